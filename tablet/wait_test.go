package tablet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

func ts(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }

func putBatch(k, v string) *kvpb.BatchRequest {
	ba := &kvpb.BatchRequest{}
	return ba.Add(&kvpb.PutRequest{Key: []byte(k), Value: []byte(v)})
}

// waitForWaiters polls the lock table until key has n waiters.
func (h *harness) waitForWaiters(key string, n int) {
	for {
		h.r.locks.mu.Lock()
		l, ok := h.r.locks.locks[key]
		got := 0
		if ok {
			got = len(l.waiters)
		}
		h.r.locks.mu.Unlock()
		if got == n {
			return
		}
		waitABit()
	}
}

// A writer meeting an intent waits in the lock's queue and proceeds once
// the holder commits and its intent is resolved.
func TestLockWaitWakesOnResolve(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	h.newTxn("B", ts(20), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.send(ctx, putBatch("k", "b"), "B")
		done <- err
	}()
	h.waitForWaiters("k", 1)
	select {
	case err := <-done:
		t.Fatalf("writer finished while the lock was held: %v", err)
	default:
	}
	commit := &kvpb.BatchRequest{}
	commit.Add(&kvpb.EndTxnRequest{Key: []byte("k"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("k")}}})
	if _, err := h.send(ctx, commit, "A"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter failed: %v", err)
	}
	in := h.r.locks.String()
	if want := `"k" holder=` + h.txn("B").Short() + " waiters=0\n"; in != want {
		t.Fatalf("lock table = %q, want %q", in, want)
	}
}

// WaitError fails at once with the WriteIntentError; nothing is queued.
func TestLockWaitPolicyError(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	h.newTxn("B", ts(20), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	ba := putBatch("k", "b")
	ba.WaitPolicy = kvpb.WaitError
	_, err := h.send(ctx, ba, "B")
	var wie *kvpb.WriteIntentError
	if !errors.As(err, &wie) || len(wie.Intents) != 1 || string(wie.Intents[0].Key) != "k" {
		t.Fatalf("err = %v, want a WriteIntentError on k", err)
	}
	h.waitForWaiters("k", 0)
}

// A waiting request gives up when its context is cancelled.
func TestLockWaitCancel(t *testing.T) {
	h := newHarness(t, Config{})
	h.newTxn("A", ts(10), 0)
	h.newTxn("B", ts(20), 0)
	if _, err := h.send(context.Background(), putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.send(ctx, putBatch("k", "b"), "B")
		done <- err
	}()
	h.waitForWaiters("k", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	h.waitForWaiters("k", 0)
}

// A batch with a LockTimeout gives up on a lock held longer than that with
// a WriteIntentError marked LockTimeout, leaves the queue, and leaves the
// holder alone (lock_timeout fails the waiter, never the holder).
func TestLockWaitLockTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	h.newTxn("B", ts(20), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	ba := putBatch("k", "b")
	ba.LockTimeout = 50 * time.Millisecond
	_, err := h.send(ctx, ba, "B")
	var wie *kvpb.WriteIntentError
	if !errors.As(err, &wie) || !wie.LockTimeout || len(wie.Intents) != 1 || string(wie.Intents[0].Key) != "k" {
		t.Fatalf("err = %v, want a lock-timeout WriteIntentError on k", err)
	}
	h.waitForWaiters("k", 0)
	if h.r.metrics.LockTimeouts.Load() != 1 {
		t.Fatalf("LockTimeouts = %d, want 1", h.r.metrics.LockTimeouts.Load())
	}
	in, err := getIntent(h, "k")
	if err != nil || in == nil || in.Txn.ID != h.txn("A").ID {
		t.Fatalf("the holder's intent after the waiter timed out: %v, %v", in, err)
	}
}

// A reader above an intent does not wait for the writer to finish: it
// pushes the writer's timestamp above its read and reads past the moved
// intent. The writer learns of the push and cannot commit at its old
// timestamp.
func TestReaderPushesWriter(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	get := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts(30)}}
	get.Add(&kvpb.GetRequest{Key: []byte("k")})
	br, err := h.send(ctx, get, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := br.Responses[0].(*kvpb.GetResponse).Value; v != nil {
		t.Fatalf("read saw %q through a pending intent", v)
	}
	in, err := getIntent(h, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !ts(30).Less(in.Txn.WriteTimestamp) {
		t.Fatalf("intent at %s, want above the read at 30", in.Txn.WriteTimestamp)
	}
	commit := &kvpb.BatchRequest{}
	commit.Add(&kvpb.EndTxnRequest{Key: []byte("k"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("k")}}})
	_, err = h.send(ctx, commit, "A")
	var rty *kvpb.TransactionRetryError
	if !errors.As(err, &rty) {
		t.Fatalf("commit at the old timestamp: err = %v, want TransactionRetryError", err)
	}
}

// A writer meeting the intent of an abandoned transaction (no heartbeat
// for longer than the liveness threshold) aborts it through the push,
// cleans up the intent and writes.
func TestWriterRecoversAbandonedIntent(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	h.manual.Advance(DefaultTxnLivenessThreshold + time.Second)
	now := h.clock.Now()
	h.newTxn("B", now, 0)
	if _, err := h.send(ctx, putBatch("k", "b"), "B"); err != nil {
		t.Fatalf("writer over an abandoned intent: %v", err)
	}
	in, err := getIntent(h, "k")
	if err != nil || in == nil || in.Txn.ID != h.txn("B").ID {
		t.Fatalf("intent on k = %+v, %v; want B's", in, err)
	}
	commit := &kvpb.BatchRequest{}
	commit.Add(&kvpb.EndTxnRequest{Key: []byte("k"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("k")}}})
	_, err = h.send(ctx, commit, "A")
	var abt *kvpb.TransactionAbortedError
	if !errors.As(err, &abt) || abt.Reason != kvpb.AbortExpired {
		t.Fatalf("late commit of the abandoned txn: err = %v, want TransactionAbortedError(EXPIRED)", err)
	}
}

