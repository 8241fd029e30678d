package catalog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// Writer changes the catalog inside the DDL's own transaction, so a
// rolled-back CREATE TABLE leaves nothing, not even a used ID (invariant
// 4). Names are claimed with a ConditionalPut on the namespace key, so two
// transactions creating one name conflict in the KV layer and one of them
// gets the duplicate error.
//
// ID allocation: AllocateID increments a counter key inside the DDL
// transaction. The alternative, a separate short transaction per ID, would
// let concurrent DDL proceed without contending on the counter but would
// leak IDs on rollback; DDL is rare and IDs are cheap, but DDL that
// serializes on one key is simpler to reason about and makes a rolled-back
// schema change leave the catalog exactly as it was. If DDL throughput
// ever matters, ID blocks allocated out of band are the fix.
type Writer struct {
	Reader
	// bumped: this Writer has written the next catalog generation.
	bumped bool
	// step: the next put is an online schema change's step (UpdateStep):
	// it invalidates only writers two versions behind.
	step bool
}

// NewWriter returns a Writer over txn; cache may be nil.
func NewWriter(txn *kv.Txn, cache *Cache) *Writer {
	return &Writer{Reader: Reader{txn: txn, cache: cache}}
}

// AllocateID returns a fresh descriptor ID (also used for table groups).
func (w *Writer) AllocateID(ctx context.Context) (ID, error) {
	b, ok, err := w.txn.Get(ctx, idCounterKey())
	if err != nil {
		return 0, fmt.Errorf("reading the ID counter: %w", err)
	}
	if !ok {
		return 0, ErrNotBootstrapped
	}
	next, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) || next >= uint64(^uint32(0)) {
		return 0, fmt.Errorf("%w: ID counter %x", ErrBadDescriptor, b)
	}
	if err := w.txn.Put(ctx, idCounterKey(), binary.AppendUvarint(nil, next+1)); err != nil {
		return 0, fmt.Errorf("advancing the ID counter: %w", err)
	}
	return ID(next), nil
}

// Create stores a new descriptor at version 1, assigning its ID if it has
// none and filling in table defaults (fillTableDefaults). d becomes owned
// by the catalog's transaction: the caller must not change it afterwards.
// A database is created with its public schema, as Postgres's template
// database has one.
func (w *Writer) Create(ctx context.Context, d Descriptor) error {
	if err := w.checkName(d, d.DescName()); err != nil {
		return err
	}
	if err := w.checkParents(ctx, d); err != nil {
		return err
	}
	if d.DescID() == InvalidID {
		id, err := w.AllocateID(ctx)
		if err != nil {
			return err
		}
		d.setID(id)
	}
	d.setVersion(1)
	switch v := d.(type) {
	case *Database:
		if v.Colocated && v.ColocationGroupID == 0 {
			v.ColocationGroupID = uint64(v.ID)
		}
	case *Table:
		if err := w.fillTableDefaults(ctx, v); err != nil {
			return err
		}
	}
	if err := w.claimName(ctx, d, nsName(d)); err != nil {
		return err
	}
	if err := w.put(ctx, d); err != nil {
		return err
	}
	if t, ok := d.(*Table); ok {
		if err := w.syncReferencedBy(ctx, t, nil, referencedTables(t)); err != nil {
			return err
		}
		if err := w.syncIndexNames(ctx, nil, t); err != nil {
			return err
		}
	}
	if db, ok := d.(*Database); ok {
		sc := publicSchema(db.ID)
		sc.ID = 0
		return w.Create(ctx, sc)
	}
	return nil
}

// checkName refuses names Postgres reserves.
func (w *Writer) checkName(d Descriptor, name string) error {
	if d.DescKind() != KindSchema {
		return nil
	}
	if _, ok := virtualSchemas[name]; ok {
		return duplicate(d, name)
	}
	if strings.HasPrefix(name, "pg_") && !(d.(*Schema).Temp && strings.HasPrefix(name, "pg_temp_")) {
		return reservedSchema(name)
	}
	return nil
}

