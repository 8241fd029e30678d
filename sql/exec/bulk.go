package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/bulkclean"
	"github.com/cairn-db/cairn/sql/catalog"
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
	if empty, err := isEmpty(ctx, x, tb, kvpb.WaitBlock); err != nil || !empty {
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
// up to any commit timestamp, and the span it reads is, for a
// distributed table, the table's whole group, which the load itself
// fills: a refresh there read every row and entry loaded, and failed on
// any other write in the group.
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
	if _, ok := errors.AsType[*kvpb.WriteIntentError](err); ok {
		empty, err = false, nil
	}
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
// another transaction's intent fails it with *kvpb.WriteIntentError.
// bulkLoadExisting calls it after its descriptor write and its
// ReadAtWriteTimestamp: the transaction has written nothing to the old
// storage (isEmptyNow found no lock there, its own included), so what
// the read cannot see of its own writes is nothing.
func isEmptyAt(ctx context.Context, x *Context, tb *catalog.Table) (bool, error) {
	b, _, err := firstRowScan(tb, kvpb.WaitError)
	if err != nil {
		return false, err
	}
	if err := x.Txn.DB().RunAt(ctx, b, x.Txn.ReadTimestamp()); err != nil {
		return false, err
	}
	return len(b.Results[0].Rows) == 0, nil
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
	b, sp, err := firstRowScan(tb, kvpb.WaitError)
	if err != nil {
		return false, err
	}
	if err := x.Txn.DB().Run(ctx, b); err != nil {
		if _, ok := errors.AsType[*kvpb.WriteIntentError](err); ok {
			return false, nil
		}
		return false, err
	}
	if len(b.Results[0].Rows) > 0 {
		return false, nil
	}
	probe := &kv.Batch{WaitPolicy: kvpb.WaitError}
	probe.Lock(sp.Key, sp.EndKey, false)
	if err := x.Txn.DB().Run(ctx, probe); err != nil {
		if _, ok := errors.AsType[*kvpb.WriteIntentError](err); ok {
			return false, nil
		}
		if _, ok := errors.AsType[*kvpb.WriteTooOldError](err); ok {
			// A version committed since the scan.
			return false, nil
		}
		return false, err
	}
	return true, nil
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
		w = x.CatalogWriter()
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
