package types

import "testing"

func TestVectors(t *testing.T) {
	// PostgreSQL 15: '1 2'::int2vector prints "1 2", its first element is
	// [0], and cast to int2[] it keeps its bounds: [0:1]={1,2}.
	for _, tc := range []struct {
		typ      *T
		in, out  string
		asArray  string
		wantName string
	}{
		{Int2Vector, "1 2", "1 2", "[0:1]={1,2}", "int2vector"},
		{Int2Vector, "  3   ", "3", "[0:0]={3}", "int2vector"},
		{Int2Vector, "", "", "{}", "int2vector"},
		{OidVector, "23 25", "23 25", "[0:1]={23,25}", "oidvector"},
	} {
		d, err := ParseDatum(nil, tc.typ, tc.in)
		if err != nil {
			t.Fatalf("%s %q: %v", tc.typ, tc.in, err)
		}
		if got := Format(nil, tc.typ, d); got != tc.out {
			t.Errorf("%s %q prints %q, want %q", tc.typ, tc.in, got, tc.out)
		}
		if a := d.(*DArray); len(a.Elems) > 0 && a.Lower() != 0 {
			t.Errorf("%s %q: lower bound %d", tc.typ, tc.in, a.Lower())
		}
		arrT := MustArray(tc.typ.Elem)
		c, err := Cast(nil, d, tc.typ, arrT)
		if err != nil {
			t.Fatal(err)
		}
		if got := Format(nil, arrT, c); got != tc.asArray {
			t.Errorf("%s %q as an array prints %q, want %q", tc.typ, tc.in, got, tc.asArray)
		}
		if tc.typ.Name() != tc.wantName || tc.typ.PGName() != tc.wantName {
			t.Errorf("names %s/%s", tc.typ.Name(), tc.typ.PGName())
		}
		if u, ok := OidToType(tc.typ.Oid); !ok || u != tc.typ {
			t.Errorf("OidToType(%d) = %v", tc.typ.Oid, u)
		}
		b, err := EncodeBinary(nil, tc.typ, d)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeBinary(tc.typ, b); err != nil || Compare(back, d) != 0 {
			t.Errorf("%s binary round trip: %v, %v", tc.typ, back, err)
		}
	}
	if _, err := ParseDatum(nil, Int2Vector, "1 x"); err == nil {
		t.Error("int2vector accepted a non-number")
	}
	if CastKindOf(Int2Vector, MustArray(Int2)) != CastImplicit {
		t.Error("int2vector does not coerce to int2[]")
	}
}
