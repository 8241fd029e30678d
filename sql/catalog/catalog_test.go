package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// simpleTable returns an uncreated table t(a int8 primary key, b text,
// c int4) with a secondary index on b in postgres.public.
func simpleTable(name string) *Table {
	return &Table{
		DatabaseID: PostgresDatabaseID,
		SchemaID:   PublicSchemaID,
		Name:       name,
		Columns: []Column{
			{ID: 1, Name: "a", Type: types.Int8},
			{ID: 2, Name: "b", Type: types.Text, Nullable: true},
			{ID: 3, Name: "c", Type: types.Int4, Nullable: true},
		},
		PrimaryIndex: Index{ID: PrimaryIndexID, Name: name + "_pkey", Unique: true,
			KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: []rowenc.Order{rowenc.Asc}},
		Indexes: []Index{{ID: 2, Name: name + "_b_idx",
			KeyColumnIDs: []rowenc.ColumnID{2}, KeyDirections: []rowenc.Order{rowenc.Asc}}},
		RowFormat: RowFormat{Packed: true, SchemaVersion: 1},
	}
}

func TestBootstrap(t *testing.T) {
	db := newTestDB(t)
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		pg, err := r.Database(ctx, "postgres")
		if err != nil {
			return err
		}
		if pg.ID != PostgresDatabaseID || pg.Version != 1 {
			t.Errorf("postgres database = %+v", pg)
		}
		pub, err := r.Schema(ctx, pg.ID, "public")
		if err != nil {
			return err
		}
		if pub.ID != PublicSchemaID {
			t.Errorf("public schema ID = %d", pub.ID)
		}
		for _, name := range []string{"pg_catalog", "information_schema"} {
			s, err := r.Schema(ctx, pg.ID, name)
			if err != nil || !s.Virtual {
				t.Errorf("schema %s = %+v, %v", name, s, err)
			}
		}
		role, err := r.Role(ctx, "postgres")
		if err != nil {
			return err
		}
		if !role.Superuser || !role.Login {
			t.Errorf("postgres role = %+v", role)
		}
		if err := Bootstrap(ctx, txn, ""); !errors.Is(err, ErrAlreadyBootstrapped) {
			t.Errorf("second bootstrap: %v", err)
		}
		id, err := NewWriter(txn, nil).AllocateID(ctx)
		if id != FirstUserID || err != nil {
			t.Errorf("first allocated ID = %d, %v", id, err)
		}
		return nil
	})
}

func TestCreateReadRenameDrop(t *testing.T) {
	db := newTestDB(t)
	var tableID ID
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		tbl := simpleTable("t")
		if err := NewWriter(txn, nil).Create(ctx, tbl); err != nil {
			return err
		}
		tableID = tbl.ID
		return nil
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		tbl, err := r.Table(ctx, PostgresDatabaseID, PublicSchemaID, "t")
		if err != nil {
			return err
		}
		if tbl.ID != tableID || tbl.Version != 1 || tbl.GroupID != uint64(tbl.ID) || tbl.NextColumnID != 4 || tbl.NextIndexID != 3 {
			t.Errorf("created table = %+v", tbl)
		}
		idx := tbl.Indexes[0]
		if idx.Placement != IndexGlobal || idx.GroupID == 0 || idx.State != IndexPublic || idx.Kind != IndexBTree {
			t.Errorf("secondary index defaults = %+v", idx)
		}
		if !tbl.Columns[1].Type.Identical(types.Text) {
			t.Errorf("column type round trip: %v", tbl.Columns[1].Type)
		}
		c, err := Clone(tbl)
		if err != nil {
			return err
		}
		w := NewWriter(txn, nil)
		if err := w.Rename(ctx, c, "u"); err != nil {
			return err
		}
		if c.Version != 2 {
			t.Errorf("version after rename = %d", c.Version)
		}
		return nil
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		if _, err := r.Table(ctx, PostgresDatabaseID, PublicSchemaID, "t"); pgerror.Code(err) != pgerrcode.UndefinedTable {
			t.Errorf("old name after rename: %v", err)
		}
		tbl, err := r.Table(ctx, PostgresDatabaseID, PublicSchemaID, "u")
		if err != nil {
			return err
		}
		c, _ := Clone(tbl)
		c.Comment = "hello"
		w := NewWriter(txn, nil)
		if err := w.Update(ctx, c); err != nil {
			return err
		}
		if err := w.Update(ctx, tbl); !errors.Is(err, ErrVersionMismatch) {
			t.Errorf("update of a stale copy: %v", err)
		}
		got, err := r.TableByID(ctx, tableID)
		if err != nil || got.Comment != "hello" || got.Version != 3 {
			t.Errorf("after update: %+v, %v", got, err)
		}
		return w.Drop(ctx, got)
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		if _, err := r.TableByID(ctx, tableID); pgerror.Code(err) != pgerrcode.UndefinedObject {
			t.Errorf("dropped table by ID: %v", err)
		}
		rels, err := r.Relations(ctx, PostgresDatabaseID, PublicSchemaID)
		if err != nil || len(rels) != 0 {
			t.Errorf("relations after drop: %v, %v", rels, err)
		}
		return nil
	})
}

