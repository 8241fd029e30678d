package rowenc

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/cockroachdb/apd/v3"

	"github.com/cairn-db/cairn/sql/types"
)

// Order is how one key column sorts: its direction and where its NULLs go.
// The zero Order is Postgres's default for ASC (NULLS LAST).
type Order uint8

// Order bits and the four combinations by name.
const (
	Descending Order = 1 << iota
	NullsFirst

	Asc           = Order(0)                // ASC NULLS LAST, Postgres's default
	AscNullsFirst = NullsFirst              // ASC NULLS FIRST
	Desc          = Descending | NullsFirst // DESC NULLS FIRST, Postgres's default
	DescNullsLast = Descending              // DESC NULLS LAST
)

func (o Order) String() string {
	s := "ASC"
	if o&Descending != 0 {
		s = "DESC"
	}
	if o&NullsFirst != 0 {
		return s + " NULLS FIRST"
	}
	return s + " NULLS LAST"
}

// Per-column markers. They do not depend on the direction, so NULL lands
// first or last whatever the body's inversion does.
const (
	markerNullFirst = 0x00
	markerValue     = 0x01
	markerNullLast  = 0x02
)

// EncodeKey appends d's order-preserving encoding under order o: for
// values a, b of one type, bytes.Compare of their encodings has the sign
// of types.Compare(a, b) (negated for Descending), with NULL placed by o.
// Encodings are self-delimiting, so composite keys are concatenations.
// Values Compare calls equal encode identically (1.0 and 1.00, -0 and 0,
// '1 mon' and '30 days'), which is what makes unique indexes unique.
func EncodeKey(dst []byte, d types.Datum, o Order) ([]byte, error) {
	if types.IsNull(d) {
		if o&NullsFirst != 0 {
			return append(dst, markerNullFirst), nil
		}
		return append(dst, markerNullLast), nil
	}
	dst = append(dst, markerValue)
	start := len(dst)
	dst, err := appendKeyBody(dst, d)
	if err != nil {
		return nil, err
	}
	if o&Descending != 0 {
		invert(dst[start:])
	}
	return dst, nil
}

// DecodeKey reads one key column of type t written with order o and
// returns it with the remaining bytes. Values come back Compare-equal to
// what was encoded, in canonical form (numeric without trailing zeros,
// interval as days and time).
func DecodeKey(src []byte, t *types.T, o Order) (types.Datum, []byte, error) {
	if len(src) == 0 {
		return nil, nil, fmt.Errorf("%w: empty key column", ErrCorrupt)
	}
	switch src[0] {
	case markerNullFirst, markerNullLast:
		return types.DNull, src[1:], nil
	case markerValue:
	default:
		return nil, nil, fmt.Errorf("%w: key marker %#x", ErrCorrupt, src[0])
	}
	r := keyReader{b: src[1:]}
	if o&Descending != 0 {
		r.inv = 0xff
	}
	d, err := r.datum(t)
	if err != nil {
		return nil, nil, err
	}
	return d, r.b, nil
}

func invert(b []byte) {
	for i := range b {
		b[i] = ^b[i]
	}
}

