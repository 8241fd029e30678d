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
	mu      sync.Mutex
	stopped bool
	// timer runs the next beat (tick). The beats run on a timer, not on
	// a goroutine of their own waiting for a ticker: most transactions
	// end long before their first beat (pgbench's, in a millisecond),
	// and the goroutine's start, its wake-up at the end and its ticker
	// were paid by each (TestHeartbeatStartsNoGoroutine).
	timer   *time.Timer
	aborted error
}

// startHeartbeat starts beating for t; t.mu is held.
func (t *Txn) startHeartbeat() *heartbeat {
	hb := &heartbeat{}
	hb.mu.Lock()
	hb.timer = time.AfterFunc(t.db.opts.HeartbeatInterval, func() { t.tick(hb) })
	hb.mu.Unlock()
	return hb
}

// tick sends a beat that is due, on the timer's goroutine, and sets the
// timer for the next one, unless the heartbeat stopped, the Txn's
// context ended or the DB closed (Close waits for a beat being sent, as
// for any background work: goBackground).
func (t *Txn) tick(hb *heartbeat) {
	db := t.db
	if hb.isStopped() || t.ctx.Err() != nil {
		return
	}
	db.bgMu.Lock()
	if db.closed {
		db.bgMu.Unlock()
		return
	}
	db.bg.Add(1)
	db.bgMu.Unlock()
	defer db.bg.Done()
	if db.stopCtx.Err() != nil || !t.beat(hb) {
		return
	}
	hb.mu.Lock()
	if !hb.stopped {
		hb.timer.Reset(db.opts.HeartbeatInterval)
	}
	hb.mu.Unlock()
}

func (hb *heartbeat) isStopped() bool {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.stopped
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
func (hb *heartbeat) stop() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if !hb.stopped {
		hb.stopped = true
		hb.timer.Stop()
	}
}