func TestRollbackLeavesNothing(t *testing.T) {
	db := newTestDB(t)
	ctx := context.Background()
	txn := db.NewTxn(ctx, "ddl", kv.Serializable)
	w := NewWriter(txn, nil)
	d := &Database{Name: "shop", Owner: "postgres"}
	if err := w.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	tbl := simpleTable("t")
	tbl.DatabaseID = d.ID
	sch, err := w.Schema(ctx, d.ID, "public")
	if err != nil {
		t.Fatal(err)
	}
	tbl.SchemaID = sch.ID
	if err := w.Create(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	// The transaction sees its own DDL.
	if _, err := w.Table(ctx, d.ID, sch.ID, "t"); err != nil {
		t.Fatal(err)
	}
	if err := txn.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		r := NewReader(txn, nil)
		if _, err := r.Database(ctx, "shop"); pgerror.Code(err) != pgerrcode.InvalidCatalogName {
			t.Errorf("database after rollback: %v", err)
		}
		if _, err := r.ByID(ctx, tbl.ID); pgerror.Code(err) != pgerrcode.UndefinedObject {
			t.Errorf("table after rollback: %v", err)
		}
		dbs, err := r.Databases(ctx)
		if err != nil || len(dbs) != 1 || dbs[0].Name != "postgres" {
			t.Errorf("databases after rollback: %v, %v", dbs, err)
		}
		id, err := NewWriter(txn, nil).AllocateID(ctx)
		if err != nil || id != FirstUserID {
			t.Errorf("next ID after rollback = %d, %v (IDs must not leak)", id, err)
		}
		return nil
	})
}

func TestNameCollisions(t *testing.T) {
	db := newTestDB(t)
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		if err := w.Create(ctx, simpleTable("t")); err != nil {
			return err
		}
		return w.Create(ctx, &Database{Name: "d", Owner: "postgres"})
	})
	view := &View{DatabaseID: PostgresDatabaseID, SchemaID: PublicSchemaID, Name: "t", Query: "SELECT 1", Columns: []ViewColumn{{Name: "x", Type: types.Int4}}}
	tests := []struct {
		name string
		fn   func(ctx context.Context, w *Writer) error
		code string
	}{
		{"duplicate table", func(ctx context.Context, w *Writer) error { return w.Create(ctx, simpleTable("t")) }, pgerrcode.DuplicateTable},
		{"view takes a table's name", func(ctx context.Context, w *Writer) error { return w.Create(ctx, view) }, pgerrcode.DuplicateTable},
		{"duplicate database", func(ctx context.Context, w *Writer) error { return w.Create(ctx, &Database{Name: "d"}) }, pgerrcode.DuplicateDatabase},
		{"duplicate schema", func(ctx context.Context, w *Writer) error {
			return w.Create(ctx, &Schema{DatabaseID: PostgresDatabaseID, Name: "public"})
		}, pgerrcode.DuplicateSchema},
		{"virtual schema name", func(ctx context.Context, w *Writer) error {
			return w.Create(ctx, &Schema{DatabaseID: PostgresDatabaseID, Name: "pg_catalog"})
		}, pgerrcode.DuplicateSchema},
		{"reserved schema prefix", func(ctx context.Context, w *Writer) error {
			return w.Create(ctx, &Schema{DatabaseID: PostgresDatabaseID, Name: "pg_mine"})
		}, pgerrcode.ReservedName},
		{"duplicate role", func(ctx context.Context, w *Writer) error { return w.CreateRole(ctx, &Role{Name: "postgres"}) }, pgerrcode.DuplicateObject},
		{"missing table", func(ctx context.Context, w *Writer) error {
			_, err := w.Table(ctx, PostgresDatabaseID, PublicSchemaID, "nope")
			return err
		}, pgerrcode.UndefinedTable},
		{"missing database", func(ctx context.Context, w *Writer) error { _, err := w.Database(ctx, "nope"); return err }, pgerrcode.InvalidCatalogName},
		{"missing schema", func(ctx context.Context, w *Writer) error {
			_, err := w.Schema(ctx, PostgresDatabaseID, "nope")
			return err
		}, pgerrcode.InvalidSchemaName},
		{"missing role", func(ctx context.Context, w *Writer) error { _, err := w.Role(ctx, "nope"); return err }, pgerrcode.UndefinedObject},
		{"missing ID", func(ctx context.Context, w *Writer) error { _, err := w.ByID(ctx, 9999); return err }, pgerrcode.UndefinedObject},
		{"table in missing schema", func(ctx context.Context, w *Writer) error {
			tb := simpleTable("x")
			tb.SchemaID = 9999
			return w.Create(ctx, tb)
		}, pgerrcode.UndefinedObject},
		{"invalid table", func(ctx context.Context, w *Writer) error {
			tb := simpleTable("x")
			tb.Columns[0].Nullable = true
			return w.Create(ctx, tb)
		}, pgerrcode.InvalidObjectDefinition},
		{"colocated table in a plain database", func(ctx context.Context, w *Writer) error {
			tb := simpleTable("x")
			tb.Colocated = true
			return w.Create(ctx, tb)
		}, pgerrcode.InvalidTableDefinition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			txn := db.NewTxn(ctx, tc.name, kv.Serializable)
			defer func() { _ = txn.Rollback(ctx) }()
			err := tc.fn(ctx, NewWriter(txn, nil))
			if got := pgerror.Code(err); got != tc.code {
				t.Errorf("SQLSTATE %s (%v), want %s", got, err, tc.code)
			}
		})
	}
}

