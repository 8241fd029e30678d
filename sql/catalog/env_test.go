package catalog

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/testcluster"
)

// newTestDB starts one real node in miniature with a bootstrapped catalog.
func newTestDB(t testing.TB) *kv.DB {
	t.Helper()
	db := testcluster.StartNode(t, testcluster.Options{}).DB
	if err := db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
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
