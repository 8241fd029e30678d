package tablet

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
)

// Finished transaction records go (invariant 8): an EndTxn that resolves
// every intent itself leaves none, a GC request deletes a final record
// (never a pending one), and what is left is a tombstone that answers
// every late or replayed request the way the record did, and keeps a
// record from being created again.
func TestTxnRecordCleanupGuard(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	endTxn := func(name string, commit bool) error {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.EndTxnRequest{Key: h.txn(name).Key, Commit: commit, LockSpans: h.writes[name]})
		_, err := h.send(ctx, ba, name)
		return err
	}
	heartbeat := func(name string) (*kvpb.HeartbeatTxnResponse, error) {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.HeartbeatTxnRequest{Key: h.txn(name).Key, Now: ts(100)})
		br, err := h.send(ctx, ba, name)
		if err != nil {
			return nil, err
		}
		return br.Responses[0].(*kvpb.HeartbeatTxnResponse), nil
	}
	records := func() int {
		n := 0
		lo, hi := keys.TxnRecordSpan(keys.Min, keys.Max)
		it, err := h.eng.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		return n
	}

	// A commits: no record is left; a late heartbeat sees COMMITTED, a
	// replayed commit is a status error, not a second commit.
	h.newTxn("A", ts(10), 0)
	if _, err := h.send(ctx, putBatch("a", "a1"), "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := heartbeat("A"); err != nil { // creates the record
		t.Fatal(err)
	}
	if err := endTxn("A", true); err != nil {
		t.Fatal(err)
	}
	if n := records(); n != 0 {
		t.Fatalf("%d records after a commit that resolved every intent", n)
	}
	if hb, err := heartbeat("A"); err != nil || hb.Txn.Status != kvpb.Committed {
		t.Fatalf("late heartbeat of a committed txn: %+v, %v", hb, err)
	}
	var status *kvpb.TransactionStatusError
	if err := endTxn("A", true); !errors.As(err, &status) || status.Status != kvpb.Committed {
		t.Fatalf("replayed commit: %v", err)
	}

	// B rolls back: a replayed commit fails as aborted and writes nothing.
	h.newTxn("B", ts(20), 0)
	if _, err := h.send(ctx, putBatch("b", "b1"), "B"); err != nil {
		t.Fatal(err)
	}
	if err := endTxn("B", false); err != nil {
		t.Fatal(err)
	}
	h.txn("B").Status = kvpb.Pending // a coordinator that never heard
	var aborted *kvpb.TransactionAbortedError
	if err := endTxn("B", true); !errors.As(err, &aborted) {
		t.Fatalf("replayed commit of a rolled back txn: %v", err)
	}
	if n := records(); n != 0 {
		t.Fatalf("%d records after a replayed commit", n)
	}

	// A final record left for intents elsewhere goes with a GC request
	// naming it; a pending one stays.
	c := h.newTxn("C", ts(30), 0)
	c.Key = []byte("c")
	d := h.newTxn("D", ts(30), 0)
	d.Key = []byte("d")
	final := *c.Clone()
	final.Status = kvpb.Committed
	b := h.eng.NewBatch()
	for _, rec := range []*kvpb.Transaction{&final, d} {
		if err := mvcc.PutTxnRecord(b, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	gc := &kvpb.BatchRequest{}
	gc.Add(&kvpb.GCRequest{Key: []byte("c"), EndKey: []byte("e"), TxnRecords: []kvpb.TxnMeta{c.TxnMeta, d.TxnMeta}})
	br, err := h.send(ctx, gc, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := br.Responses[0].(*kvpb.GCResponse).TxnRecordsRemoved; n != 1 {
		t.Fatalf("GC removed %d records, want the final one only", n)
	}
	if _, found, _ := mvcc.GetTxnRecord(h.eng, d.Key, d.ID); !found {
		t.Fatalf("GC removed a pending record")
	}
	if hb, err := heartbeat("C"); err != nil || hb.Txn.Status != kvpb.Committed {
		t.Fatalf("heartbeat after the record's GC: %+v, %v", hb, err)
	}

	// After a lease change the tombstones are gone, and the low-water mark
	// stands for them: a transaction older than it without a record can
	// never create one, and a pusher meeting its intent aborts it.
	e := h.newTxn("E", ts(40), 0)
	if _, err := h.send(ctx, putBatch("e", "e1"), "E"); err != nil {
		t.Fatal(err)
	}
	h.r.tombs.raiseLowWater(ts(50))
	push := &kvpb.BatchRequest{Header: kvpb.Header{Now: ts(60)}}
	push.Add(&kvpb.PushTxnRequest{Key: e.Key, Pushee: h.txn("E").TxnMeta, PushType: kvpb.PushAbort})
	br, err = h.send(ctx, push, "")
	if err != nil {
		t.Fatal(err)
	}
	if st := br.Responses[0].(*kvpb.PushTxnResponse).Pushee.Status; st != kvpb.Aborted {
		t.Fatalf("push of a txn that cannot create its record: %s", st)
	}
	if hb, err := heartbeat("E"); err != nil || hb.Txn.Status != kvpb.Aborted {
		t.Fatalf("heartbeat of the pushed txn: %+v, %v", hb, err)
	}
	// F never wrote a record and nobody pushed it: it cannot create one.
	h.newTxn("F", ts(45), 0).Key = []byte("f")
	if _, err := heartbeat("F"); !errors.As(err, &aborted) {
		t.Fatalf("a heartbeat created the record of a txn older than the low-water mark: %v", err)
	}
	if _, err := heartbeat("D"); err != nil { // its record exists
		t.Fatal(err)
	}
}