// checkParents makes sure a schema's database and a relation's database
// and schema exist as this transaction sees them.
func (w *Writer) checkParents(ctx context.Context, d Descriptor) error {
	dbID, schemaID := d.Parent()
	if dbID != InvalidID {
		p, ok, err := w.lookupID(ctx, dbID)
		if err != nil {
			return err
		}
		if _, isDB := p.(*Database); !ok || !isDB {
			return undefinedObject(fmt.Sprintf("database %d", dbID))
		}
	}
	if schemaID != InvalidID {
		p, ok, err := w.lookupID(ctx, schemaID)
		if err != nil {
			return err
		}
		s, isSchema := p.(*Schema)
		if !ok || !isSchema || s.Virtual || s.DatabaseID != dbID {
			return undefinedObject(fmt.Sprintf("schema %d of database %d", schemaID, dbID))
		}
	}
	return nil
}

// fillTableDefaults completes what CREATE TABLE leaves unsaid: the table
// group (its own ID, or its colocated database's group), the partitioning
// (single when colocated, else range: the binder asks for hash partitioning
// explicitly, following the cluster setting), index kinds and states, and
// index placement: local when the table is colocated or distributed, else
// global in a group of the index's own, so it is partitioned by its key.
func (w *Writer) fillTableDefaults(ctx context.Context, t *Table) error {
	if t.Partitioning.Kind == "" {
		t.Partitioning.Kind = PartitionRange
		if t.Colocated {
			t.Partitioning.Kind = PartitionSingle
		}
	}
	if t.GroupID == 0 {
		t.GroupID = uint64(t.ID)
		if t.Colocated {
			d, _, err := w.lookupID(ctx, t.DatabaseID)
			if err != nil {
				return err
			}
			db := d.(*Database) // checkParents made sure
			if !db.Colocated {
				return pgerror.New(pgerrcode.InvalidTableDefinition, "cannot colocate table %q: database %q is not colocated", t.Name, db.Name)
			}
			t.GroupID = db.ColocationGroupID
		}
	}
	if t.PrimaryIndex.ID == 0 {
		t.PrimaryIndex.ID = PrimaryIndexID
	}
	for _, idx := range append([]*Index{&t.PrimaryIndex}, indexPtrs(t.Indexes)...) {
		if idx.Kind == "" {
			idx.Kind = IndexBTree
		}
		if idx.State == "" {
			idx.State = IndexPublic
		}
		if idx.ID == 0 {
			idx.ID = t.NextIndexID
		}
		t.NextIndexID = max(t.NextIndexID, idx.ID+1)
		if idx.ID == PrimaryIndexID || idx.Placement != "" {
			continue
		}
		idx.Placement = IndexGlobal
		if t.Colocated || t.Partitioning.Distributed && !idx.Unique && idx.Kind != IndexGIN {
			// (A distributed table's unique index stays global: one
			// place enforces its keys across every bucket; so does a
			// GIN index, whose token must be one span.)
			idx.Placement = IndexLocal
		}
	}
	for i := range t.Indexes {
		if idx := &t.Indexes[i]; idx.Placement == IndexGlobal && idx.GroupID == 0 {
			g, err := w.AllocateID(ctx)
			if err != nil {
				return err
			}
			idx.GroupID = uint64(g)
		}
	}
	for _, c := range t.Columns {
		t.NextColumnID = max(t.NextColumnID, c.ID+1)
	}
	return nil
}

func indexPtrs(idxs []Index) []*Index {
	out := make([]*Index, len(idxs))
	for i := range idxs {
		out[i] = &idxs[i]
	}
	return out
}

// claimName writes d's namespace entry under name, failing with the
// kind's duplicate error if the name is taken.
func (w *Writer) claimName(ctx context.Context, d Descriptor, name string) error {
	if err := w.bump(ctx); err != nil {
		return err
	}
	dbID, schemaID := d.Parent()
	err := w.txn.CPut(ctx, nsKey(dbID, schemaID, name), encodeID(d.DescID()), nil, false)
	if _, ok := errors.AsType[*kvpb.ConditionFailedError](err); ok {
		return duplicate(d, name)
	}
	if err != nil {
		return fmt.Errorf("claiming name %q: %w", name, err)
	}
	return nil
}

