package kv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// TestTxnBackoffCancelled: a transaction waiting out DB.Txn's backoff
// before its next attempt stops as soon as its context is cancelled
// (issue 15: retries and their backoff see the statement's context),
// with the context's error, rather than sleeping out the backoff (an hour
// here: a backoff deaf to the context would hang the test until go
// test's timeout) and running again.
func TestTxnBackoffCancelled(t *testing.T) {
	e := newTestEnv(t, envOptions{db: Options{RetryBackoff: time.Hour, MaxRetryBackoff: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan struct{})
	attempts := 0
	errc := make(chan error, 1)
	go func() {
		errc <- e.db.Txn(ctx, Serializable, func(ctx context.Context, txn *Txn) error {
			attempts++
			if err := txn.Put(ctx, []byte("k"), []byte("v")); err != nil {
				return err
			}
			if attempts == 1 {
				close(first)
			}
			return &kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable, Detail: "the test's"}
		})
	}()
	<-first
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Txn = %v, want context.Canceled", err)
	}
	if attempts != 1 {
		t.Fatalf("%d attempts, want 1 (no attempt after the cancel)", attempts)
	}
	// The attempt's write was rolled back: nothing holds k.
	if v, _, err := e.db.NewTxn(context.Background(), "", Serializable).Get(context.Background(), []byte("k")); err != nil || v != nil {
		t.Fatalf("k after the cancelled transaction: %q, %v", v, err)
	}
}

// TestRoutingBackoffCancelled: DistSender's pause between routing
// retries ends with the context's error once the context is done, and
// attempt 0 does not pause.
func TestRoutingBackoffCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := routingBackoff(ctx, 0); err != nil {
		t.Fatalf("attempt 0: %v", err)
	}
	cancel()
	// The longest pauses (50 ms): a shorter timer could fire before the
	// select on a loaded machine, and then either case may win.
	for _, attempt := range []int{7, 30} {
		if err := routingBackoff(ctx, attempt); !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d after cancel: %v, want context.Canceled", attempt, err)
		}
	}
}
