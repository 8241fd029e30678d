package rowenc

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/sql/types/typestest"
)

// keyType draws a key-encodable type: any scalar but jsonb, or an array of
// one.
func keyType() *rapid.Generator[*types.T] {
	return typestest.Type().Filter(func(t *types.T) bool {
		e := t
		if t.Family == types.ArrayFamily {
			e = t.Elem
		}
		// Neither jsonb nor json has a key encoding (json has no ordering).
		return e.Family != types.JSONBFamily && e.Family != types.JSONTextFamily
	})
}

var orders = []Order{Asc, Desc, AscNullsFirst, DescNullsLast}

// expectedKeyOrder is the order key bytes must have: NULLs placed by o,
// values by types.Compare, reversed for descending columns.
func expectedKeyOrder(a, b types.Datum, o Order) int {
	an, bn := types.IsNull(a), types.IsNull(b)
	nullSide := 1
	if o&NullsFirst != 0 {
		nullSide = -1
	}
	switch {
	case an && bn:
		return 0
	case an:
		return nullSide
	case bn:
		return -nullSide
	}
	c := types.Compare(a, b)
	if o&Descending != 0 {
		c = -c
	}
	return c
}

func mustKey(t interface{ Fatalf(string, ...any) }, dst []byte, d types.Datum, o Order) []byte {
	b, err := EncodeKey(dst, d, o)
	if err != nil {
		t.Fatalf("EncodeKey(%s): %v", d, err)
	}
	return b
}

// TestKeyOrderProperty: bytes.Compare of encodings agrees with
// types.Compare for composite keys of random types and orders, and every
// key decodes back to an equal value.
func TestKeyOrderProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ncols := rapid.IntRange(1, 3).Draw(t, "ncols")
		var ts []*types.T
		var os []Order
		for range ncols {
			ts = append(ts, keyType().Draw(t, "type"))
			os = append(os, rapid.SampledFrom(orders).Draw(t, "order"))
		}
		row := func(name string) []types.Datum {
			var r []types.Datum
			for _, typ := range ts {
				r = append(r, typestest.NullableDatum(typ).Draw(t, name))
			}
			return r
		}
		a, b := row("a"), row("b")
		if rapid.Bool().Draw(t, "share prefix") {
			copy(b[:ncols-1], a[:ncols-1]) // make later columns decide
		}
		var ka, kb []byte
		want := 0
		for i := range ts {
			ka = mustKey(t, ka, a[i], os[i])
			kb = mustKey(t, kb, b[i], os[i])
			if want == 0 {
				want = expectedKeyOrder(a[i], b[i], os[i])
			}
		}
		if got := bytes.Compare(ka, kb); got != want {
			t.Fatalf("bytes.Compare(%x, %x) = %d, want %d for %v vs %v", ka, kb, got, want, a, b)
		}
		rest := ka
		for i, typ := range ts {
			var d types.Datum
			var err error
			d, rest, err = DecodeKey(rest, typ, os[i])
			if err != nil {
				t.Fatalf("DecodeKey(%s): %v", typ, err)
			}
			if types.Compare(d, a[i]) != 0 {
				t.Fatalf("column %d (%s %s): decoded %s, encoded %s", i, typ, os[i], d, a[i])
			}
		}
		if len(rest) != 0 {
			t.Fatalf("%d bytes left over", len(rest))
		}
	})
}

