package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/bulkclean"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// The bulk-load path of COPY FROM and INSERT ... SELECT (CREATE TABLE AS)
// (docs/architecture.md, "Bulk loads").
//
// The statement gives each index of the table fresh storage
// (catalog.AllocateStorageID: keys no other attempt will ever write) in a
// new descriptor version, written in the transaction, and writes the rows
// there as committed values (kvpb.BulkPutRequest) instead of intents: no
// lock record, no in-memory lock, nothing to resolve at commit.
// Uniqueness is the BulkPut's MustNotExist on primary keys and unique
// index entries; defaults, NOT NULL, CHECK and foreign keys are checked
// as on the transactional path. It is taken for a table that is empty as
// the transaction sees it and
//
//   - was created in the transaction (catalog.NewTableMark), or
//   - was truncated in it (catalog.TruncatedTableMark: TRUNCATE already
//     moved it to fresh storage, sql/ddl truncateStorage), or
//   - (COPY only) existed before it: then the load writes the new
//     descriptor version first and decides that the table is empty by a
//     read at or above that write (kv.Txn.ReadAtWriteTimestamp), see
//     bulkLoadExisting.
//
// Why it keeps PostgreSQL's semantics:
//   - Atomicity: the rows are reachable only through the new descriptor
//     version. A failed load fails its transaction (or, in a block, is
//     rolled back to a savepoint taken before it, which undoes the
//     descriptor write), and the storage it wrote becomes unreachable;
//     the IDs are never handed out again, so nothing can surface it
//     later, and it is cleared once the transaction ends (or, if its
//     process died, by the node's sweep): sql/bulkclean.
//   - Isolation: other transactions read the new version only at or above
//     the commit timestamp, above the rows' timestamp (just below the
//     transaction's read timestamp, so its own later reads see them and
//     its own later writes land above them). Below it they read the old
//     version and the old storage, which the load never writes.
//   - Concurrent writers of a table that existed before: a writer that
//     resolved the old version registered its stamp key for validation at
//     commit (kv/txn_validate.go). It either committed before the new
//     version was written (the timestamp cache then put that write above
//     its commit), and its rows are in the old storage, where TRUNCATE
//     discards them as PostgreSQL's would after waiting for it, and where
//     an existing table's emptiness read (above the write) sees them; or
//     its validation meets the new version's intent or committed value
//     and it fails with a retryable error (40001).
//   - Durability: each BulkPut batch is applied (synced) before COPY
//     returns, and the descriptor commits after them.
//
// Not taken (the transactional path runs): a table the transaction
// already wrote rows into; a table that existed before the transaction
// and has foreign keys to other tables: a concurrent DELETE of a parent
// row checks the child through the child's old version and storage,
// where the loaded rows are not, and, unlike a CREATE TABLE, neither the
// load nor TRUNCATE writes the parent's descriptor, so nothing would stop
// that delete (a key-share lock on each parent row, PostgreSQL's answer,
// is the follow-up).

// bulkBatchRows is how many rows one BulkPut batch carries: each batch is
// one synced write per tablet, so it is larger than batchSize.
const bulkBatchRows = 10000

// bulkLoadTable decides whether a load (COPY, INSERT ... SELECT) into tb
// takes the bulk path and, if it does, moves tb to fresh storage and
// returns the new descriptor version (nil: the transactional path).
// existing allows it for a table that existed before the transaction
// (COPY).
func bulkLoadTable(ctx context.Context, x *Context, tb *catalog.Table, existing bool) (*catalog.Table, error) {
	if x.Txn == nil || tb.Move != nil || tb.Partitioning.Reference {
		// A table a job is moving is written transactionally: the load
		// would have to fill the move's target too. So is a reference
		// table: its tablets are closed in the future (global reads,
		// tablet/closedts.go), and a BulkPut, which the timestamp cache
		// does not push, cannot land above that.
		return nil, nil
	}
	created := x.Txn.IsNew(catalog.NewTableMark(tb.ID))
	truncated := !created && x.Txn.IsNew(catalog.TruncatedTableMark(tb.ID))
	if !created && !truncated && (!existing || x.CatalogWriter == nil) {
		return nil, nil
	}
	if !created && referencesOthers(tb) {
		return nil, nil
	}
	if !created && !truncated {
		return bulkLoadExisting(ctx, x, tb)
	}
	// Empty as this transaction sees it: its own earlier rows (intents)
	// would otherwise sit in the current storage. Secondary indexes hold
	// nothing when the primary one does not.
	if empty, err := isEmptyOwn(ctx, x, tb); err != nil || !empty {
		return nil, err
	}
	nt, err := moveToFreshStorage(ctx, x, tb)
	if err != nil {
		return nil, err
	}
	return nt, nil
}

