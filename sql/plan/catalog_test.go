package plan_test

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
)

// TestNewCatalog resolves names through NewCatalog over a real catalog:
// pg_catalog first, then the search path (missing schemas skipped),
// qualified virtual schemas, and Postgres's errors.
func TestNewCatalog(t *testing.T) {
	ctx := context.Background()
	clock := hlc.NewClock(hlc.UnixNano, 0)
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, eng, clock, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db := kv.NewDB(st, st, clock, kv.Options{})
	defer func() { db.Close(); st.Close(); _ = eng.Close() }()

	err = db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		if err := catalog.Bootstrap(ctx, txn, ""); err != nil {
			return err
		}
		w := catalog.NewWriter(txn, nil)
		app := &catalog.Schema{DatabaseID: catalog.PostgresDatabaseID, Name: "app"}
		if err := w.Create(ctx, app); err != nil {
			return err
		}
		mk := func(schema catalog.ID, name string) *catalog.Table {
			return &catalog.Table{DatabaseID: catalog.PostgresDatabaseID, SchemaID: schema, Name: name,
				Columns: []catalog.Column{{ID: 1, Name: "k", Type: types.Int8}},
				PrimaryIndex: catalog.Index{ID: catalog.PrimaryIndexID, Name: name + "_pkey", Unique: true,
					KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: []rowenc.Order{rowenc.Asc}},
				RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1}}
		}
		for _, tb := range []*catalog.Table{mk(catalog.PublicSchemaID, "both"), mk(app.ID, "both"), mk(app.ID, "apponly"), mk(catalog.PublicSchemaID, "pg_class")} {
			if err := w.Create(ctx, tb); err != nil {
				return err
			}
		}
		return w.Create(ctx, &catalog.View{DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID,
			Name: "vw", Query: "SELECT 1 AS one", Columns: []catalog.ViewColumn{{Name: "one", Type: types.Int4}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	virtual := func(schema, name string) plan.VirtualTable {
		if schema == "pg_catalog" && name == "pg_class" || schema == "information_schema" && name == "tables" {
			return &vtable{name: name}
		}
		return nil
	}
	type want struct {
		schema, name string
		kind         string // table schema name, "view", "virtual", or an error code
	}
	cases := []struct {
		path  []string
		wants []want
	}{
		{[]string{"$user", "public"}, []want{
			{"", "both", "public"},
			{"", "apponly", pgerrcode.UndefinedTable},
			{"app", "apponly", "app"},
			{"", "vw", "view"},
			{"", "pg_class", "virtual"}, // pg_catalog is searched first
			{"public", "pg_class", "public"},
			{"pg_catalog", "pg_class", "virtual"},
			{"information_schema", "tables", "virtual"},
			{"information_schema", "nope", pgerrcode.UndefinedTable},
			{"nope", "both", pgerrcode.UndefinedTable}, // a missing schema is a missing relation, as in PostgreSQL
		}},
		{[]string{"app", "public"}, []want{
			{"", "both", "app"},
			{"", "apponly", "app"},
			{"", "vw", "view"},
		}},
		{[]string{"missing", "public"}, []want{
			{"", "both", "public"},
		}},
	}
	err = db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		r := catalog.NewReader(txn, nil)
		pdb, err := r.Database(ctx, "postgres")
		if err != nil {
			return err
		}
		for _, c := range cases {
			cat := plan.NewCatalog(r, pdb, c.path, virtual)
			for _, w := range c.wants {
				rel, err := cat.LookupRelation(ctx, w.schema, w.name)
				got := ""
				switch {
				case err != nil:
					got = pgerror.Code(err)
				case rel.Table != nil:
					sc, err := r.Schema(ctx, pdb.ID, w.kind)
					if err == nil && sc.ID == rel.Table.SchemaID {
						got = w.kind
					} else {
						got = "table in another schema"
					}
				case rel.View != nil:
					got = "view"
				case rel.Virtual != nil:
					got = "virtual"
				}
				if got != w.kind {
					t.Errorf("path %v: %s.%s: got %s (%v), want %s", c.path, w.schema, w.name, got, err, w.kind)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
