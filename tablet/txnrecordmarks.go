package tablet

import (
	"sync"

	"github.com/cairn-db/cairn/hlc"
	"github.com/google/uuid"
)

// Transaction record marks: what lets a one-phase commit skip reading its
// transaction's record (evaluateOnePC, invariant 14). A transaction has a
// record only if one was written for it: by a HeartbeatTxn, a PushTxn (a
// pushed timestamp or an abort) or an EndTxn that left intents elsewhere
// (evaluate_txn.go, every such write goes through evalCtx.putTxnRecord).
// The leaseholder marks each transaction it evaluates such a write for,
// before the write is proposed, so any batch that evaluates after it (a
// one-phase commit latches the record's key, as every record writer does)
// sees the mark. What the marks cannot know of is a record written before
// they began: before this process opened the replica, by another node's
// lease, through a snapshot, or by a mark forgotten to bound memory. Each
// of those raises the low-water mark to this node's clock plus the maximum
// offset, which is above the MinTimestamp of every transaction that had
// begun by then (a transaction's MinTimestamp is a clock reading at its
// start, fixed for its life, and no clock runs more than the maximum
// offset ahead of this one). So a transaction with no mark whose
// MinTimestamp is above the low-water mark began after every record the
// marks do not know of was written, and has none. A transaction that began
// before this lease still reads its record.
//
// A mark is kept even if its proposal fails or the record is later
// deleted (then a tombstone guards it, invariant 8): a mark only ever
// makes a commit read.

// maxTxnRecordMarks bounds the marks a replica keeps.
const maxTxnRecordMarks = 1 << 14

type txnRecordMarks struct {
	mu       sync.Mutex
	lowWater hlc.Timestamp
	ids      map[uuid.UUID]struct{}
}

// horizon is this node's clock plus the maximum offset: above every clock
// reading any node can have taken by now, so above the MinTimestamp of
// every transaction begun by now (see above), and the start of a lease
// other nodes may have held (LeaseAcquired).
func horizon(clock *hlc.Clock) hlc.Timestamp {
	ts := clock.Now()
	ts.WallTime += int64(clock.MaxOffset())
	return ts
}

func newTxnRecordMarks(lowWater hlc.Timestamp) *txnRecordMarks {
	return &txnRecordMarks{lowWater: lowWater, ids: map[uuid.UUID]struct{}{}}
}

// mark records that transaction id may have a record. Past the bound it
// forgets every mark and raises the low-water mark over them.
func (m *txnRecordMarks) mark(id uuid.UUID, clock *hlc.Clock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ids[id]; ok {
		return
	}
	if len(m.ids) >= maxTxnRecordMarks {
		clear(m.ids)
		m.lowWater = m.lowWater.Forward(horizon(clock))
	}
	m.ids[id] = struct{}{}
}

// mayExist reports whether transaction id, which began at minTS, may have
// a record: it was marked, or began at or below the low-water mark.
func (m *txnRecordMarks) mayExist(id uuid.UUID, minTS hlc.Timestamp) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if minTS.LessEq(m.lowWater) {
		return true
	}
	_, ok := m.ids[id]
	return ok
}

// raiseLowWater makes every transaction that began by now read its
// record: records were written that the marks did not see.
func (m *txnRecordMarks) raiseLowWater(clock *hlc.Clock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lowWater = m.lowWater.Forward(horizon(clock))
}
