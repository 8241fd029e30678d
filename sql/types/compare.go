package types

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"math"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// Compare returns -1, 0 or 1 as a sorts before, equal to or after b, with
// Postgres's btree semantics:
//
//   - Values of one family compare directly; ints, floats and numerics also
//     compare with each other (int vs numeric exactly, anything vs float in
//     float8, as Postgres's implicit casts resolve those operators).
//   - Strings compare bytewise: Cairn's only collation is C. Bpchar values
//     are stored padded, so equal-length char(n) values compare correctly;
//     comparing char(n) with a different length is the binder's business
//     (it casts to text, which Postgres compares without trailing blanks).
//   - Float and numeric NaN equal each other and sort above every other
//     number, including Infinity; -0 equals 0.
//   - Intervals compare by their total length with 30-day months and
//     24-hour days, so '1 mon' = '30 days'.
//   - Arrays compare element by element, a NULL element sorting above any
//     value, then by length.
//
// Callers implement SQL's NULL logic; Compare itself orders NULL above every
// value and equal to NULL (Postgres's default NULLS LAST). Comparing
// families that have no common comparison (text vs int) is a binder bug and
// panics.
func Compare(a, b Datum) int {
	an, bn := IsNull(a), IsNull(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	switch x := a.(type) {
	case DEnum:
		if y, ok := b.(DEnum); ok {
			return strings.Compare(x.PhysRep, y.PhysRep)
		}
	case DBool:
		if y, ok := b.(DBool); ok {
			return compareBool(bool(x), bool(y))
		}
	case DInt:
		switch y := b.(type) {
		case DInt:
			return cmp.Compare(x, y)
		case DFloat:
			return compareFloat(float64(x), float64(y))
		case *DDecimal:
			var d apd.Decimal
			d.SetInt64(int64(x))
			return compareDecimal(&d, &y.Decimal)
		}
	case DFloat:
		switch y := b.(type) {
		case DFloat:
			return compareFloat(float64(x), float64(y))
		case DInt:
			return compareFloat(float64(x), float64(y))
		case *DDecimal:
			return compareFloat(float64(x), decimalToFloat(&y.Decimal))
		}
	case *DDecimal:
		switch b.(type) {
		case DInt, DFloat:
			return -Compare(b, a)
		case *DDecimal:
			return compareDecimal(&x.Decimal, &b.(*DDecimal).Decimal)
		}
	case DString:
		if y, ok := b.(DString); ok {
			return strings.Compare(string(x), string(y))
		}
	case DBytes:
		if y, ok := b.(DBytes); ok {
			return strings.Compare(string(x), string(y))
		}
	case DDate:
		if y, ok := b.(DDate); ok {
			return cmp.Compare(x, y)
		}
	case DTime:
		if y, ok := b.(DTime); ok {
			return cmp.Compare(x, y)
		}
	case DTimestamp:
		if y, ok := b.(DTimestamp); ok {
			return cmp.Compare(x, y)
		}
	case DTimestampTZ:
		if y, ok := b.(DTimestampTZ); ok {
			return cmp.Compare(x, y)
		}
	case DInterval:
		if y, ok := b.(DInterval); ok {
			xd, xr := x.span()
			yd, yr := y.span()
			if c := cmp.Compare(xd, yd); c != 0 {
				return c
			}
			return cmp.Compare(xr, yr)
		}
	case DUUID:
		if y, ok := b.(DUUID); ok {
			return bytes.Compare(x[:], y[:])
		}
	case *DJSON:
		if y, ok := b.(*DJSON); ok {
			return x.JSON.Compare(y.JSON)
		}
	case DJSONText:
		// json has no comparison operators in SQL; the executor's own
		// sorting and hashing (DISTINCT, GROUP BY) compare the text.
		if y, ok := b.(DJSONText); ok {
			return strings.Compare(string(x), string(y))
		}
	case DOid:
		if y, ok := b.(DOid); ok {
			return cmp.Compare(x, y)
		}
	case *DArray:
		if y, ok := b.(*DArray); ok {
			for i := range min(len(x.Elems), len(y.Elems)) {
				if c := Compare(x.Elems[i], y.Elems[i]); c != 0 {
					return c
				}
			}
			return cmp.Compare(len(x.Elems), len(y.Elems))
		}
	case *DTuple:
		if y, ok := b.(*DTuple); ok {
			return compareRecords(x, y)
		}
	}
	panic("types.Compare: cannot compare " + a.Family().String() + " with " + b.Family().String())
}

// span returns the interval's length as whole days (months count 30) plus
// a remainder in [0, 24h) of microseconds; the pair orders intervals
// exactly without 128-bit arithmetic.
func (iv DInterval) span() (days int64, rem int64) {
	days = int64(iv.Months)*30 + int64(iv.Days) + floorDiv(iv.Micros, microsPerDay)
	return days, iv.Micros - floorDiv(iv.Micros, microsPerDay)*microsPerDay
}

func compareFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b) // -0 == 0 under cmp.Compare
}

