package kv

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// Every test here has "Savepoint" in its name: `go test -race -run
// Savepoint` runs them all.

// txnRead reads key in txn ("<none>" if absent).
func txnRead(t *testing.T, txn *Txn, key string) string {
	t.Helper()
	v, ok, err := txn.Get(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if !ok {
		return "<none>"
	}
	return string(v)
}

func mustSavepoint(t *testing.T, txn *Txn) SavepointToken {
	t.Helper()
	sp, err := txn.Savepoint(context.Background())
	if err != nil {
		t.Fatalf("savepoint: %v", err)
	}
	return sp
}

// waitNoIntents waits until the asynchronous resolution of a commit has
// removed every intent, so what follows reads what resolution wrote rather
// than what a reader's push would resolve.
func (e *testEnv) waitNoIntents() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.allIntents() > 0 {
		if time.Now().After(deadline) {
			e.t.Fatalf("%d intents still unresolved", e.allIntents())
		}
		time.Sleep(time.Millisecond)
	}
}

// engineGet reads key's newest committed value straight from the engine.
func (e *testEnv) engineGet(key string) string {
	e.t.Helper()
	res, err := mvcc.Get(e.eng, []byte(key), hlc.MaxTimestamp, mvcc.ReadOptions{})
	if err != nil {
		e.t.Fatalf("engine get %s: %v", key, err)
	}
	if res.Value == nil {
		return "<none>"
	}
	return string(res.Value)
}

