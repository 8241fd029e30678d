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
	n, err := db.Inc(ctx, storageIDKey(), 1)
	if err != nil {
		return 0, fmt.Errorf("allocating a storage ID: %w", err)
	}
	id := int64(firstStorageID) + n
	if n <= 0 || id > int64(^uint32(0)) {
		return 0, fmt.Errorf("%w: storage ID counter at %d", ErrBadDescriptor, n)
	}
	return uint32(id), nil
}

// NewTableMark is the kv.Txn.MarkNew key of a table created in the
// transaction (set by CREATE TABLE, read by COPY's bulk path).
func NewTableMark(id ID) string { return fmt.Sprintf("table/%d", id) }
