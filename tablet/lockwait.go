package tablet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// lockWait is a batch's registration on the locks its evaluation met.
type lockWait struct {
	intents  []kvpb.Intent
	released []<-chan struct{}
	waiter   uuid.UUID
}

// waitForLocks waits, lock by lock, until each conflicting lock is released
// or its holder has been pushed out of the way (and the intent cleaned up),
// then returns so the batch re-evaluates. The batch holds no latches here.
func (r *Replica) waitForLocks(ctx context.Context, ba *kvpb.BatchRequest, w *lockWait) error {
	if o := kvpb.LockWaitObserverOf(ctx); o != nil {
		o.LockWait(true)
		defer o.LockWait(false)
	}
	r.metrics.LockWaiting.Add(1)
	defer r.metrics.LockWaiting.Add(-1)
	if o := r.cfg.Observe; o != nil && o.LockWait != nil {
		began := time.Now()
		defer func() { o.LockWait(time.Since(began)) }()
	}
	defer func() {
		for _, in := range w.intents {
			r.locks.dequeue(in.Key, w.waiter)
		}
	}()
	done := make(map[uuid.UUID]bool)
	for i, in := range w.intents {
		if done[in.Txn.ID] {
			continue
		}
		pushee, err := r.waitForLock(ctx, ba, in, w.released[i])
		if err != nil {
			return err
		}
		if pushee == nil {
			continue
		}
		// One push settles every intent of that holder the batch met:
		// resolve them together, in one batch per tablet.
		done[in.Txn.ID] = true
		var met [][]byte
		for _, o := range w.intents[i:] {
			if o.Txn.ID == in.Txn.ID {
				met = append(met, o.Key)
			}
		}
		if err := r.resolveMet(ctx, in.Txn, *pushee, met); err != nil {
			return err
		}
	}
	return nil
}

type pushResult struct {
	pushee kvpb.Transaction
	err    error
}

// When a waiter pushes. A push that meets a live holder fails and waits
// in the txn wait queue of the holder's record tablet, whose only work is
// then to notice an abandoned holder (no heartbeat for
// TxnLivenessThreshold) and deadlocks (pushwait.go); a released lock ends
// the wait either way. Most waits of contended writers are short (under
// pgbench's tpcb-like every transaction queues on the one branch row for
// about one commit), and pushing at once cost each of them a PushTxn, a
// goroutine and a registration on the record's tablet, CPU taken from the
// commit that holds the row. So a writer first waits LockPushDelay for the
// release, as CockroachDB's lock table does
// (kv.lock_table.coordinator_liveness_push_delay); a lock still held then
// is pushed as before, which delays the detection of a deadlock or an
// abandoned holder by that much. Pushes that can succeed at once are not
// delayed: a reader's (it only moves the holder's timestamp) and a push
// that wins on priority.

// pushDelay is how long the waiter of ba waits on in's lock before pushing
// its holder.
func (r *Replica) pushDelay(ba *kvpb.BatchRequest, in kvpb.Intent) time.Duration {
	if ba.IsReadOnly() || in.Txn.Priority == MinPriority || (ba.Txn != nil && ba.Txn.Priority == MaxPriority) {
		return 0
	}
	return max(r.cfg.LockPushDelay, 0)
}

