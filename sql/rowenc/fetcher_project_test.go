package rowenc_test

import (
	"slices"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// TestFetchProjections checks that a fetch of some columns reads what a
// full fetch reads with the other columns cleared, over packed, unpacked
// and partially updated rows and deleted rows whose column entries
// linger: in particular that a fetch of no value column (count(*), which
// skips decoding values) still skips deleted rows.
func TestFetchProjections(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, testTable(120))
	packed, unpacked := newWriter(l, true, 0), newWriter(l, false, 0)
	r1, r2, r3, r4 := row(1, "x", 5, "p"), row(2, nil, -1, nil), row(3, "z", 7, "q"), row(4, "w", 8, nil)
	r3b := row(3, "z", 70, "q")
	steps := []struct {
		w *rowenc.RowWriter
		c [2][]types.Datum
	}{
		{packed, ins(r1)}, {unpacked, ins(r2)}, {unpacked, ins(r3)}, {packed, ins(r4)},
		{packed, upd(r3, r3b)}, // a column entry newer than the row
		{unpacked, del(r2)},    // an unpacked row deleted
		{packed, del(r1)},
	}
	for _, s := range steps {
		if err := write(t, db, s.w, s.c); err != nil {
			t.Fatal(err)
		}
	}
	full := fetch(t, db, l, &l.Primary, nil)
	if got, want := rowsString(full), "(3,z,70,q) (4,w,8,NULL)"; got != want {
		t.Fatalf("full fetch = %s, want %s", got, want)
	}
	for _, needed := range [][]rowenc.ColumnID{{}, {1}, {3}, {2, 4}, {1, 3}} {
		var want [][]types.Datum
		for _, r := range full {
			p := make([]types.Datum, len(r))
			for _, id := range needed {
				p[id-1] = r[id-1]
			}
			want = append(want, p)
		}
		got := fetch(t, db, l, &l.Primary, needed)
		if rowsString(got) != rowsString(want) {
			t.Errorf("fetch of %v = %s, want %s", needed, rowsString(got), rowsString(want))
		}
		// With ReuseRows, each row as emitted (copied during emit, in
		// pages of one KV so rows span pages) is the same.
		f, err := rowenc.NewRowFetcher(l, &l.Primary, needed)
		if err != nil {
			t.Fatal(err)
		}
		f.ReuseRows = true
		var reused [][]types.Datum
		emit := func(r []types.Datum) error { reused = append(reused, slices.Clone(r)); return nil }
		for _, kv := range scan(t, db, l.IndexSpan(&l.Primary)) {
			if err := f.Add([]kvpb.KeyValue{kv}, emit); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Finish(emit); err != nil {
			t.Fatal(err)
		}
		if rowsString(reused) != rowsString(want) {
			t.Errorf("fetch of %v reusing rows = %s, want %s", needed, rowsString(reused), rowsString(want))
		}
	}
}
