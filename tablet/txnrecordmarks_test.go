package tablet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	pb "go.etcd.io/raft/v3/raftpb"
)

// onePCBatch is a one-phase commit of a Put of key.
func onePCBatch(key, value string) *kvpb.BatchRequest {
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PutRequest{Key: []byte(key), Value: []byte(value)})
	ba.Add(&kvpb.EndTxnRequest{Key: []byte(key), Commit: true, LockSpans: []kvpb.Span{{Key: []byte(key)}}})
	return ba
}

// newerTxn makes a transaction of h that began at the clock's reading a
// second after the replica opened: above the record marks' low-water
// mark, which New set to its clock plus the maximum offset (500ms).
func newerTxn(h *harness, name, anchor string) *kvpb.Transaction {
	h.manual.Advance(time.Second)
	txn := h.newTxn(name, h.clock.Now(), 0)
	txn.Key = []byte(anchor)
	return txn
}

// TestOnePCSkipsRecordRead: a one-phase commit of a transaction that began
// after the replica opened, and for which no record was written, commits
// without reading its record (a Pebble Get on every commit before); one
// that began before the replica opened still reads it.
func TestOnePCSkipsRecordRead(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	old := h.newTxn("old", wallTS(int64(100*time.Millisecond)), 0)
	old.Key = []byte("o")
	newerTxn(h, "new", "n")
	for _, tc := range []struct {
		txn, key string
		reads    int64
	}{{"new", "n", 0}, {"old", "o", 1}} {
		before := h.r.Metrics().OnePCRecordReads.Load()
		br, err := h.send(ctx, onePCBatch(tc.key, "v"), tc.txn)
		if err != nil {
			t.Fatal(err)
		}
		if !br.OnePhaseCommit {
			t.Fatalf("%s did not commit in one phase", tc.txn)
		}
		if got := h.r.Metrics().OnePCRecordReads.Load() - before; got != tc.reads {
			t.Errorf("the one-phase commit of %s read its record %d times, want %d", tc.txn, got, tc.reads)
		}
	}
}

// TestOnePCAfterRecordWrites: every way a record comes to be written
// makes a later one-phase commit of its transaction read it and act on
// it. A pusher that aborted the transaction fails the commit (nothing
// written); a pushed timestamp is not committed under; a heartbeat's
// pending record is not left behind by a commit.
func TestOnePCAfterRecordWrites(t *testing.T) {
	ctx := context.Background()
	pusher := kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: MaxPriority}}

	t.Run("aborted by a pusher", func(t *testing.T) {
		h := newHarness(t, Config{})
		txn := newerTxn(h, "T", "k")
		push := &kvpb.BatchRequest{}
		push.Add(&kvpb.PushTxnRequest{Key: txn.Key, Pushee: txn.TxnMeta, Pusher: pusher, PushType: kvpb.PushAbort})
		br, err := h.send(ctx, push, "")
		if err != nil {
			t.Fatal(err)
		}
		if st := br.Responses[0].(*kvpb.PushTxnResponse).Pushee.Status; st != kvpb.Aborted {
			t.Fatalf("pushee is %s, want aborted", st)
		}
		_, err = h.send(ctx, onePCBatch("k", "v"), "T")
		var aborted *kvpb.TransactionAbortedError
		if !errors.As(err, &aborted) {
			t.Fatalf("the one-phase commit of an aborted transaction: %v, want TransactionAbortedError", err)
		}
		if got := h.getAt(t, "k", h.clock.Now()); got != "" {
			t.Fatalf("an aborted transaction's write is visible: %q", got)
		}
	})

	t.Run("timestamp pushed", func(t *testing.T) {
		h := newHarness(t, Config{})
		txn := newerTxn(h, "T", "k")
		to := hlc.Timestamp{WallTime: txn.WriteTimestamp.WallTime + int64(time.Millisecond)}
		push := &kvpb.BatchRequest{}
		push.Add(&kvpb.PushTxnRequest{Key: txn.Key, Pushee: txn.TxnMeta, Pusher: pusher, PushType: kvpb.PushTimestamp, PushTo: to})
		if _, err := h.send(ctx, push, ""); err != nil {
			t.Fatal(err)
		}
		br, err := h.send(ctx, onePCBatch("k", "v"), "T")
		if err == nil && br.Txn.WriteTimestamp.LessEq(to) {
			t.Fatalf("committed at %s, at or below the timestamp it was pushed above (%s)", br.Txn.WriteTimestamp, to)
		}
	})

	t.Run("heartbeat", func(t *testing.T) {
		h := newHarness(t, Config{})
		txn := newerTxn(h, "T", "k")
		hb := &kvpb.BatchRequest{}
		hb.Add(&kvpb.HeartbeatTxnRequest{Key: txn.Key})
		if _, err := h.send(ctx, hb, "T"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.send(ctx, onePCBatch("k", "v"), "T"); err != nil {
			t.Fatal(err)
		}
		rec, found, err := mvcc.GetTxnRecord(h.eng, txn.Key, txn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			t.Fatalf("the commit left the record %s behind", rec.Status)
		}
	})
}

