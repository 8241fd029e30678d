package rowcontainer

import (
	"encoding/binary"
	"math"

	"github.com/cairn-db/cairn/sql/types"
)

// KeyFunc abbreviates a row's first sort key to a uint64 (PostgreSQL's
// abbreviated keys): wherever two rows' keys differ (both ok), they order
// as their keys do under the sorter's comparison; equal keys say nothing,
// and the comparison decides. Sorting and merging ints, floats, dates,
// timestamps or strings that differ in their first 8 bytes then costs an
// integer comparison instead of a call through types.Compare.
type KeyFunc func(row []types.Datum) (key uint64, ok bool)

// FirstKey returns the KeyFunc of the value at pos, of type t, ordered
// desc or not with NULLs first or last, or nil when t's family has no
// abbreviation. A value whose Go type is not the family's gives !ok.
func FirstKey(t *types.T, pos int, desc, nullsFirst bool) KeyFunc {
	var abbrev func(d types.Datum) (uint64, bool)
	switch t.Family {
	case types.BoolFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			b, ok := d.(types.DBool)
			if b {
				return 1, ok
			}
			return 0, ok
		}
	case types.IntFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			i, ok := d.(types.DInt)
			return flipSign(int64(i)), ok
		}
	case types.FloatFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			f, ok := d.(types.DFloat)
			return floatKey(float64(f)), ok
		}
	case types.StringFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			s, ok := d.(types.DString)
			return stringKey(string(s)), ok
		}
	case types.BytesFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			s, ok := d.(types.DBytes)
			return stringKey(string(s)), ok
		}
	case types.DateFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			v, ok := d.(types.DDate)
			return flipSign(int64(v)), ok
		}
	case types.TimeFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			v, ok := d.(types.DTime)
			return flipSign(int64(v)), ok
		}
	case types.TimestampFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			v, ok := d.(types.DTimestamp)
			return flipSign(int64(v)), ok
		}
	case types.TimestampTZFamily:
		abbrev = func(d types.Datum) (uint64, bool) {
			v, ok := d.(types.DTimestampTZ)
			return flipSign(int64(v)), ok
		}
	default:
		return nil
	}
	// NULL is at an end of the key space; a value abbreviated to the same
	// end compares equal and the comparison decides.
	var null uint64 = math.MaxUint64
	if nullsFirst {
		null = 0
	}
	return func(row []types.Datum) (uint64, bool) {
		d := row[pos]
		if types.IsNull(d) {
			return null, true
		}
		k, ok := abbrev(d)
		if desc {
			k = ^k
		}
		return k, ok
	}
}

// flipSign maps int64 order onto uint64 order.
func flipSign(i int64) uint64 { return uint64(i) ^ 1<<63 }

// floatKey maps float8 order (types.Compare's: -0 = 0, NaN above
// +Infinity, every NaN equal) onto uint64 order.
func floatKey(f float64) uint64 {
	if math.IsNaN(f) {
		return math.MaxUint64
	}
	if f == 0 {
		f = 0 // -0
	}
	b := math.Float64bits(f)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

// stringKey is the first 8 bytes, zero-padded: if a's key is below b's,
// a is below b bytewise (C collation), a shorter prefix included.
func stringKey(s string) uint64 {
	var b [8]byte
	copy(b[:], s)
	return binary.BigEndian.Uint64(b[:])
}

// rowKey is a row's abbreviated key.
type rowKey struct {
	k  uint64
	ok bool
}

// keyCompare orders two rows by their abbreviated keys when that decides,
// else by cmp.
func keyCompare(cmp Compare, a, b []types.Datum, ka, kb rowKey) int {
	if ka.ok && kb.ok && ka.k != kb.k {
		if ka.k < kb.k {
			return -1
		}
		return 1
	}
	return cmp(a, b)
}
