package rowenc_test

import (
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// TestFetchSkipsKey: a primary-index fetch that does not need a key
// column passes over its bytes instead of decoding it (the fetcher's
// keySkip): the point SELECT of a non-key column by its key (pgbench's
// SELECT abalance ... WHERE aid = $1) made a Datum of the key, an
// object for an integer of 256 or more, which the fetch then dropped.
// A fetch that needs the key still decodes it, and both read what a
// full fetch reads with the other columns cleared
// (TestFetchProjections).
func TestFetchSkipsKey(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	db := newKVDB(t)
	l := mustLayout(t, testTable(121))
	if err := write(t, db, newWriter(l, true, 0), ins(row(100000, "x", 5, "p"))); err != nil {
		t.Fatal(err)
	}
	kvs := scan(t, db, l.IndexSpan(&l.Primary))
	for _, tc := range []struct {
		needed []rowenc.ColumnID
		want   string
		allocs float64
	}{
		{[]rowenc.ColumnID{3}, "(-,-,5,-)", 0},
		{[]rowenc.ColumnID{1, 3}, "(100000,-,5,-)", 1}, // the key's DInt
	} {
		f, err := rowenc.NewRowFetcher(l, &l.Primary, tc.needed)
		if err != nil {
			t.Fatal(err)
		}
		f.ReuseRows = true
		var last []types.Datum
		emit := func(r []types.Datum) error { last = r; return nil }
		read := func() {
			if err := f.Add([]kvpb.KeyValue(kvs), emit); err != nil {
				t.Fatal(err)
			}
			if err := f.Finish(emit); err != nil {
				t.Fatal(err)
			}
		}
		read()
		if got := rowsString([][]types.Datum{last}); got != tc.want {
			t.Errorf("fetch of %v = %s, want %s", tc.needed, got, tc.want)
		}
		if n := testing.AllocsPerRun(100, read); n != tc.allocs {
			t.Errorf("fetch of %v: %v allocations per row, want %v", tc.needed, n, tc.allocs)
		}
	}
}
