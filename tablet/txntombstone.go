package tablet

import (
	"bytes"
	"sync"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// Transaction record tombstones: the guard that lets final transaction
// records be deleted (invariant 8), as CockroachDB's timestamp-cache
// check before creating a record (CanCreateTxnRecord) does. Once a
// finished transaction's record is gone, a late or replayed HeartbeatTxn
// or EndTxn would find no record and could create one, reviving the
// transaction (a replayed commit of an aborted transaction whose intents
// are gone would "succeed"), and a pusher meeting no record could take a
// committed transaction for a live one. So every replica remembers, for
// each record its tablet deleted (the deletion's proposal carries the
// tombstone through the log, Proposal.TxnTombstones), the transaction's
// write timestamp, and the leaseholder refuses to create a record for a
// transaction that started at or below the tombstone or below the
// low-water mark, which stands for every tombstone the replica does not
// remember: those of before a restart or of before the replica existed
// (it starts at the clock's reading), and those forgotten to bound memory
// (raised to the newest forgotten). A new lease needs no raise: it begins
// only once its replica applied every entry of earlier terms. A transaction refused a record can
// never commit, so a pusher that finds none for it may take it for
// aborted.
//
// This is separate from the timestamp cache because that one's low-water
// mark follows reads: under a read-heavy load it rises to seconds ago,
// and every transaction older than that without a record yet would be
// refused one. Tombstones follow only finished transactions.

// maxTxnTombstones bounds the tombstones a replica remembers.
const maxTxnTombstones = 1 << 16

type txnTombstones struct {
	mu       sync.Mutex
	lowWater hlc.Timestamp
	marks    map[uuid.UUID]txnTombstone
}

// txnTombstone is a deleted record: the transaction's final status and
// write timestamp, and its anchor (the record's key), which says which
// side of a split keeps it.
type txnTombstone struct {
	status kvpb.TxnStatus
	ts     hlc.Timestamp
	anchor []byte
}

func newTxnTombstones(lowWater hlc.Timestamp) *txnTombstones {
	return &txnTombstones{lowWater: lowWater, marks: map[uuid.UUID]txnTombstone{}}
}

// add records that txn's final record (status) was deleted.
func (t *txnTombstones) add(txn kvpb.TxnMeta, status kvpb.TxnStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.marks[txn.ID] = txnTombstone{status: status, ts: txn.WriteTimestamp.Forward(t.marks[txn.ID].ts), anchor: bytes.Clone(txn.Key)}
	if len(t.marks) <= maxTxnTombstones {
		return
	}
	// Forget the older half: the low-water mark rises to cover them.
	var all []hlc.Timestamp
	for _, m := range t.marks {
		all = append(all, m.ts)
	}
	cut := nthTimestamp(all, len(all)/2)
	for k, m := range t.marks {
		if m.ts.LessEq(cut) {
			delete(t.marks, k)
		}
	}
	t.lowWater = t.lowWater.Forward(cut)
}

// status returns the final status of transaction id if its tombstone is
// remembered.
func (t *txnTombstones) status(id uuid.UUID) (kvpb.TxnStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.marks[id]
	return m.status, ok
}

// nthTimestamp returns the n-th smallest of ts (reordering it).
func nthTimestamp(ts []hlc.Timestamp, n int) hlc.Timestamp {
	lo, hi := 0, len(ts)-1
	for lo < hi {
		p := ts[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for ts[i].Less(p) {
				i++
			}
			for p.Less(ts[j]) {
				j--
			}
			if i <= j {
				ts[i], ts[j] = ts[j], ts[i]
				i++
				j--
			}
		}
		switch {
		case n <= j:
			hi = j
		case n >= i:
			lo = i
		default:
			return ts[n]
		}
	}
	return ts[n]
}

// canCreate reports whether a record may be created for transaction id,
// which started at minTS.
func (t *txnTombstones) canCreate(id uuid.UUID, minTS hlc.Timestamp) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lowWater.Forward(t.marks[id].ts).Less(minTS)
}

func (t *txnTombstones) raiseLowWater(ts hlc.Timestamp) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lowWater = t.lowWater.Forward(ts)
}

// splitOff moves the tombstones of records anchored at or after key (the
// right side of a split: those records live there) into a new set for
// the right side, with the same low-water mark. It used to copy every
// tombstone to the right side: each split then copied up to
// maxTxnTombstones of them, and the tablets split off one after another
// (a 2,048-bucket index) each kept their own copy, 17 GB of them after
// bench/ddl's 10,000 tables (issue 16).
func (t *txnTombstones) splitOff(key []byte) *txnTombstones {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := newTxnTombstones(t.lowWater)
	for k, v := range t.marks {
		if bytes.Compare(v.anchor, key) >= 0 {
			c.marks[k] = v
			delete(t.marks, k)
		}
	}
	return c
}