// TestKeyEqualValuesEncodeEqual: values Compare calls equal but that print
// differently share one key, or unique indexes would admit duplicates.
func TestKeyEqualValuesEncodeEqual(t *testing.T) {
	num := func(s string) types.Datum {
		d, err := types.ParseDatum(nil, types.Numeric, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	pairs := [][2]types.Datum{
		{num("1.0"), num("1.000")},
		{num("-120"), num("-120.00")},
		{num("0"), num("0.00")},
		{types.DFloat(0), types.DFloat(math.Copysign(0, -1))},
		{types.DFloat(math.NaN()), types.DFloat(-math.NaN())},
		{types.DInterval{Months: 1}, types.DInterval{Days: 30}},
		{types.DInterval{Days: 1}, types.DInterval{Micros: 86_400_000_000}},
	}
	for _, p := range pairs {
		for _, o := range orders {
			if a, b := mustKey(t, nil, p[0], o), mustKey(t, nil, p[1], o); !bytes.Equal(a, b) {
				t.Errorf("%s and %s encode as %x and %x under %s", p[0], p[1], a, b, o)
			}
		}
	}
}

// TestKeyLayout pins a few encodings so accidental format changes show.
func TestKeyLayout(t *testing.T) {
	tests := []struct {
		d    types.Datum
		o    Order
		want string
	}{
		{types.DNull, Asc, "\x02"},
		{types.DNull, Desc, "\x00"},
		{types.DInt(0), Asc, "\x01\x80"},
		{types.DInt(1), Asc, "\x01\x81\x01"},
		{types.DInt(-1), Asc, "\x01\x7f\xff"},
		{types.DInt(300), Asc, "\x01\x82\x01\x2c"},
		{types.DInt(0), Desc, "\x01\x7f"},
		{types.DString("a\x00b"), Asc, "\x01a\x00\xffb\x00\x01"},
		{types.DBool(true), Asc, "\x01\x01"},
	}
	for _, tc := range tests {
		if got := string(mustKey(t, nil, tc.d, tc.o)); got != tc.want {
			t.Errorf("EncodeKey(%s, %s) = %q, want %q", tc.d, tc.o, got, tc.want)
		}
	}
	if _, err := EncodeKey(nil, types.NewJSON(types.JSONNullValue), Asc); !errors.Is(err, ErrNotKeyEncodable) {
		t.Errorf("jsonb key: got %v, want ErrNotKeyEncodable", err)
	}
}

// TestColumnKeysSortWithinTheRow: column entries follow their row key in
// column order and stay below the next row's key and the row's PrefixEnd.
func TestColumnKeysSortWithinTheRow(t *testing.T) {
	prefix := EncodeTableIndexPrefix(nil, 52, 1)
	row := func(k int64) []byte { return mustKey(t, append([]byte{}, prefix...), types.DInt(k), Asc) }
	r1, r2 := row(7), row(8)
	end := keys.PrefixEnd(r1)
	prev := r1
	for _, id := range []ColumnID{0, 1, 2, 127, 128, 255, 256, 70000, math.MaxUint32} {
		ck := ColumnKey(nil, r1, id)
		if bytes.Compare(prev, ck) >= 0 || bytes.Compare(ck, r2) >= 0 || bytes.Compare(ck, end) >= 0 {
			t.Fatalf("column key %x for %d out of place (prev %x, next row %x)", ck, id, prev, r2)
		}
		got, err := DecodeColumnSuffix(ck[len(r1):])
		if err != nil || got != id {
			t.Fatalf("DecodeColumnSuffix = %d, %v; want %d", got, err, id)
		}
		prev = ck
	}
}

// FuzzDecodeKey: arbitrary bytes never make DecodeKey panic, and whatever
// decodes re-encodes to a key that decodes to an equal value.
func FuzzDecodeKey(f *testing.F) {
	all := []*types.T{types.Bool, types.Int8, types.Float8, types.Numeric, types.Text, types.Bytea,
		types.Date, types.Time, types.Timestamp, types.TimestampTZ, types.Interval, types.UUID, types.Oid,
		types.MustArray(types.Int4), types.MustArray(types.Text)}
	for i, typ := range all {
		for _, o := range orders {
			d := typestest.Datum(typ).Example(i)
			k, _ := EncodeKey(nil, d, o)
			f.Add(uint8(i), uint8(o), k)
		}
	}
	f.Fuzz(func(t *testing.T, which, order uint8, b []byte) {
		typ := all[int(which)%len(all)]
		o := Order(order) & (Descending | NullsFirst)
		d, _, err := DecodeKey(b, typ, o)
		if err != nil {
			return
		}
		k, err := EncodeKey(nil, d, o)
		if err != nil {
			t.Fatalf("decoded %s does not re-encode: %v", d, err)
		}
		d2, rest, err := DecodeKey(k, typ, o)
		if err != nil || len(rest) != 0 || types.Compare(d, d2) != 0 {
			t.Fatalf("%s re-encoded as %x, decoded as %v (%v)", d, k, d2, err)
		}
	})
}
