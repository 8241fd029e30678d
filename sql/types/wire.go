package types

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairn-db/cairn/sql/pgerror"
)

// Wire encodings. Binary formats are pgtype's, so they are byte for byte
// what pgx and libpq-based drivers produce and expect; this file only maps
// datums to and from the Go values pgtype understands. Text formats are
// Format and ParseDatum.

// pgtype.Map memoizes plans in plain maps, so a Map must not be shared
// between goroutines; pool them.
var typeMaps = sync.Pool{New: func() any { return pgtype.NewMap() }}

// EncodeBinary appends d's binary wire form for t. d must not be NULL
// (pgwire sends NULL as length -1).
func EncodeBinary(dst []byte, t *T, d Datum) ([]byte, error) {
	if e, ok := d.(DEnum); ok {
		return append(dst, e.Label...), nil // enum_send: the label as text
	}
	if r, ok := d.(*DTuple); ok {
		return appendRecordBinary(dst, r)
	}
	v, err := toPGValue(t, d)
	if err != nil {
		return nil, err
	}
	m := typeMaps.Get().(*pgtype.Map)
	defer typeMaps.Put(m)
	out, err := m.Encode(wireOID(t), pgtype.BinaryFormatCode, v, dst)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", t.Name(), err)
	}
	if out == nil {
		out = []byte{} // an empty value, not a NULL
	}
	return out, nil
}

// DecodeBinary reads a binary wire value of type t (as a bound parameter).
// Malformed input is 22P03, as Postgres reports it.
func DecodeBinary(t *T, src []byte) (Datum, error) {
	if src == nil {
		src = []byte{} // pgtype reads nil as NULL; this is an empty value
	}
	if t.Family == EnumFamily {
		return ParseEnum(t, string(src)) // enum_recv: the label as text
	}
	m := typeMaps.Get().(*pgtype.Map)
	defer typeMaps.Put(m)
	d, err := fromPG(m, t, src)
	if err != nil {
		return nil, pgerror.Wrapf(err, pgerrcode.InvalidBinaryRepresentation, "incorrect binary data format for type %s", t.Name())
	}
	return d, nil
}

// toPGValue maps a datum to the Go value pgtype encodes for t.
func toPGValue(t *T, d Datum) (any, error) {
	if IsNull(d) {
		return nil, nil
	}
	switch t.Family {
	case BoolFamily:
		return bool(d.(DBool)), nil
	case IntFamily:
		return int64(d.(DInt)), nil
	case FloatFamily:
		if t.Width == 32 {
			return float32(d.(DFloat)), nil
		}
		return float64(d.(DFloat)), nil
	case NumericFamily:
		return decimalToPG(&d.(*DDecimal).Decimal), nil
	case StringFamily:
		if t.Oid == Char.Oid {
			// pgx's "char" codec takes the byte ("" is the zero byte, as
			// charout prints it).
			if s := d.(DString); s != "" {
				return s[0], nil
			}
			return byte(0), nil
		}
		return string(d.(DString)), nil
	case BytesFamily:
		return []byte(d.(DBytes)), nil
	case DateFamily:
		v := d.(DDate)
		switch v {
		case DateNegInfinity:
			return pgtype.Date{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, nil
		case DatePosInfinity:
			return pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}, nil
		}
		return pgtype.Date{Time: time.Unix(int64(v)*86400, 0).UTC(), Valid: true}, nil
	case TimeFamily:
		return pgtype.Time{Microseconds: int64(d.(DTime)), Valid: true}, nil
	case TimestampFamily:
		us := int64(d.(DTimestamp))
		ts := pgtype.Timestamp{Valid: true, InfinityModifier: infinityModifier(us)}
		if ts.InfinityModifier == pgtype.Finite {
			ts.Time = microsToTime(us)
		}
		return ts, nil
	case TimestampTZFamily:
		us := int64(d.(DTimestampTZ))
		ts := pgtype.Timestamptz{Valid: true, InfinityModifier: infinityModifier(us)}
		if ts.InfinityModifier == pgtype.Finite {
			ts.Time = microsToTime(us)
		}
		return ts, nil
	case IntervalFamily:
		v := d.(DInterval)
		return pgtype.Interval{Months: v.Months, Days: v.Days, Microseconds: v.Micros, Valid: true}, nil
	case UUIDFamily:
		return pgtype.UUID{Bytes: d.(DUUID), Valid: true}, nil
	case JSONBFamily:
		return json.RawMessage(d.(*DJSON).JSON.String()), nil
	case JSONTextFamily:
		return json.RawMessage(d.(DJSONText)), nil
	case OidFamily:
		return uint32(d.(DOid)), nil
	case ArrayFamily:
		a := d.(*DArray)
		elems := make([]any, len(a.Elems))
		for i, e := range a.Elems {
			v, err := toPGValue(t.Elem, e)
			if err != nil {
				return nil, err
			}
			elems[i] = v
		}
		return pgtype.FlatArray[any](elems), nil
	}
	return nil, fmt.Errorf("no binary encoding for %s", t.Name())
}

