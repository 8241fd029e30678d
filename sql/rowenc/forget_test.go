package rowenc_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/storage"
)

// Dropping packing versions (invariant 5, issue #14): GC moves rows off
// the version that had a dropped column, also a row kept alone; a census
// then finds no packed row older than the current version, and the
// catalog forgets the column. Rows read the same; a column entry of the
// forgotten column is left out by the next repack; a packed row under a
// forgotten version is refused as corrupt, never misread.
func TestForgetPackingVersions(t *testing.T) {
	e := newRepackEnv(t)
	e.insert(ts(10), row(1, "x", 5, "p"))
	e.insert(ts(10), row(2, "y", 6, "q"))
	e.insert(ts(10), row(3, "z", 7, "r"))
	e.update(ts(15), 2, 4, types.DString("q2"))
	e.alter(ts(20), func(tb *catalog.Table) error { return tb.DropColumn("d") })
	e.update(ts(21), 1, 3, types.DInt(50))
	if got, want := e.raw(), "P1+c3 P1+c4 P1"; got != want {
		t.Fatalf("before GC: %s, want %s", got, want)
	}
	const rows = "(1,x,50) (2,y,6) (3,z,7)"
	if got := e.read(ts(30)); got != rows {
		t.Fatalf("rows: %s, want %s", got, rows)
	}

	census := func() uint32 {
		t.Helper()
		var rp rowenc.Repacker
		l := e.cur().l
		span := l.IndexSpan(&l.Primary)
		out, resume, err := mvcc.Census(e.eng, span.Key, span.EndKey, 0, &rp)
		if err != nil || resume != nil {
			t.Fatalf("census: %v", err)
		}
		for _, c := range out {
			if bytes.Equal(c.Owner, l.PrimaryCensusOwner()) {
				return c.MinVersion
			}
		}
		t.Fatalf("census found no packed row: %+v", out)
		return 0
	}
	if v := census(); v != 1 {
		t.Fatalf("census before GC: oldest %d, want 1", v)
	}
	// Row 3 has no column entry: it is rewritten alone, under version 2.
	if st := e.gc(ts(30), 0); st.Repacked != 3 {
		t.Fatalf("GC repacked %d rows, want 3", st.Repacked)
	}
	if got, want := e.raw(), "P2 P2 P2"; got != want {
		t.Fatalf("after GC: %s, want %s", got, want)
	}
	if st := e.gc(ts(30), 0); st.Repacked != 0 {
		t.Fatalf("a second GC rewrote %d current rows", st.Repacked)
	}
	if v := census(); v != 2 {
		t.Fatalf("census after GC: oldest %d, want 2", v)
	}

	var gone []rowenc.ColumnID
	e.alter(ts(40), func(tb *catalog.Table) error {
		if g := tb.ForgetPackingVersions(1); g != nil {
			t.Errorf("version 1 still used, yet forgot %v", g)
		}
		gone = tb.ForgetPackingVersions(census())
		return tb.Validate()
	})
	if cur := e.cur().tbl; !slices.Equal(gone, []rowenc.ColumnID{4}) || len(cur.DroppedColumns) != 0 || cur.RowFormat.OldestPacked != 2 {
		t.Fatalf("forgot %v; dropped columns left %v, oldest packed %d", gone, cur.DroppedColumns, cur.RowFormat.OldestPacked)
	}
	if got := e.read(ts(40)); got != rows {
		t.Fatalf("rows under the pruned schema: %s, want %s", got, rows)
	}

	// An entry of the forgotten column (a write from before the DROP that
	// survived above an older threshold) neither breaks reads nor keeps
	// its row from repacking.
	l := e.cur().l
	e.batch(func(b *storage.Batch) error {
		return mvcc.Put(b, rowenc.ColumnKey(nil, e.rowKey(1), 4), ts(41), []byte{0x03, 'o', 'l', 'd'}, nil)
	})
	e.update(ts(42), 1, 2, types.DString("x2"))
	if st := e.gc(ts(50), 0); st.Repacked != 1 {
		t.Fatalf("GC repacked %d rows with a forgotten column's entry, want 1", st.Repacked)
	}
	if got, want := e.raw(), "P2 P2 P2"; got != want {
		t.Fatalf("after GC: %s, want %s", got, want)
	}
	if got, want := e.read(ts(50)), "(1,x2,50) (2,y,6) (3,z,7)"; got != want {
		t.Fatalf("rows: %s, want %s", got, want)
	}

	// A packed row under the forgotten version is corrupt to the pruned
	// schema.
	ent, err := e.layouts[0].l.EncodePrimaryRow(row(4, "w", 8, "s"), true, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.batch(func(b *storage.Batch) error { return mvcc.Put(b, ent.Key, ts(60), ent.Value, nil) })
	span := l.IndexSpan(&l.Primary)
	res, err := mvcc.Scan(e.eng, span.Key, span.EndKey, ts(60), mvcc.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := rowenc.NewRowFetcher(l, &l.Primary, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.DecodeRows(res.Rows); !errors.Is(err, rowenc.ErrCorrupt) {
		t.Fatalf("a packed row under a forgotten version read as %v, want ErrCorrupt", err)
	}
}

// Rows rewritten alone count toward a GC request's bound, so a table whose
// every row moves off an old version is rewritten in bounded requests.
func TestRepackAloneIsBounded(t *testing.T) {
	e := newRepackEnv(t)
	for k := range int64(5) {
		e.insert(ts(10), row(k+1, "x", int(k), "d"))
	}
	e.alter(ts(20), func(tb *catalog.Table) error { return tb.DropColumn("d") })
	var rp rowenc.Repacker
	rp.SetTables([]rowenc.RepackTable{{Layout: e.cur().l, Since: e.cur().since}})
	span := e.cur().l.IndexSpan(&e.cur().l.Primary)
	e.batch(func(b *storage.Batch) error {
		st, resume, err := mvcc.GCWith(b, span.Key, span.EndKey, ts(30), mvcc.GCOptions{MaxVersions: 2, Repacker: &rp})
		if err == nil && (st.Repacked != 2 || st.Versions != 0 || resume == nil) {
			t.Errorf("a request bounded at 2: repacked %d, removed %d, resume %q; want 2, 0 and a resume key", st.Repacked, st.Versions, resume)
		}
		return err
	})
	if got, want := e.raw(), "P2 P2 P1 P1 P1"; got != want {
		t.Fatalf("after one bounded request: %s, want %s", got, want)
	}
	if st := e.gc(ts(30), 2); st.Repacked != 3 {
		t.Fatalf("the rest took %d repacks, want 3", st.Repacked)
	}
	if got, want := e.read(ts(30)), "(1,x,0) (2,x,1) (3,x,2) (4,x,3) (5,x,4)"; got != want {
		t.Fatalf("rows: %s, want %s", got, want)
	}
}
