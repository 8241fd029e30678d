package kv

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// beatCounter counts the HeartbeatTxn requests sent through it.
type beatCounter struct {
	kvpb.Sender
	beats atomic.Int64
}

func (s *beatCounter) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	for _, r := range ba.Requests {
		if _, ok := r.(*kvpb.HeartbeatTxnRequest); ok {
			s.beats.Add(1)
		}
	}
	return s.Sender.Send(ctx, ba)
}

// TestHeartbeatStartsNoGoroutine: a writing transaction's heartbeat
// starts no goroutine until a beat is due (a goroutine per transaction
// that waited on a ticker was started, woken and ended by every
// transaction, most of which end before their first beat); beats come
// at each interval while it runs, and none once it stopped.
func TestHeartbeatStartsNoGoroutine(t *testing.T) {
	t.Run("no goroutine", func(t *testing.T) {
		e := newTestEnv(t, envOptions{db: Options{HeartbeatInterval: time.Hour}})
		ctx := context.Background()
		before := runtime.NumGoroutine()
		var txns []*Txn
		for i := range 50 {
			txn := e.db.NewTxn(ctx, "t", Snapshot)
			if err := txn.Put(ctx, []byte{'k', byte(i)}, []byte("v")); err != nil {
				t.Fatal(err)
			}
			txns = append(txns, txn)
		}
		// Goroutines of the node's own come and go; 50 heartbeats'
		// would be 50 more.
		if n := runtime.NumGoroutine() - before; n >= 25 {
			t.Errorf("50 transactions' heartbeats started %d goroutines", n)
		}
		for _, txn := range txns {
			if err := txn.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("beats", func(t *testing.T) {
		var bc *beatCounter
		e := newTestEnv(t, envOptions{db: Options{HeartbeatInterval: time.Millisecond},
			wrapSender: func(s kvpb.Sender) kvpb.Sender { bc = &beatCounter{Sender: s}; return bc }})
		ctx := context.Background()
		txn := e.db.NewTxn(ctx, "t", Snapshot)
		if err := txn.Put(ctx, []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
		// The timer sets itself again after each beat.
		for bc.beats.Load() < 3 {
			runtime.Gosched()
		}
		txn.mu.Lock()
		hb := txn.mu.hb
		txn.mu.Unlock()
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if !hb.isStopped() {
			t.Fatal("the heartbeat runs after the commit")
		}
		n := bc.beats.Load()
		txn.tick(hb) // a beat due as it stopped
		if got := bc.beats.Load(); got != n {
			t.Errorf("a stopped heartbeat beat: %d beats, was %d", got, n)
		}
	})
}

// TestHeartbeatAllocs: starting and stopping a writing transaction's
// heartbeat allocates nothing (the heartbeat is part of its Txn and the
// DB's one timer finds due beats); with a timer of its own it was three
// objects (the heartbeat, the timer and its function). Beats still come
// for every running heartbeat and stop with each: two transactions
// beat, and once one ends only the other does.
func TestHeartbeatAllocs(t *testing.T) {
	t.Run("allocs", func(t *testing.T) {
		e := newTestEnv(t, envOptions{db: Options{HeartbeatInterval: time.Hour}})
		txn := e.db.NewTxn(context.Background(), "t", Snapshot)
		run := func() {
			txn.mu.Lock()
			txn.hb = heartbeat{}
			hb := txn.startHeartbeat()
			txn.mu.Unlock()
			hb.stop()
		}
		run()
		if got := testing.AllocsPerRun(100, run); got != 0 && !raceEnabled {
			t.Errorf("a heartbeat's start and stop allocated %.0f objects, want 0", got)
		}
		if err := txn.Rollback(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("beats", func(t *testing.T) {
		var bc *beatCounter
		e := newTestEnv(t, envOptions{db: Options{HeartbeatInterval: time.Millisecond},
			wrapSender: func(s kvpb.Sender) kvpb.Sender { bc = &beatCounter{Sender: s}; return bc }})
		ctx := context.Background()
		a, b := e.db.NewTxn(ctx, "a", Snapshot), e.db.NewTxn(ctx, "b", Snapshot)
		for _, txn := range []*Txn{a, b} {
			if err := txn.Put(ctx, []byte(txn.mu.proto.Name), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		// Each record is created by a beat: wait for both.
		for _, txn := range []*Txn{a, b} {
			for {
				txn.mu.Lock()
				proto := txn.mu.proto.Clone()
				txn.mu.Unlock()
				ba := &kvpb.BatchRequest{}
				ba.Add(&kvpb.QueryTxnRequest{Key: proto.Key, Txn: proto.TxnMeta})
				br, err := e.db.Send(ctx, ba)
				if err != nil {
					t.Fatal(err)
				}
				if br.Responses[0].(*kvpb.QueryTxnResponse).Found {
					break
				}
				runtime.Gosched()
			}
		}
		if err := a.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if !a.hb.isStopped() || b.hb.isStopped() {
			t.Fatalf("after a's commit: a's heartbeat stopped %t, b's %t", a.hb.isStopped(), b.hb.isStopped())
		}
		n := bc.beats.Load()
		for bc.beats.Load() < n+3 {
			runtime.Gosched()
		}
		e.db.beats.mu.Lock()
		first, next := e.db.beats.first, e.db.beats.first.next
		e.db.beats.mu.Unlock()
		if first != &b.hb || next != nil {
			t.Errorf("running heartbeats after a's commit: %p then %p, want b's (%p) alone", first, next, &b.hb)
		}
		if err := b.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
