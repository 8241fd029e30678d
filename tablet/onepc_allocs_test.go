package tablet

import (
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// TestOnePCEvalAllocs counts the objects a one-phase commit's evaluation
// allocates beyond its writes' own work, in a batch shaped like
// simple-update's (a strict check, a row lock, the row's rewrite, a
// generated row, EndTxn). The answer, its responses, the committed
// transaction, both evaluation contexts with their Proposals and the
// writes' header are one object (onePC): 33 objects in all, 42 with
// each made on its own (the rest is the checks' and writes' reads and
// encodings, in which a cut shows here too).
func TestOnePCEvalAllocs(t *testing.T) {
	h := newHarness(t, Config{})
	row := []byte("\x03onepcallocs/")
	hist := []byte("\x03onepcallocshist/")
	writer := []byte("\x03onepcallocswriter")
	for _, k := range [][]byte{row, writer} {
		if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: k, Value: []byte("v10")}); err != nil {
			t.Fatal(err)
		}
	}
	txn := h.newTxn("committer", wallTS(20), 0)
	txn.Key = row
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.RefreshRequest{Key: writer, From: wallTS(15), Strict: true})
	ba.Add(&kvpb.LockRequest{Key: row, EndKey: keys.PrefixEnd(row)})
	ba.Add(&kvpb.PutRequest{Key: row, Value: []byte("v20")})
	ba.Add(&kvpb.ConditionalPutRequest{Key: hist, Value: []byte("h")})
	ba.Add(&kvpb.EndTxnRequest{Key: row, Commit: true, LockSpans: []kvpb.Span{{Key: row, EndKey: keys.PrefixEnd(row)}, {Key: hist}}})
	ba.Txn = txn.Clone()
	desc := h.r.Desc()
	if !isOnePC(ba, desc) {
		t.Fatal("the batch does not have a one-phase commit's shape")
	}
	eval := func() {
		prop, br, err := h.r.evaluateOnePC(ba, desc)
		if err != nil {
			t.Fatal(err)
		}
		if !br.OnePhaseCommit || br.Txn.Status != kvpb.Committed || len(br.Responses) != len(ba.Requests) || len(prop.Repr) == 0 {
			t.Fatalf("not a one-phase commit: %+v", br)
		}
	}
	eval()
	const want = 33
	if got := testing.AllocsPerRun(50, eval); got > want && !raceEnabled {
		t.Errorf("a one-phase commit's evaluation allocated %.0f objects, want at most %d", got, want)
	}
}

// TestWaitProposalAllocs: a proposer waiting for its answer takes its
// lease-check ticker from a pool of stopped ones (leaseCheckers) instead
// of making one (three objects per write).
func TestWaitProposalAllocs(t *testing.T) {
	h := newHarness(t, Config{})
	pp := &pendingProposal{done: make(chan error, 1)}
	got := testing.AllocsPerRun(100, func() {
		pp.done <- nil
		if err := h.r.waitProposal(nil, 0, 0, pp, nil); err != nil {
			t.Fatal(err)
		}
	})
	if got > 0 && !raceEnabled {
		t.Errorf("waiting for an answered proposal allocated %.0f objects, want 0", got)
	}
}