// decimalRank orders the special forms: -Inf < finite < +Inf < NaN.
func decimalRank(d *apd.Decimal) int {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return 3
	case apd.Infinite:
		if d.Negative {
			return 0
		}
		return 2
	}
	return 1
}

func compareDecimal(a, b *apd.Decimal) int {
	ra, rb := decimalRank(a), decimalRank(b)
	if ra != rb || ra != 1 {
		return cmp.Compare(ra, rb)
	}
	return a.Cmp(b)
}

func decimalToFloat(d *apd.Decimal) float64 {
	switch d.Form {
	case apd.NaN, apd.NaNSignaling:
		return math.NaN()
	case apd.Infinite:
		if d.Negative {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	f, err := d.Float64()
	if err != nil {
		// Out of float range: Float64 already returns ±Inf or 0 then.
		return f
	}
	return f
}

// Hash returns a hash of d that is equal for datums Compare calls equal,
// including across int, float and numeric (all numbers hash their float8
// value, which is exactly the value Compare's cross-type rules agree on).
// It is stable across processes and releases so distributed hash joins can
// partition rows on different nodes alike. NULL hashes to a fixed value.
func Hash(d Datum) uint64 {
	h := fnv.New64a()
	h.Write(hashKey(nil, d))
	return h.Sum64()
}

func hashKey(dst []byte, d Datum) []byte {
	if IsNull(d) {
		return append(dst, 0)
	}
	switch v := d.(type) {
	case DEnum:
		return append(append(dst, 'E'), v.PhysRep...)
	case DInt:
		return appendFloatHashKey(dst, float64(v))
	case DFloat:
		return appendFloatHashKey(dst, float64(v))
	case *DDecimal:
		return appendFloatHashKey(dst, decimalToFloat(&v.Decimal))
	case DInterval:
		days, rem := v.span()
		dst = append(dst, byte(IntervalFamily))
		dst = binary.BigEndian.AppendUint64(dst, uint64(days))
		return binary.BigEndian.AppendUint64(dst, uint64(rem))
	case *DJSON:
		return v.JSON.appendHashKey(append(dst, byte(JSONBFamily)))
	case *DTuple:
		dst = append(dst, byte(RecordFamily))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v.Elems)))
		for _, e := range v.Elems {
			dst = hashKey(dst, e)
		}
		return dst
	case *DArray:
		dst = append(dst, byte(ArrayFamily))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v.Elems)))
		for _, e := range v.Elems {
			dst = hashKey(dst, e)
		}
		return dst
	case DString:
		return binaryAppendString(append(dst, byte(StringFamily)), string(v))
	case DBytes:
		return binaryAppendString(append(dst, byte(BytesFamily)), string(v))
	case DJSONText:
		return binaryAppendString(append(dst, byte(JSONTextFamily)), string(v))
	case DBool:
		if v {
			return append(dst, byte(BoolFamily), 1)
		}
		return append(dst, byte(BoolFamily), 0)
	case DDate:
		return binary.BigEndian.AppendUint32(append(dst, byte(DateFamily)), uint32(v))
	case DTime:
		return binary.BigEndian.AppendUint64(append(dst, byte(TimeFamily)), uint64(v))
	case DTimestamp:
		return binary.BigEndian.AppendUint64(append(dst, byte(TimestampFamily)), uint64(v))
	case DTimestampTZ:
		return binary.BigEndian.AppendUint64(append(dst, byte(TimestampTZFamily)), uint64(v))
	case DUUID:
		return append(append(dst, byte(UUIDFamily)), v[:]...)
	case DOid:
		return binary.BigEndian.AppendUint32(append(dst, byte(OidFamily)), uint32(v))
	}
	panic("types.Hash: unknown datum " + d.Family().String())
}

func appendFloatHashKey(dst []byte, f float64) []byte {
	dst = append(dst, byte(FloatFamily))
	switch {
	case math.IsNaN(f):
		return append(dst, 0xff)
	case f == 0:
		f = 0 // fold -0 into 0
	}
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(f))
}

// appendDecimalHashKey appends a key equal for numerically equal finite
// decimals (used inside jsonb, where numbers compare as numeric).
func appendDecimalHashKey(dst []byte, d *apd.Decimal) []byte {
	var r apd.Decimal
	r.Reduce(d)
	normalizeZero(&r)
	return binaryAppendString(dst, r.String())
}

// normalizeZero clears the sign of a zero; Postgres has no -0 numeric.
func normalizeZero(d *apd.Decimal) {
	if d.Form == apd.Finite && d.IsZero() {
		d.Negative = false
	}
}
