package kv

import (
	"sync"

	"github.com/cairn-db/cairn/hlc"
)

// Protected timestamps (issue #14). GC removes versions no read at or
// above its threshold can see; a transaction reading below that threshold
// would be refused (snapshot_too_old). So every transaction of a DB is
// registered from its start until it commits or rolls back, and
// ProtectedTimestamp tells the GC queue (through the node, which also
// publishes it for the other nodes) the lowest timestamp any of them
// reads at. Backfills and online moves are transactions, and so are
// protected like a session's.
//
// Invariant: a timestamp P returned by ProtectedTimestamp is at or below
// the read timestamp of every transaction of this DB that was open when it
// was computed or starts later (a transaction's read timestamp only moves
// forward, and a new one reads at the clock's reading when it registers,
// taken under the same lock after P's), except an AS OF SYSTEM TIME
// transaction (NewAsOfTxn) started later, which reads at a timestamp its
// caller chose in the past: P bounds it only from its registration on, so
// its reads below a threshold GC already raised fail with
// BatchTimestampBeforeGCError.
type activeTxns struct {
	mu   sync.Mutex
	txns map[*Txn]struct{}
}

// register adds t, built by mk at a clock reading taken under the lock.
func (a *activeTxns) register(clock *hlc.Clock, mk func(now hlc.Timestamp) *Txn) *Txn {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := mk(clock.Now())
	if a.txns == nil {
		a.txns = make(map[*Txn]struct{})
	}
	a.txns[t] = struct{}{}
	return t
}

func (a *activeTxns) remove(t *Txn) {
	a.mu.Lock()
	delete(a.txns, t)
	a.mu.Unlock()
}

// ProtectedTimestamp returns a timestamp at or below every read timestamp
// of this DB's open transactions and of every transaction it starts from
// now on (see activeTxns): the clock's reading, lowered to the oldest open
// transaction's read timestamp.
func (db *DB) ProtectedTimestamp() hlc.Timestamp {
	db.active.mu.Lock()
	p := db.clock.Now()
	open := make([]*Txn, 0, len(db.active.txns))
	for t := range db.active.txns {
		open = append(open, t)
	}
	db.active.mu.Unlock()
	// Read outside the registry's lock: finishLocked takes it under the
	// transaction's.
	for _, t := range open {
		if ts := t.ReadTimestamp(); ts.Less(p) {
			p = ts
		}
	}
	return p
}

// OpenTxns counts the transactions ProtectedTimestamp accounts for.
func (db *DB) OpenTxns() int {
	db.active.mu.Lock()
	defer db.active.mu.Unlock()
	return len(db.active.txns)
}

// Schema-change drains (sql/ddl's online index build). A step of an
// online schema change commits a descriptor version; before the next step
// it waits until no transaction that could still write through the
// version before it is open anywhere (every writer of that version
// commits or fails by then, catalog.WriterKey). A transaction that reads
// descriptors only at its read timestamp and starts after the step's
// commit resolves the new version, so the wait is over once the lowest
// read timestamp of the open transactions, cluster-wide, is above the
// step's commit timestamp: DrainTimestamp is that bound for this DB.
//
// It differs from ProtectedTimestamp only by leaving out transactions
// that write no rows through a descriptor and would otherwise hold a
// drain up: the schema change's own statement transaction (open around
// the job it runs) and a backfill's reads.

// ExemptFromDrain leaves t out of DrainTimestamp. The caller guarantees
// t writes no table rows from now on.
func (t *Txn) ExemptFromDrain() {
	t.mu.Lock()
	t.mu.drainExempt = true
	t.mu.Unlock()
}

func (t *Txn) drainExempt() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.drainExempt
}

// DrainTimestamp returns a timestamp at or below the read timestamp of
// every open transaction of this DB not exempted (ExemptFromDrain), and of
// every transaction it starts from now on.
func (db *DB) DrainTimestamp() hlc.Timestamp {
	db.active.mu.Lock()
	p := db.clock.Now()
	open := make([]*Txn, 0, len(db.active.txns))
	for t := range db.active.txns {
		open = append(open, t)
	}
	db.active.mu.Unlock()
	for _, t := range open {
		if t.drainExempt() {
			continue
		}
		if ts := t.ReadTimestamp(); ts.Less(p) {
			p = ts
		}
	}
	return p
}