func infinityModifier(us int64) pgtype.InfinityModifier {
	switch us {
	case TimestampNegInfinity:
		return pgtype.NegativeInfinity
	case TimestampPosInfinity:
		return pgtype.Infinity
	}
	return pgtype.Finite
}

func decimalToPG(d *apd.Decimal) pgtype.Numeric {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return pgtype.Numeric{NaN: true, Valid: true}
	case apd.Infinite:
		if d.Negative {
			return pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		}
		return pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	n := new(big.Int).Set(d.Coeff.MathBigInt())
	if d.Negative {
		n.Neg(n)
	}
	return pgtype.Numeric{Int: n, Exp: d.Exponent, Valid: true}
}

func decimalFromPG(n pgtype.Numeric) *DDecimal {
	d := &DDecimal{}
	switch {
	case n.NaN:
		d.Form = apd.NaN
	case n.InfinityModifier == pgtype.Infinity:
		d.Form = apd.Infinite
	case n.InfinityModifier == pgtype.NegativeInfinity:
		d.Form, d.Negative = apd.Infinite, true
	default:
		var c apd.BigInt
		c.SetMathBigInt(n.Int)
		d.Coeff.Abs(&c)
		d.Negative = n.Int.Sign() < 0
		d.Exponent = n.Exp
		if d.Exponent > 0 {
			_, _ = decimalCtx.Quantize(&d.Decimal, &d.Decimal, 0)
		}
		normalizeZero(&d.Decimal)
	}
	return d
}

// fromPG decodes src with pgtype into the Go type each family maps to; for
// arrays, pgtype splits the container and decodes every element into the
// same Go type (nil for NULL elements).
func fromPG(m *pgtype.Map, t *T, src []byte) (Datum, error) {
	et := t
	if t.Family == ArrayFamily {
		et = t.Elem
	}
	switch et.Family {
	case BoolFamily:
		return scanAs(m, t, src, func(v bool) (Datum, error) { return DBool(v), nil })
	case IntFamily:
		return scanAs(m, t, src, func(v int64) (Datum, error) { return DInt(v), nil })
	case FloatFamily:
		return scanAs(m, t, src, func(v float64) (Datum, error) { return DFloat(v), nil })
	case NumericFamily:
		return scanAs(m, t, src, func(v pgtype.Numeric) (Datum, error) {
			d := decimalFromPG(v)
			return d, applyNumericTypmod(et, d)
		})
	case StringFamily:
		return scanAs(m, t, src, func(v string) (Datum, error) {
			if !validUTF8(v) {
				return nil, errInvalidUTF8(v)
			}
			return AssignmentCast(nil, DString(v), Text, et)
		})
	case BytesFamily:
		return scanAs(m, t, src, func(v []byte) (Datum, error) { return DBytes(v), nil })
	case DateFamily:
		return scanAs(m, t, src, func(v pgtype.Date) (Datum, error) {
			switch v.InfinityModifier {
			case pgtype.Infinity:
				return DatePosInfinity, nil
			case pgtype.NegativeInfinity:
				return DateNegInfinity, nil
			}
			days := floorDiv(v.Time.Unix(), 86400)
			if days < minDateDays || days >= maxDateDays {
				return nil, errDatetimeRange(Date)
			}
			return DDate(days), nil
		})
	case TimeFamily:
		return scanAs(m, t, src, func(v pgtype.Time) (Datum, error) {
			if v.Microseconds < 0 || v.Microseconds > microsPerDay {
				return nil, errDatetimeRange(Time)
			}
			return DTime(v.Microseconds), nil
		})
	case TimestampFamily:
		return scanAs(m, t, src, func(v pgtype.Timestamp) (Datum, error) {
			us, err := fromInfinity(v.InfinityModifier, v.Time)
			return DTimestamp(us), err
		})
	case TimestampTZFamily:
		return scanAs(m, t, src, func(v pgtype.Timestamptz) (Datum, error) {
			us, err := fromInfinity(v.InfinityModifier, v.Time)
			return DTimestampTZ(us), err
		})
	case IntervalFamily:
		return scanAs(m, t, src, func(v pgtype.Interval) (Datum, error) {
			return DInterval{Months: v.Months, Days: v.Days, Micros: v.Microseconds}, nil
		})
	case UUIDFamily:
		return scanAs(m, t, src, func(v pgtype.UUID) (Datum, error) { return DUUID(v.Bytes), nil })
	case JSONBFamily:
		// pgx maps a JSON null to a nil pointer, which would turn jsonb
		// 'null' elements into SQL NULLs; capture the raw bytes instead.
		return scanAs(m, t, src, func(v rawJSON) (Datum, error) {
			if v.b == nil {
				return DNull, nil
			}
			j, err := ParseJSON(string(v.b))
			if err != nil {
				return nil, err
			}
			return NewJSON(j), nil
		})
	case JSONTextFamily:
		return scanAs(m, t, src, func(v rawJSON) (Datum, error) {
			if v.b == nil {
				return DNull, nil
			}
			return ParseDatum(nil, JSONText, string(v.b))
		})
	case OidFamily:
		return scanAs(m, t, src, func(v uint32) (Datum, error) { return DOid(v), nil })
	}
	return nil, fmt.Errorf("no binary decoding for %s", t.Name())
}

