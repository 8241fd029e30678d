package types_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/sql/types/typestest"
)

// TestTextRoundTrip: for every type, ParseDatum(Format(d)) equals d, in UTC
// and in a zone with historical oddities.
func TestTextRoundTrip(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		typ := typestest.Type().Draw(t, "type")
		d := typestest.Datum(typ).Draw(t, "d")
		ctx := rapid.SampledFrom([]*types.Context{nil, {Location: ny}}).Draw(t, "ctx")
		s := types.Format(ctx, typ, d)
		back, err := types.ParseDatum(ctx, typ, s)
		if err != nil {
			t.Fatalf("ParseDatum(%s, %q): %v", typ, s, err)
		}
		if types.Compare(d, back) != 0 {
			t.Fatalf("%s: %q read back as %q", typ, s, types.Format(ctx, typ, back))
		}
		if s2 := types.Format(ctx, typ, back); s2 != s {
			t.Fatalf("%s: printed %q, then %q", typ, s, s2)
		}
	})
}

// TestBinaryRoundTrip: pgtype's binary encoding reads back exactly.
func TestBinaryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := typestest.Type().Draw(t, "type")
		d := typestest.Datum(typ).Draw(t, "d")
		b, err := types.EncodeBinary(nil, typ, d)
		if err != nil {
			t.Fatalf("EncodeBinary(%s, %s): %v", typ, d, err)
		}
		back, err := types.DecodeBinary(typ, b)
		if err != nil {
			t.Fatalf("DecodeBinary(%s, %x): %v", typ, b, err)
		}
		if types.Compare(d, back) != 0 || types.Format(nil, typ, d) != types.Format(nil, typ, back) {
			t.Fatalf("%s: %s read back as %s", typ, types.Format(nil, typ, d), types.Format(nil, typ, back))
		}
	})
}

// TestCompareIsAnOrder: antisymmetric, transitive, and consistent with Hash.
func TestCompareIsAnOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := typestest.Type().Draw(t, "type")
		g := typestest.NullableDatum(typ)
		a, b, c := g.Draw(t, "a"), g.Draw(t, "b"), g.Draw(t, "c")
		if types.Compare(a, b) != -types.Compare(b, a) {
			t.Fatalf("not antisymmetric: %s, %s", a, b)
		}
		if types.Compare(a, b) <= 0 && types.Compare(b, c) <= 0 && types.Compare(a, c) > 0 {
			t.Fatalf("not transitive: %s <= %s <= %s", a, b, c)
		}
		if types.Compare(a, a) != 0 || types.Hash(a) != types.Hash(a) {
			t.Fatalf("not reflexive: %s", a)
		}
		if types.Compare(a, b) == 0 && types.Hash(a) != types.Hash(b) {
			t.Fatalf("equal but hash differently: %s, %s", a, b)
		}
	})
}

// TestCrossNumericEquality: an int, its numeric and its float compare and
// hash equal, so a hash join on int = numeric finds matches.
func TestCrossNumericEquality(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		i := rapid.Int64Range(-1<<53, 1<<53).Draw(t, "i")
		n, err := types.Cast(nil, types.DInt(i), types.Int8, types.Numeric)
		if err != nil {
			t.Fatal(err)
		}
		scaled, _ := types.ParseDatum(nil, types.Numeric, types.Format(nil, types.Numeric, n)+".000")
		for _, d := range []types.Datum{n, scaled, types.DFloat(float64(i))} {
			if types.Compare(types.DInt(i), d) != 0 || types.Compare(d, types.DInt(i)) != 0 {
				t.Fatalf("%d != %s", i, d)
			}
			if types.Hash(types.DInt(i)) != types.Hash(d) {
				t.Fatalf("hash(%d) != hash(%s)", i, d)
			}
		}
	})
}

// TestCastToTextAndBack: every type's value survives a cast to text and
// back, which is how Postgres's I/O conversion casts work.
func TestCastToTextAndBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := typestest.Type().Draw(t, "type")
		d := typestest.Datum(typ).Draw(t, "d")
		s, err := types.Cast(nil, d, typ, types.Text)
		if err != nil {
			t.Fatal(err)
		}
		back, err := types.Cast(nil, s, types.Text, typ)
		if err != nil {
			t.Fatalf("cast %q back to %s: %v", s, typ, err)
		}
		if types.Compare(d, back) != 0 {
			t.Fatalf("%s: %s came back as %s", typ, s, back)
		}
	})
}
