package kv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// stillRunning reports whether done has not fired within a moment: a
// blocked writer must still be blocked (a lock, not a timing, decides).
func stillRunning(done <-chan error) bool {
	select {
	case <-done:
		return false
	case <-time.After(200 * time.Millisecond):
		return true
	}
}

// TestBufferedLocksBlockSecondWriter: a buffered write takes an
// unreplicated lock at its statement, so a second buffered writer of the
// key waits there (no 40001 at COMMIT for anyone); the first still
// commits in one phase, without intents or a record, and its commit lets
// the second go on and commit.
func TestBufferedLocksBlockSecondWriter(t *testing.T) {
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			e, w := newWatchedEnv(t)
			ctx := context.Background()
			e.mustPut("k", "0")
			t1 := e.db.NewTxn(ctx, "first", iso)
			t1.EnableWriteBuffering()
			mustOK(t, t1.Put(ctx, []byte("k"), []byte("1")))

			t2 := e.db.NewTxn(ctx, "second", iso)
			t2.EnableWriteBuffering()
			done := make(chan error, 1)
			go func() { done <- t2.Put(ctx, []byte("k"), []byte("2")) }()
			if !stillRunning(done) {
				t.Fatal("second writer did not wait for the first's lock")
			}
			mustOK(t, t1.Commit(ctx))
			if !t1.OnePhaseCommitted() {
				t.Fatal("the lock holder did not commit in one phase")
			}
			mustOK(t, <-done)
			mustOK(t, t2.Commit(ctx))
			if got := e.mustGet("k"); got != "2" {
				t.Fatalf("k = %q, want the second writer's 2", got)
			}
			if got := w.intentWrites(); len(got) != 0 {
				t.Fatalf("writes sent as intents: %q", got)
			}
			if n := e.allIntents(); n != 0 {
				t.Fatalf("%d intents left", n)
			}
		})
	}
}

