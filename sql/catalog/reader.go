package catalog

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
)

// Reader reads the catalog inside one transaction: what it returns is the
// catalog as of that transaction's snapshot, including the transaction's
// own DDL (invariant 2). With a Cache, descriptors by ID come from it
// after a version check (cache.go). Descriptors returned are shared and
// must not be modified (Clone them). Not safe for concurrent use (a
// kv.Txn is not).
type Reader struct {
	txn   *kv.Txn
	cache *Cache
	// useGen, genRead and gen: lookups answered for one catalog
	// generation (generation.go).
	useGen, genRead bool
	gen             []byte
	// genOff, when set and true, turns useGen off (UseGenerationUnless).
	genOff func() bool
}

// NewReader returns a Reader over txn; cache may be nil.
func NewReader(txn *kv.Txn, cache *Cache) *Reader { return &Reader{txn: txn, cache: cache} }

// virtualSchemas are the schemas every database shows and none stores.
var virtualSchemas = map[string]*Schema{
	"pg_catalog":         {ID: PgCatalogSchemaID, Name: "pg_catalog", Version: 1, Owner: "postgres", Virtual: true},
	"information_schema": {ID: InformationSchemaID, Name: "information_schema", Version: 1, Owner: "postgres", Virtual: true},
	"cairn_catalog":      {ID: CairnCatalogSchemaID, Name: "cairn_catalog", Version: 1, Owner: "postgres", Virtual: true},
}

// ByID returns the descriptor with id, or a 42704 error if there is none.
func (r *Reader) ByID(ctx context.Context, id ID) (Descriptor, error) {
	d, ok, err := r.lookupID(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, undefinedObject(fmt.Sprintf("descriptor %d", id))
	}
	return d, nil
}

func (r *Reader) lookupID(ctx context.Context, id ID) (Descriptor, bool, error) {
	for _, s := range virtualSchemas {
		if s.ID == id {
			return s, true, nil
		}
	}
	if r.cache != nil {
		gen, err := r.generation(ctx)
		if err != nil {
			return nil, false, err
		}
		if gen != nil {
			if d, ok := r.cache.genDesc(gen, id); ok {
				return d, d != nil, nil
			}
		}
		d, ok, err := r.cache.get(ctx, r.txn, id)
		if err == nil && gen != nil {
			r.cache.putGenDesc(gen, id, d)
		}
		return d, ok, err
	}
	return readDescriptor(ctx, r.txn, id)
}

func readDescriptor(ctx context.Context, txn *kv.Txn, id ID) (Descriptor, bool, error) {
	b, ok, err := txn.Get(ctx, descKey(id))
	if err != nil || !ok {
		return nil, false, err
	}
	d, err := Decode(b)
	if err != nil {
		return nil, false, fmt.Errorf("descriptor %d: %w", id, err)
	}
	if d.DescID() != id {
		return nil, false, fmt.Errorf("%w: descriptor key %d holds %s", ErrBadDescriptor, id, describe(d))
	}
	if t, ok := d.(*Table); ok {
		t.shareLayout()
	}
	return d, true, nil
}

// LookupID resolves a name in the namespace of (parent, schema): (0, 0)
// for databases, (database, 0) for schemas, (database, schema) for
// relations.
func (r *Reader) LookupID(ctx context.Context, parent, schema ID, name string) (ID, bool, error) {
	nk := nameKey{parent, schema, name}
	gen, err := r.generation(ctx)
	if err != nil {
		return 0, false, err
	}
	if gen != nil {
		if e, ok := r.cache.genName(gen, nk); ok {
			return e.id, e.ok, nil
		}
	}
	b, ok, err := r.txn.Get(ctx, nsKey(parent, schema, name))
	if err != nil {
		return 0, false, err
	}
	var id ID
	if ok {
		if id, err = decodeID(b); err != nil {
			return 0, false, err
		}
	}
	if gen != nil {
		r.cache.putGenName(gen, nk, nameEntry{id: id, ok: ok})
	}
	return id, ok, nil
}

func (r *Reader) byName(ctx context.Context, parent, schema ID, name string) (Descriptor, bool, error) {
	id, ok, err := r.LookupID(ctx, parent, schema, name)
	if err != nil || !ok {
		return nil, false, err
	}
	d, ok, err := r.lookupID(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, fmt.Errorf("%w: name %q points at missing descriptor %d", ErrBadDescriptor, name, id)
	}
	return d, true, nil
}

// Database returns the database named name (3D000 if none).
func (r *Reader) Database(ctx context.Context, name string) (*Database, error) {
	d, ok, err := r.byName(ctx, 0, 0, name)
	if err != nil {
		return nil, err
	}
	db, isDB := d.(*Database)
	if !ok || !isDB {
		return nil, undefinedDatabase(name)
	}
	return db, nil
}

