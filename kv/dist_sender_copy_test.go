package kv

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// answerSender answers every batch with the same response, whose
// transaction is the tablet's own (as tablet.Replica.evaluate's copy
// is), and records the transaction it was sent.
type answerSender struct {
	br   kvpb.BatchResponse
	sent *kvpb.Transaction
}

func (s *answerSender) Send(_ context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	s.sent = ba.Txn
	br := s.br
	return &br, nil
}

// TestSendWholeCopiesNoTxn: a transactional batch on one tablet is sent
// with the caller's transaction, not a copy (nothing below the
// DistSender writes it), and answered with the tablet's, not a copy of
// it. The two copies were two objects each per batch.
func TestSendWholeCopiesNoTxn(t *testing.T) {
	f := newFakeTablets()
	s := &answerSender{}
	ds := NewDistSender(s, NewTabletCache(f), hlc.NewClock(hlc.NewManualClock(1).UnixNano, 0), 4)
	ctx := context.Background()
	txn := &kvpb.Transaction{ObservedTimestamps: []kvpb.ObservedTimestamp{{NodeID: 1}}}
	answer := &kvpb.Transaction{ObservedTimestamps: []kvpb.ObservedTimestamp{{NodeID: 1}}}
	s.br = kvpb.BatchResponse{Responses: []kvpb.Response{&kvpb.GetResponse{}}, Txn: answer}
	ba := &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.GetRequest{Key: []byte("k")}}}
	ba.Txn = txn
	br, err := ds.Send(ctx, ba)
	if err != nil {
		t.Fatal(err)
	}
	if s.sent != txn {
		t.Errorf("the tablet was sent a copy of the transaction")
	}
	if br.Txn != answer {
		t.Errorf("the answer's transaction is a copy of the tablet's")
	}
	if raceEnabled {
		return
	}
	// Send's copy of the batch, the sub-batch, the response and
	// answerSender's copy of its answer (8 with the two copies).
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ds.Send(ctx, ba); err != nil {
			t.Fatal(err)
		}
	}); n > 4 {
		t.Errorf("Send allocates %.0f objects, want at most 4", n)
	}
}