// TestBufferedWithoutLocks: a transaction buffering without locks (an
// implicit one) leaves a second writer of its key free to go on; the
// later of the two to commit meets the other's version and fails
// retryably instead of overwriting it blindly.
func TestBufferedWithoutLocks(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("k", "0")
	t1 := e.db.NewTxn(ctx, "implicit", Serializable)
	t1.EnableWriteBufferingWithoutLocks()
	if got := getStr(t, t1, "k"); got != "0" {
		t.Fatalf("first read %q", got)
	}
	mustOK(t, t1.Put(ctx, []byte("k"), []byte("1")))

	t2 := e.db.NewTxn(ctx, "second", Serializable)
	t2.EnableWriteBuffering()
	done := make(chan error, 1)
	go func() { done <- t2.Put(ctx, []byte("k"), []byte("2")) }()
	select {
	case err := <-done:
		mustOK(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("second writer waited on a transaction that takes no locks")
	}
	mustOK(t, t2.Commit(ctx))
	err := t1.Commit(ctx)
	if err == nil || !kvpb.IsRetryable(err) {
		t.Fatalf("first commit after a newer version of its read key: %v, want a retryable error", err)
	}
	if got := e.mustGet("k"); got != "2" {
		t.Fatalf("k = %q, want the second writer's 2", got)
	}
}

// TestBufferedLocksReadersPass: a reader does not wait on an unreplicated
// lock (it holds no value).
func TestBufferedLocksReadersPass(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("k", "0")
	t1 := e.db.NewTxn(ctx, "writer", Snapshot)
	t1.EnableWriteBuffering()
	mustOK(t, t1.Put(ctx, []byte("k"), []byte("1")))
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r := e.db.NewTxn(rctx, "reader", Snapshot)
	if got := getStr(t, r, "k"); got != "0" {
		t.Fatalf("reader saw %q", got)
	}
	mustOK(t, r.Commit(rctx))
	mustOK(t, t1.Commit(ctx))
}

// TestBufferedLocksDeadlock: two buffered transactions that each wait for
// the other's lock are a deadlock the push machinery breaks: one is
// aborted, the other goes on and commits.
func TestBufferedLocksDeadlock(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	t1 := e.db.NewTxn(ctx, "one", Snapshot)
	t1.EnableWriteBuffering()
	t2 := e.db.NewTxn(ctx, "two", Snapshot)
	t2.EnableWriteBuffering()
	mustOK(t, t1.Put(ctx, []byte("a"), []byte("1")))
	mustOK(t, t2.Put(ctx, []byte("b"), []byte("2")))
	d1, d2 := make(chan error, 1), make(chan error, 1)
	go func() { d1 <- t1.Put(ctx, []byte("b"), []byte("1")) }()
	go func() { d2 <- t2.Put(ctx, []byte("a"), []byte("2")) }()
	// The detector aborts one of them. The first to return is either the
	// victim (its wait fails) or the survivor (the victim's locks went
	// with its abort).
	var first error
	var firstTxn, otherTxn *Txn
	var other <-chan error
	select {
	case first = <-d1:
		firstTxn, otherTxn, other = t1, t2, d2
	case first = <-d2:
		firstTxn, otherTxn, other = t2, t1, d1
	case <-time.After(30 * time.Second):
		t.Fatal("deadlock between buffered transactions not broken")
	}
	winner, loser := firstTxn, otherTxn
	if first != nil {
		if !kvpb.IsRetryable(first) {
			t.Fatalf("wait ended with %v, want the deadlock victim's abort", first)
		}
		winner, loser = otherTxn, firstTxn
		// The victim's locks go with its rollback; the other proceeds.
		mustOK(t, loser.Rollback(ctx))
		mustOK(t, <-other)
		mustOK(t, winner.Commit(ctx))
	} else {
		mustOK(t, winner.Commit(ctx))
		// The victim fails at its wait or, at the latest, at commit.
		err := <-other
		if err == nil {
			err = loser.Commit(ctx)
		}
		if !kvpb.IsRetryable(err) {
			t.Fatalf("deadlock victim ended with %v, want a retryable error", err)
		}
	}
	if got := e.mustGet("a") + e.mustGet("b"); got != "11" && got != "22" {
		t.Fatalf("a+b = %q, want one transaction's writes", got)
	}
}

// TestBufferedLocksRollbackReleases: a rollback releases the locks at
// once: a later writer does not wait for them to expire (the liveness
// threshold is 5s; the writer gives up after 2s).
func TestBufferedLocksRollbackReleases(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	t1 := e.db.NewTxn(ctx, "rolled-back", ReadCommitted)
	t1.EnableWriteBuffering()
	mustOK(t, t1.Put(ctx, []byte("k"), []byte("1")))
	mustOK(t, t1.Put(ctx, []byte("r"), []byte("1")))
	mustOK(t, t1.Rollback(ctx))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := e.db.Put(wctx, []byte("k"), []byte("2")); err != nil {
		t.Fatalf("write after the rollback: %v", err)
	}
	if err := e.db.Put(wctx, []byte("r"), []byte("2")); err != nil {
		t.Fatalf("write after the rollback: %v", err)
	}
}

// TestBufferedLocksSavepointRolledBack: a key whose buffered write a
// savepoint rolled back is still locked until the transaction ends, and
// the one-phase commit of the rest releases it too.
func TestBufferedLocksSavepointRolledBack(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	t1 := e.db.NewTxn(ctx, "savepoint", Snapshot)
	t1.EnableWriteBuffering()
	mustOK(t, t1.Put(ctx, []byte("a"), []byte("1")))
	sp, err := t1.Savepoint(ctx)
	mustOK(t, err)
	mustOK(t, t1.Put(ctx, []byte("x"), []byte("1"))) // other tablet
	mustOK(t, t1.RollbackToSavepoint(ctx, sp))
	mustOK(t, t1.Commit(ctx))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := e.db.Put(wctx, []byte("x"), []byte("2")); err != nil {
		var wie *kvpb.WriteIntentError
		t.Fatalf("write of the rolled-back key after commit: %v (intent error %t)", err, errors.As(err, &wie))
	}
}

// txnBatchCounter counts the batches of one transaction (by name) that
// reach the store, heartbeats aside.
type txnBatchCounter struct {
	kvpb.Sender
	mu    sync.Mutex
	name  string
	count int
}

func (c *txnBatchCounter) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	c.mu.Lock()
	if ba.Txn != nil && ba.Txn.Name == c.name && ba.Requests[0].Method() != kvpb.MethodHeartbeatTxn {
		c.count++
	}
	c.mu.Unlock()
	return c.Sender.Send(ctx, ba)
}