// bulkLoadExisting moves tb, a table that existed before the transaction
// and looked empty at its snapshot, to fresh storage, then reads its old
// storage again at or above that descriptor write. Every writer that
// validated the old version before the write committed below it (the
// timestamp cache pushed the write above its validation), so the read
// sees its rows, or meets its not yet resolved intents, which count as
// rows; every later writer fails its validation. Rows found there: the load goes the
// transactional way, and the descriptor write is rolled back to a
// savepoint taken before it (its intent stays a lock until the
// transaction ends, as every rolled-back write's does).
//
// That read is not one of the transaction's tracked reads
// (isEmptyAt), so its commit does not refresh it: no writer can commit
// into the old storage after the descriptor write, so the answer holds
// up to any commit timestamp, and the span it first reads is, for a
// distributed table, the table's whole group, which the load itself
// fills: a refresh there read every row and entry loaded, and failed on
// any other write in the group. Both reads look at tb's rows only
// (probePrimary): in a group shared with tables holding rows, the
// per-bucket spans of tb's primary index.
//
// That read does not wait for another transaction's intent: it counts as
// a row. The writer holding it is bound to fail its validation against
// the descriptor write (or to have committed), but a writer that retries
// (an implicit transaction does, silently) would write its intent again
// in every attempt while the load waited on it, and neither would get
// on until the writer ran out of retries.
func bulkLoadExisting(ctx context.Context, x *Context, tb *catalog.Table) (*catalog.Table, error) {
	// First a look outside the transaction, so that a table with rows
	// costs no descriptor write (whose lock would stay until the
	// transaction ends and fail every other writer of the table): rows
	// or intents (another writer's, or this transaction's own) there
	// make the load transactional at once. Reading in the transaction
	// instead would put the span in its read set, and the refresh below
	// would then fail on any row committed there since (40001) instead
	// of going the transactional way.
	if empty, err := isEmptyNow(ctx, x, tb); err != nil || !empty {
		return nil, err
	}
	sp, err := x.Txn.Savepoint(ctx)
	if err != nil {
		return nil, err
	}
	nt, err := moveToFreshStorage(ctx, x, tb)
	if err != nil {
		return nil, err
	}
	if err := x.Txn.ReadAtWriteTimestamp(ctx); err != nil {
		return nil, err
	}
	empty, err := isEmptyAt(ctx, x, tb)
	if err != nil {
		return nil, err
	}
	if !empty {
		if err := x.Txn.RollbackToSavepoint(ctx, sp); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return nt, nil
}

// isEmptyOwn reports whether tb, created or truncated in this
// transaction, holds no row in the storage tb names. That storage is
// reachable only through a descriptor version this transaction wrote and
// has not committed (CREATE TABLE's, TRUNCATE's, or an earlier bulk
// load's move to fresh storage), so all it can hold are this
// transaction's own writes: intents, and the committed versions of an
// earlier bulk load, below its read timestamp. isEmptyNow, a look from
// outside the transaction, meets both: its scan the loaded rows and
// every intent at or below the present time, its lock probe every
// intent whatever its timestamp. Being outside, it also adds nothing to
// the transaction's read set and waits for no one, so probePrimary can
// look at tb's rows alone: a distributed table created or truncated in a
// group holding other tables' rows (and their writers' intents) loads in
// bulk too, which a read of the group in the transaction, meeting those
// rows first, never allowed.
//
// Writes buffered in the coordinator (kv/txn_buffer.go) are the
// exception, invisible from outside; the DDL that marked tb flushed the
// buffer and turned buffering off (sql/session execDDL, the catalog
// writer), so there are none, but if there were, the read in the
// transaction decides, over the group as before.
func isEmptyOwn(ctx context.Context, x *Context, tb *catalog.Table) (bool, error) {
	if x.Txn.BufferedWrites() > 0 {
		return isEmpty(ctx, x, tb, kvpb.WaitBlock)
	}
	return isEmptyNow(ctx, x, tb)
}

// isEmpty reports whether tb's primary index, as tb names it, holds no
// row visible to the transaction; wait is what it does on another
// transaction's intent.
func isEmpty(ctx context.Context, x *Context, tb *catalog.Table, wait kvpb.WaitPolicy) (bool, error) {
	b, _, err := firstRowScan(tb, wait)
	if err != nil {
		return false, err
	}
	if err := x.Txn.Run(ctx, b); err != nil {
		return false, err
	}
	return len(b.Results[0].Rows) == 0, nil
}

// firstRowScan is a batch that reads the first row of tb's primary index,
// as tb names it, with wait for another transaction's intent, and that
// index's span.
func firstRowScan(tb *catalog.Table, wait kvpb.WaitPolicy) (*kv.Batch, kvpb.Span, error) {
	layout, err := tb.Layout()
	if err != nil {
		return nil, kvpb.Span{}, fmt.Errorf("table %q: %w", tb.Name, err)
	}
	sp := layout.IndexSpan(&layout.Primary)
	b := &kv.Batch{WaitPolicy: wait}
	b.Scan(sp.Key, sp.EndKey, 1)
	return b, sp, nil
}

// isEmptyAt reports whether tb's primary index, as tb names it, holds
// no row at the transaction's read timestamp, read outside the
// transaction (kv.DB.RunAt) so that the span does not join its read set;
// another transaction's intent on a row of tb fails it with
// *kvpb.WriteIntentError. bulkLoadExisting calls it after its descriptor
// write and its ReadAtWriteTimestamp: the transaction has written
// nothing to the old storage (isEmptyNow found no lock there, its own
// included), so what the read cannot see of its own writes is nothing.
func isEmptyAt(ctx context.Context, x *Context, tb *catalog.Table) (bool, error) {
	return probePrimary(ctx, tb, func(spans []kvpb.Span) (found, error) {
		b := firstRowScans(spans)
		if err := x.Txn.DB().RunAt(ctx, b, x.Txn.ReadTimestamp()); err != nil {
			if wi, ok := errors.AsType[*kvpb.WriteIntentError](err); ok {
				return found{intents: wi}, nil
			}
			return found{}, err
		}
		return found{rows: b}, nil
	})
}

// isEmptyNow reports whether tb's primary index holds neither a
// committed row nor an intent nor another transaction's lock at the
// present time, read outside the transaction without waiting.
//
// The lock check is for writers that buffer (kv/txn_buffer.go): their
// rows are in no tablet until they commit, but each of their writing
// statements left an unreplicated lock, which a scan does not see and a
// lock request does. Without it such a writer, pending when the COPY
// starts, would be failed at its commit by the load's descriptor write,
// where PostgreSQL lets both through. It is a second round trip, taken
// only when the scan found the table empty.
func isEmptyNow(ctx context.Context, x *Context, tb *catalog.Table) (bool, error) {
	db := x.Txn.DB()
	return probePrimary(ctx, tb, func(spans []kvpb.Span) (found, error) {
		b := firstRowScans(spans)
		if err := db.Run(ctx, b); err != nil {
			if wi, ok := errors.AsType[*kvpb.WriteIntentError](err); ok {
				return found{intents: wi}, nil
			}
			return found{}, err
		}
		if f := (found{rows: b}); f.any() {
			return f, nil
		}
		probe := &kv.Batch{WaitPolicy: kvpb.WaitError}
		for _, sp := range spans {
			probe.Lock(sp.Key, sp.EndKey, false)
		}
		if err := db.Run(ctx, probe); err != nil {
			if wi, ok := errors.AsType[*kvpb.WriteIntentError](err); ok {
				return found{intents: wi}, nil
			}
			if wto, ok := errors.AsType[*kvpb.WriteTooOldError](err); ok {
				// A version committed since the scan.
				return found{tooOld: wto}, nil
			}
			return found{}, err
		}
		return found{}, nil
	})
}

// found is what one probe of probePrimary met in its spans: the rows
// its scans returned, or the intents or locks that stopped it, or the
// version committed since its scan that its lock request met.
type found struct {
	rows    *kv.Batch
	intents *kvpb.WriteIntentError
	tooOld  *kvpb.WriteTooOldError
}

// any reports whether the probe met anything at all.
func (f found) any() bool {
	if f.intents != nil || f.tooOld != nil {
		return true
	}
	if f.rows != nil {
		for _, r := range f.rows.Results {
			if len(r.Rows) > 0 {
				return true
			}
		}
	}
	return false
}

// keys lists the keys of what the probe met.
func (f found) keys() [][]byte {
	var out [][]byte
	if f.rows != nil {
		for _, r := range f.rows.Results {
			for _, row := range r.Rows {
				out = append(out, row.Key)
			}
		}
	}
	if f.intents != nil {
		for _, in := range f.intents.Intents {
			out = append(out, in.Key)
		}
	}
	if f.tooOld != nil {
		out = append(out, f.tooOld.Key)
	}
	return out
}

// probePrimary reports whether tb's primary index, as tb names it, is
// empty by what probe meets in the spans it is given: rows, intents and
// locks all count as rows.
//
// The primary index's span (rowenc IndexSpan) is exact for a table that
// is not hash partitioned, a table of a colocated database included
// (its table and index prefix follow the group's bucket 0). A
// distributed table's rows spread over its group's buckets, with the
// table and index after the bucket in each key, so its one span is the
// whole group, which the tables colocated with it share: what is met
// there may be another table's (or one of tb's secondary indexes'). The
// group is probed first, one read for the common case (an empty group,
// or tb's own row met first); when only keys of others were met, tb's
// rows are looked for exactly, in one span per bucket (rowenc.NumBuckets
// limited scans in one batch, which the router cuts per tablet and sends
// in parallel), so that a COPY into an empty table of a group holding
// rows still loads in bulk. The exact probe meets nothing but tb's
// primary index. Another table's row, intent or lock does not bear on
// the argument of bulkLoadExisting: its writer resolved its own
// table's descriptor, never tb's, and wrote keys under its own table
// prefix, which the load (into tb's fresh storage) never writes.
func probePrimary(ctx context.Context, tb *catalog.Table, probe func([]kvpb.Span) (found, error)) (bool, error) {
	l, err := tb.Layout()
	if err != nil {
		return false, fmt.Errorf("table %q: %w", tb.Name, err)
	}
	f, err := probe([]kvpb.Span{l.IndexSpan(&l.Primary)})
	if err != nil || !f.any() {
		return err == nil, err
	}
	if !l.SharedGroup {
		return false, nil
	}
	for _, k := range f.keys() {
		if ownsPrimaryKey(l, k) {
			return false, nil
		}
	}
	f, err = probe(primaryBucketSpans(l))
	if err != nil {
		return false, err
	}
	return !f.any(), nil
}

// ownsPrimaryKey reports whether key is an entry of l's primary index
// (as l names it).
func ownsPrimaryKey(l *rowenc.TableLayout, key []byte) bool {
	p, _, err := rowenc.DecodeKeyPrefix(key)
	if err != nil {
		// Not a table key of the group: nobody's row, but no reason to
		// call the table empty either.
		return true
	}
	return bytes.HasPrefix(key, l.IndexPrefix(nil, &l.Primary, p.Bucket))
}

// primaryBucketSpans lists the exact span of l's primary index in each
// bucket of its group.
func primaryBucketSpans(l *rowenc.TableLayout) []kvpb.Span {
	out := make([]kvpb.Span, rowenc.NumBuckets)
	for b := range rowenc.NumBuckets {
		out[b] = l.IndexBucketSpan(&l.Primary, uint16(b))
	}
	return out
}

// firstRowScans is a batch that reads the first row of each of spans,
// failing on another transaction's intent.
func firstRowScans(spans []kvpb.Span) *kv.Batch {
	b := &kv.Batch{WaitPolicy: kvpb.WaitError}
	for _, sp := range spans {
		b.Scan(sp.Key, sp.EndKey, 1)
	}
	return b
}

// moveToFreshStorage writes the next version of tb with every index in
// fresh storage and returns it.
func moveToFreshStorage(ctx context.Context, x *Context, tb *catalog.Table) (*catalog.Table, error) {
	nt := *tb
	nt.Indexes = slices.Clone(tb.Indexes)
	if err := catalog.MoveToFreshStorage(ctx, x.Txn.DB(), &nt); err != nil {
		return nil, err
	}
	w := catalog.NewWriter(x.Txn, nil)
	if x.CatalogWriter != nil {
		w = x.CatalogWriter.CatalogWriter()
	}
	if err := w.Update(ctx, &nt); err != nil {
		return nil, fmt.Errorf("moving table %q to fresh storage: %w", tb.Name, err)
	}
	// Before any row goes there: what a failed load leaves is found and
	// cleared (sql/bulkclean).
	storage := []uint32{nt.PrimaryIndex.StorageID}
	for _, idx := range nt.Indexes {
		storage = append(storage, idx.StorageID)
	}
	if err := bulkclean.Record(ctx, x.Txn, &nt, storage); err != nil {
		return nil, err
	}
	return &nt, nil
}

// referencesOthers reports whether tb has a foreign key to another table.
func referencesOthers(tb *catalog.Table) bool {
	for _, fk := range tb.ForeignKeys {
		if fk.ReferencedTableID != tb.ID {
			return true
		}
	}
	return false
}
