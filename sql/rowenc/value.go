package rowenc

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Value encodings: how one non-NULL datum is stored inside a packed row or
// a column entry. The column's type is known from the schema, so values
// carry no type tag, fixed-width types carry no length, and integers are
// zig-zag varints (small values take one byte). Unlike key encodings they
// keep everything the datum holds (numeric scale, interval fields, -0).

// appendValue appends d (not NULL) encoded for type t.
func appendValue(dst []byte, t *types.T, d types.Datum) ([]byte, error) {
	switch t.Family {
	case types.BoolFamily:
		v, ok := d.(types.DBool)
		if !ok {
			break
		}
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case types.IntFamily:
		if v, ok := d.(types.DInt); ok {
			return binary.AppendVarint(dst, int64(v)), nil
		}
	case types.OidFamily:
		if v, ok := d.(types.DOid); ok {
			return binary.AppendUvarint(dst, uint64(v)), nil
		}
	case types.FloatFamily:
		v, ok := d.(types.DFloat)
		if !ok {
			break
		}
		if t.Width == 32 {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(float64(v))), nil
	case types.NumericFamily:
		if v, ok := d.(*types.DDecimal); ok {
			return appendDecimalValue(dst, &v.Decimal), nil
		}
	case types.StringFamily:
		if v, ok := d.(types.DString); ok {
			return appendLenPrefixed(dst, string(v)), nil
		}
	case types.BytesFamily:
		if v, ok := d.(types.DBytes); ok {
			return appendLenPrefixed(dst, string(v)), nil
		}
	case types.EnumFamily:
		// Stored by physical representation so RENAME VALUE rewrites nothing.
		if v, ok := d.(types.DEnum); ok {
			return appendLenPrefixed(dst, v.PhysRep), nil
		}
	case types.DateFamily:
		if v, ok := d.(types.DDate); ok {
			return binary.AppendVarint(dst, int64(v)), nil
		}
	case types.TimeFamily:
		if v, ok := d.(types.DTime); ok {
			return binary.AppendVarint(dst, int64(v)), nil
		}
	case types.TimestampFamily:
		if v, ok := d.(types.DTimestamp); ok {
			return binary.AppendVarint(dst, int64(v)), nil
		}
	case types.TimestampTZFamily:
		if v, ok := d.(types.DTimestampTZ); ok {
			return binary.AppendVarint(dst, int64(v)), nil
		}
	case types.IntervalFamily:
		if v, ok := d.(types.DInterval); ok {
			dst = binary.AppendVarint(dst, int64(v.Months))
			dst = binary.AppendVarint(dst, int64(v.Days))
			return binary.AppendVarint(dst, v.Micros), nil
		}
	case types.UUIDFamily:
		if v, ok := d.(types.DUUID); ok {
			return append(dst, v[:]...), nil
		}
	case types.JSONBFamily:
		// jsonb is stored as its canonical text; a binary tree format would
		// decode faster and is a compatible change behind a new row tag.
		if v, ok := d.(*types.DJSON); ok {
			return appendLenPrefixed(dst, v.JSON.String()), nil
		}
	case types.JSONTextFamily:
		// json keeps its text as written.
		if v, ok := d.(types.DJSONText); ok {
			return appendLenPrefixed(dst, string(v)), nil
		}
	case types.ArrayFamily:
		if v, ok := d.(*types.DArray); ok {
			return appendArrayValue(dst, t, v)
		}
	}
	return nil, fmt.Errorf("rowenc: cannot store %s value %s in a %s column", d.Family(), d, t.Name())
}

func appendLenPrefixed(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Numeric value forms.
const (
	numFinite = iota
	numFiniteNeg
	numNaN
	numPosInf
	numNegInf
)

// appendDecimalValue writes [form][exponent varint][coefficient bytes,
// length-prefixed, big-endian], keeping the display scale.
func appendDecimalValue(dst []byte, d *apd.Decimal) []byte {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return append(dst, numNaN)
	case apd.Infinite:
		if d.Negative {
			return append(dst, numNegInf)
		}
		return append(dst, numPosInf)
	}
	form := byte(numFinite)
	if d.Negative {
		form = numFiniteNeg
	}
	dst = append(dst, form)
	dst = binary.AppendVarint(dst, int64(d.Exponent))
	return appendLenPrefixed(dst, string(d.Coeff.MathBigInt().Bytes()))
}

func appendArrayValue(dst []byte, t *types.T, a *types.DArray) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(a.Elems)))
	bm := len(dst)
	dst = append(dst, make([]byte, (len(a.Elems)+7)/8)...)
	for i, e := range a.Elems {
		if types.IsNull(e) {
			continue
		}
		dst[bm+i/8] |= 1 << (i % 8)
		var err error
		if dst, err = appendValue(dst, t.Elem, e); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// valueReader decodes values; every read is bounds-checked so corrupt
// input yields ErrCorrupt, never a panic.
type valueReader struct{ b []byte }

func corrupt(what string) error { return fmt.Errorf("%w: %s", ErrCorrupt, what) }

func (r *valueReader) varint() (int64, error) {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		return 0, corrupt("varint")
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *valueReader) uvarint() (uint64, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, corrupt("uvarint")
	}
	r.b = r.b[n:]
	return v, nil
}

