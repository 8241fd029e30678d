package rowenc_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// pairTable is p(k int8, s text, v int8) with primary key (k, s) under
// the given orders, a local index on v, and the given partitioning.
func pairTable(id catalog.ID, group uint64, ko, so rowenc.Order, part catalog.Partitioning, colocated bool) *catalog.Table {
	return &catalog.Table{
		ID: id, DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: "p", Version: 1,
		Columns: []catalog.Column{
			{ID: 1, Name: "k", Type: types.Int8},
			{ID: 2, Name: "s", Type: types.Text},
			{ID: 3, Name: "v", Type: types.Int8, Nullable: true},
		},
		NextColumnID: 4,
		PrimaryIndex: catalog.Index{ID: 1, Name: "p_pkey", Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
			KeyColumnIDs: []rowenc.ColumnID{1, 2}, KeyDirections: []rowenc.Order{ko, so}},
		Indexes: []catalog.Index{{ID: 2, Name: "p_v_idx", Kind: catalog.IndexBTree, State: catalog.IndexPublic, Placement: catalog.IndexLocal,
			KeyColumnIDs: []rowenc.ColumnID{3}, KeyDirections: []rowenc.Order{rowenc.Asc}}},
		NextIndexID:  3,
		Partitioning: part,
		Colocated:    colocated,
		GroupID:      group,
		RowFormat:    catalog.RowFormat{Packed: true, SchemaVersion: 1},
	}
}

func pairRow(k int64, s string, v int64) []types.Datum {
	return []types.Datum{types.DInt(k), types.DString(s), types.DInt(v)}
}

func within(key []byte, sp kvpb.Span) bool {
	return bytes.Compare(sp.Key, key) <= 0 && bytes.Compare(key, sp.EndKey) < 0
}

// Rows' primary keys sort in primary-key order (directions included)
// within a range-partitioned table.
func TestPrimaryKeyOrderProperty(t *testing.T) {
	orders := []rowenc.Order{rowenc.Asc, rowenc.Desc, rowenc.AscNullsFirst, rowenc.DescNullsLast}
	rapid.Check(t, func(rt *rapid.T) {
		ko, so := rapid.SampledFrom(orders).Draw(rt, "ko"), rapid.SampledFrom(orders).Draw(rt, "so")
		l := mustLayout(t, pairTable(500, 500, ko, so, catalog.Partitioning{Kind: catalog.PartitionRange}, false))
		rows := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) []types.Datum {
			return pairRow(rapid.Int64().Draw(rt, "k"), rapid.String().Draw(rt, "s"), 0)
		}), 2, 20).Draw(rt, "rows")
		type keyed struct {
			key []byte
			row []types.Datum
		}
		var ks []keyed
		for _, r := range rows {
			k, err := l.PrimaryKey(nil, r)
			if err != nil {
				rt.Fatal(err)
			}
			ks = append(ks, keyed{k, r})
		}
		sort.Slice(ks, func(i, j int) bool { return bytes.Compare(ks[i].key, ks[j].key) < 0 })
		cmp := func(a, b types.Datum, o rowenc.Order) int {
			c := types.Compare(a, b)
			if o&rowenc.Descending != 0 {
				c = -c
			}
			return c
		}
		for i := 1; i < len(ks); i++ {
			a, b := ks[i-1].row, ks[i].row
			c := cmp(a[0], b[0], ko)
			if c == 0 {
				c = cmp(a[1], b[1], so)
			}
			if c > 0 {
				rt.Fatalf("key order puts %v before %v (orders %v, %v)", a, b, ko, so)
			}
			if !within(ks[i].key, l.IndexSpan(&l.Primary)) || !within(ks[i].key, l.TableSpans()[0]) {
				rt.Fatalf("key %q outside the table's spans", ks[i].key)
			}
		}
	})
}

// The tables of a colocated database (one group) form one contiguous
// span: every key of every table and local index lies in the group's
// span, the keys of neighbouring groups do not, and each table's span
// holds its own keys and no other table's.
func TestColocatedGroupIsContiguous(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		g := rapid.Uint64Range(2, 1<<31).Draw(rt, "group")
		single := catalog.Partitioning{Kind: catalog.PartitionSingle}
		ids := rapid.SliceOfNDistinct(rapid.Uint32Range(1, 1<<31), 2, 5, func(v uint32) uint32 { return v }).Draw(rt, "tables")
		var members []*rowenc.TableLayout
		for _, id := range ids {
			members = append(members, mustLayout(t, pairTable(catalog.ID(id), g, rowenc.Asc, rowenc.Asc, single, true)))
		}
		neighbours := []*rowenc.TableLayout{
			mustLayout(t, pairTable(catalog.ID(g-1), g-1, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionRange}, false)),
			mustLayout(t, pairTable(catalog.ID(g+1), g+1, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionRange}, false)),
		}
		span := rowenc.GroupSpan(g)
		keysOf := func(l *rowenc.TableLayout) [][]byte {
			var out [][]byte
			for range 3 {
				r := pairRow(rapid.Int64().Draw(rt, "k"), rapid.String().Draw(rt, "s"), rapid.Int64().Draw(rt, "v"))
				pk, err := l.PrimaryKey(nil, r)
				if err != nil {
					rt.Fatal(err)
				}
				e, err := l.EncodeIndexEntry(&l.Secondary[0], r)
				if err != nil {
					rt.Fatal(err)
				}
				out = append(out, pk, e.Key)
			}
			return out
		}
		for _, m := range members {
			for _, k := range keysOf(m) {
				if !within(k, span) {
					rt.Fatalf("table %d key %q outside its group's span", m.ID, k)
				}
				for _, o := range members {
					if in := within(k, o.TableSpans()[0]); in != (o == m) {
						rt.Fatalf("table %d key %q: within table %d's span = %v", m.ID, k, o.ID, in)
					}
				}
			}
		}
		for _, n := range neighbours {
			for _, k := range keysOf(n) {
				if within(k, span) {
					rt.Fatalf("group %d key %q inside group %d's span", n.GroupID, k, g)
				}
			}
		}
	})
}

