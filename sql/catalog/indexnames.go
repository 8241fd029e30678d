package catalog

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Index names. In PostgreSQL an index is a relation of its schema
// (pg_class), so its name must not collide with another index's or
// relation's, and DROP INDEX or ALTER INDEX find it by name. Indexes are
// part of their table's descriptor here, so answering "which table has an
// index named n in this schema" used to read every table of the schema:
// each CREATE TABLE and CREATE INDEX did (to pick t_pkey, t_v_idx, ...),
// which made DDL cost grow with the number of tables (issue 16, bench/ddl).
//
// The index-name entries answer it with one read:
//
//	x/<parent><schema><name>   -> the ID of the table holding the index
//
// (encoded as namespace entries are). The Writer keeps them in step with
// every table it creates, updates, renames or drops, in the same
// transaction. Catalogs written before the entries existed have none and
// no marker key: the first DDL transaction that changes a table writes
// the entries of every table and the marker (buildIndexNames); until then
// lookups scan the schema's tables as before. Invariant: when the marker
// exists, the entries are exactly the index names (primary included) of
// the stored tables.
var (
	idxNamePrefix = []byte("x/")
	idxBuiltName  = []byte("x-built")
)

func idxNameKey(parent, schema ID, name string) []byte {
	b := append([]byte(nil), idxNamePrefix...)
	b, _ = rowenc.EncodeKey(b, types.DInt(parent), rowenc.Asc)
	b, _ = rowenc.EncodeKey(b, types.DInt(schema), rowenc.Asc)
	b, _ = rowenc.EncodeKey(b, types.DString(name), rowenc.Asc)
	return keys.System(b)
}

func idxBuiltKey() []byte { return keys.System(idxBuiltName) }

// IndexTable returns the table of schema (dbID, schemaID) that has an
// index named name (ok false: none).
func (r *Reader) IndexTable(ctx context.Context, dbID, schemaID ID, name string) (*Table, bool, error) {
	_, built, err := r.txn.Get(ctx, idxBuiltKey())
	if err != nil {
		return nil, false, err
	}
	if !built {
		rels, err := r.Relations(ctx, dbID, schemaID)
		if err != nil {
			return nil, false, err
		}
		for _, d := range rels {
			if t, ok := d.(*Table); ok && t.IndexByName(name) != nil {
				return t, true, nil
			}
		}
		return nil, false, nil
	}
	b, ok, err := r.txn.Get(ctx, idxNameKey(dbID, schemaID, name))
	if err != nil || !ok {
		return nil, false, err
	}
	id, err := decodeID(b)
	if err != nil {
		return nil, false, err
	}
	t, err := r.TableByID(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("%w: index name %q points at table %d: %v", ErrBadDescriptor, name, id, err)
	}
	if t.IndexByName(name) == nil {
		return nil, false, fmt.Errorf("%w: index name %q points at table %q, which has no such index", ErrBadDescriptor, name, t.Name)
	}
	return t, true, nil
}

func indexNames(t *Table) []string {
	if t == nil {
		return nil
	}
	names := []string{t.PrimaryIndex.Name}
	for _, ix := range t.Indexes {
		names = append(names, ix.Name)
	}
	return names
}

// syncIndexNames updates the index-name entries from table before to
// after (either nil: created or dropped), both already stored in w's
// transaction. On a catalog without the entries it builds them all.
func (w *Writer) syncIndexNames(ctx context.Context, before, after *Table) error {
	_, built, err := w.txn.Get(ctx, idxBuiltKey())
	if err != nil {
		return err
	}
	if !built {
		return w.buildIndexNames(ctx)
	}
	old, cur := indexNames(before), indexNames(after)
	var b kv.Batch
	n := 0
	if before != nil {
		for _, name := range old {
			if !slices.Contains(cur, name) || after.DatabaseID != before.DatabaseID || after.SchemaID != before.SchemaID {
				b.Del(idxNameKey(before.DatabaseID, before.SchemaID, name))
				n++
			}
		}
	}
	if after != nil {
		for _, name := range cur {
			if name == "" {
				continue
			}
			if before == nil || !slices.Contains(old, name) || after.DatabaseID != before.DatabaseID || after.SchemaID != before.SchemaID {
				b.Put(idxNameKey(after.DatabaseID, after.SchemaID, name), encodeID(after.ID))
				n++
			}
		}
	}
	if n == 0 {
		return nil
	}
	if err := w.txn.Run(ctx, &b); err != nil {
		return fmt.Errorf("writing index names: %w", err)
	}
	return nil
}

// buildIndexNames writes the entries of every stored table and the
// marker (the upgrade of a catalog written before they existed).
func (w *Writer) buildIndexNames(ctx context.Context) error {
	dbs, err := w.Databases(ctx)
	if err != nil {
		return err
	}
	var b kv.Batch
	for _, db := range dbs {
		schemas, err := w.Schemas(ctx, db.ID)
		if err != nil {
			return err
		}
		for _, s := range schemas {
			rels, err := w.Relations(ctx, db.ID, s.ID)
			if err != nil {
				return err
			}
			for _, d := range rels {
				t, ok := d.(*Table)
				if !ok {
					continue
				}
				for _, name := range indexNames(t) {
					if name != "" {
						b.Put(idxNameKey(t.DatabaseID, t.SchemaID, name), encodeID(t.ID))
					}
				}
			}
		}
	}
	b.Put(idxBuiltKey(), []byte{1})
	if err := w.txn.Run(ctx, &b); err != nil {
		return fmt.Errorf("building index names: %w", err)
	}
	return nil
}