func (r *valueReader) fixed(n int) ([]byte, error) {
	if n < 0 || len(r.b) < n {
		return nil, corrupt("value ends early")
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out, nil
}

func (r *valueReader) lenPrefixed() (string, error) {
	n, err := r.uvarint()
	if err != nil {
		return "", err
	}
	if n > uint64(len(r.b)) {
		return "", corrupt("length beyond value")
	}
	b, _ := r.fixed(int(n))
	return string(b), nil
}

// skip passes over one value of type t without building it: a reader
// that needs some of a packed row's columns (RowMerger.SetSkip) pays no
// allocation for the others (a text column's string, a numeric's
// big.Int). The value's bounds are checked as by value; its contents
// (UTF-8, JSON syntax) are not, since nobody reads them.
func (r *valueReader) skip(t *types.T) error {
	var err error
	switch t.Family {
	case types.BoolFamily:
		_, err = r.fixed(1)
	case types.IntFamily, types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily:
		_, err = r.varint()
	case types.OidFamily:
		_, err = r.uvarint()
	case types.DateFamily:
		_, err = r.int32()
	case types.FloatFamily:
		if t.Width == 32 {
			_, err = r.fixed(4)
		} else {
			_, err = r.fixed(8)
		}
	case types.StringFamily, types.BytesFamily, types.EnumFamily, types.JSONBFamily, types.JSONTextFamily:
		var n uint64
		if n, err = r.uvarint(); err == nil {
			if n > uint64(len(r.b)) {
				return corrupt("length beyond value")
			}
			_, err = r.fixed(int(n))
		}
	case types.UUIDFamily:
		_, err = r.fixed(16)
	default:
		// Numeric, interval, arrays: rarer, decoded and dropped.
		_, err = r.value(t)
	}
	return err
}

func (r *valueReader) int32() (int32, error) {
	v, err := r.varint()
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, corrupt("int32 out of range")
	}
	return int32(v), nil
}

func (r *valueReader) value(t *types.T) (types.Datum, error) {
	switch t.Family {
	case types.BoolFamily:
		b, err := r.fixed(1)
		if err != nil || b[0] > 1 {
			return nil, corrupt("bool")
		}
		return types.DBool(b[0] == 1), nil
	case types.IntFamily:
		v, err := r.varint()
		return types.DInt(v), err
	case types.OidFamily:
		v, err := r.uvarint()
		if err == nil && v > math.MaxUint32 {
			err = corrupt("oid")
		}
		return types.DOid(v), err
	case types.FloatFamily:
		if t.Width == 32 {
			b, err := r.fixed(4)
			if err != nil {
				return nil, err
			}
			return types.DFloat(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
		}
		b, err := r.fixed(8)
		if err != nil {
			return nil, err
		}
		return types.DFloat(math.Float64frombits(binary.LittleEndian.Uint64(b))), nil
	case types.NumericFamily:
		return r.decimal()
	case types.StringFamily:
		s, err := r.lenPrefixed()
		return types.DString(s), err
	case types.BytesFamily:
		s, err := r.lenPrefixed()
		return types.DBytes(s), err
	case types.EnumFamily:
		s, err := r.lenPrefixed()
		if err != nil {
			return nil, err
		}
		return types.EnumFromPhysRep(t, []byte(s))
	case types.DateFamily:
		v, err := r.int32()
		return types.DDate(v), err
	case types.TimeFamily:
		v, err := r.varint()
		return types.DTime(v), err
	case types.TimestampFamily:
		v, err := r.varint()
		return types.DTimestamp(v), err
	case types.TimestampTZFamily:
		v, err := r.varint()
		return types.DTimestampTZ(v), err
	case types.IntervalFamily:
		m, err := r.int32()
		if err != nil {
			return nil, err
		}
		d, err := r.int32()
		if err != nil {
			return nil, err
		}
		us, err := r.varint()
		return types.DInterval{Months: m, Days: d, Micros: us}, err
	case types.UUIDFamily:
		b, err := r.fixed(16)
		if err != nil {
			return nil, err
		}
		return types.DUUID(b), nil
	case types.JSONBFamily:
		s, err := r.lenPrefixed()
		if err != nil {
			return nil, err
		}
		j, err := types.ParseJSON(s)
		if err != nil {
			return nil, fmt.Errorf("%w: jsonb: %v", ErrCorrupt, err)
		}
		return types.NewJSON(j), nil
	case types.JSONTextFamily:
		s, err := r.lenPrefixed()
		return types.DJSONText(s), err
	case types.ArrayFamily:
		n, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		if n > uint64(len(r.b))*8 {
			return nil, corrupt("array length")
		}
		bm, err := r.fixed(int((n + 7) / 8))
		if err != nil {
			return nil, err
		}
		a := &types.DArray{Elem: t.Elem, Elems: make([]types.Datum, n)}
		for i := range a.Elems {
			if bm[i/8]&(1<<(i%8)) == 0 {
				a.Elems[i] = types.DNull
				continue
			}
			if a.Elems[i], err = r.value(t.Elem); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	return nil, corrupt("unsupported column type " + t.Name())
}

func (r *valueReader) decimal() (types.Datum, error) {
	f, err := r.fixed(1)
	if err != nil {
		return nil, err
	}
	d := &types.DDecimal{}
	switch f[0] {
	case numNaN:
		d.Form = apd.NaN
		return d, nil
	case numPosInf, numNegInf:
		d.Form, d.Negative = apd.Infinite, f[0] == numNegInf
		return d, nil
	case numFinite, numFiniteNeg:
	default:
		return nil, corrupt("numeric form")
	}
	e, err := r.int32()
	if err != nil {
		return nil, err
	}
	c, err := r.lenPrefixed()
	if err != nil {
		return nil, err
	}
	d.Coeff.SetMathBigInt(new(big.Int).SetBytes([]byte(c)))
	d.Exponent = e
	d.Negative = f[0] == numFiniteNeg && d.Coeff.Sign() != 0
	return d, nil
}

// ValueSize returns how many bytes d, of type t, takes as a value in a
// packed row or a column entry (its tag byte not counted):
// pg_column_size's answer for variable-length types.
func ValueSize(t *types.T, d types.Datum) (int, error) {
	b, err := appendValue(nil, t, d)
	return len(b), err
}
