package exec

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/sql/catalog"
)

// The bulk-load path of COPY FROM and INSERT ... SELECT (CREATE TABLE AS)
// (docs/architecture.md, "Bulk loads").
//
// A table created in the statement's own transaction can be seen by no
// other transaction until that one commits. If it is still empty, the
// statement gives each of its indexes fresh storage
// (catalog.AllocateStorageID: keys no other attempt will ever write) in a
// new descriptor version, written in the transaction, and writes the rows
// there as committed values (kvpb.BulkPutRequest) instead of intents: no
// lock record, no in-memory lock, nothing to resolve at commit.
// Uniqueness is the BulkPut's MustNotExist on primary keys and unique
// index entries; defaults, NOT NULL, CHECK and foreign keys are checked
// as on the transactional path.
//
// Why it keeps PostgreSQL's semantics:
//   - Atomicity: the rows are reachable only through the new descriptor
//     version. A failed load fails its transaction (or, in a block, is
//     rolled back to a savepoint taken before it, which undoes the
//     descriptor write), and the storage it wrote becomes unreachable
//     garbage; the IDs are never handed out again, so nothing can surface
//     it later.
//   - Isolation: other transactions cannot name the table before commit;
//     afterwards they read it at or above the commit timestamp, above the
//     rows' timestamp (just below the transaction's read timestamp, so its
//     own later reads see them and its own later writes land above them).
//   - Durability: each BulkPut batch is applied (synced) before COPY
//     returns, and the descriptor commits after them.
//
// Not taken (the transactional path runs): a table that existed before
// the transaction, even empty or truncated in it: a concurrent writer
// that resolved the old descriptor validates it at commit
// (kv/txn_validate.go), but the load would still have to decide the table
// is empty by a read above its own descriptor write, which it does not
// yet (docs/architecture.md, "Bulk loads"); a table the transaction
// already wrote rows into.

// bulkBatchRows is how many rows one BulkPut batch carries: each batch is
// one synced write per tablet, so it is larger than batchSize.
const bulkBatchRows = 10000

// bulkLoadTable decides whether a load (COPY, INSERT ... SELECT) into tb
// takes the bulk path and, if it does, moves tb to fresh storage and
// returns the new descriptor version (nil: the transactional path).
func bulkLoadTable(ctx context.Context, x *Context, tb *catalog.Table) (*catalog.Table, error) {
	if x.Txn == nil || !x.Txn.IsNew(catalog.NewTableMark(tb.ID)) {
		return nil, nil
	}
	layout, err := tb.Layout()
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", tb.Name, err)
	}
	// Empty as this transaction sees it: its own earlier rows (intents)
	// would otherwise sit in the old storage. Secondary indexes hold
	// nothing when the primary one does not.
	sp := layout.IndexSpan(&layout.Primary)
	kvs, err := x.Txn.Scan(ctx, sp.Key, sp.EndKey, 1)
	if err != nil {
		return nil, err
	}
	if len(kvs) > 0 {
		return nil, nil
	}
	nt := *tb
	nt.Indexes = slices.Clone(tb.Indexes)
	db := x.Txn.DB()
	for _, idx := range append([]*catalog.Index{&nt.PrimaryIndex}, indexPtrs(nt.Indexes)...) {
		if idx.StorageID, err = catalog.AllocateStorageID(ctx, db); err != nil {
			return nil, err
		}
	}
	if err := catalog.NewWriter(x.Txn, nil).Update(ctx, &nt); err != nil {
		return nil, fmt.Errorf("moving table %q to fresh storage: %w", tb.Name, err)
	}
	return &nt, nil
}

func indexPtrs(xs []catalog.Index) []*catalog.Index {
	out := make([]*catalog.Index, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}