// waitForLock waits for one lock. It returns the holder's record when a
// push got it out of the way (the caller must then resolve the intent), or
// nil when the lock was released.
func (r *Replica) waitForLock(ctx context.Context, ba *kvpb.BatchRequest, in kvpb.Intent, released <-chan struct{}) (*kvpb.Transaction, error) {
	select {
	case <-released:
		return nil, nil
	default:
	}
	// The batch's lock_timeout bounds this one wait (PostgreSQL applies it
	// to each lock acquisition, not to the statement).
	var timedOut <-chan time.Time
	if ba.LockTimeout > 0 {
		t := time.NewTimer(ba.LockTimeout)
		defer t.Stop()
		timedOut = t.C
	}
	timeout := func() error {
		r.metrics.LockTimeouts.Add(1)
		return &kvpb.WriteIntentError{Intents: []kvpb.Intent{in}, LockTimeout: true}
	}
	canceled := func() error {
		r.metrics.LockWaitsCanceled.Add(1)
		return fmt.Errorf("tablet: waiting for lock on %q: %w", in.Key, ctx.Err())
	}
	if d := r.pushDelay(ba, in); d > 0 {
		delay := time.NewTimer(d)
		select {
		case <-released:
			delay.Stop()
			return nil, nil
		case <-timedOut:
			delay.Stop()
			return nil, timeout()
		case <-ctx.Done():
			delay.Stop()
			return nil, canceled()
		case <-delay.C:
		}
	}
	// Push the holder while waiting: the push returns when the holder is
	// finished, abandoned, pushed (for a reader), or a deadlock victim, or
	// fails when we are the victim. Cancelling pushCtx cancels the push on
	// whichever node holds the holder's record (gRPC carries it), so its
	// wait in that tablet's txn wait queue ends too.
	pushCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan pushResult, 1)
	go func() {
		pushee, err := r.push(pushCtx, ba, in)
		done <- pushResult{pushee: pushee, err: err}
	}()
	select {
	case <-timedOut:
		cancel()
		<-done
		return nil, timeout()
	case <-released:
		cancel()
		// The push may have finished meanwhile with our own abort (we were
		// a deadlock victim and rolled our record back): that outcome
		// stands even though the lock is free now.
		var abt *kvpb.TransactionAbortedError
		if res := <-done; errors.As(res.err, &abt) {
			return nil, res.err
		}
		return nil, nil
	case <-ctx.Done():
		cancel()
		<-done
		return nil, canceled()
	case res := <-done:
		if res.err != nil {
			if ctx.Err() != nil {
				return nil, canceled()
			}
			return nil, res.err
		}
		return &res.pushee, nil
	}
}

// push sends a PushTxn for the intent's holder to the tablet holding its
// record. Writers want the holder aborted; readers only want it above
// their read timestamp.
func (r *Replica) push(ctx context.Context, ba *kvpb.BatchRequest, in kvpb.Intent) (kvpb.Transaction, error) {
	var pusher kvpb.Transaction
	if ba.Txn != nil {
		pusher = *ba.Txn.Clone()
	}
	req := &kvpb.PushTxnRequest{
		Key:      in.Txn.Key,
		Pusher:   pusher,
		Pushee:   in.Txn,
		PushTo:   r.pushTo(ba),
		PushType: kvpb.PushAbort,
	}
	if ba.IsReadOnly() {
		req.PushType = kvpb.PushTimestamp
	}
	pba := &kvpb.BatchRequest{Header: kvpb.Header{Now: r.clock.Now()}}
	pba.Add(req)
	br, err := r.cfg.Sender.Send(ctx, pba)
	if err != nil {
		return kvpb.Transaction{}, fmt.Errorf("tablet: push %s: %w", in.Txn.Short(), err)
	}
	resp, ok := br.Responses[0].(*kvpb.PushTxnResponse)
	if !ok {
		return kvpb.Transaction{}, fmt.Errorf("tablet: push %s: unexpected response %T", in.Txn.Short(), br.Responses[0])
	}
	return resp.Pushee, nil
}

// resolveMet cleans up the intents met after a successful push: removed if
// the holder is aborted, committed if it committed, moved to the holder's
// new write timestamp if it was only pushed.
func (r *Replica) resolveMet(ctx context.Context, holder kvpb.TxnMeta, pushee kvpb.Transaction, met [][]byte) error {
	meta := holder
	meta.WriteTimestamp = meta.WriteTimestamp.Forward(pushee.WriteTimestamp)
	// The holder may have restarted (and rewritten its intents at a newer
	// epoch) since we met its intent: resolve at the record's epoch.
	if pushee.ID == holder.ID && pushee.Epoch > meta.Epoch {
		meta.Epoch = pushee.Epoch
	}
	// A committed holder's record names the sequence numbers it rolled
	// back to savepoints: their values must not be committed.
	if err := r.resolver().ResolveIntents(ctx, meta, pushee.Status, met, pushee.IgnoredSeqNums...); err != nil {
		var mismatch *kvpb.TabletKeyMismatchError
		if errors.As(err, &mismatch) {
			// The key moved away in a split; the re-evaluation will say so.
			return nil
		}
		return fmt.Errorf("tablet: resolve intents of %s after push: %w", holder.Short(), err)
	}
	return nil
}
