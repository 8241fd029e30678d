package tablet

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// waitForPush waits, in this tablet's txn wait queue, until the push can
// succeed: the pushee's record changes (it finished, or was aborted), or a
// periodic re-check finds it expired. On every tick it also asks the
// pusher's own record tablet which transactions wait on the pusher; if the
// pushee is among them there is a cycle, and the rule in deadlockVictim
// breaks it (invariant 7):
//
//   - pusher is the victim: fail the push with AbortDeadlock, and abort the
//     pusher's record so everyone waiting on it moves on;
//   - pushee is the victim: its own waiter (it is waiting too, or there
//     would be no cycle) normally does the above first; if the cycle is
//     still there on the next tick, abort the pushee here (a forced push)
//     and succeed. Waiting one tick lets the victim learn the reason
//     (AbortDeadlock) from its own waiter rather than from a record.
func (r *Replica) waitForPush(ctx context.Context, ba *kvpb.BatchRequest, w *pushWaiter) (*kvpb.PushTxnResponse, error) {
	defer r.txnWait.dequeue(w)
	req := ba.Requests[0].(*kvpb.PushTxnRequest)
	ticker := time.NewTicker(r.cfg.PushPollInterval)
	defer ticker.Stop()
	var ds deadlockState
	for {
		force := false
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("tablet: waiting to push %s: %w", req.Pushee.Short(), ctx.Err())
		case <-r.ctx.Done():
			return nil, ErrClosed
		case <-r.txnWait.changedCh(w):
		case <-ticker.C:
			victim, err := r.checkDeadlock(ctx, req, w, &ds)
			if err != nil {
				return nil, err
			}
			if victim {
				force = true
			}
		}
		br, _, next, err := r.executeOnce(ctx, ba, nil, nil, evalOptions{forceAbort: force})
		if err != nil {
			return nil, err
		}
		if next == nil {
			return br.Responses[0].(*kvpb.PushTxnResponse), nil
		}
		// Still blocked: executeOnce registered a fresh waiter; keep the
		// dependents learned so far and wait on that one instead.
		if next.push == nil {
			return nil, fmt.Errorf("tablet: push of %s met an unexpected conflict", req.Pushee.Short())
		}
		r.txnWait.setDeps(next.push, w.deps)
		r.txnWait.dequeue(w)
		w = next.push
	}
}

// checkDeadlock asks the pusher's record tablet which transactions wait on
// the pusher, records them as the pusher's dependents, and reports whether
// the pushee must be aborted as a deadlock victim. When the pusher itself
// is the victim (or was aborted meanwhile) it returns the error the pusher
// gets.
func (r *Replica) checkDeadlock(ctx context.Context, req *kvpb.PushTxnRequest, w *pushWaiter, ds *deadlockState) (pusheeVictim bool, err error) {
	pusher := req.Pusher
	if len(pusher.Key) == 0 {
		// A pusher without a record anchor holds no locks, so nobody can
		// wait on it and it cannot be in a cycle.
		return false, nil
	}
	q := &kvpb.BatchRequest{Header: kvpb.Header{Now: r.clock.Now()}}
	q.Add(&kvpb.QueryTxnRequest{Key: pusher.Key, Txn: pusher.TxnMeta})
	br, err := r.cfg.Sender.Send(ctx, q)
	if err != nil {
		return false, fmt.Errorf("tablet: query pusher %s: %w", pusher.Short(), err)
	}
	resp := br.Responses[0].(*kvpb.QueryTxnResponse)
	if resp.Found && resp.Txn.Status == kvpb.Aborted {
		reason := resp.AbortReason
		if ds.sawCycle {
			reason = kvpb.AbortDeadlock
		}
		return false, &kvpb.TransactionAbortedError{Reason: reason}
	}
	r.txnWait.setDeps(w, resp.WaitingTxns)
	inCycle := false
	for _, d := range resp.WaitingTxns {
		if d.ID == req.Pushee.ID {
			inCycle = true
			break
		}
	}
	if !inCycle {
		ds.pusheeVictimTicks = 0
		return false, nil
	}
	ds.sawCycle = true
	victim := deadlockVictim(pusher.TxnMeta, req.Pushee)
	if victim.ID == req.Pushee.ID {
		ds.pusheeVictimTicks++
		if ds.pusheeVictimTicks < 2 {
			return false, nil
		}
		r.metrics.DeadlocksBroken.Add(1)
		return true, nil
	}
	r.metrics.DeadlocksBroken.Add(1)
	// We are the victim. Abort our own record so that whoever waits on us
	// stops at once, then give up.
	r.abortSelf(ctx, pusher)
	return false, &kvpb.TransactionAbortedError{Reason: kvpb.AbortDeadlock}
}

// abortSelf rolls back the pusher's record on its tablet. It is best
// effort: if it fails, the pushers waiting on us see the cycle from their
// side, or our coordinator rolls back when it gets AbortDeadlock.
func (r *Replica) abortSelf(ctx context.Context, txn kvpb.Transaction) {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone(), Now: r.clock.Now()}}
	ba.Add(&kvpb.EndTxnRequest{Key: txn.Key, Commit: false, LockSpans: txn.LockSpans})
	_, _ = r.cfg.Sender.Send(ctx, ba)
}

// deadlockState is what one waiting push has learned about cycles.
type deadlockState struct {
	// sawCycle: some tick found the pushee waiting on the pusher.
	sawCycle bool
	// pusheeVictimTicks counts consecutive ticks that found a cycle whose
	// victim is the pushee.
	pusheeVictimTicks int
}
