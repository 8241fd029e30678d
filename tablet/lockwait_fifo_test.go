package tablet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// A released lock is handed to its first waiter alone: the others neither
// wake nor re-evaluate until that waiter has taken the lock and released
// it in turn, so the writers get the key in the order they queued and each
// waits once (pgbench's tpcb-like, where every transaction queues on the
// one branch row). Waking them all made each release cost a re-evaluation
// per waiter and let any of them win.
func TestLockReleaseWakesFirstWaiterOnly(t *testing.T) {
	var waits atomic.Int64
	h := newHarness(t, Config{Observe: &Observers{LockWait: func(time.Duration) { waits.Add(1) }}})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		name string
		err  error
	}
	done := make(chan result, 3)
	for i, name := range []string{"B", "C", "D"} {
		h.newTxn(name, ts(int64(20+10*i)), 0)
		go func() {
			_, err := h.send(ctx, putBatch("k", name), name)
			done <- result{name, err}
		}()
		h.waitForWaiters("k", i+1)
	}
	commit := func(name string) {
		t.Helper()
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.EndTxnRequest{Key: []byte("k"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("k")}}})
		if _, err := h.send(ctx, ba, name); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
	}
	prev := "A"
	for i, want := range []string{"B", "C", "D"} {
		commit(prev)
		got := <-done
		if got.err != nil {
			t.Fatalf("%s: %v", got.name, got.err)
		}
		if got.name != want {
			t.Fatalf("release %d of k went to %s, want %s (the first in the queue)", i+1, got.name, want)
		}
		// The rest queue behind the new holder without having re-evaluated.
		h.waitForWaiters("k", 2-i)
		if n := waits.Load(); n != int64(i+1) {
			t.Fatalf("after release %d: %d lock waits ended, want %d (only the first waiter woken)", i+1, n, i+1)
		}
		prev = want
	}
	commit("D")
}

// The lock table's hand-off: a release wakes the first waiter; the rest
// stay queued on the key until it has re-evaluated; if it took the lock
// they wait for that lock, if not the next one is woken; a waiter that
// leaves the queue is dropped from it.
func TestLockTableHandOff(t *testing.T) {
	lt := newLockTable()
	a, x := kvpb.TxnMeta{ID: uuid.New()}, kvpb.TxnMeta{ID: uuid.New()}
	lt.acquire([]byte("k"), a)
	in := kvpb.Intent{Key: []byte("k"), Txn: a}
	var ws []*lockWaiter
	for range 4 {
		ws = append(ws, lt.enqueue(in, uuid.New()))
	}
	woken := func() (out []int) {
		for i, w := range ws {
			select {
			case <-w.ch:
				out = append(out, i)
			default:
			}
		}
		return out
	}
	check := func(step string, want ...int) {
		t.Helper()
		got := woken()
		if len(got) != len(want) {
			t.Fatalf("%s: woken %v, want %v", step, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: woken %v, want %v", step, got, want)
			}
		}
	}
	lt.release([]byte("k"), a.ID)
	check("release", 0)
	// Waiter 0 re-evaluated and took no lock (a read, or it gave up).
	lt.handoffDone(&lockWait{intents: []kvpb.Intent{in}, waiters: ws[:1]})
	check("first done without locking", 0, 1)
	// A done from a waiter the key was not handed to changes nothing.
	lt.handoffDone(&lockWait{intents: []kvpb.Intent{in}, waiters: ws[2:3]})
	check("done from a queued waiter", 0, 1)
	// Waiter 2 leaves (lock timeout); x takes the lock: 3 waits for it.
	lt.dequeue([]byte("k"), ws[2])
	lt.acquireUnreplicated([]byte("k"), x)
	lt.handoffDone(&lockWait{intents: []kvpb.Intent{in}, waiters: ws[1:2]})
	check("taken by another", 0, 1)
	if n := lt.numWaiters(); n != 1 {
		t.Fatalf("%d waiters on x's lock, want 1", n)
	}
	lt.releaseUnreplicated(x.ID, nil)
	check("x released", 0, 1, 3)
	if n := lt.numWaiters(); n != 0 || len(lt.queued) != 0 {
		t.Fatalf("%d waiters, %d queued keys left, want none", n, len(lt.queued))
	}
}

// A key handed to a waiter that takes no lock (its conditional put fails
// once the holder's value is committed) passes on to the next waiter when
// that one has re-evaluated: the writer behind it does not wait for its
// push (an hour here) to notice the release.
func TestLockHandOffPassesOverFailedWaiter(t *testing.T) {
	h := newHarness(t, Config{LockPushDelay: time.Hour})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	h.newTxn("B", ts(20), 0)
	h.newTxn("C", ts(30), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.ConditionalPutRequest{Key: []byte("k"), Value: []byte("b")}) // expects no value
		_, err := h.send(ctx, ba, "B")
		failed <- err
	}()
	h.waitForWaiters("k", 1)
	wrote := make(chan error, 1)
	go func() {
		_, err := h.send(ctx, putBatch("k", "c"), "C")
		wrote <- err
	}()
	h.waitForWaiters("k", 2)
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.EndTxnRequest{Key: []byte("k"), Commit: true, LockSpans: []kvpb.Span{{Key: []byte("k")}}})
	if _, err := h.send(ctx, ba, "A"); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; err == nil {
		t.Fatal("B's conditional put succeeded over A's committed value")
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writer: %v", err)
	}
}
