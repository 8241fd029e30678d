package session

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cairn-db/cairn/sql/builtins"
)

// AdvisoryLocks is the node's advisory lock table (pg_advisory_lock and
// friends). It is node-local: two sessions on different nodes do not see
// each other's locks until the cluster issue (#4) moves the table into KV.
// There is no deadlock detection; statement_timeout and cancellation end
// a wait (Lock honours ctx).
type AdvisoryLocks struct {
	mu    sync.Mutex
	locks map[builtins.AdvisoryKey]map[*advisoryHolder]*holdCounts
	// wake is closed (and replaced) whenever a hold is released, waking
	// every waiter to re-check; the table is small and contention rare.
	wake chan struct{}
	// scans counts release's passes over the table (tests:
	// TestAdvisoryEndTxnNoScan).
	scans int
}

// holdCounts are one session's holds of one key. Postgres counts
// re-acquisitions: each hold needs its own unlock.
type holdCounts struct {
	sessShared, sessExcl, xactShared, xactExcl int
}

func (h *holdCounts) exclusive() bool { return h.sessExcl+h.xactExcl > 0 }
func (h *holdCounts) zero() bool {
	return h.sessShared+h.sessExcl+h.xactShared+h.xactExcl == 0
}

// NewAdvisoryLocks returns an empty lock table.
func NewAdvisoryLocks() *AdvisoryLocks {
	return &AdvisoryLocks{
		locks: make(map[builtins.AdvisoryKey]map[*advisoryHolder]*holdCounts),
		wake:  make(chan struct{}),
	}
}

// advisoryHolder is one session's view of the table; it implements
// builtins.AdvisoryLocker.
type advisoryHolder struct {
	m *AdvisoryLocks
	// xactHolds counts the transaction-level holds taken since the last
	// endTxn: a transaction that took none ends without taking the
	// node's table lock and passing over every key (every transaction's
	// end did, the prepared SELECT's included). Atomic: a statement's
	// evaluation may run off the session's goroutine.
	xactHolds atomic.Int32
}

var _ builtins.AdvisoryLocker = (*advisoryHolder)(nil)

func (m *AdvisoryLocks) holder() *advisoryHolder { return &advisoryHolder{m: m} }

// compatible reports whether h may take key in the mode asked: a
// session's own holds never conflict with each other, as in Postgres.
func (m *AdvisoryLocks) compatible(h *advisoryHolder, key builtins.AdvisoryKey, shared bool) bool {
	for other, c := range m.locks[key] {
		if other == h {
			continue
		}
		if c.exclusive() || !shared {
			return false
		}
	}
	return true
}

// Lock takes key, waiting (until ctx ends) when wait is set.
func (h *advisoryHolder) Lock(ctx context.Context, key builtins.AdvisoryKey, shared, xact, wait bool) (bool, error) {
	m := h.m
	for {
		m.mu.Lock()
		if m.compatible(h, key, shared) {
			holders := m.locks[key]
			if holders == nil {
				holders = make(map[*advisoryHolder]*holdCounts)
				m.locks[key] = holders
			}
			c := holders[h]
			if c == nil {
				c = &holdCounts{}
				holders[h] = c
			}
			if xact {
				h.xactHolds.Add(1)
			}
			switch {
			case xact && shared:
				c.xactShared++
			case xact:
				c.xactExcl++
			case shared:
				c.sessShared++
			default:
				c.sessExcl++
			}
			m.mu.Unlock()
			return true, nil
		}
		ch := m.wake
		m.mu.Unlock()
		if !wait {
			return false, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
}

// release updates key's holds of h with f and wakes waiters; the caller
// holds m.mu.
func (m *AdvisoryLocks) releaseLocked(h *advisoryHolder, key builtins.AdvisoryKey, f func(*holdCounts)) {
	holders := m.locks[key]
	c := holders[h]
	if c == nil {
		return
	}
	f(c)
	if c.zero() {
		delete(holders, h)
		if len(holders) == 0 {
			delete(m.locks, key)
		}
	}
	close(m.wake)
	m.wake = make(chan struct{})
}

// Unlock releases one session-level hold (transaction-level locks cannot
// be released early, as in Postgres).
func (h *advisoryHolder) Unlock(key builtins.AdvisoryKey, shared bool) bool {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.locks[key][h]
	if c == nil || (shared && c.sessShared == 0) || (!shared && c.sessExcl == 0) {
		return false
	}
	m.releaseLocked(h, key, func(c *holdCounts) {
		if shared {
			c.sessShared--
		} else {
			c.sessExcl--
		}
	})
	return true
}

// UnlockAll releases every session-level hold (pg_advisory_unlock_all).
func (h *advisoryHolder) UnlockAll() {
	h.release(func(c *holdCounts) { c.sessShared, c.sessExcl = 0, 0 })
}

// endTxn releases the transaction-level holds.
func (h *advisoryHolder) endTxn() {
	if h.xactHolds.Swap(0) == 0 {
		return
	}
	h.release(func(c *holdCounts) { c.xactShared, c.xactExcl = 0, 0 })
}

// close releases everything the session holds.
func (h *advisoryHolder) close() {
	h.release(func(c *holdCounts) { *c = holdCounts{} })
}

func (h *advisoryHolder) release(f func(*holdCounts)) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scans++
	for key, holders := range m.locks {
		if _, ok := holders[h]; ok {
			m.releaseLocked(h, key, f)
		}
	}
}
