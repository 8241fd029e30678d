package tablet

import (
	"sync"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// txnWaitQueue holds the pushes that failed against a transaction whose
// record lives on this tablet, until that transaction finishes, expires or
// is chosen as a deadlock victim.
//
// It is also the local piece of the cluster-wide wait-for graph: each
// waiting push knows (from its own periodic QueryTxn of the pusher) which
// transactions wait, transitively, on its pusher, and QueryTxn of a pushee
// here answers with every waiting pusher plus those dependents. Because the
// dependents travel only in requests and responses, the graph works across
// tablets and nodes without a central detector (invariant 7).
type txnWaitQueue struct {
	mu sync.Mutex
	// byPushee maps a pushee to the pushes waiting on it.
	byPushee map[uuid.UUID][]*pushWaiter
}

// pushWaiter is one waiting PushTxn.
type pushWaiter struct {
	pusher kvpb.TxnMeta
	pushee uuid.UUID
	// changed is closed when the pushee's record changes; it is replaced
	// under the queue's mutex each time.
	changed chan struct{}
	// deps are the transactions known to wait, transitively, on pusher.
	deps []kvpb.TxnMeta
}

func newTxnWaitQueue() *txnWaitQueue {
	return &txnWaitQueue{byPushee: make(map[uuid.UUID][]*pushWaiter)}
}

// enqueue registers a push of pushee by pusher. The caller holds the latch
// on the pushee's record so no update can slip in between the failed push
// and the registration.
func (q *txnWaitQueue) enqueue(pusher kvpb.TxnMeta, pushee uuid.UUID) *pushWaiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := &pushWaiter{pusher: pusher, pushee: pushee, changed: make(chan struct{})}
	q.byPushee[pushee] = append(q.byPushee[pushee], w)
	return w
}

func (q *txnWaitQueue) dequeue(w *pushWaiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := q.byPushee[w.pushee]
	for i, o := range ws {
		if o == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(q.byPushee, w.pushee)
	} else {
		q.byPushee[w.pushee] = ws
	}
}

// changedCh returns the channel that closes on the next change of w's
// pushee.
func (q *txnWaitQueue) changedCh(w *pushWaiter) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return w.changed
}

// notify wakes every push waiting on txn.
func (q *txnWaitQueue) notify(txn uuid.UUID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, w := range q.byPushee[txn] {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// notifyAll wakes every waiting push (on a split, whose records may have
// moved to the new tablet).
func (q *txnWaitQueue) notifyAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ws := range q.byPushee {
		for _, w := range ws {
			close(w.changed)
			w.changed = make(chan struct{})
		}
	}
}

func (q *txnWaitQueue) setDeps(w *pushWaiter, deps []kvpb.TxnMeta) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w.deps = deps
}

// waitingOn returns the transactions waiting, directly or transitively, on
// txn, as far as this tablet knows, without duplicates.
func (q *txnWaitQueue) waitingOn(txn uuid.UUID) []kvpb.TxnMeta {
	q.mu.Lock()
	defer q.mu.Unlock()
	seen := make(map[uuid.UUID]bool)
	var out []kvpb.TxnMeta
	add := func(m kvpb.TxnMeta) {
		if m.ID == uuid.Nil || seen[m.ID] {
			return
		}
		seen[m.ID] = true
		out = append(out, m)
	}
	for _, w := range q.byPushee[txn] {
		add(w.pusher)
		for _, d := range w.deps {
			add(d)
		}
	}
	return out
}

// deadlockVictim picks the transaction a cycle through a and b aborts: the
// lower priority, and on a tie the larger ID. Every member of the cycle
// applies the same rule to the same pair, so they agree without talking.
func deadlockVictim(a, b kvpb.TxnMeta) kvpb.TxnMeta {
	switch {
	case a.Priority < b.Priority:
		return a
	case b.Priority < a.Priority:
		return b
	}
	if compareIDs(a.ID, b.ID) > 0 {
		return a
	}
	return b
}

func compareIDs(a, b uuid.UUID) int {
	for i := range a {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}
