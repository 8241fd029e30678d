package kv

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestRetryStatement: a READ COMMITTED statement that read a key, lost a
// write race on it (the read cannot be refreshed: a concurrent commit
// changed it) and so failed with a retryable error, is undone back to its
// savepoint and rerun at a fresh snapshot, where it sees the concurrent
// commit; the transaction's earlier statement stays. The other levels
// refuse: their transaction must restart.
func TestRetryStatement(t *testing.T) {
	ctx := context.Background()
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			e := newTestEnv(t, envOptions{})
			e.mustPut("k", "1")
			txn := e.db.NewTxn(ctx, "rc", iso)
			// Statement 1 writes "a".
			if err := txn.Put(ctx, []byte("a"), []byte("a1")); err != nil {
				t.Fatal(err)
			}
			if err := txn.Step(ctx); err != nil {
				t.Fatal(err)
			}
			// Statement 2 reads k, writes "b", then someone else commits
			// k and statement 2's write of k is too old.
			sp, err := txn.Savepoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v, _, err := txn.Get(ctx, []byte("k"))
			if err != nil || string(v) != "1" {
				t.Fatalf("get k = %q, %v", v, err)
			}
			if err := txn.Put(ctx, []byte("b"), []byte("b1")); err != nil {
				t.Fatal(err)
			}
			e.mustPut("k", "2")
			err = txn.Put(ctx, []byte("k"), []byte("from 1"))
			if !kvpb.IsRetryable(err) {
				t.Fatalf("write over a concurrent commit: %v, want a retryable error", err)
			}
			rerr := txn.RetryStatement(ctx, sp)
			if iso != ReadCommitted {
				if !errors.Is(rerr, ErrStatementNotRetryable) || !kvpb.IsRetryable(rerr) {
					t.Fatalf("RetryStatement under %s = %v, want ErrStatementNotRetryable wrapping the retry", iso, rerr)
				}
				_ = txn.Rollback(ctx)
				return
			}
			if rerr != nil {
				t.Fatal(rerr)
			}
			// The rerun sees the commit and its write goes through; the
			// failed attempt's write of b is gone, statement 1's stays.
			v, _, err = txn.Get(ctx, []byte("k"))
			if err != nil || string(v) != "2" {
				t.Fatalf("rerun reads k = %q, %v, want 2", v, err)
			}
			if err := txn.Put(ctx, []byte("k"), []byte("from 2")); err != nil {
				t.Fatal(err)
			}
			if err := txn.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string]string{"a": "a1", "b": "", "k": "from 2"} {
				got, found, err := e.db.Get(ctx, []byte(key))
				if err != nil {
					t.Fatal(err)
				}
				if want == "" && found || want != "" && string(got) != want {
					t.Errorf("%s = %q (found %v), want %q", key, got, found, want)
				}
			}
		})
	}
}

// TestStartSavepoint: the token StartSavepoint returns after writes is
// the one Savepoint returned before them: a statement that made its
// transaction lazily and failed is undone back to the transaction's
// start, and a token of the first epoch is refused after a restart.
func TestStartSavepoint(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{})
	e.mustPut("k", "1")
	txn := e.db.NewTxn(ctx, "rc", ReadCommitted)
	early, err := txn.Savepoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := txn.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Put(ctx, []byte("b"), []byte("b1")); err != nil {
		t.Fatal(err)
	}
	if sp := txn.StartSavepoint(); sp != early {
		t.Fatalf("StartSavepoint %+v after a write, Savepoint at the start %+v", sp, early)
	}
	e.mustPut("k", "2")
	if err := txn.Put(ctx, []byte("k"), []byte("from 1")); !kvpb.IsRetryable(err) {
		t.Fatalf("write over a concurrent commit: %v, want a retryable error", err)
	}
	if err := txn.RetryStatement(ctx, txn.StartSavepoint()); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, found, err := e.db.Get(ctx, []byte("b")); err != nil || found {
		t.Fatalf("b after the retry from the start: found %v, %v", found, err)
	}
}