// put writes d and a fresh stamp for its version.
func (w *Writer) put(ctx context.Context, d Descriptor) error {
	b, err := Encode(d)
	if err != nil {
		return pgerror.Wrapf(err, pgerrcode.InvalidObjectDefinition, "invalid %s", d.DescKind())
	}
	if err := w.bump(ctx); err != nil {
		return err
	}
	var batch kv.Batch
	batch.Put(descKey(d.DescID()), b)
	batch.Put(stampKey(d.DescID()), newStamp(d.DescVersion()))
	batch.Put(WriterKey(d.DescID(), d.DescVersion()), nil)
	if !w.step {
		batch.Put(WriterKey(d.DescID(), d.DescVersion()+1), nil)
	}
	if err := w.txn.Run(ctx, &batch); err != nil {
		return fmt.Errorf("writing %s: %w", describe(d), err)
	}
	return nil
}

// stored returns the stored copy of d, read without the cache.
func (w *Writer) stored(ctx context.Context, d Descriptor) (Descriptor, error) {
	cur, ok, err := readDescriptor(ctx, w.txn, d.DescID())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, undefinedObject(describe(d))
	}
	if cur.DescKind() != d.DescKind() {
		return nil, fmt.Errorf("%w: %s is stored as a %s", ErrBadDescriptor, describe(d), cur.DescKind())
	}
	if cur.DescVersion() != d.DescVersion() {
		return nil, fmt.Errorf("%w: %s is at version %d, the change was made to version %d", ErrVersionMismatch, describe(d), cur.DescVersion(), d.DescVersion())
	}
	return cur, nil
}

// Update stores a changed copy of a descriptor (see Clone) as the next
// version. d.DescVersion() must be the stored version (the one the copy
// was made from); Update increments it. Renames go through Rename.
func (w *Writer) Update(ctx context.Context, d Descriptor) error {
	cur, err := w.stored(ctx, d)
	if err != nil {
		return err
	}
	if cur.DescName() != d.DescName() {
		return fmt.Errorf("catalog: Update of %s changes its name; use Rename", describe(cur))
	}
	if ct, ok := cur.(*Table); ok && ct.Move != nil {
		// Only the moving job changes a moving table: it sets the move,
		// then clears it (switching the table over, or rolling back). A
		// change made meanwhile (a column, an index, a reference from a
		// new foreign key) would be missing from the target the job
		// copies to.
		if nt, _ := d.(*Table); nt == nil || nt.Move != nil {
			return ErrMoving(ct)
		}
	}
	cd, cs := cur.Parent()
	if dd, ds := d.Parent(); cd != dd || cs != ds {
		return fmt.Errorf("catalog: Update of %s moves it to another namespace", describe(cur))
	}
	d.setVersion(d.DescVersion() + 1)
	if err := w.put(ctx, d); err != nil {
		return err
	}
	if t, ok := d.(*Table); ok {
		if err := w.syncReferencedBy(ctx, t, referencedTables(cur.(*Table)), referencedTables(t)); err != nil {
			return err
		}
		return w.syncIndexNames(ctx, cur.(*Table), t)
	}
	return nil
}

// UpdateStep is Update for one step of an online schema change (an index
// moving from one state to the next, sql/ddl's index build): writers that
// resolved the version just before it may still commit (WriterKey), so
// the step fails no concurrent writer that the schema changer waited for.
// The caller guarantees the two versions are compatible: every row
// written through either is right for both.
func (w *Writer) UpdateStep(ctx context.Context, d Descriptor) error {
	w.step = true
	defer func() { w.step = false }()
	return w.Update(ctx, d)
}

