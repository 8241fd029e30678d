package kv

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestRunBulk: bulk writes are committed values just below the
// transaction's read timestamp: its own reads see them, they are not its
// writes (no intent, nothing to resolve), and a rollback leaves them.
func TestRunBulk(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	txn := e.db.NewTxn(ctx, "bulk", Serializable)
	b := &Batch{}
	b.BulkPut([]byte("a"), []byte("1"), true)
	b.BulkPut([]byte("z"), []byte("2"), true) // another tablet
	if err := txn.RunBulk(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "z"); got != "12" {
		t.Errorf("the transaction reads %q, want its bulk writes", got)
	}
	if n := e.allIntents(); n != 0 {
		t.Errorf("%d intents after a bulk write", n)
	}
	// A later write of the transaction lands above the bulk value.
	if err := txn.Put(ctx, []byte("a"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a"); got != "3" {
		t.Errorf("after its own put the transaction reads %q, want 3", got)
	}
	dup := &Batch{}
	dup.BulkPut([]byte("z"), []byte("4"), true)
	if err := txn.RunBulk(ctx, dup); err == nil {
		t.Error("a second MustNotExist bulk put of z succeeded")
	}
	mixed := &Batch{}
	mixed.Put([]byte("b"), []byte("5"))
	if err := txn.RunBulk(ctx, mixed); err == nil {
		t.Error("RunBulk accepted a Put")
	}
	if err := txn.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.mustGet("z"); got != "2" {
		t.Errorf("after rollback z = %q: bulk writes are not the transaction's", got)
	}
	if err := txn.RunBulk(ctx, b); err == nil {
		t.Error("RunBulk in a finished transaction succeeded")
	}
}

// TestMarkNew: marks last for the attempt, and a rollback to a savepoint
// taken before one forgets it.
func TestMarkNew(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	txn := e.db.NewTxn(ctx, "ddl", Serializable)
	sp0 := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("d1"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	txn.MarkNew("t1")
	sp1 := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("d2"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	txn.MarkNew("t2")
	if !txn.IsNew("t1") || !txn.IsNew("t2") || txn.IsNew("t3") {
		t.Fatal("marks not recorded")
	}
	if err := txn.RollbackToSavepoint(ctx, sp1); err != nil {
		t.Fatal(err)
	}
	if !txn.IsNew("t1") || txn.IsNew("t2") {
		t.Errorf("after rolling back past t2's mark: t1 %t t2 %t, want true false", txn.IsNew("t1"), txn.IsNew("t2"))
	}
	if err := txn.RollbackToSavepoint(ctx, sp0); err != nil {
		t.Fatal(err)
	}
	if txn.IsNew("t1") {
		t.Error("t1 still marked after rolling back past its creation")
	}
	txn.MarkNew("t3")
	txn.mu.Lock()
	txn.mu.retryErr = &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable}
	txn.mu.Unlock()
	if err := txn.PrepareForRetry(ctx); err != nil {
		t.Fatal(err)
	}
	if txn.IsNew("t3") {
		t.Error("a mark survived a restart")
	}
}