// TestSavepointRollback: a=1; SAVEPOINT; a=2, b=2, x=2 (x on another
// tablet), delete c; ROLLBACK TO SAVEPOINT: the transaction reads a=1, no
// b or x, c back; the commit writes exactly that, on both tablets (the
// anchor's resolved by EndTxn, the other's asynchronously); the locks on
// the rolled back keys are held until the end.
func TestSavepointRollback(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	e.mustPut("c", "c0")
	txn := e.db.NewTxn(ctx, "sp", Serializable)
	if err := txn.Put(ctx, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	sp := mustSavepoint(t, txn)
	b := &Batch{}
	b.Put([]byte("a"), []byte("2"))
	b.Put([]byte("b"), []byte("2"))
	b.Put([]byte("x"), []byte("2"))
	b.Del([]byte("c"))
	if err := txn.Run(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "b") + txnRead(t, txn, "x") + txnRead(t, txn, "c"); got != "222<none>" {
		t.Fatalf("before the rollback the txn reads %q", got)
	}
	if err := txn.RollbackToSavepoint(ctx, sp); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, want string }{{"a", "1"}, {"b", "<none>"}, {"x", "<none>"}, {"c", "c0"}} {
		if got := txnRead(t, txn, tc.key); got != tc.want {
			t.Errorf("after the rollback the txn reads %s=%s, want %s", tc.key, got, tc.want)
		}
	}
	for _, reverse := range []bool{false, true} {
		scan := txn.Scan
		if reverse {
			scan = txn.ReverseScan
		}
		rows, err := scan(ctx, []byte("a"), []byte("z"), 0)
		if err != nil {
			t.Fatal(err)
		}
		want := "a=1 c=c0"
		if reverse {
			want = "c=c0 a=1"
		}
		if got := rowsString(rows); got != want {
			t.Errorf("scan (reverse=%v) after the rollback = %q, want %q", reverse, got, want)
		}
	}
	// The locks stay until the transaction ends (as in CockroachDB).
	nowait := &kvpb.BatchRequest{Header: kvpb.Header{WaitPolicy: kvpb.WaitError}}
	nowait.Add(&kvpb.PutRequest{Key: []byte("b"), Value: []byte("other")})
	var wie *kvpb.WriteIntentError
	if _, err := e.db.Send(ctx, nowait); !errors.As(err, &wie) {
		t.Fatalf("write over a rolled back intent: got %v, want WriteIntentError", err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitNoIntents()
	for _, tc := range []struct{ key, want string }{{"a", "1"}, {"b", "<none>"}, {"x", "<none>"}, {"c", "c0"}} {
		if got := e.engineGet(tc.key); got != tc.want {
			t.Errorf("after the commit %s=%s, want %s", tc.key, got, tc.want)
		}
	}
}

// TestSavepointNested: savepoints nest; rolling back to the outer one
// undoes the inner one's writes too; a savepoint survives being rolled
// back to; a rollback with nothing written since changes nothing.
func TestSavepointNested(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	e.mustPut("a", "0")
	txn := e.db.NewTxn(ctx, "nested", Snapshot)
	outer := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	inner := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("a"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Put(ctx, []byte("n"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := txn.RollbackToSavepoint(ctx, inner); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "n"); got != "1<none>" {
		t.Fatalf("after rolling back the inner savepoint: %q, want 1<none>", got)
	}
	// Rolling back to the same savepoint again, with nothing new, and
	// after new writes.
	if err := txn.RollbackToSavepoint(ctx, inner); err != nil {
		t.Fatal(err)
	}
	if err := txn.Put(ctx, []byte("n"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "n"); got != "3" {
		t.Fatalf("a write after the rollback reads %q, want 3", got)
	}
	if err := txn.RollbackToSavepoint(ctx, inner); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "n"); got != "1<none>" {
		t.Fatalf("after the second rollback to inner: %q, want 1<none>", got)
	}
	if err := txn.Put(ctx, []byte("b"), []byte("4")); err != nil {
		t.Fatal(err)
	}
	if err := txn.RollbackToSavepoint(ctx, outer); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "b") + txnRead(t, txn, "n"); got != "0<none><none>" {
		t.Fatalf("after rolling back the outer savepoint: %q, want 0<none><none>", got)
	}
	if err := txn.Put(ctx, []byte("z"), []byte("5")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitNoIntents()
	if got := e.engineGet("a") + e.engineGet("b") + e.engineGet("n") + e.engineGet("z"); got != "0<none><none>5" {
		t.Fatalf("after the commit: %q, want 0<none><none>5", got)
	}
}

// TestSavepointRelease: releasing a savepoint keeps its writes; they then
// belong to the enclosing savepoint, whose rollback still undoes them.
func TestSavepointRelease(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	txn := e.db.NewTxn(ctx, "release", Snapshot)
	outer := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	inner := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("b"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := txn.ReleaseSavepoint(ctx, inner); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "b"); got != "12" {
		t.Fatalf("after the release: %q, want 12", got)
	}
	if err := txn.RollbackToSavepoint(ctx, outer); err != nil {
		t.Fatal(err)
	}
	if got := txnRead(t, txn, "a") + txnRead(t, txn, "b"); got != "<none><none>" {
		t.Fatalf("after rolling back the outer savepoint: %q", got)
	}
	if err := txn.Put(ctx, []byte("c"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	sp := mustSavepoint(t, txn)
	if err := txn.Put(ctx, []byte("d"), []byte("4")); err != nil {
		t.Fatal(err)
	}
	if err := txn.ReleaseSavepoint(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitNoIntents()
	if got := e.engineGet("a") + e.engineGet("b") + e.engineGet("c") + e.engineGet("d"); got != "<none><none>34" {
		t.Fatalf("after the commit: %q, want <none><none>34", got)
	}
}

// TestSavepointAfterConditionFailed is the SQL use: INSERT ...; a unique
// violation (ConditionFailedError); ROLLBACK TO SAVEPOINT; go on and
// commit. The failing batch wrote on another tablet before failing; the
// rollback undoes that too.
func TestSavepointAfterConditionFailed(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	ctx := context.Background()
	e.mustPut("u", "taken")
	txn := e.db.NewTxn(ctx, "insert", Serializable)
	if err := txn.Put(ctx, []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	sp := mustSavepoint(t, txn)
	b := &Batch{}
	b.Put([]byte("b"), []byte("row"))                // the row, on the first tablet
	b.CPut([]byte("u"), []byte("index"), nil, false) // its unique index entry, on the second
	err := txn.Run(ctx, b)
	var cf *kvpb.ConditionFailedError
	if !errors.As(err, &cf) {
		t.Fatalf("insert of a duplicate: got %v, want ConditionFailedError", err)
	}
	if kvpb.IsRetryable(err) {
		t.Fatal("a condition failure must not be retryable")
	}
	if got := e.intentsOf(txn.ID()); len(got) != 2 || got[1] != "b" {
		// a and b: the row's half of the failed batch was written.
		t.Fatalf("intents after the failed batch = %v, want [a b]", got)
	}
	if err := txn.RollbackToSavepoint(ctx, sp); err != nil {
		t.Fatalf("rollback to savepoint after ConditionFailed: %v", err)
	}
	if got := txnRead(t, txn, "b"); got != "<none>" {
		t.Fatalf("the failed insert's row reads %q after the rollback", got)
	}
	if err := txn.CPut(ctx, []byte("v"), []byte("index"), nil, false); err != nil {
		t.Fatalf("the next insert: %v", err)
	}
	if err := txn.Put(ctx, []byte("c"), []byte("row")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitNoIntents()
	got := e.engineGet("a") + " " + e.engineGet("b") + " " + e.engineGet("c") + " " + e.engineGet("u") + " " + e.engineGet("v")
	if got != "1 <none> row taken index" {
		t.Fatalf("after the commit: %q", got)
	}
}

// TestSavepointRollbackRefusedAfterRetryableError: after a retryable error
// the whole transaction must restart: a rollback to a savepoint says so
// (and stays retryable for DB.Txn's loop); after the restart the old
// savepoints are void and new ones work.
func TestSavepointRollbackRefusedAfterRetryableError(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("k", "0")
	a := e.db.NewTxn(ctx, "a", Snapshot)
	if _, _, err := a.Get(ctx, []byte("k")); err != nil {
		t.Fatal(err)
	}
	sp := mustSavepoint(t, a)
	b := e.db.NewTxn(ctx, "b", Snapshot)
	if err := b.Put(ctx, []byte("k"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	werr := a.Put(ctx, []byte("k"), []byte("a"))
	if !kvpb.IsRetryable(werr) {
		t.Fatalf("conflicting write: got %v, want a retryable error", werr)
	}
	err := a.RollbackToSavepoint(ctx, sp)
	if !errors.Is(err, ErrSavepointAfterRetryableError) || !kvpb.IsRetryable(err) {
		t.Fatalf("rollback after a retryable error: got %v, want ErrSavepointAfterRetryableError wrapping the retryable error", err)
	}
	if _, err := a.Savepoint(ctx); !kvpb.IsRetryable(err) {
		t.Fatalf("savepoint after a retryable error: got %v, want the retryable error", err)
	}
	if err := a.ReleaseSavepoint(ctx, sp); !kvpb.IsRetryable(err) {
		t.Fatalf("release after a retryable error: got %v, want the retryable error", err)
	}
	if err := a.PrepareForRetry(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.RollbackToSavepoint(ctx, sp); !errors.Is(err, ErrSavepointInvalid) {
		t.Fatalf("rollback to a savepoint of the previous epoch: got %v, want ErrSavepointInvalid", err)
	}
	sp2 := mustSavepoint(t, a)
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := a.RollbackToSavepoint(ctx, sp2); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, []byte("k2"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitNoIntents()
	if got := e.engineGet("k") + e.engineGet("k2"); got != "ba" {
		t.Fatalf("after the commit: %q, want ba", got)
	}
}

// TestSavepointMisuse: tokens of another transaction, and rollbacks of a
// finished one, are refused.
func TestSavepointMisuse(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	a := e.db.NewTxn(ctx, "a", Snapshot)
	b := e.db.NewTxn(ctx, "b", Snapshot)
	spA := mustSavepoint(t, a)
	if err := b.RollbackToSavepoint(ctx, spA); !errors.Is(err, ErrSavepointInvalid) {
		t.Fatalf("rollback to another txn's savepoint: %v", err)
	}
	if err := b.ReleaseSavepoint(ctx, spA); !errors.Is(err, ErrSavepointInvalid) {
		t.Fatalf("release of another txn's savepoint: %v", err)
	}
	if err := b.RollbackToSavepoint(ctx, SavepointToken{}); !errors.Is(err, ErrSavepointInvalid) {
		t.Fatalf("rollback to the zero token: %v", err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.RollbackToSavepoint(ctx, spA); !errors.Is(err, ErrTxnFinished) {
		t.Fatalf("rollback after commit: %v", err)
	}
	if err := b.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSavepointInRetriedClosure: DB.Txn reruns a closure that uses
// savepoints; the retry starts a new epoch where the closure's new
// savepoints work and the rolled back writes of either attempt never
// commit.
func TestSavepointInRetriedClosure(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("k", "0")
	attempts := 0
	err := e.db.Txn(ctx, Serializable, func(ctx context.Context, txn *Txn) error {
		attempts++
		if _, _, err := txn.Get(ctx, []byte("k")); err != nil {
			return err
		}
		if err := txn.Put(ctx, []byte("kept"), []byte("yes")); err != nil {
			return err
		}
		sp, err := txn.Savepoint(ctx)
		if err != nil {
			return err
		}
		if err := txn.Put(ctx, []byte("undone"), []byte("no")); err != nil {
			return err
		}
		if err := txn.RollbackToSavepoint(ctx, sp); err != nil {
			return err
		}
		if attempts == 1 {
			// Someone else changes what we read: the commit must restart.
			e.mustPut("k", "1")
		}
		// A write over a value newer than our read of it: the refresh
		// fails and the transaction restarts.
		return txn.Put(ctx, []byte("k"), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts < 2 {
		t.Fatalf("closure ran %d times; the test needs a retry", attempts)
	}
	e.waitNoIntents()
	if got := e.engineGet("kept") + e.engineGet("undone") + e.engineGet("k"); got != "yes<none>x" {
		t.Fatalf("after the commit: %q, want yes<none>x", got)
	}
}

// TestSavepointRollbackRefusedAfterAbort: once the coordinator knows its
// transaction was aborted (here a heartbeat found the record aborted by a
// pusher), a rollback to a savepoint is refused with the abort.
func TestSavepointRollbackRefusedAfterAbort(t *testing.T) {
	e := newTestEnv(t, envOptions{db: Options{HeartbeatInterval: time.Hour}})
	ctx := context.Background()
	a := e.db.NewTxn(ctx, "a", Snapshot)
	sp := mustSavepoint(t, a)
	if err := a.Put(ctx, []byte("k"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	pushee, hb := a.mu.proto.TxnMeta, a.mu.hb
	a.mu.Unlock()
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PushTxnRequest{Key: pushee.Key, Pushee: pushee, PushType: kvpb.PushAbort, PushTo: e.clock.Now(),
		Pusher: kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: math.MaxInt32, WriteTimestamp: e.clock.Now()}}})
	if _, err := e.db.Send(ctx, ba); err != nil {
		t.Fatal(err)
	}
	if keepGoing := a.beat(hb); keepGoing {
		t.Fatal("heartbeat of an aborted record wants to keep beating")
	}
	err := a.RollbackToSavepoint(ctx, sp)
	if !errors.Is(err, ErrSavepointAfterRetryableError) || !isAborted(err, kvpb.AbortPushed) {
		t.Fatalf("rollback to savepoint of an aborted txn: got %v", err)
	}
	if err := a.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}