// A hash-partitioned table's rows spread over buckets by their hash
// columns: sequential keys land in many buckets, rows sharing the hash
// columns share a bucket, and the bucket in the key is the row's.
func TestHashPartitionedBuckets(t *testing.T) {
	l := mustLayout(t, pairTable(600, 600, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1}, false))
	buckets := map[uint16]bool{}
	for k := range int64(1000) {
		r := pairRow(k, "a", 0)
		key, err := l.PrimaryKey(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := rowenc.DecodeKeyPrefix(key)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := l.Bucket(r)
		b2, _ := l.Bucket(pairRow(k, "another", 7))
		if p.Bucket != b || b != b2 {
			t.Fatalf("row %d: key bucket %d, row bucket %d, same hash columns bucket %d", k, p.Bucket, b, b2)
		}
		if !within(key, l.IndexBucketSpan(&l.Primary, b)) || !within(key, rowenc.BucketSpan(600, b, b)) || !within(key, rowenc.GroupSpan(600)) {
			t.Fatalf("row %d key %q outside its bucket's spans", k, key)
		}
		if b > 0 && within(key, rowenc.BucketSpan(600, 0, b-1)) {
			t.Fatalf("row %d key in a lower bucket range", k)
		}
		buckets[b] = true
	}
	// 1000 keys over 65536 buckets: a uniform hash leaves ~8 collisions.
	if len(buckets) < 950 {
		t.Errorf("1000 sequential keys landed in only %d buckets", len(buckets))
	}
}

// A table hashed on its second primary-key column (a Citus distribution
// column after the key's first, catalog.Partitioning.HashColumn): the
// bucket is the hash of that column alone, whatever the first holds, and
// a hash column outside the primary key is refused.
func TestHashColumnNotFirst(t *testing.T) {
	byS := mustLayout(t, pairTable(610, 610, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, HashColumn: 2}, false))
	if got := byS.HashColumnIDs(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("HashColumnIDs = %v, want [2]", got)
	}
	byK := mustLayout(t, pairTable(611, 611, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1}, false))
	differ := 0
	for k := range int64(200) {
		s := fmt.Sprintf("s%d", k%10)
		b, err := byS.Bucket(pairRow(k, s, 0))
		if err != nil {
			t.Fatal(err)
		}
		want := rowenc.HashBucket(must(rowenc.EncodeKey(nil, types.DString(s), rowenc.Asc)))
		if b != want {
			t.Fatalf("row (%d, %s): bucket %d, want the hash of %q alone, %d", k, s, b, s, want)
		}
		key, err := byS.PrimaryKey(nil, pairRow(k, s, 0))
		if err != nil {
			t.Fatal(err)
		}
		if p, _, err := rowenc.DecodeKeyPrefix(key); err != nil || p.Bucket != b {
			t.Fatalf("row (%d, %s): key bucket %d (%v), row bucket %d", k, s, p.Bucket, err, b)
		}
		if kb, _ := byK.Bucket(pairRow(k, s, 0)); kb != b {
			differ++
		}
	}
	if differ == 0 {
		t.Error("hashing on the second key column gave every row the first column's bucket")
	}
	bad := pairTable(612, 612, rowenc.Asc, rowenc.Asc, catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, HashColumn: 3}, false)
	if err := bad.Validate(); err == nil {
		t.Error("a descriptor hashed on a column outside its primary key validated")
	}
	if _, err := bad.Layout(); err == nil {
		t.Error("a layout hashed on a column outside its primary key initialised")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Rows of a hash-partitioned table read back through a scan of its whole
// group, interleaved with its local index's entries, from a real store.
func TestHashPartitionedRoundTrip(t *testing.T) {
	db := newKVDB(t)
	l := mustLayout(t, pairTable(700, 700, rowenc.Asc, rowenc.Desc, catalog.Partitioning{Kind: catalog.PartitionHash, HashColumns: 1, Distributed: true}, false))
	w := &rowenc.RowWriter{Table: l, PackedRows: true}
	want := map[string]bool{}
	if err := db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		var b kv.Batch
		for k := range int64(40) {
			r := pairRow(k, "s", k%5)
			want[rowsString([][]types.Datum{r})] = true
			if err := w.Insert(&b, r); err != nil {
				return err
			}
		}
		return txn.Run(ctx, &b)
	}); err != nil {
		t.Fatal(err)
	}
	rows := fetch(t, db, l, &l.Primary, nil)
	if len(rows) != len(want) {
		t.Fatalf("read %d rows, wrote %d", len(rows), len(want))
	}
	for _, r := range rows {
		if !want[rowsString([][]types.Datum{r})] {
			t.Errorf("read row %v that was not written", r)
		}
	}
	if idx := fetch(t, db, l, &l.Secondary[0], nil); len(idx) != 40 {
		t.Errorf("local index has %d entries, want 40", len(idx))
	}
}