func scanAs[E any](m *pgtype.Map, t *T, src []byte, conv func(E) (Datum, error)) (Datum, error) {
	if t.Family != ArrayFamily {
		var v E
		if err := m.Scan(wireOID(t), pgtype.BinaryFormatCode, src, &v); err != nil {
			return nil, err
		}
		return conv(v)
	}
	if _, raw := any(new(E)).(pgtype.BytesScanner); raw {
		// E sees NULL itself (as nil bytes); no pointer wrapping needed.
		var arr pgtype.FlatArray[E]
		if err := m.Scan(wireOID(t), pgtype.BinaryFormatCode, src, &arr); err != nil {
			return nil, err
		}
		out := &DArray{Elem: t.Elem, Elems: make([]Datum, len(arr))}
		for i, v := range arr {
			d, err := conv(v)
			if err != nil {
				return nil, err
			}
			out.Elems[i] = d
		}
		return out, nil
	}
	var arr pgtype.FlatArray[*E]
	if err := m.Scan(wireOID(t), pgtype.BinaryFormatCode, src, &arr); err != nil {
		return nil, err
	}
	out := &DArray{Elem: t.Elem, Elems: make([]Datum, len(arr))}
	for i, p := range arr {
		if p == nil {
			out.Elems[i] = DNull
			continue
		}
		d, err := conv(*p)
		if err != nil {
			return nil, err
		}
		out.Elems[i] = d
	}
	return out, nil
}

func fromInfinity(mod pgtype.InfinityModifier, t time.Time) (int64, error) {
	switch mod {
	case pgtype.Infinity:
		return TimestampPosInfinity, nil
	case pgtype.NegativeInfinity:
		return TimestampNegInfinity, nil
	}
	// Check the range on seconds first: microseconds could overflow.
	if sec := t.Unix(); sec < minTimestamp/microsPerSec || sec >= maxTimestamp/microsPerSec {
		return 0, errDatetimeRange(Timestamp)
	}
	return int64(TimestampTZFromTime(t)), nil
}

// rawJSON receives a jsonb value's text undecoded (nil for SQL NULL).
type rawJSON struct{ b []byte }

// ScanBytes implements pgtype.BytesScanner.
func (r *rawJSON) ScanBytes(v []byte) error {
	if v != nil {
		r.b = append([]byte{}, v...)
	}
	return nil
}
