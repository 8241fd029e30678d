package kv

import (
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// TestOnePhaseChecksCopyNoTxn: the checks a one-phase commit folds into
// its batch (bufferChecks, validationChecks without their transaction)
// copy nothing of the transaction: the copy, which the commit dropped,
// was two objects per commit each; with the transaction asked for, each
// is a copy at the right timestamps.
func TestOnePhaseChecksCopyNoTxn(t *testing.T) {
	txn := &Txn{}
	txn.mu.proto.ReadTimestamp = hlc.Timestamp{WallTime: 10}
	txn.mu.proto.WriteTimestamp = hlc.Timestamp{WallTime: 20}
	txn.mu.proto.ObservedTimestamps = []kvpb.ObservedTimestamp{{}}
	txn.mu.validate = map[string]validation{"k": {}}
	wb := newWriteBuffer()
	pgbenchBuffer(wb)
	if n := testing.AllocsPerRun(100, func() {
		if c, _ := txn.bufferChecks(wb, false); c != nil {
			t.Fatal("bufferChecks copied the transaction")
		}
		txn.mu.readSpans.reset()
		if c, _ := txn.validationChecks(false); c != nil {
			t.Fatal("validationChecks copied the transaction")
		}
	}); n > 7 && !raceEnabled {
		// The checks alone: three refreshes and their slice's growth
		// (the row key and the range lie under the row's lock), the
		// validation's slice, request and key. Under the race detector
		// (9 there) only the missing copies above are checked.
		t.Errorf("%.0f allocations, want at most 7", n)
	}
	if c, _ := txn.bufferChecks(wb, true); c == nil || c.ReadTimestamp.WallTime != 10 {
		t.Errorf("bufferChecks' transaction %v, want a copy read at 10", c)
	}
	if c, _ := txn.validationChecks(true); c == nil || c.ReadTimestamp.WallTime != 20 {
		t.Errorf("validationChecks' transaction %v, want a copy read at 20", c)
	}
}

// TestFinishCommittedCopiesNoTxn: recording a commit updates the
// transaction's record in place (the copy it made was two objects per
// commit), at the answer's write timestamp when that is higher.
func TestFinishCommittedCopiesNoTxn(t *testing.T) {
	db := &DB{}
	br := &kvpb.BatchResponse{Txn: &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{WriteTimestamp: hlc.Timestamp{WallTime: 30}}}, OnePhaseCommit: true}
	obs := []kvpb.ObservedTimestamp{{NodeID: 1}}
	txn := &Txn{}
	n := testing.AllocsPerRun(100, func() {
		*txn = Txn{db: db, iso: ReadCommitted}
		txn.mu.proto.ReadTimestamp = hlc.Timestamp{WallTime: 10}
		txn.mu.proto.WriteTimestamp = hlc.Timestamp{WallTime: 20}
		txn.mu.proto.ObservedTimestamps = obs
		if err := txn.finishCommitted(br); err != nil {
			t.Fatal(err)
		}
		if p := txn.mu.proto; p.Status != kvpb.Committed || p.WriteTimestamp.WallTime != 30 || txn.mu.commitTS.WallTime != 30 || !txn.mu.onePC {
			t.Fatalf("committed %s at %s (commitTS %s, one phase %t), want committed at 30 in one phase", p.Status, p.WriteTimestamp, txn.mu.commitTS, txn.mu.onePC)
		}
	})
	if n > 0 && !raceEnabled {
		t.Errorf("%.0f allocations, want 0", n)
	}
}
