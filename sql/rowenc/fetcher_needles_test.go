package rowenc_test

import (
	"testing"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// TestFetchNeedles: a fetcher with needles (SetNeedles) emits exactly the
// rows each of whose needles is in one of its stored values (a packed
// row, an unpacked row's column entries, a column entry newer than its
// row), whichever column holds it, and skips the others; an update that
// removes a needle leaves it in the older packed value, so that row is
// still emitted (the needles only ever skip rows the caller's filter
// rejects: the filter decides the rest).
func TestFetchNeedles(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, testTable(121))
	packed, unpacked := newWriter(l, true, 0), newWriter(l, false, 0)
	r4, r5 := row(4, "zz", 8, "q"), row(5, "m", 9, "q")
	for _, s := range []struct {
		w *rowenc.RowWriter
		c [2][]types.Datum
	}{
		{packed, ins(row(1, "xzzx", 5, "p"))}, // "zz" inside b
		{unpacked, ins(row(2, "y", 6, "zz"))}, // in d's column entry
		{packed, ins(row(3, "a", 7, "b"))},    // nowhere
		{packed, ins(r4)},
		{packed, upd(r4, row(4, "n", 8, "q"))}, // b's newer entry lacks it; the packed value has it
		{packed, ins(r5)},
		{packed, upd(r5, row(5, "zz", 9, "q"))}, // only b's newer entry has it
	} {
		if err := write(t, db, s.w, s.c); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		needles []string
		want    string
	}{
		{nil, "(1,xzzx,5,p) (2,y,6,zz) (3,a,7,b) (4,n,8,q) (5,zz,9,q)"},
		{[]string{"zz"}, "(1,xzzx,5,p) (2,y,6,zz) (4,n,8,q) (5,zz,9,q)"},
		{[]string{"zz", "q"}, "(4,n,8,q) (5,zz,9,q)"},
		{[]string{"nope"}, ""},
	} {
		f, err := rowenc.NewRowFetcher(l, &l.Primary, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ns [][]byte
		for _, n := range tc.needles {
			ns = append(ns, []byte(n))
		}
		f.SetNeedles(ns)
		rows, err := f.DecodeRows(scan(t, db, l.IndexSpan(&l.Primary)))
		if err != nil {
			t.Fatal(err)
		}
		if got := rowsString(rows); got != tc.want {
			t.Errorf("needles %q: %s, want %s", tc.needles, got, tc.want)
		}
	}
}