// Schema returns schema name of database dbID (3F000 if none), including
// the virtual pg_catalog, information_schema and cairn_catalog.
func (r *Reader) Schema(ctx context.Context, dbID ID, name string) (*Schema, error) {
	s, ok, err := r.LookupSchema(ctx, dbID, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, undefinedSchema(name)
	}
	return s, nil
}

// LookupSchema is Schema reporting a missing schema as false rather than
// an error: a search path usually starts with "$user", which names none,
// and making that error for every statement showed in profiles.
func (r *Reader) LookupSchema(ctx context.Context, dbID ID, name string) (*Schema, bool, error) {
	if s, ok := virtualSchemas[name]; ok {
		return s, true, nil
	}
	d, ok, err := r.byName(ctx, dbID, 0, name)
	if err != nil {
		return nil, false, err
	}
	s, isSchema := d.(*Schema)
	if !ok || !isSchema {
		return nil, false, nil
	}
	return s, true, nil
}

// Relation returns the table, view or sequence named name in schema
// schemaID of database dbID (42P01 if none).
func (r *Reader) Relation(ctx context.Context, dbID, schemaID ID, name string) (Descriptor, error) {
	d, ok, err := r.byName(ctx, dbID, schemaID, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, undefinedRelation(name)
	}
	return d, nil
}

// Table returns the table named name (42P01 if none, 42809 if the name
// is a view or sequence).
func (r *Reader) Table(ctx context.Context, dbID, schemaID ID, name string) (*Table, error) {
	d, err := r.Relation(ctx, dbID, schemaID, name)
	if err != nil {
		return nil, err
	}
	t, ok := d.(*Table)
	if !ok {
		return nil, wrongObjectType(name, "table")
	}
	return t, nil
}

// TableByID returns table id (42704 if no descriptor has id, 42809 if it
// is not a table).
func (r *Reader) TableByID(ctx context.Context, id ID) (*Table, error) {
	d, err := r.ByID(ctx, id)
	if err != nil {
		return nil, err
	}
	t, ok := d.(*Table)
	if !ok {
		return nil, wrongObjectType(d.DescName(), "table")
	}
	return t, nil
}

// Databases lists every database in name order.
func (r *Reader) Databases(ctx context.Context) ([]*Database, error) {
	ds, err := r.list(ctx, 0, 0)
	if err != nil {
		return nil, err
	}
	out := make([]*Database, 0, len(ds))
	for _, d := range ds {
		if db, ok := d.(*Database); ok {
			out = append(out, db)
		}
	}
	return out, nil
}

// Schemas lists the stored schemas of database dbID in name order (the
// virtual ones are not listed; pg_catalog adds them).
func (r *Reader) Schemas(ctx context.Context, dbID ID) ([]*Schema, error) {
	ds, err := r.list(ctx, dbID, 0)
	if err != nil {
		return nil, err
	}
	out := make([]*Schema, 0, len(ds))
	for _, d := range ds {
		if s, ok := d.(*Schema); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// Relations lists the tables, views, sequences, types and functions of a
// schema in namespace-name order: one scan of the namespace.
func (r *Reader) Relations(ctx context.Context, dbID, schemaID ID) ([]Descriptor, error) {
	return r.list(ctx, dbID, schemaID)
}

func (r *Reader) list(ctx context.Context, parent, schema ID) ([]Descriptor, error) {
	ids, err := r.listIDs(ctx, parent, schema)
	if err != nil {
		return nil, err
	}
	out := make([]Descriptor, 0, len(ids))
	for _, id := range ids {
		d, err := r.ByID(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// listIDs returns the IDs under a namespace prefix in name order, from
// the generation's maps when r reads by generation (generation.go).
func (r *Reader) listIDs(ctx context.Context, parent, schema ID) ([]ID, error) {
	var gen []byte
	if r.cache != nil {
		var err error
		if gen, err = r.generation(ctx); err != nil {
			return nil, err
		}
		if gen != nil {
			if ids, ok := r.cache.genList(gen, [2]ID{parent, schema}); ok {
				return ids, nil
			}
		}
	}
	p := nsPrefixKey(parent, schema)
	kvs, err := r.txn.Scan(ctx, p, keys.PrefixEnd(p), 0)
	if err != nil {
		return nil, fmt.Errorf("listing namespace (%d, %d): %w", parent, schema, err)
	}
	ids := make([]ID, 0, len(kvs))
	for _, e := range kvs {
		id, err := decodeID(e.Value)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if gen != nil {
		r.cache.putGenList(gen, [2]ID{parent, schema}, ids)
	}
	return ids, nil
}
