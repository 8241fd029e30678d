package tablet

import (
	"testing"

	"github.com/cairn-db/cairn/hlc"

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

// TestOnePCCachedChecksBuildNoReader: a one-phase commit whose checks
// the validation cache answers (simple-update's two: a written table's
// writer key and the row lock's span) reads nothing for them, so it
// makes no reader for them: 15 objects, 16 with storage's ReusingReader
// made up front; its seeks are its writes'. A check the cache cannot
// answer still reads, and fails the commit when a newer version is
// there.
func TestOnePCCachedChecksBuildNoReader(t *testing.T) {
	h := newHarness(t, Config{})
	// The harness checks the lock table against the engine on every
	// read that skips the lock keyspace: that read is not the node's.
	h.r.cfg.VerifyLockTable = false
	row := []byte("\x03onepclazy/")
	hist := []byte("\x03onepclazyhist/")
	w1, w2 := []byte("\x03onepclazyw1"), []byte("\x03onepclazyw2")
	for _, k := range [][]byte{row, w1, w2} {
		if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: k, Value: []byte("v10")}); err != nil {
			t.Fatal(err)
		}
	}
	desc := h.r.Desc()
	batch := func(from hlc.Timestamp) *kvpb.BatchRequest {
		txn := h.newTxn("committer", wallTS(20), 0)
		txn.Key = row
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.RefreshRequest{Key: w1, From: from, Strict: true})
		ba.Add(&kvpb.RefreshRequest{Key: w2, From: from, Strict: true})
		ba.Add(&kvpb.PutRequest{Key: row, Value: []byte("v20")})
		ba.Add(&kvpb.ConditionalPutRequest{Key: hist, Value: []byte("h")})
		ba.Add(&kvpb.EndTxnRequest{Key: row, Commit: true, LockSpans: []kvpb.Span{{Key: row}, {Key: hist}}})
		ba.Txn = txn
		return ba
	}
	ba := batch(wallTS(15))
	eval := func() {
		prop, br, err := h.r.evaluateOnePC(ba, desc)
		if err != nil {
			t.Fatal(err)
		}
		if !br.OnePhaseCommit || len(prop.Repr) == 0 {
			t.Fatalf("not a one-phase commit: %+v", br)
		}
	}
	// The first evaluation reads both writer keys and leaves their
	// newest versions in the validation cache; evaluations apply nothing.
	eval()
	seeks := h.eng.Seeks()
	eval()
	if n := h.eng.Seeks() - seeks; n != 2 {
		t.Errorf("a commit whose checks the cache answers sought %d times, want 2 (its writes)", n)
	}
	const want = 15
	if got := testing.AllocsPerRun(50, eval); got > want && !raceEnabled {
		t.Errorf("a commit whose checks the cache answers allocated %.0f objects, want at most %d", got, want)
	}
	// A check from below the key's newest version still reads it and
	// fails.
	if _, _, err := h.r.evaluateOnePC(batch(wallTS(5)), desc); err == nil {
		t.Fatal("a check from below the writer key's newest version passed")
	}
}