// A non-transactional read without a timestamp gets one from the tablet
// once; meeting an older intent it pushes the writer above that timestamp
// and reads past it instead of waiting or spinning.
func TestNonTxnReadPushesWithItsTimestamp(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", h.clock.Now(), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	get := &kvpb.BatchRequest{}
	get.Add(&kvpb.GetRequest{Key: []byte("k")})
	br, err := h.send(ctx, get, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := br.Responses[0].(*kvpb.GetResponse).Value; v != nil {
		t.Fatalf("read saw %q through a pending intent", v)
	}
	in, err := getIntent(h, "k")
	if err != nil || in == nil || !h.txn("A").WriteTimestamp.Less(in.Txn.WriteTimestamp) {
		t.Fatalf("intent = %+v, %v; want it pushed above A's original timestamp", in, err)
	}
}

// A non-transactional write without a timestamp that meets a newer
// committed version (here: one written straight into the engine above the
// clock, as a node with a faster clock could have) is retried above it by
// the tablet rather than failing.
func TestNonTxnWriteRetriesWriteTooOld(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	future := hlc.Timestamp{WallTime: h.clock.Now().WallTime + int64(100*time.Millisecond)}
	b := h.eng.NewBatch()
	if err := mvcc.Put(b, []byte("k"), future, []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := h.send(ctx, putBatch("k", "2"), ""); err != nil {
		t.Fatalf("server-timestamped write under a newer version: %v", err)
	}
	get := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: hlc.Timestamp{WallTime: future.WallTime + 1}}}
	get.Add(&kvpb.GetRequest{Key: []byte("k")})
	br, err := h.send(ctx, get, "")
	if err != nil {
		t.Fatal(err)
	}
	if v := br.Responses[0].(*kvpb.GetResponse).Value; string(v) != "2" {
		t.Fatalf("k = %q, want the later write", v)
	}
}

// A writer waiting on a lock does not push its holder for LockPushDelay
// (lockwait.go, "When a waiter pushes"): a lock released within it costs
// no PushTxn. A reader pushes at once all the same.
func TestLockWaitPushDelay(t *testing.T) {
	h := newHarness(t, Config{LockPushDelay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.newTxn("A", ts(10), 0)
	h.newTxn("B", ts(20), 0)
	h.newTxn("C", ts(30), 0)
	h.newTxn("D", ts(10), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.send(ctx, putBatch("r", "d"), "D"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.send(ctx, putBatch("k", "b"), "B")
		done <- err
	}()
	h.waitForWaiters("k", 1)
	// The reader meets D's intent below its timestamp and pushes D above
	// it without waiting out the delay (the context would end first).
	get := &kvpb.BatchRequest{}
	get.Add(&kvpb.GetRequest{Key: []byte("r")})
	if _, err := h.send(ctx, get, "C"); err != nil {
		t.Fatalf("reader: %v", err)
	}
	if n := h.sender.pushes.Load(); n != 1 {
		t.Fatalf("%d pushes after the reader's, want only the reader's: the waiting writer pushed", n)
	}
	commit := &kvpb.BatchRequest{}
	commit.Add(&kvpb.EndTxnRequest{Key: []byte("k"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("k")}}})
	if _, err := h.send(ctx, commit, "A"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter failed: %v", err)
	}
	if n := h.sender.pushes.Load(); n != 1 {
		t.Fatalf("%d pushes, want 1 (the reader's)", n)
	}
}

// A writer whose holder stays past LockPushDelay pushes it, so an
// abandoned holder is still aborted and the waiter proceeds.
func TestLockWaitPushesAfterDelay(t *testing.T) {
	h := newHarness(t, Config{LockPushDelay: time.Millisecond, TxnLivenessThreshold: time.Second})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	// A never heartbeats: by the clock it is long abandoned.
	h.manual.Advance(10 * time.Second)
	h.newTxn("B", h.clock.Now(), 0)
	if _, err := h.send(ctx, putBatch("k", "b"), "B"); err != nil {
		t.Fatalf("writer: %v", err)
	}
	if n := h.sender.pushes.Load(); n != 1 {
		t.Fatalf("%d pushes, want 1", n)
	}
	if in := h.r.locks.String(); in != `"k" holder=`+h.txn("B").Short()+" waiters=0\n" {
		t.Fatalf("lock table = %q", in)
	}
}
