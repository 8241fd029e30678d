package types

import (
	"testing"

	"github.com/cairn-db/cairn/sql/pgerror"
)

func i64p(v int64) *int64 { return &v }

func TestArraySlice(t *testing.T) {
	a := NewArray(Int4, DInt(1), DInt(2), DInt(3), DInt(4))
	vec := NewVector(Int2Vector, DInt(10), DInt(11), DInt(12))
	for _, tc := range []struct {
		a      *DArray
		lo, hi *int64
		want   string
	}{
		{a, i64p(2), i64p(3), "{2,3}"},
		{a, nil, i64p(2), "{1,2}"},
		{a, i64p(3), nil, "{3,4}"},
		{a, nil, nil, "{1,2,3,4}"},
		{a, i64p(0), i64p(2), "{1,2}"}, // clamped
		{a, i64p(3), i64p(2), "{}"},    // empty range
		{a, i64p(5), nil, "{}"},        // past the end
		{a, i64p(-3), i64p(99), "{1,2,3,4}"},
		{vec, i64p(0), i64p(1), "{10,11}"}, // a vector counts from 0; its slice from 1
	} {
		got := ArraySlice(tc.a, tc.lo, tc.hi)
		if s := Format(nil, MustArray(Int4), got); s != tc.want {
			t.Errorf("slice %v[%v:%v] = %s, want %s", tc.a, tc.lo, tc.hi, s, tc.want)
		}
		if got.ZeroBased {
			t.Errorf("slice %v is zero-based", got)
		}
	}
}

func TestArraySetSlice(t *testing.T) {
	a := NewArray(Int4, DInt(1), DInt(2))
	empty := NewArray(Int4)
	src := NewArray(Int4, DInt(7), DInt(8), DInt(9))
	for _, tc := range []struct {
		name   string
		a      Datum
		lo, hi *int64
		want   string // or the SQLSTATE
	}{
		{"replace", a, i64p(2), i64p(2), "{1,7}"},
		{"extend with NULLs", a, i64p(4), i64p(4), "{1,2,NULL,7}"},
		{"slice", a, i64p(2), i64p(3), "{1,7,8}"},
		{"open upper bound", a, i64p(1), nil, "{7,8}"},
		{"NULL array", DNull, i64p(1), i64p(2), "{7,8}"},
		{"empty array", empty, i64p(1), i64p(1), "{7}"},
		{"before the lower bound", a, i64p(0), i64p(0), "0A000"},
		{"empty array elsewhere", empty, i64p(3), i64p(3), "0A000"},
		{"open bound on empty", empty, nil, i64p(1), "2202E"},
		{"source too small", a, i64p(1), i64p(4), "2202E"},
		{"upper below lower", a, i64p(2), i64p(1), "2202E"},
	} {
		got, err := ArraySetSlice(tc.a, Int4, tc.lo, tc.hi, src)
		if err != nil {
			if c := pgerror.Code(err); c != tc.want {
				t.Errorf("%s: error %v (%s), want %s", tc.name, err, c, tc.want)
			}
			continue
		}
		if s := Format(nil, MustArray(Int4), got); s != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, s, tc.want)
		}
	}
	// The input is never modified.
	if s := Format(nil, MustArray(Int4), a); s != "{1,2}" {
		t.Errorf("input became %s", s)
	}
	// Assigning into a vector keeps it zero-based.
	vec := NewVector(Int2Vector, DInt(10), DInt(11))
	got, err := ArraySetElement(vec, Int2, 0, DInt(5))
	if err != nil || !got.ZeroBased || Format(nil, Int2Vector, got) != "5 11" {
		t.Errorf("vector assignment: %v %v", got, err)
	}
}
