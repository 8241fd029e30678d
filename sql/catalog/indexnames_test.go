package catalog

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
)

// indexOwner returns the name of the table IndexTable finds for index
// name in postgres.public ("" for none).
func indexOwner(t *testing.T, db *kv.DB, name string) string {
	t.Helper()
	var owner string
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		tbl, ok, err := NewReader(txn, nil).IndexTable(ctx, PostgresDatabaseID, PublicSchemaID, name)
		if err != nil || !ok {
			return err
		}
		owner = tbl.Name
		return nil
	})
	return owner
}

// TestIndexNames follows the index-name entries through every change of
// a table: they must always name exactly the stored tables' indexes.
func TestIndexNames(t *testing.T) {
	db := newTestDB(t)
	steps := []struct {
		name string
		do   func(ctx context.Context, w *Writer) error
		want map[string]string // index name -> table, "" for none
	}{
		{"create", func(ctx context.Context, w *Writer) error { return w.Create(ctx, simpleTable("t")) },
			map[string]string{"t_pkey": "t", "t_b_idx": "t", "u_pkey": ""}},
		{"create another", func(ctx context.Context, w *Writer) error { return w.Create(ctx, simpleTable("u")) },
			map[string]string{"t_pkey": "t", "u_pkey": "u", "u_b_idx": "u"}},
		{"rename an index", func(ctx context.Context, w *Writer) error {
			tbl, err := w.Table(ctx, PostgresDatabaseID, PublicSchemaID, "t")
			if err != nil {
				return err
			}
			c, _ := Clone(tbl)
			c.Indexes[0].Name = "renamed"
			return w.Update(ctx, c)
		}, map[string]string{"t_b_idx": "", "renamed": "t", "t_pkey": "t"}},
		{"rename the table", func(ctx context.Context, w *Writer) error {
			tbl, err := w.Table(ctx, PostgresDatabaseID, PublicSchemaID, "t")
			if err != nil {
				return err
			}
			c, _ := Clone(tbl)
			return w.Rename(ctx, c, "t2")
		}, map[string]string{"renamed": "t2", "t_pkey": "t2"}},
		{"drop an index", func(ctx context.Context, w *Writer) error {
			tbl, err := w.Table(ctx, PostgresDatabaseID, PublicSchemaID, "u")
			if err != nil {
				return err
			}
			c, _ := Clone(tbl)
			c.Indexes = nil
			return w.Update(ctx, c)
		}, map[string]string{"u_b_idx": "", "u_pkey": "u"}},
		{"drop a table", func(ctx context.Context, w *Writer) error {
			tbl, err := w.Table(ctx, PostgresDatabaseID, PublicSchemaID, "t2")
			if err != nil {
				return err
			}
			return w.Drop(ctx, tbl)
		}, map[string]string{"renamed": "", "t_pkey": "", "u_pkey": "u"}},
	}
	for _, s := range steps {
		run(t, db, func(ctx context.Context, txn *kv.Txn) error { return s.do(ctx, NewWriter(txn, nil)) })
		for name, want := range s.want {
			if got := indexOwner(t, db, name); got != want {
				t.Errorf("after %s: index %q is on %q, want %q", s.name, name, got, want)
			}
		}
	}
}

// TestIndexNamesUpgrade: a catalog written before the entries existed
// (no marker, no entries) answers by scanning, and its first table change
// writes every table's entries.
func TestIndexNamesUpgrade(t *testing.T) {
	db := newTestDB(t)
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		w := NewWriter(txn, nil)
		if err := w.Create(ctx, simpleTable("old")); err != nil {
			return err
		}
		// Back to the old catalog: remove the entries and the marker.
		p := keys.System(idxNamePrefix)
		if _, err := txn.DelRange(ctx, p, keys.PrefixEnd(p)); err != nil {
			return err
		}
		return txn.Delete(ctx, idxBuiltKey())
	})
	entries := func() int {
		var n int
		run(t, db, func(ctx context.Context, txn *kv.Txn) error {
			p := keys.System(idxNamePrefix)
			kvs, err := txn.Scan(ctx, p, keys.PrefixEnd(p), 0)
			n = len(kvs)
			return err
		})
		return n
	}
	if n := entries(); n != 0 {
		t.Fatalf("%d entries left in the old catalog", n)
	}
	if got := indexOwner(t, db, "old_b_idx"); got != "old" {
		t.Errorf("old catalog: old_b_idx is on %q, want old (by scanning)", got)
	}
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		return NewWriter(txn, nil).Create(ctx, simpleTable("new"))
	})
	if n := entries(); n != 4 {
		t.Errorf("after the first change: %d entries, want 4 (two tables' two indexes)", n)
	}
	for name, want := range map[string]string{"old_b_idx": "old", "old_pkey": "old", "new_b_idx": "new", "missing": ""} {
		if got := indexOwner(t, db, name); got != want {
			t.Errorf("upgraded: index %q is on %q, want %q", name, got, want)
		}
	}
}
