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
//
// It is part of its Txn, and the DB's heartbeats (one timer for all of
// them) start its beats when they are due: most transactions end long
// before their first beat (pgbench's, in a millisecond), and a timer of
// their own (time.AfterFunc: the timer, its function and the heartbeat,
// and the runtime's timer heap on start and stop) was paid by each,
// as a goroutine waiting on a ticker was before it
// (TestHeartbeatStartsNoGoroutine, TestHeartbeatAllocs).
type heartbeat struct {
	t  *Txn
	mu sync.Mutex
	// due is when the next beat is; beating: one is being sent.
	due     time.Time
	beating bool
	stopped bool
	aborted error
	// prev and next link the running heartbeats (heartbeats.first);
	// the DB's heartbeats.mu guards them.
	prev, next *heartbeat
}

// heartbeats are a DB's running heartbeats, and the timer that looks for
// due beats every quarter interval while any runs, so a beat comes at
// most a quarter interval late (well inside the liveness threshold,
// which is several intervals).
type heartbeats struct {
	mu    sync.Mutex
	first *heartbeat
	armed bool
	timer *time.Timer
}

// sweepEvery is how often the DB's heartbeats look for due beats.
func (db *DB) sweepEvery() time.Duration { return max(db.opts.HeartbeatInterval/4, time.Microsecond) }

// startHeartbeat starts beating for t; t.mu is held.
func (t *Txn) startHeartbeat() *heartbeat {
	hb := &t.hb
	hb.t = t
	hb.due = time.Now().Add(t.db.opts.HeartbeatInterval)
	b := &t.db.beats
	b.mu.Lock()
	hb.next = b.first
	if b.first != nil {
		b.first.prev = hb
	}
	b.first = hb
	if !b.armed {
		b.armed = true
		if b.timer == nil {
			b.timer = time.AfterFunc(t.db.sweepEvery(), t.db.sweepHeartbeats)
		} else {
			b.timer.Reset(t.db.sweepEvery())
		}
	}
	b.mu.Unlock()
	return hb
}

// sweepHeartbeats starts each due beat (on a goroutine of its own, as a
// beat may wait up to an interval for its answer) and sets the timer
// again while any heartbeat runs and the DB is open.
func (db *DB) sweepHeartbeats() {
	b := &db.beats
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if db.stopCtx.Err() != nil || b.first == nil {
		b.armed = false
		return
	}
	for hb := b.first; hb != nil; hb = hb.next {
		hb.mu.Lock()
		due := !hb.stopped && !hb.beating && !now.Before(hb.due)
		if due {
			hb.beating = true
		}
		hb.mu.Unlock()
		if due {
			db.goBackground(func() { hb.t.tick(hb) })
		}
	}
	b.timer.Reset(db.sweepEvery())
}

// tick sends a beat that is due and sets the next one an interval on,
// unless the heartbeat stopped, the Txn's context ended or the DB closed
// (Close waits for a beat being sent, as for any background work:
// goBackground). A beat that finds the record aborted ends it.
func (t *Txn) tick(hb *heartbeat) {
	db := t.db
	if hb.isStopped() {
		return
	}
	if t.ctx.Err() != nil || db.stopCtx.Err() != nil || !t.beat(hb) {
		hb.stop()
		return
	}
	hb.mu.Lock()
	hb.beating = false
	hb.due = time.Now().Add(db.opts.HeartbeatInterval)
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
	was := hb.stopped
	hb.stopped = true
	hb.mu.Unlock()
	if was {
		return
	}
	b := &hb.t.db.beats
	b.mu.Lock()
	if hb.prev != nil {
		hb.prev.next = hb.next
	} else {
		b.first = hb.next
	}
	if hb.next != nil {
		hb.next.prev = hb.prev
	}
	hb.prev, hb.next = nil, nil
	b.mu.Unlock()
}