func (c *txnBatchCounter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// TestLockOnReadSavesRoundTrip: an UPDATE-shaped statement of a buffering
// transaction (read the row, then buffer a Put of its key with a Lock of
// its span) costs two batches; with Batch.LockOnRead on the read, the lock
// is taken in the read's batch and the write buffers without one. The
// lock is held from the read on: another transaction's locking read of
// the row waits until the first commits (in one phase), then reads its
// value. A read of a key the buffer holds runs without the lock (the
// write's lock is held already).
func TestLockOnReadSavesRoundTrip(t *testing.T) {
	for _, lockOnRead := range []bool{false, true} {
		t.Run(fmt.Sprintf("lockOnRead=%v", lockOnRead), func(t *testing.T) {
			c := &txnBatchCounter{name: "update"}
			e := newTestEnv(t, envOptions{wrapSender: func(s kvpb.Sender) kvpb.Sender {
				c.Sender = s
				return c
			}})
			ctx := context.Background()
			e.mustPut("r", "0")
			read := func(txn *Txn, lock bool) (string, error) {
				b := &Batch{}
				b.Scan([]byte("r"), []byte("s"), 0)
				if lock {
					b.LockOnRead([]byte("r"), []byte("s"))
				}
				if err := txn.Run(ctx, b); err != nil {
					return "", err
				}
				if len(b.Results[0].Rows) != 1 {
					return "", fmt.Errorf("%d rows", len(b.Results[0].Rows))
				}
				return string(b.Results[0].Rows[0].Value), nil
			}
			txn := e.db.NewTxn(ctx, "update", ReadCommitted)
			txn.EnableWriteBuffering()
			if v, err := read(txn, lockOnRead); err != nil || v != "0" {
				t.Fatalf("read: %q, %v", v, err)
			}
			if n := c.n(); n != 1 {
				t.Fatalf("%d batches for the read, want 1", n)
			}
			w := &Batch{}
			w.Put([]byte("r"), []byte("1"))
			w.Lock([]byte("r"), []byte("s"), false)
			mustOK(t, txn.Run(ctx, w))
			want := 2
			if lockOnRead {
				want = 1
			}
			if n := c.n(); n != want {
				t.Fatalf("%d batches after the write, want %d", n, want)
			}
			// The buffer holds r now: a locking read of it reads through
			// the buffer, with no new lock.
			if v, err := read(txn, true); err != nil || v != "1" {
				t.Fatalf("read of the buffered row: %q, %v", v, err)
			}

			t2 := e.db.NewTxn(ctx, "second", ReadCommitted)
			t2.EnableWriteBuffering()
			done := make(chan error, 1)
			var got string
			go func() {
				var err error
				got, err = read(t2, true)
				done <- err
			}()
			if !stillRunning(done) {
				t.Fatal("a second locking read did not wait for the row's lock")
			}
			mustOK(t, txn.Commit(ctx))
			if !txn.OnePhaseCommitted() {
				t.Fatal("the UPDATE did not commit in one phase")
			}
			mustOK(t, <-done)
			if got != "1" {
				t.Fatalf("second read after the commit: %q, want 1", got)
			}
			mustOK(t, t2.Commit(ctx))
		})
	}
}

// TestLockedRowCheckedOnce: an UPDATE-shaped statement of a READ
// COMMITTED buffering transaction (a locking read of the row's span, then
// a Put of its key with a Lock of the span) is checked at commit by one
// refresh of the lock's span, which covers the key's own check from the
// same snapshot (writeBuffer.lockChecks); it was two, each a read of the
// row. A key written by an earlier statement, before the lock, keeps its
// own check from that statement's snapshot; a write of the row in the
// window (the unreplicated lock out of its way) still fails the commit.
// A row rewritten whole (a DeleteRange of the rest of its span with the
// Put: sql/rowenc's RowWriter.WholeRow) is checked by the lock's refresh
// too (writeBuffer.lockChecksSpan), and a column entry another
// transaction wrote in the window fails the commit.
func TestLockedRowCheckedOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		writeFirst   bool // an earlier statement wrote r without a lock
		wholeRow     bool // the write deletes the rest of r's span too
		intrude      bool // another transaction writes r (r\x01 when wholeRow) before the commit
		wantRefresh  int
		wantRetryErr bool
	}{
		{name: "locked then written", wantRefresh: 1},
		{name: "written before the lock", writeFirst: true, wantRefresh: 2},
		{name: "row written in the window", intrude: true, wantRetryErr: true},
		{name: "written before the lock, row written in the window", writeFirst: true, intrude: true, wantRetryErr: true},
		{name: "rewritten whole", wholeRow: true, wantRefresh: 1},
		{name: "rewritten whole, a column entry written in the window", wholeRow: true, intrude: true, wantRetryErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &batchLog{}
			e := newTestEnv(t, envOptions{db: Options{NoUnreplicatedLocks: tc.intrude},
				wrapSender: func(s kvpb.Sender) kvpb.Sender {
					log.Sender = s
					return log
				}})
			e.mustPut("r", "0")
			txn := e.db.NewTxn(ctx, "update", ReadCommitted)
			txn.EnableWriteBuffering()
			if tc.writeFirst {
				mustOK(t, txn.Put(ctx, []byte("r"), []byte("first")))
				mustOK(t, txn.Step(ctx))
			}
			rd := &Batch{}
			rd.Scan([]byte("r"), []byte("s"), 0)
			rd.LockOnRead([]byte("r"), []byte("s"))
			mustOK(t, txn.Run(ctx, rd))
			w := &Batch{}
			if tc.wholeRow {
				w.DelRange([]byte("r\x00"), []byte("s"))
			}
			w.Put([]byte("r"), []byte("1"))
			w.Lock([]byte("r"), []byte("s"), false)
			mustOK(t, txn.Run(ctx, w))
			mustOK(t, txn.Step(ctx))
			intruded := "r"
			if tc.wholeRow {
				intruded = "r\x01"
			}
			if tc.intrude {
				e.mustPut(intruded, "x")
			}
			log.arm()
			err := txn.Commit(ctx)
			if tc.wantRetryErr {
				if !kvpb.IsRetryable(err) {
					t.Fatalf("commit: %v, want a retryable error", err)
				}
				_ = txn.Rollback(ctx)
				if got := e.mustGet(intruded); got != "x" {
					t.Fatalf("%q = %q after the failed commit, want x", intruded, got)
				}
				return
			}
			mustOK(t, err)
			if got := e.mustGet("r"); got != "1" {
				t.Fatalf("r = %q after the commit, want 1", got)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			n := 0
			for _, b := range log.batches {
				for _, r := range b {
					if _, ok := r.(*kvpb.RefreshRequest); ok {
						n++
					}
				}
			}
			if n != tc.wantRefresh {
				var got [][]string
				for _, b := range log.batches {
					got = append(got, describe(b))
				}
				t.Fatalf("the commit sent %d refreshes (%q), want %d", n, got, tc.wantRefresh)
			}
		})
	}
}