func appendKeyBody(dst []byte, d types.Datum) ([]byte, error) {
	switch v := d.(type) {
	case types.DBool:
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case types.DInt:
		return appendOrderedInt(dst, int64(v)), nil
	case types.DOid:
		return appendOrderedInt(dst, int64(v)), nil
	case types.DFloat:
		return binary.BigEndian.AppendUint64(dst, floatKeyBits(float64(v))), nil
	case *types.DDecimal:
		return appendDecimalKey(dst, &v.Decimal), nil
	case types.DString:
		return appendEscaped(dst, string(v)), nil
	case types.DEnum:
		// The member's physical representation, not its label: it orders
		// as the declaration does and survives ALTER TYPE ... RENAME VALUE.
		return appendEscaped(dst, v.PhysRep), nil
	case types.DBytes:
		return appendEscaped(dst, string(v)), nil
	case types.DDate:
		return binary.BigEndian.AppendUint32(dst, uint32(v)^(1<<31)), nil
	case types.DTime:
		return appendFixedInt(dst, int64(v)), nil
	case types.DTimestamp:
		return appendFixedInt(dst, int64(v)), nil
	case types.DTimestampTZ:
		return appendFixedInt(dst, int64(v)), nil
	case types.DInterval:
		days, rem := intervalSpan(v)
		return appendFixedInt(appendFixedInt(dst, days), rem), nil
	case types.DUUID:
		return append(dst, v[:]...), nil
	case *types.DArray:
		for _, e := range v.Elems {
			if types.IsNull(e) {
				dst = append(dst, arrayElemNull) // NULL elements sort above values
				continue
			}
			dst = append(dst, arrayElemValue)
			var err error
			if dst, err = appendKeyBody(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, arrayEnd), nil
	case *types.DJSON:
		return nil, fmt.Errorf("%w: jsonb", ErrNotKeyEncodable)
	}
	return nil, fmt.Errorf("%w: %s", ErrNotKeyEncodable, d.Family())
}

// Array element markers: the end sorts before any element, so a prefix
// array sorts first, and NULL elements after values, as array_cmp does.
const (
	arrayEnd       = 0x00
	arrayElemValue = 0x01
	arrayElemNull  = 0x02
)

// appendOrderedInt writes a varint whose bytes sort like the integers: a
// marker 0x80+n for a non-negative value of n significant bytes, 0x80-n
// for a negative one, then those n bytes big-endian. Small values take one
// or two bytes.
func appendOrderedInt(dst []byte, v int64) []byte {
	if v >= 0 {
		n := (bits.Len64(uint64(v)) + 7) / 8
		dst = append(dst, byte(0x80+n))
		for i := n - 1; i >= 0; i-- {
			dst = append(dst, byte(uint64(v)>>(8*i)))
		}
		return dst
	}
	n := (bits.Len64(uint64(^v)) + 8) / 8 // bytes holding v in two's complement, sign included
	n = min(n, 8)
	dst = append(dst, byte(0x80-n))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(uint64(v)>>(8*i)))
	}
	return dst
}

func appendFixedInt(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

// floatKeyBits maps a float to bits that sort like Postgres orders floats:
// -Inf < ... < -0 = 0 < ... < +Inf < NaN.
func floatKeyBits(f float64) uint64 {
	switch {
	case math.IsNaN(f):
		return math.MaxUint64
	case f == 0:
		f = 0
	}
	b := math.Float64bits(f)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

func floatFromKeyBits(b uint64) float64 {
	switch {
	case b == math.MaxUint64:
		return math.NaN()
	case b>>63 != 0:
		return math.Float64frombits(b &^ (1 << 63))
	}
	return math.Float64frombits(^b)
}

// Decimal classes, in sort order.
const (
	decNegInf = 0x01 + iota
	decNeg
	decZero
	decPos
	decPosInf
	decNaN
)

// appendDecimalKey writes a class byte, then for non-zero finite values
// the adjusted exponent E (value = 0.d1d2... × 10^E) as an ordered int and
// the significant digits in pairs, one byte per pair (pair+1), ending in
// 0x00. Negative values store -E and complemented digit bytes ending in
// 0xff, so larger magnitudes sort first.
func appendDecimalKey(dst []byte, d *apd.Decimal) []byte {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return append(dst, decNaN)
	case apd.Infinite:
		if d.Negative {
			return append(dst, decNegInf)
		}
		return append(dst, decPosInf)
	}
	if d.IsZero() {
		return append(dst, decZero)
	}
	digits := d.Coeff.String()
	trimmed := strings.TrimRight(digits, "0")
	e := int64(d.Exponent) + int64(len(digits))
	if len(trimmed)%2 == 1 {
		trimmed += "0"
	}
	if d.Negative {
		dst = append(dst, decNeg)
		dst = appendOrderedInt(dst, -e)
		for i := 0; i < len(trimmed); i += 2 {
			dst = append(dst, ^byte((trimmed[i]-'0')*10+(trimmed[i+1]-'0')+1))
		}
		return append(dst, 0xff)
	}
	dst = append(dst, decPos)
	dst = appendOrderedInt(dst, e)
	for i := 0; i < len(trimmed); i += 2 {
		dst = append(dst, (trimmed[i]-'0')*10+(trimmed[i+1]-'0')+1)
	}
	return append(dst, 0x00)
}

// appendEscaped writes s with 0x00 escaped as 0x00 0xff and a 0x00 0x01
// terminator, so a string sorts before its extensions.
func appendEscaped(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, 0x00, 0xff)
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, 0x00, 0x01)
}

