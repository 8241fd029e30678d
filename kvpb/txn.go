package kvpb

import (
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/google/uuid"
)

// TxnStatus is the state of a transaction record.
type TxnStatus int8

const (
	// Pending: the transaction may still write and commit.
	Pending TxnStatus = iota
	// Committed: final; intents resolve to values at WriteTimestamp.
	Committed
	// Aborted: final; intents are discarded.
	Aborted
)

func (s TxnStatus) String() string {
	switch s {
	case Pending:
		return "PENDING"
	case Committed:
		return "COMMITTED"
	case Aborted:
		return "ABORTED"
	}
	return fmt.Sprintf("TxnStatus(%d)", int8(s))
}

// IsFinal reports whether the status can no longer change.
func (s TxnStatus) IsFinal() bool { return s == Committed || s == Aborted }

// TxnMeta is the part of a transaction that travels with each intent.
type TxnMeta struct {
	ID uuid.UUID `wire:"1"`
	// Key anchors the transaction record: the record lives on the tablet
	// holding Key (the transaction's first written key).
	Key []byte `wire:"2"`
	// Epoch increases when the transaction restarts; intents written at an
	// older epoch are overwritten or discarded.
	Epoch int32 `wire:"3"`
	// WriteTimestamp is the provisional commit timestamp; intents are written
	// at it and it only moves forward.
	WriteTimestamp hlc.Timestamp `wire:"4"`
	// MinTimestamp is the timestamp the transaction started at.
	MinTimestamp hlc.Timestamp `wire:"5"`
	// Priority breaks deadlocks and push contests: higher wins.
	Priority int32 `wire:"6"`
	// Sequence numbers the transaction's writes so a replayed write is
	// recognised and a savepoint can name the writes made after it
	// (Transaction.IgnoredSeqNums). The coordinator gives every batch that
	// writes a higher sequence than the one before.
	Sequence int32 `wire:"7"`
}

// Short is the first eight hex digits of the ID, for logs and test output.
func (m TxnMeta) Short() string { return m.ID.String()[:8] }

// Transaction is the full state of a transaction, as its coordinator keeps
// it and as its record stores it.
type Transaction struct {
	TxnMeta `wire:"1"`
	Name    string    `wire:"2"`
	Status  TxnStatus `wire:"3"`
	// ReadTimestamp is where the transaction reads. It starts at
	// MinTimestamp and moves forward only by a successful refresh or a
	// restart.
	ReadTimestamp hlc.Timestamp `wire:"4"`
	// GlobalUncertaintyLimit is ReadTimestamp's wall time plus the maximum
	// clock offset at the start: a value above ReadTimestamp and at or below
	// it may have been written before the transaction started in real time.
	GlobalUncertaintyLimit hlc.Timestamp `wire:"5"`
	// LastHeartbeat is when the coordinator last proved it is alive; a
	// pending record not heartbeaten for TxnLivenessThreshold is abandoned.
	LastHeartbeat hlc.Timestamp `wire:"6"`
	// LockSpans are the keys the transaction may hold intents on; the
	// committed or aborted record keeps them so anyone can clean up.
	LockSpans []Span `wire:"7"`
	// IgnoredSeqNums are the sequence numbers (of the current epoch) whose
	// writes were rolled back to a savepoint: sorted, disjoint, inclusive
	// ranges. The transaction's own reads skip values written at them,
	// and resolving its intents at commit discards them (seqrange.go).
	// Empty for a transaction that never rolled back to a savepoint.
	IgnoredSeqNums []SeqRange `wire:"8"`
	// ObservedTimestamps are clock readings of the nodes the transaction
	// has visited, the first one per node, taken after the transaction (or,
	// under READ COMMITTED, its current statement's snapshot) started. On a
	// node whose reading is known, a value acknowledged before the start
	// must carry a local timestamp at or below that reading (or below the
	// lease's start), which bounds the uncertainty window there far below
	// GlobalUncertaintyLimit (LocalUncertaintyLimit; docs/architecture.md,
	// "Observed timestamps"). Coordinator state: the record does not
	// store it. A slice, not a map: the rpc codec carries no maps, and a
	// transaction visits few nodes.
	ObservedTimestamps []ObservedTimestamp `wire:"9"`
}

