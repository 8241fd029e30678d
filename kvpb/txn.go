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
	ID uuid.UUID
	// Key anchors the transaction record: the record lives on the tablet
	// holding Key (the transaction's first written key).
	Key []byte
	// Epoch increases when the transaction restarts; intents written at an
	// older epoch are overwritten or discarded.
	Epoch int32
	// WriteTimestamp is the provisional commit timestamp; intents are written
	// at it and it only moves forward.
	WriteTimestamp hlc.Timestamp
	// MinTimestamp is the timestamp the transaction started at.
	MinTimestamp hlc.Timestamp
	// Priority breaks deadlocks and push contests: higher wins.
	Priority int32
	// Sequence numbers the transaction's writes so a replayed write is
	// recognised and a savepoint can name the writes made after it
	// (Transaction.IgnoredSeqNums). The coordinator gives every batch that
	// writes a higher sequence than the one before.
	Sequence int32
}

// Short is the first eight hex digits of the ID, for logs and test output.
func (m TxnMeta) Short() string { return m.ID.String()[:8] }

// Transaction is the full state of a transaction, as its coordinator keeps
// it and as its record stores it.
type Transaction struct {
	TxnMeta
	Name   string
	Status TxnStatus
	// ReadTimestamp is where the transaction reads. It starts at
	// MinTimestamp and moves forward only by a successful refresh or a
	// restart.
	ReadTimestamp hlc.Timestamp
	// GlobalUncertaintyLimit is ReadTimestamp's wall time plus the maximum
	// clock offset at the start: a value above ReadTimestamp and at or below
	// it may have been written before the transaction started in real time.
	GlobalUncertaintyLimit hlc.Timestamp
	// LastHeartbeat is when the coordinator last proved it is alive; a
	// pending record not heartbeaten for TxnLivenessThreshold is abandoned.
	LastHeartbeat hlc.Timestamp
	// LockSpans are the keys the transaction may hold intents on; the
	// committed or aborted record keeps them so anyone can clean up.
	LockSpans []Span
	// IgnoredSeqNums are the sequence numbers (of the current epoch) whose
	// writes were rolled back to a savepoint: sorted, disjoint, inclusive
	// ranges. The transaction's own reads skip values written at them,
	// and resolving its intents at commit discards them (seqrange.go).
	// Empty for a transaction that never rolled back to a savepoint.
	IgnoredSeqNums []SeqRange
}

// Clone returns a deep-enough copy: slices are copied, keys are shared
// (keys are never mutated after creation).
func (t *Transaction) Clone() *Transaction {
	if t == nil {
		return nil
	}
	c := *t
	c.LockSpans = append([]Span(nil), t.LockSpans...)
	c.IgnoredSeqNums = append([]SeqRange(nil), t.IgnoredSeqNums...)
	return &c
}

func (t *Transaction) String() string {
	if t == nil {
		return "<nil txn>"
	}
	return fmt.Sprintf("txn %s %s epo=%d read=%s write=%s pri=%d", t.Short(), t.Status, t.Epoch, t.ReadTimestamp, t.WriteTimestamp, t.Priority)
}

// Intent is a provisional write of a transaction on one key.
type Intent struct {
	Key []byte
	Txn TxnMeta
}

// Span is [Key, EndKey); an empty EndKey means the single key Key.
type Span struct {
	Key    []byte
	EndKey []byte
}

func (s Span) String() string {
	if len(s.EndKey) == 0 {
		return fmt.Sprintf("%q", s.Key)
	}
	return fmt.Sprintf("[%q, %q)", s.Key, s.EndKey)
}