// intervalSpan is an interval's length as (days, microseconds in [0, 1
// day)), months counting 30 days: the quantity types.Compare orders by.
func intervalSpan(iv types.DInterval) (int64, int64) {
	const day = 86_400_000_000
	q := iv.Micros / day
	r := iv.Micros % day
	if r < 0 {
		q, r = q-1, r+day
	}
	return int64(iv.Months)*30 + int64(iv.Days) + q, r
}

// keyReader reads key bytes, complementing them for descending columns.
type keyReader struct {
	b   []byte
	inv byte
}

func (r *keyReader) byte() (byte, error) {
	if len(r.b) == 0 {
		return 0, fmt.Errorf("%w: key ends early", ErrCorrupt)
	}
	c := r.b[0] ^ r.inv
	r.b = r.b[1:]
	return c, nil
}

func (r *keyReader) fixed(n int) ([]byte, error) {
	if len(r.b) < n {
		return nil, fmt.Errorf("%w: key ends early", ErrCorrupt)
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = r.b[i] ^ r.inv
	}
	r.b = r.b[n:]
	return out, nil
}

// bigEndian reads n ≤ 8 bytes as a big-endian number shifted into init
// (all ones sign-extends a negative one), without fixed's copy: every key a
// scan decodes goes through here several times (group, table, index,
// integer key columns).
func (r *keyReader) bigEndian(n int, init uint64) (uint64, error) {
	if len(r.b) < n {
		return 0, fmt.Errorf("%w: key ends early", ErrCorrupt)
	}
	u := init
	for _, c := range r.b[:n] {
		u = u<<8 | uint64(c^r.inv)
	}
	r.b = r.b[n:]
	return u, nil
}

func (r *keyReader) uint64() (uint64, error) {
	return r.bigEndian(8, 0)
}

func (r *keyReader) orderedInt() (int64, error) {
	m, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case m >= 0x80 && m <= 0x88:
		u, err := r.bigEndian(int(m-0x80), 0)
		if err != nil {
			return 0, err
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("%w: integer overflows int64", ErrCorrupt)
		}
		return int64(u), nil
	case m >= 0x78 && m < 0x80:
		u, err := r.bigEndian(int(0x80-m), math.MaxUint64) // sign-extend
		if err != nil {
			return 0, err
		}
		if int64(u) >= 0 {
			return 0, fmt.Errorf("%w: negative integer marker on a non-negative value", ErrCorrupt)
		}
		return int64(u), nil
	}
	return 0, fmt.Errorf("%w: integer marker %#x", ErrCorrupt, m)
}

func (r *keyReader) escaped() (string, error) {
	var out []byte
	for {
		c, err := r.byte()
		if err != nil {
			return "", err
		}
		if c != 0x00 {
			out = append(out, c)
			continue
		}
		c, err = r.byte()
		if err != nil {
			return "", err
		}
		switch c {
		case 0x01:
			return string(out), nil
		case 0xff:
			out = append(out, 0x00)
		default:
			return "", fmt.Errorf("%w: bad escape %#x", ErrCorrupt, c)
		}
	}
}

