package catalog_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
)

// A CREATE TABLE, an INSERT and a SELECT, the way the executor will do
// them: DDL through a catalog.Writer in the statement's transaction, rows
// through rowenc with the table's layout.
func Example() {
	ctx := context.Background()
	clock := hlc.NewClock(hlc.UnixNano, 0)
	eng, _ := storage.Open("", storage.Options{FS: vfs.NewMem()})
	st, _ := store.Open(ctx, eng, clock, store.Config{})
	db := kv.NewDB(st, st, clock, kv.Options{})
	defer func() { db.Close(); st.Close(); _ = eng.Close() }()

	err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		if err := catalog.Bootstrap(ctx, txn, ""); err != nil {
			return err
		}
		w := catalog.NewWriter(txn, nil)
		// CREATE TABLE kv (k int8 PRIMARY KEY, v text)
		tbl := &catalog.Table{
			DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: "kv",
			Columns: []catalog.Column{
				{ID: 1, Name: "k", Type: types.Int8},
				{ID: 2, Name: "v", Type: types.Text, Nullable: true},
			},
			PrimaryIndex: catalog.Index{ID: catalog.PrimaryIndexID, Name: "kv_pkey", Unique: true,
				KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: []rowenc.Order{rowenc.Asc}},
			RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1},
		}
		return w.Create(ctx, tbl)
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	var layout *rowenc.TableLayout
	err = db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		tbl, err := catalog.NewReader(txn, nil).Table(ctx, catalog.PostgresDatabaseID, catalog.PublicSchemaID, "kv")
		if err != nil {
			return err
		}
		if layout, err = tbl.Layout(); err != nil {
			return err
		}
		// INSERT INTO kv VALUES (1, 'one'), (2, NULL)
		rw := &rowenc.RowWriter{Table: layout, PackedRows: tbl.RowFormat.Packed}
		var b kv.Batch
		for _, r := range [][]types.Datum{{types.DInt(1), types.DString("one")}, {types.DInt(2), types.DNull}} {
			if err := rw.Insert(&b, r); err != nil {
				return err
			}
		}
		return layout.ConvertWriteError(txn.Run(ctx, &b))
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// SELECT * FROM kv
	span := layout.IndexSpan(&layout.Primary)
	kvs, _ := db.Scan(ctx, span.Key, span.EndKey, 0)
	f, _ := rowenc.NewRowFetcher(layout, &layout.Primary, nil)
	rows, _ := f.DecodeRows(kvs)
	for _, r := range rows {
		fmt.Println(r[0], r[1])
	}
	// Output:
	// 1 one
	// 2 NULL
}
