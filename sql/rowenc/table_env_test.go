package rowenc_test

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/testcluster"
)

// The table-level tests (rowwriter_test.go, tablekey_test.go) run against
// a real node in miniature: an engine on an in-memory filesystem, a
// clock, a store and a kv.DB. Tables are catalog descriptors turned into
// layouts, as the executor will get them.

func newKVDB(t testing.TB) *kv.DB {
	t.Helper()
	return testcluster.StartNode(t, testcluster.Options{}).DB
}

// testTable is t(a int8, b text, c int4, d text) with primary key a and
//
//	t_b_key   UNIQUE (b)
//	t_c_idx   (c DESC) STORING (d)
//	t_d_part  (d) WHERE c > 0   (partial)
func testTable(id catalog.ID) *catalog.Table {
	return &catalog.Table{
		ID: id, DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: "t", Version: 1,
		Columns: []catalog.Column{
			{ID: 1, Name: "a", Type: types.Int8},
			{ID: 2, Name: "b", Type: types.Text, Nullable: true},
			{ID: 3, Name: "c", Type: types.Int4, Nullable: true},
			{ID: 4, Name: "d", Type: types.Text, Nullable: true},
		},
		NextColumnID: 5,
		PrimaryIndex: catalog.Index{ID: 1, Name: "t_pkey", Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
			KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: []rowenc.Order{rowenc.Asc}},
		Indexes: []catalog.Index{
			{ID: 2, Name: "t_b_key", Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic, Placement: catalog.IndexGlobal, GroupID: uint64(id) + 1,
				KeyColumnIDs: []rowenc.ColumnID{2}, KeyDirections: []rowenc.Order{rowenc.Asc}},
			{ID: 3, Name: "t_c_idx", Kind: catalog.IndexBTree, State: catalog.IndexPublic, Placement: catalog.IndexLocal,
				KeyColumnIDs: []rowenc.ColumnID{3}, KeyDirections: []rowenc.Order{rowenc.Desc}, StoreColumnIDs: []rowenc.ColumnID{4}},
			{ID: 4, Name: "t_d_part", Kind: catalog.IndexBTree, State: catalog.IndexPublic, Placement: catalog.IndexGlobal, GroupID: uint64(id) + 2,
				KeyColumnIDs: []rowenc.ColumnID{4}, KeyDirections: []rowenc.Order{rowenc.Asc}, Predicate: "c > 0"},
		},
		NextIndexID:  5,
		Partitioning: catalog.Partitioning{Kind: catalog.PartitionRange},
		GroupID:      uint64(id),
		RowFormat:    catalog.RowFormat{Packed: true, SchemaVersion: 1},
	}
}

func mustLayout(t testing.TB, tbl *catalog.Table) *rowenc.TableLayout {
	t.Helper()
	if err := tbl.Validate(); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Layout()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// cPositive is t_d_part's predicate, c > 0.
func cPositive(idx *rowenc.IndexLayout, row []types.Datum) (bool, error) {
	c, ok := row[2].(types.DInt)
	return ok && c > 0, nil
}

func newWriter(l *rowenc.TableLayout, packed bool, limit int) *rowenc.RowWriter {
	return &rowenc.RowWriter{Table: l, PackedRows: packed, PackedSizeLimit: limit, InPartialIndex: cPositive}
}

// write runs old -> new changes in one transaction.
func write(t testing.TB, db *kv.DB, w *rowenc.RowWriter, changes ...[2][]types.Datum) error {
	t.Helper()
	return db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		for _, c := range changes {
			var b kv.Batch
			if err := w.Write(&b, c[0], c[1]); err != nil {
				return err
			}
			if err := txn.Run(ctx, &b); err != nil {
				return w.Table.ConvertWriteError(err)
			}
		}
		return nil
	})
}

func scan(t testing.TB, db *kv.DB, span kvpb.Span) []kvpb.KeyValue {
	t.Helper()
	kvs, err := db.Scan(context.Background(), span.Key, span.EndKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	return kvs
}

// fetch reads every row of idx.
func fetch(t testing.TB, db *kv.DB, l *rowenc.TableLayout, idx *rowenc.IndexLayout, needed []rowenc.ColumnID) [][]types.Datum {
	t.Helper()
	f, err := rowenc.NewRowFetcher(l, idx, needed)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.DecodeRows(scan(t, db, l.IndexSpan(idx)))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func row(a int64, b any, c any, d any) []types.Datum {
	conv := func(v any) types.Datum {
		switch x := v.(type) {
		case nil:
			return types.DNull
		case string:
			return types.DString(x)
		case int:
			return types.DInt(x)
		}
		panic("bad test value")
	}
	return []types.Datum{types.DInt(a), conv(b), conv(c), conv(d)}
}

func rowsString(rows [][]types.Datum) string {
	s := ""
	for i, r := range rows {
		if i > 0 {
			s += " "
		}
		s += "("
		for j, d := range r {
			if j > 0 {
				s += ","
			}
			if d == nil {
				s += "-"
			} else {
				s += d.String()
			}
		}
		s += ")"
	}
	return s
}