// ObservedTimestamp is a node's clock reading taken while serving the
// transaction.
type ObservedTimestamp struct {
	NodeID    uint64        `wire:"1"`
	Timestamp hlc.Timestamp `wire:"2"`
}

// ObservedTimestamp returns the transaction's observation of node.
func (t *Transaction) ObservedTimestamp(node uint64) (hlc.Timestamp, bool) {
	for _, o := range t.ObservedTimestamps {
		if o.NodeID == node {
			return o.Timestamp, true
		}
	}
	return hlc.Timestamp{}, false
}

// UpdateObservedTimestamp records node's reading ts, keeping the lower of
// two readings of one node: any reading taken after the start bounds what
// was acknowledged before it, and the earliest bounds it tightest.
func (t *Transaction) UpdateObservedTimestamp(node uint64, ts hlc.Timestamp) {
	for i := range t.ObservedTimestamps {
		if o := &t.ObservedTimestamps[i]; o.NodeID == node {
			if ts.Less(o.Timestamp) {
				o.Timestamp = ts
			}
			return
		}
	}
	t.ObservedTimestamps = append(t.ObservedTimestamps, ObservedTimestamp{NodeID: node, Timestamp: ts})
}

// LocalUncertaintyLimit is the uncertainty limit of the transaction on node
// (0: unknown) under a lease that started at leaseStart (zero: a lease no
// other node could have held before): min(GlobalUncertaintyLimit,
// max(observation of node, leaseStart)), or GlobalUncertaintyLimit without
// an observation of node. A value whose local timestamp is above it was
// written after the observation on this leaseholder, or under this lease
// after its start, so not acknowledged before the transaction started.
func (t *Transaction) LocalUncertaintyLimit(node uint64, leaseStart hlc.Timestamp) hlc.Timestamp {
	obs, ok := t.ObservedTimestamp(node)
	if node == 0 || !ok {
		return t.GlobalUncertaintyLimit
	}
	lim := obs.Forward(leaseStart)
	if t.GlobalUncertaintyLimit.Less(lim) {
		return t.GlobalUncertaintyLimit
	}
	return lim
}

// Clone returns a deep-enough copy: slices are copied, keys are shared
// (keys are never mutated after creation).
func (t *Transaction) Clone() *Transaction {
	if t == nil {
		return nil
	}
	c := new(Transaction)
	t.CloneInto(c)
	return c
}

// CloneInto makes c a deep copy of t, as Clone does, in memory the caller
// owns (a struct that holds the copy among other things: one object).
func (t *Transaction) CloneInto(c *Transaction) {
	*c = *t
	c.LockSpans = append([]Span(nil), t.LockSpans...)
	c.IgnoredSeqNums = append([]SeqRange(nil), t.IgnoredSeqNums...)
	c.ObservedTimestamps = append([]ObservedTimestamp(nil), t.ObservedTimestamps...)
}

func (t *Transaction) String() string {
	if t == nil {
		return "<nil txn>"
	}
	return fmt.Sprintf("txn %s %s epo=%d read=%s write=%s pri=%d", t.Short(), t.Status, t.Epoch, t.ReadTimestamp, t.WriteTimestamp, t.Priority)
}

// Intent is a provisional write of a transaction on one key.
type Intent struct {
	Key []byte  `wire:"1"`
	Txn TxnMeta `wire:"2"`
}

// Span is [Key, EndKey); an empty EndKey means the single key Key.
type Span struct {
	Key    []byte `wire:"1"`
	EndKey []byte `wire:"2"`
}

func (s Span) String() string {
	if len(s.EndKey) == 0 {
		return fmt.Sprintf("%q", s.Key)
	}
	return fmt.Sprintf("[%q, %q)", s.Key, s.EndKey)
}