func TestColocatedDatabase(t *testing.T) {
	db := newTestDB(t)
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		d := &Database{Name: "co", Owner: "postgres", Colocated: true}
		if err := w.Create(ctx, d); err != nil {
			return err
		}
		pub, err := w.Schema(ctx, d.ID, "public")
		if err != nil {
			return err
		}
		var groups []uint64
		for _, name := range []string{"a", "b"} {
			tb := simpleTable(name)
			tb.DatabaseID, tb.SchemaID, tb.Colocated = d.ID, pub.ID, true
			if err := w.Create(ctx, tb); err != nil {
				return err
			}
			if tb.Partitioning.Kind != PartitionSingle || tb.Indexes[0].Placement != IndexLocal {
				t.Errorf("colocated table defaults: %+v %+v", tb.Partitioning, tb.Indexes[0])
			}
			groups = append(groups, tb.GroupID)
		}
		if groups[0] != d.ColocationGroupID || groups[1] != d.ColocationGroupID {
			t.Errorf("groups %v, database group %d", groups, d.ColocationGroupID)
		}
		rels, err := w.Relations(ctx, d.ID, pub.ID)
		if err != nil || len(rels) != 2 || rels[0].DescName() != "a" || rels[1].DescName() != "b" {
			t.Errorf("relations = %v, %v", rels, err)
		}
		if err := w.Drop(ctx, pub); pgerror.Code(err) != pgerrcode.DependentObjectsStillExist {
			t.Errorf("drop of a non-empty schema: %v", err)
		}
		return nil
	})
}

// TestConcurrentCreate: two transactions create the same table name; the
// namespace's ConditionalPut lets exactly one of them commit, and the
// other fails with 42P07 (or, if it aborted the first, the first fails).
func TestConcurrentCreate(t *testing.T) {
	db := newTestDB(t)
	ctx := context.Background()
	first := db.NewTxn(ctx, "first", kv.Serializable)
	if err := NewWriter(first, nil).Create(ctx, simpleTable("t")); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		second <- db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			return NewWriter(txn, nil).Create(ctx, simpleTable("t"))
		})
	}()
	firstErr := first.Commit(ctx)
	secondErr := <-second
	if (firstErr == nil) == (secondErr == nil) {
		t.Fatalf("first: %v, second: %v; want exactly one to succeed", firstErr, secondErr)
	}
	if firstErr == nil && pgerror.Code(secondErr) != pgerrcode.DuplicateTable {
		t.Errorf("losing transaction: %v, want 42P07", secondErr)
	}
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		rels, err := NewReader(txn, nil).Relations(ctx, PostgresDatabaseID, PublicSchemaID)
		if err != nil || len(rels) != 1 {
			t.Errorf("relations = %v, %v; want exactly one", rels, err)
		}
		return nil
	})
}

func TestAlterColumns(t *testing.T) {
	tbl := validTable()
	id, err := tbl.AddColumn(Column{Name: "e", Type: types.Int8, Nullable: true})
	if err != nil || id != 4 || tbl.NextColumnID != 5 || tbl.RowFormat.SchemaVersion != 2 || tbl.Columns[3].AddedIn != 2 {
		t.Fatalf("AddColumn: id %d err %v table %+v", id, err, tbl)
	}
	if _, err := tbl.AddColumn(Column{Name: "e", Type: types.Int8}); pgerror.Code(err) != pgerrcode.DuplicateColumn {
		t.Errorf("duplicate column: %v", err)
	}
	if err := tbl.DropColumn("b"); pgerror.Code(err) != pgerrcode.DependentObjectsStillExist {
		t.Errorf("dropping an indexed column: %v", err)
	}
	if err := tbl.DropColumn("nope"); pgerror.Code(err) != pgerrcode.UndefinedColumn {
		t.Errorf("dropping a missing column: %v", err)
	}
	if err := tbl.DropColumn("c"); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Validate(); err != nil {
		t.Fatalf("after DROP COLUMN: %v", err)
	}
	if d := tbl.DroppedColumns; len(d) != 1 || d[0].ID != 3 || d[0].DroppedIn != 3 {
		t.Errorf("dropped columns %+v", d)
	}
}
