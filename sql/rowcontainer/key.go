package rowcontainer

import (
	"math"
	"math/bits"

	"github.com/cairn-db/cairn/sql/types"
)

// KeyFunc abbreviates a row's sort keys to a uint64 (PostgreSQL's
// abbreviated keys): wherever two rows' keys differ (both ok), they order
// as their keys do under the sorter's comparison; equal keys say nothing,
// and the comparison decides. Sorting and merging rows whose keys differ
// in their first 8 bytes of normalized key then costs an integer
// comparison instead of a call through types.Compare per column.
type KeyFunc func(row []types.Datum) (key uint64, ok bool)

// KeyCol is one sort column of a NormalizedKey: the value at Pos, of type
// T, ordered Desc or not with NULLs first or last.
type KeyCol struct {
	T          *types.T
	Pos        int
	Desc       bool
	NullsFirst bool
}

// NormalizedKey returns the KeyFunc whose key is the first 8 bytes
// (zero-padded) of a normalized key of cols: each column's value encoded
// so that the encodings compare bytewise as the values do, and so that no
// encoding is a prefix of another (each says where it ends), one after
// the other. Bytewise order of such concatenations is the rows' order
// column by column, and so is the order of their 8-byte prefixes wherever
// the prefixes differ; small integers take few bytes (a length byte and
// the significant bytes), so a window's PARTITION BY g % 1000 ORDER BY g
// fits both columns in 7 bytes and its ties are rare, where an
// abbreviation of the first column alone leaves every row of a partition
// tied. Columns are used up to the first whose family has no encoding
// (numeric, intervals, arrays, ...); nil if the first has none. A row
// holding a value whose Go type is not its column family's gives !ok.
//
// The encodings (before inverting every byte of a DESC column's):
//
//	NULL                   0x00 when NULLs come first, else 0xff (not inverted)
//	int, date, time,       0x01+n..: the n-byte big-endian complement of a
//	timestamp(tz)          negative value's -v-1 (n = 8..0, marker 0x09-n);
//	                       0x0a+n..: the n significant bytes of v >= 0 (n = 0..8)
//	float                  0x01, then floatKey's 8 bytes
//	bool                   0x01 false, 0x02 true
//	string, bytes          0x01, the bytes with 0x00 as 0x00 0xff, then 0x00 0x01
func NormalizedKey(cols []KeyCol) KeyFunc {
	var encs []colEncoder
	for _, c := range cols {
		if c.T == nil {
			break
		}
		kind := encodingOf(c.T.Family)
		if kind == encNone {
			break
		}
		e := colEncoder{pos: c.Pos, kind: kind, null: 0xff}
		if c.NullsFirst {
			e.null = 0
		}
		if c.Desc {
			e.inv = 0xff
		}
		encs = append(encs, e)
	}
	if len(encs) == 0 {
		return nil
	}
	return func(row []types.Datum) (uint64, bool) {
		var b keyBuf
		for i := range encs {
			if b.n == 8 {
				break
			}
			e := &encs[i]
			d := row[e.pos]
			if types.IsNull(d) {
				b.put(e.null)
				continue
			}
			b.inv = e.inv
			if !b.putDatum(e.kind, d) {
				return 0, false
			}
			b.inv = 0
		}
		return b.k, true
	}
}

// FirstKey is the NormalizedKey of one column: the value at pos, of type
// t, ordered desc or not with NULLs first or last.
func FirstKey(t *types.T, pos int, desc, nullsFirst bool) KeyFunc {
	return NormalizedKey([]KeyCol{{T: t, Pos: pos, Desc: desc, NullsFirst: nullsFirst}})
}

// encoding is how a column's values are encoded (NormalizedKey's table).
type encoding uint8

const (
	encNone encoding = iota
	encBool
	encInt
	encDate
	encTime
	encTimestamp
	encTimestampTZ
	encFloat
	encString
	encBytes
)

func encodingOf(f types.Family) encoding {
	switch f {
	case types.BoolFamily:
		return encBool
	case types.IntFamily:
		return encInt
	case types.DateFamily:
		return encDate
	case types.TimeFamily:
		return encTime
	case types.TimestampFamily:
		return encTimestamp
	case types.TimestampTZFamily:
		return encTimestampTZ
	case types.FloatFamily:
		return encFloat
	case types.StringFamily:
		return encString
	case types.BytesFamily:
		return encBytes
	}
	return encNone
}

type colEncoder struct {
	pos  int
	kind encoding
	null byte // NULL's byte
	inv  byte // 0xff for DESC: every byte of a value inverted
}

// keyBuf accumulates a normalized key's first 8 bytes, big-endian, in k;
// bytes past the eighth are dropped. It stays on the stack: no method
// is called through a func value, which would make it escape (an
// allocation per row).
type keyBuf struct {
	k   uint64
	n   int
	inv byte
}

func (b *keyBuf) put(c byte) {
	if b.n < 8 {
		b.k |= uint64(c^b.inv) << (56 - 8*b.n)
		b.n++
	}
}

// putDatum encodes d as kind says; false if d's Go type is not kind's.
func (b *keyBuf) putDatum(kind encoding, d types.Datum) bool {
	switch kind {
	case encBool:
		v, ok := d.(types.DBool)
		if v {
			b.put(2)
		} else {
			b.put(1)
		}
		return ok
	case encInt:
		v, ok := d.(types.DInt)
		b.putInt(int64(v))
		return ok
	case encDate:
		v, ok := d.(types.DDate)
		b.putInt(int64(v))
		return ok
	case encTime:
		v, ok := d.(types.DTime)
		b.putInt(int64(v))
		return ok
	case encTimestamp:
		v, ok := d.(types.DTimestamp)
		b.putInt(int64(v))
		return ok
	case encTimestampTZ:
		v, ok := d.(types.DTimestampTZ)
		b.putInt(int64(v))
		return ok
	case encFloat:
		v, ok := d.(types.DFloat)
		k := floatKey(float64(v))
		b.put(1)
		for i := 7; i >= 0 && b.n < 8; i-- {
			b.put(byte(k >> (8 * i)))
		}
		return ok
	case encString:
		v, ok := d.(types.DString)
		b.putString(string(v))
		return ok
	case encBytes:
		v, ok := d.(types.DBytes)
		b.putString(string(v))
		return ok
	}
	return false
}

// putInt encodes v with as few bytes as its magnitude needs (the table
// of NormalizedKey): the marker orders by sign and length, the bytes
// within a length.
func (b *keyBuf) putInt(v int64) {
	u := uint64(v)
	if v < 0 {
		u = ^u // -v-1 >= 0
	}
	n := (bits.Len64(u) + 7) / 8
	if v < 0 {
		b.put(byte(0x09 - n))
		u = ^u // the complement of -v-1's n bytes: larger v, larger bytes
	} else {
		b.put(byte(0x0a + n))
	}
	for i := n - 1; i >= 0 && b.n < 8; i-- {
		b.put(byte(u >> (8 * i)))
	}
}

func (b *keyBuf) putString(s string) {
	b.put(0x01)
	for i := 0; i < len(s) && b.n < 8; i++ {
		if s[i] == 0 {
			b.put(0)
			b.put(0xff)
			continue
		}
		b.put(s[i])
	}
	b.put(0)
	b.put(1)
}

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