func (r *keyReader) datum(t *types.T) (types.Datum, error) {
	switch t.Family {
	case types.BoolFamily:
		c, err := r.byte()
		if err != nil || c > 1 {
			return nil, fmt.Errorf("%w: bool key", ErrCorrupt)
		}
		return types.DBool(c == 1), nil
	case types.IntFamily:
		v, err := r.orderedInt()
		return types.DInt(v), err
	case types.OidFamily:
		v, err := r.orderedInt()
		if err == nil && (v < 0 || v > math.MaxUint32) {
			err = fmt.Errorf("%w: oid out of range", ErrCorrupt)
		}
		return types.DOid(v), err
	case types.FloatFamily:
		u, err := r.uint64()
		return types.DFloat(floatFromKeyBits(u)), err
	case types.NumericFamily:
		return r.decimal()
	case types.StringFamily:
		s, err := r.escaped()
		return types.DString(s), err
	case types.EnumFamily:
		s, err := r.escaped()
		if err != nil {
			return nil, err
		}
		return types.EnumFromPhysRep(t, []byte(s))
	case types.BytesFamily:
		s, err := r.escaped()
		return types.DBytes(s), err
	case types.DateFamily:
		b, err := r.fixed(4)
		if err != nil {
			return nil, err
		}
		return types.DDate(int32(binary.BigEndian.Uint32(b) ^ 1<<31)), nil
	case types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily:
		u, err := r.uint64()
		if err != nil {
			return nil, err
		}
		v := int64(u ^ 1<<63)
		switch t.Family {
		case types.TimeFamily:
			return types.DTime(v), nil
		case types.TimestampFamily:
			return types.DTimestamp(v), nil
		}
		return types.DTimestampTZ(v), nil
	case types.IntervalFamily:
		du, err := r.uint64()
		if err != nil {
			return nil, err
		}
		ru, err := r.uint64()
		if err != nil {
			return nil, err
		}
		return intervalFromSpan(int64(du^1<<63), int64(ru^1<<63))
	case types.UUIDFamily:
		b, err := r.fixed(16)
		if err != nil {
			return nil, err
		}
		return types.DUUID(b), nil
	case types.ArrayFamily:
		a := types.NewArray(t.Elem)
		for {
			c, err := r.byte()
			if err != nil {
				return nil, err
			}
			switch c {
			case arrayEnd:
				return a, nil
			case arrayElemNull:
				a.Elems = append(a.Elems, types.DNull)
			case arrayElemValue:
				e, err := r.datum(t.Elem)
				if err != nil {
					return nil, err
				}
				a.Elems = append(a.Elems, e)
			default:
				return nil, fmt.Errorf("%w: array element marker %#x", ErrCorrupt, c)
			}
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNotKeyEncodable, t.Name())
}

// intervalFromSpan rebuilds an interval of the given length, preferring
// days and time; lengths beyond int32 days move whole 30-day months out.
func intervalFromSpan(days, rem int64) (types.Datum, error) {
	if rem < 0 || rem >= 86_400_000_000 {
		return nil, fmt.Errorf("%w: interval remainder", ErrCorrupt)
	}
	var months int64
	if days > math.MaxInt32 || days < math.MinInt32 {
		months = days / 30
		days -= months * 30
	}
	if months > math.MaxInt32 || months < math.MinInt32 {
		return nil, fmt.Errorf("%w: interval length", ErrCorrupt)
	}
	return types.DInterval{Months: int32(months), Days: int32(days), Micros: rem}, nil
}

func (r *keyReader) decimal() (types.Datum, error) {
	c, err := r.byte()
	if err != nil {
		return nil, err
	}
	d := &types.DDecimal{}
	switch c {
	case decNaN:
		d.Form = apd.NaN
		return d, nil
	case decNegInf, decPosInf:
		d.Form, d.Negative = apd.Infinite, c == decNegInf
		return d, nil
	case decZero:
		return d, nil
	case decPos, decNeg:
	default:
		return nil, fmt.Errorf("%w: numeric class %#x", ErrCorrupt, c)
	}
	neg := c == decNeg
	e, err := r.orderedInt()
	if err != nil {
		return nil, err
	}
	if neg {
		e = -e
	}
	var digits []byte
	for {
		b, err := r.byte()
		if err != nil {
			return nil, err
		}
		if neg {
			b = ^b
		}
		if b == 0 {
			break
		}
		if b > 100 {
			return nil, fmt.Errorf("%w: numeric digit pair %d", ErrCorrupt, b)
		}
		digits = append(digits, '0'+(b-1)/10, '0'+(b-1)%10)
		if len(digits) > 300000 {
			return nil, fmt.Errorf("%w: numeric too long", ErrCorrupt)
		}
	}
	if len(digits) == 0 || e > 1<<20 || e < -(1<<20) {
		return nil, fmt.Errorf("%w: numeric digits", ErrCorrupt)
	}
	if _, _, err := d.SetString(string(digits) + "E" + fmt.Sprint(e-int64(len(digits)))); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	var red apd.Decimal
	red.Reduce(&d.Decimal)
	d.Decimal.Set(&red)
	if d.Exponent > 0 {
		// Print 1E+2 as 100, as Postgres numerics have no negative scale.
		_, _ = apd.BaseContext.WithPrecision(uint32(d.NumDigits())+uint32(d.Exponent)).Quantize(&d.Decimal, &d.Decimal, 0)
	}
	d.Negative = neg
	return d, nil
}