// TestOnePCAfterLeaseChange: a record written by another node's lease
// reaches this replica through the log only, with no mark of its own; a
// one-phase commit of its transaction under this replica's new lease
// still reads it, since the transaction began before the lease (the lease
// raises the marks' low-water mark).
func TestOnePCAfterLeaseChange(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{})
	g := &scriptedGroup{term: 5, leader: 2, proposed: make(chan []byte, 1)}
	h.r.SetRaft(g)
	txn := newerTxn(h, "T", "k")

	// The previous leaseholder aborts T.
	prev := newHarness(t, Config{})
	prev.manual.Advance(time.Second)
	pg := &scriptedGroup{term: 5, leader: 2, proposed: make(chan []byte, 1)}
	prev.r.SetRaft(pg)
	done := make(chan error, 1)
	go func() {
		push := &kvpb.BatchRequest{}
		push.Add(&kvpb.PushTxnRequest{Key: txn.Key, Pushee: txn.TxnMeta,
			Pusher: kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: MaxPriority}}, PushType: kvpb.PushAbort})
		_, err := prev.r.Send(ctx, push)
		done <- err
	}()
	applyEverywhere(t, <-pg.proposed, 5, 1, prev, h)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	g.mu.Lock()
	g.term, g.leader = 6, 1
	g.mu.Unlock()
	h.r.StateMachine().LeaseAcquired(6, false)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				h.manual.Advance(10 * time.Millisecond)
			}
		}
	}()
	ba := onePCBatch("k", "v")
	ba.Txn = h.txn("T").Clone()
	proposed := make(chan struct{})
	go func() {
		// Whatever this replica proposes is committed at once.
		defer close(proposed)
		select {
		case data := <-g.proposed:
			term, index := uint64(6), uint64(2)
			b := h.eng.NewBatch()
			defer b.Close()
			m := h.r.StateMachine()
			if err := m.Apply(b, &pb.Entry{Term: &term, Index: &index, Data: data}); err != nil {
				t.Error(err)
				return
			}
			if err := b.Commit(); err != nil {
				t.Error(err)
				return
			}
			m.Applied([]*pb.Entry{{Term: &term, Index: &index, Data: data}}, false)
		case <-stop:
		}
	}()
	_, err := h.r.Send(ctx, ba)
	var aborted *kvpb.TransactionAbortedError
	if !errors.As(err, &aborted) {
		t.Fatalf("the one-phase commit of a transaction the previous lease aborted: %v, want TransactionAbortedError", err)
	}
	if got := h.getAt(t, "k", hlc.Timestamp{WallTime: h.clock.Now().WallTime}); got != "" {
		t.Fatalf("an aborted transaction's write is visible: %q", got)
	}
}

// TestOnePCRefusedRecord: a transaction aborted by a pusher whose record
// was then deleted (the tombstone stands for it, txntombstone.go) commits
// neither in one phase nor in two. Its one-phase commit read the record,
// found none and committed the write of an aborted transaction.
func TestOnePCRefusedRecord(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{})
	txn := newerTxn(h, "T", "k")
	push := &kvpb.BatchRequest{}
	push.Add(&kvpb.PushTxnRequest{Key: txn.Key, Pushee: txn.TxnMeta, Pusher: kvpb.Transaction{TxnMeta: kvpb.TxnMeta{Priority: MaxPriority}}, PushType: kvpb.PushAbort})
	br, err := h.send(ctx, push, "")
	if err != nil {
		t.Fatal(err)
	}
	rec := br.Responses[0].(*kvpb.PushTxnResponse).Pushee
	if rec.Status != kvpb.Aborted {
		t.Fatalf("pushee is %s, want aborted", rec.Status)
	}
	// The aborted record's deletion, as its cleanup's apply does it.
	b := h.eng.NewBatch()
	if err := mvcc.DeleteTxnRecord(b, txn.Key, txn.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	h.r.tombs.add(rec.TxnMeta, rec.Status)

	_, err = h.send(ctx, onePCBatch("k", "v"), "T")
	var aborted *kvpb.TransactionAbortedError
	if !errors.As(err, &aborted) {
		t.Fatalf("the commit of a transaction aborted, its record deleted: %v, want TransactionAbortedError", err)
	}
	if got := h.getAt(t, "k", h.clock.Now()); got != "" {
		t.Fatalf("an aborted transaction committed a write: %q", got)
	}
}
