package catalog

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
)

// Storage IDs (Index.StorageID) come from one counter under keys.System,
// incremented outside any transaction (kvpb.IncrementRequest), so an ID
// is handed out once, ever, even when the transaction that asked for it
// aborts or restarts. That is what lets a bulk load write committed
// versions into the storage it names: no other attempt can write there,
// and no later index can be given the same keys.
//
//	sid    the storage ID counter, 8 bytes BE (kvpb.EncodeIncrementValue)
//
// The IDs start at firstStorageID, above the index IDs a table hands out
// (those count up from 1 per table, and pg_class OIDs already assume
// fewer than 1024 of them: sql/pgcatalog's derived OIDs keep 10 bits), so
// an index's keys never collide with another index of its table whichever
// of the two it carries; validation refuses a descriptor where they would.
// Keys carry the ID as an ordered int: the first 64,512 storage IDs cost
// one byte more per key than a small index ID, not three.
const firstStorageID = 1 << 10

func storageIDKey() []byte { return keys.System([]byte("sid")) }

// AllocateStorageID returns a storage ID no one else will ever get.
func AllocateStorageID(ctx context.Context, db *kv.DB) (uint32, error) {
	ids, err := AllocateStorageIDs(ctx, db, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// AllocateStorageIDs returns n storage IDs no one else will ever get, in
// one increment of the counter.
func AllocateStorageIDs(ctx context.Context, db *kv.DB, n int) ([]uint32, error) {
	if n <= 0 {
		return nil, nil
	}
	last, err := db.Inc(ctx, storageIDKey(), int64(n))
	if err != nil {
		return nil, fmt.Errorf("allocating %d storage IDs: %w", n, err)
	}
	first := int64(firstStorageID) + last - int64(n) + 1
	if last < int64(n) || first+int64(n)-1 > int64(^uint32(0)) {
		return nil, fmt.Errorf("%w: storage ID counter at %d", ErrBadDescriptor, last)
	}
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(first + int64(i))
	}
	return ids, nil
}

// MoveToFreshStorage gives every index of t (primary and secondary) a new
// storage ID, in place: the next descriptor version written with them
// names empty storage that no other attempt will ever write. TRUNCATE and
// the bulk loads use it.
func MoveToFreshStorage(ctx context.Context, db *kv.DB, t *Table) error {
	ids, err := AllocateStorageIDs(ctx, db, 1+len(t.Indexes))
	if err != nil {
		return err
	}
	t.PrimaryIndex.StorageID = ids[0]
	for i := range t.Indexes {
		t.Indexes[i].StorageID = ids[1+i]
	}
	return nil
}

// NewTableMark is the kv.Txn.MarkNew key of a table created in the
// transaction (set by CREATE TABLE, read by COPY's bulk path).
func NewTableMark(id ID) string { return fmt.Sprintf("table/%d", id) }

// TruncatedTableMark is the kv.Txn.MarkNew key of a table that TRUNCATE
// moved to fresh storage in the transaction (set by TRUNCATE, read by
// COPY's bulk path): its rows, like a new table's, are reachable only
// through the descriptor version the transaction wrote.
func TruncatedTableMark(id ID) string { return fmt.Sprintf("truncated/%d", id) }
