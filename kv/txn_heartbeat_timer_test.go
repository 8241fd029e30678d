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