// Rename renames d (a changed copy, or a fresh Clone) to newName in its
// namespace, as the next version.
func (w *Writer) Rename(ctx context.Context, d Descriptor, newName string) error {
	cur, err := w.stored(ctx, d)
	if err != nil {
		return err
	}
	if err := w.checkName(d, newName); err != nil {
		return err
	}
	// A function's entry carries its signature (nsName): rename the
	// name part only.
	newEntry := newName
	if f, ok := d.(*FuncDesc); ok {
		newEntry = NamespaceName(newName, f.InputTypes())
	}
	if err := w.claimName(ctx, d, newEntry); err != nil {
		return err
	}
	dbID, schemaID := cur.Parent()
	if err := w.txn.Delete(ctx, nsKey(dbID, schemaID, nsName(cur))); err != nil {
		return fmt.Errorf("releasing name %q: %w", cur.DescName(), err)
	}
	d.setName(newName)
	d.setVersion(d.DescVersion() + 1)
	if err := w.put(ctx, d); err != nil {
		return err
	}
	if t, ok := d.(*Table); ok {
		return w.syncIndexNames(ctx, cur.(*Table), t)
	}
	return nil
}

// Drop removes d's descriptor and name. A schema must be empty (2BP01
// otherwise); a database must hold no relations, and its schemas go with
// it. Table data is not touched here: the caller clears the table's spans
// (rowenc.TableLayout.TableSpans), now or in a GC job.
func (w *Writer) Drop(ctx context.Context, d Descriptor) error {
	cur, err := w.stored(ctx, d)
	if err != nil {
		return err
	}
	if ct, ok := cur.(*Table); ok && ct.Move != nil {
		// The job would lose the table under it, and the target's storage
		// with it.
		return ErrMoving(ct)
	}
	switch v := d.(type) {
	case *Schema:
		if err := w.mustBeEmpty(ctx, v); err != nil {
			return err
		}
	case *Database:
		schemas, err := w.Schemas(ctx, v.ID)
		if err != nil {
			return err
		}
		for _, s := range schemas {
			if err := w.mustBeEmpty(ctx, s); err != nil {
				return err
			}
		}
		for _, s := range schemas {
			if err := w.remove(ctx, s); err != nil {
				return err
			}
		}
	}
	if t, ok := d.(*Table); ok {
		if err := w.syncReferencedBy(ctx, t, referencedTables(t), nil); err != nil {
			return err
		}
	}
	if err := w.remove(ctx, d); err != nil {
		return err
	}
	if ct, ok := cur.(*Table); ok {
		return w.syncIndexNames(ctx, ct, nil)
	}
	return nil
}

func (w *Writer) mustBeEmpty(ctx context.Context, s *Schema) error {
	rels, err := w.Relations(ctx, s.DatabaseID, s.ID)
	if err != nil {
		return err
	}
	if len(rels) > 0 {
		return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop schema %s because other objects depend on it", s.Name).
			WithDetail("%s %s depends on schema %s", rels[0].DescKind(), rels[0].DescName(), s.Name)
	}
	return nil
}

func (w *Writer) remove(ctx context.Context, d Descriptor) error {
	if err := w.bump(ctx); err != nil {
		return err
	}
	dbID, schemaID := d.Parent()
	var b kv.Batch
	b.Del(nsKey(dbID, schemaID, nsName(d)))
	b.Del(descKey(d.DescID()))
	b.Del(stampKey(d.DescID()))
	b.Del(WriterKey(d.DescID(), 0))
	b.Del(WriterKey(d.DescID(), 1))
	if err := w.txn.Run(ctx, &b); err != nil {
		return fmt.Errorf("dropping %s: %w", describe(d), err)
	}
	return nil
}

// InTxn returns a Writer over another transaction with w's cache: a
// schema change run as a job (sql/ddl) writes descriptors in transactions
// of its own, which the node's cache must see as DDL (localgen.go). The
// caller ends each such transaction with EndDDL.
func (w *Writer) InTxn(txn *kv.Txn) *Writer { return NewWriter(txn, w.cache) }

// EndDDL tells w's cache that txn, a transaction a Writer from InTxn
// wrote in, ended (Cache.EndDDL).
func (w *Writer) EndDDL(txn *kv.Txn) {
	if w.cache != nil {
		w.cache.EndDDL(txn)
	}
}
