package kv

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// heartbeat keeps a writing transaction's record alive. The first beat
// creates the record (HeartbeatTxn does); until then a pusher judges the
// transaction by its intents' MinTimestamp, which the liveness threshold
// (several heartbeat intervals) leaves room for.
//
// It stops when the transaction finishes, when the Txn's context ends, or
// when the DB closes: after that the record expires and pushers abort it
// (invariant 5). A beat that finds the record aborted (a pusher or the
// deadlock detector got there) makes the Txn's next operation fail with
// *kvpb.TransactionAbortedError.
type heartbeat struct {
	stopOnce sync.Once
	stopped  chan struct{}

	mu      sync.Mutex
	aborted error
}

// startHeartbeat starts beating for t; t.mu is held.
func (t *Txn) startHeartbeat() *heartbeat {
	hb := &heartbeat{stopped: make(chan struct{})}
	db := t.db
	db.goBackground(func() {
		tick := time.NewTicker(db.opts.HeartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-hb.stopped:
				return
			case <-t.ctx.Done():
				return
			case <-db.stopCtx.Done():
				return
			case <-tick.C:
			}
			if !t.beat(hb) {
				return
			}
		}
	})
	return hb
}

// beatNow creates (or refreshes) the record at once, for a transaction whose
// first write comes late (see prepareWritesLocked).
func (t *Txn) beatNow(ctx context.Context) error {
	t.mu.Lock()
	anchor := t.mu.proto.Key
	t.mu.Unlock()
	_, err := t.send(ctx, []kvpb.Request{&kvpb.HeartbeatTxnRequest{Key: anchor, Now: t.db.clock.Now()}}, sendOpts{})
	return err
}

// beat sends one heartbeat; it reports whether to keep beating.
func (t *Txn) beat(hb *heartbeat) bool {
	t.mu.Lock()
	txn := t.mu.proto.Clone()
	t.mu.Unlock()

	ctx, cancel := context.WithTimeout(t.db.stopCtx, t.db.opts.HeartbeatInterval)
	defer cancel()
	ba := &kvpb.BatchRequest{}
	ba.Txn = txn
	ba.Add(&kvpb.HeartbeatTxnRequest{Key: txn.Key, Now: t.db.clock.Now()})
	br, err := t.db.ds.Send(ctx, ba)
	var abortErr *kvpb.TransactionAbortedError
	switch {
	case errors.As(err, &abortErr):
		hb.setAborted(abortErr)
		return false
	case err != nil:
		// A lost beat is harmless unless it is one of many; the next tick
		// tries again.
		return true
	}
	if rec := br.Responses[0].(*kvpb.HeartbeatTxnResponse).Txn; rec.Status == kvpb.Aborted {
		hb.setAborted(&kvpb.TransactionAbortedError{Reason: t.abortReason(ctx, txn.TxnMeta)})
		return false
	}
	return true
}

// abortReason asks the record's tablet why txn was aborted, so that the
// client's error says it (an expired record is not a lost priority
// contest); AbortPushed when the tablet cannot tell.
func (t *Txn) abortReason(ctx context.Context, txn kvpb.TxnMeta) kvpb.AbortReason {
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.QueryTxnRequest{Key: txn.Key, Txn: txn})
	br, err := t.db.ds.Send(ctx, ba)
	if err != nil {
		return kvpb.AbortPushed
	}
	q, ok := br.Responses[0].(*kvpb.QueryTxnResponse)
	if !ok || !q.Found || q.Txn.Status != kvpb.Aborted {
		return kvpb.AbortPushed
	}
	return q.AbortReason
}

func (hb *heartbeat) setAborted(err error) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.aborted = err
}

func (hb *heartbeat) abortedErr() error {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.aborted
}

// stop ends the heartbeat; safe to call more than once.
func (hb *heartbeat) stop() { hb.stopOnce.Do(func() { close(hb.stopped) }) }
