package kv

import (
	"fmt"
	"strings"
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
	txn.mu.validate = []validation{{key: []byte("k")}}
	wb := newWriteBuffer()
	pgbenchBuffer(wb)
	if n := testing.AllocsPerRun(100, func() {
		if c, _ := txn.bufferChecks(wb, false, nil); c != nil {
			t.Fatal("bufferChecks copied the transaction")
		}
		txn.mu.readSpans.reset()
		if c, _ := txn.validationChecks(false, nil); c != nil {
			t.Fatal("validationChecks copied the transaction")
		}
	}); n > 7 && !raceEnabled {
		// The checks alone: three refreshes and their slice's growth
		// (the row key and the range lie under the row's lock), the
		// validation's slice, request and key. Under the race detector
		// (9 there) only the missing copies above are checked.
		t.Errorf("%.0f allocations, want at most 7", n)
	}
	// As tryOnePhase folds them: appended to the batch's one slice, sized
	// ahead, they take no slice of their own.
	dst := make([]kvpb.Request, 0, 16)
	if n := testing.AllocsPerRun(100, func() {
		_, folded := txn.bufferChecks(wb, false, dst)
		txn.mu.readSpans.reset()
		if _, folded = txn.validationChecks(false, folded); len(folded) != 4 {
			t.Fatalf("%d checks, want 4", len(folded))
		}
	}); n > 4 && !raceEnabled {
		// The three refreshes and the validation's.
		t.Errorf("folded into one slice: %.0f allocations, want at most 4", n)
	}
	if c, _ := txn.bufferChecks(wb, true, nil); c == nil || c.ReadTimestamp.WallTime != 10 {
		t.Errorf("bufferChecks' transaction %v, want a copy read at 10", c)
	}
	if c, _ := txn.validationChecks(true, nil); c == nil || c.ReadTimestamp.WallTime != 20 {
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

// TestValidationAllocs: a pgbench -N block's two registrations (and a
// statement registering its table again) cost nothing, and the
// commit's checks only their requests and slice (the map, its string
// keys and the checks' copies of them were five objects); with many
// keys, found through the index, and after a rollback to a savepoint,
// the checks are the keys registered, each at its oldest timestamp.
func TestValidationAllocs(t *testing.T) {
	txn := &Txn{}
	a, b := []byte("a"), []byte("b")
	ts := func(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }
	n := testing.AllocsPerRun(100, func() {
		txn.mu.validate = nil
		txn.ValidateAtCommit(a, ts(10))
		txn.ValidateAtCommit(b, ts(12))
		txn.ValidateAtCommit(a, ts(11))
	})
	if n > 0 && !raceEnabled {
		t.Errorf("registering: %.0f allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { txn.validationChecks(false, nil) }); n > 3 && !raceEnabled {
		t.Errorf("checks: %.0f allocations, want 3", n)
	}
	checks := func() string {
		_, reqs := txn.validationChecks(false, nil)
		var got []string
		for _, r := range reqs {
			rr := r.(*kvpb.RefreshRequest)
			got = append(got, fmt.Sprintf("%s@%d", rr.Key, rr.From.WallTime))
		}
		return strings.Join(got, " ")
	}
	if got, want := checks(), "a@10 b@12"; got != want {
		t.Errorf("checks %s, want %s", got, want)
	}
	// Many keys: past validationIndexed a map finds them.
	txn = &Txn{}
	var want []string
	for i := range 20 {
		txn.mu.proto.Sequence = int32(i)
		txn.ValidateAtCommit([]byte(fmt.Sprintf("k%02d", i)), ts(int64(100+i)))
		want = append(want, fmt.Sprintf("k%02d@%d", i, 100+i))
	}
	txn.ValidateAtCommit([]byte("k03"), ts(50))
	want[3] = "k03@50"
	if got := checks(); got != strings.Join(want, " ") {
		t.Errorf("checks %s, want %s", got, strings.Join(want, " "))
	}
	if txn.mu.validateIdx == nil {
		t.Error("20 keys without an index")
	}
	// A rollback to a savepoint taken at sequence 5 forgets the keys
	// registered by the statements after it (sequences 6 and on: k05
	// and later).
	txn.forgetValidationsAfterLocked(5)
	if got := checks(); got != strings.Join(want[:5], " ") {
		t.Errorf("after the rollback: checks %s, want %s", got, strings.Join(want[:5], " "))
	}
	if txn.mu.validateIdx != nil || txn.validationLocked([]byte("k03")) != 3 || txn.validationLocked([]byte("k12")) != -1 {
		t.Error("after the rollback the keys are not found as registered")
	}
}
