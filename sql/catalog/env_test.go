package catalog

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
)

// newTestDB starts one real node in miniature (engine on an in-memory
// filesystem, clock, store, kv.DB) with a bootstrapped catalog.
func newTestDB(t testing.TB) *kv.DB {
	t.Helper()
	ctx := context.Background()
	clock := hlc.NewClock(hlc.UnixNano, 0)
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, eng, clock, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db := kv.NewDB(st, st, clock, kv.Options{})
	t.Cleanup(func() {
		db.Close()
		st.Close()
		if err := eng.Close(); err != nil {
			t.Errorf("closing engine: %v", err)
		}
	})
	if err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		return Bootstrap(ctx, txn, "")
	}); err != nil {
		t.Fatal(err)
	}
	return db
}

// run runs fn in a committed transaction and fails the test on error.
func run(t testing.TB, db *kv.DB, fn func(ctx context.Context, txn *kv.Txn) error) {
	t.Helper()
	if err := db.Txn(context.Background(), kv.Serializable, fn); err != nil {
		t.Fatal(err)
	}
}
