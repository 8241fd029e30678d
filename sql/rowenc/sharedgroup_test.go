package rowenc_test

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// Tables of a shared hash group (Citus colocation, catalog
// Partitioning.Distributed) are freed bucket by bucket: clearing one
// table's FreeSpans, or one storage's StorageSpans, on a real store
// leaves every key of the other tables and storages in the group, and a
// hash-partitioned table with a group of its own is still freed as its
// whole group.
func TestSharedGroupFreeSpans(t *testing.T) {
	db := newKVDB(t)
	ctx := context.Background()
	dist := catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, InitialTablets: 4, Distributed: true}
	const group = 900
	a := mustLayout(t, pairTable(800, group, rowenc.Asc, rowenc.Asc, dist, false))
	b := mustLayout(t, pairTable(801, group, rowenc.Asc, rowenc.Asc, dist, false))
	// b's rows under fresh storage IDs as well, as a move in the group
	// leaves them until the old storage is freed.
	bt := pairTable(801, group, rowenc.Asc, rowenc.Asc, dist, false)
	bt.PrimaryIndex.StorageID, bt.Indexes[0].StorageID = 5000, 5001
	bNew := mustLayout(t, bt)
	own := mustLayout(t, pairTable(802, 802, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1}, false))
	if !a.SharedGroup || own.SharedGroup {
		t.Fatalf("SharedGroup: distributed %v, hash partitioned %v", a.SharedGroup, own.SharedGroup)
	}
	for _, l := range []*rowenc.TableLayout{a, b, bNew, own} {
		w := &rowenc.RowWriter{Table: l, PackedRows: true}
		if err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			var bt kv.Batch
			for k := range int64(300) {
				if err := w.Insert(&bt, pairRow(k, "s", k%7)); err != nil {
					return err
				}
			}
			return txn.Run(ctx, &bt)
		}); err != nil {
			t.Fatal(err)
		}
	}
	// count is the keys of each table and index storage in group g.
	count := func(g uint64) map[[2]uint32]int {
		out := map[[2]uint32]int{}
		for _, kv := range scan(t, db, rowenc.GroupSpan(g)) {
			p, _, err := rowenc.DecodeKeyPrefix(kv.Key)
			if err != nil {
				t.Fatal(err)
			}
			out[[2]uint32{p.Table, p.Index}]++
		}
		return out
	}
	before := count(group)
	// Rows and local index entries of a, b and b's fresh storage.
	if len(before) != 6 {
		t.Fatalf("group %d holds %v", group, before)
	}
	steps := []struct {
		name  string
		spans []kvpb.Span
		gone  [][2]uint32
	}{
		{"b's old storage", b.StorageSpans(), [][2]uint32{{801, 1}, {801, 2}}},
		{"table a", a.FreeSpans(), [][2]uint32{{800, 1}, {800, 2}}},
	}
	for _, st := range steps {
		if err := db.ClearRanges(ctx, st.spans); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		after := count(group)
		for k, n := range before {
			gone := false
			for _, g := range st.gone {
				gone = gone || g == k
			}
			if gone && after[k] != 0 || !gone && after[k] != n {
				t.Errorf("after clearing %s, table %d index %d has %d keys, had %d", st.name, k[0], k[1], after[k], n)
			}
		}
		before = after
	}
	if n := len(count(802)); n != 2 {
		t.Fatalf("the table with a group of its own: %d index storages", n)
	}
	if sp := own.FreeSpans(); len(sp) != 1 || string(sp[0].Key) != string(rowenc.GroupSpan(802).Key) {
		t.Errorf("FreeSpans of a hash-partitioned table with its own group: %d spans", len(sp))
	}
	if err := db.ClearRanges(ctx, own.FreeSpans()); err != nil {
		t.Fatal(err)
	}
	if n := len(count(802)); n != 0 {
		t.Errorf("the table with a group of its own kept %d index storages", n)
	}
}

// A key of a distributed group's row splits off with its whole bucket.
func TestBucketUnit(t *testing.T) {
	l := mustLayout(t, pairTable(800, 900, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, Distributed: true}, false))
	for k := range int64(50) {
		r := pairRow(k, "s", 1)
		key, err := l.PrimaryKey(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		bucket, _ := l.Bucket(r)
		u, ok := rowenc.BucketUnit(key)
		want := rowenc.BucketSpan(900, bucket, bucket)
		if !ok || string(u.Key) != string(want.Key) || string(u.EndKey) != string(want.EndKey) || !within(key, u) {
			t.Fatalf("BucketUnit of row %d: %x..%x %v, want bucket %d's span", k, u.Key, u.EndKey, ok, bucket)
		}
	}
	if _, ok := rowenc.BucketUnit(rowenc.GroupPrefix(nil, 900)); ok {
		t.Errorf("a bare group prefix has a bucket unit")
	}
}
