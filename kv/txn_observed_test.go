package kv

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// stampSender plays a remote leaseholder (node 9) that stamps its reading
// into every transactional answer, as a replicated replica does.
type stampSender struct {
	kvpb.Sender
	next hlc.Timestamp
}

func (s *stampSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	br, err := s.Sender.Send(ctx, ba)
	if err == nil && br.Txn != nil && !s.next.IsEmpty() {
		br.Txn.UpdateObservedTimestamp(9, s.next)
	}
	return br, err
}

func observed(txn *Txn, node uint64) (hlc.Timestamp, bool) {
	txn.mu.Lock()
	defer txn.mu.Unlock()
	return txn.mu.proto.ObservedTimestamp(node)
}

// TestTxnObservedTimestamps: the gateway observes itself at the start, the
// first reading per node is kept, a restart keeps them, and a READ
// COMMITTED statement's new snapshot drops them and observes the gateway
// anew.
func TestTxnObservedTimestamps(t *testing.T) {
	var ss *stampSender
	e := newTestEnv(t, envOptions{db: Options{NodeID: 7}, wrapSender: func(s kvpb.Sender) kvpb.Sender {
		ss = &stampSender{Sender: s}
		return ss
	}})
	ctx := context.Background()
	for _, iso := range []IsolationLevel{ReadCommitted, Serializable} {
		txn := e.db.NewTxn(ctx, "obs", iso)
		if got, ok := observed(txn, 7); !ok || got != txn.ReadTimestamp() {
			t.Fatalf("%v: gateway observation %s, %v; want the read timestamp %s", iso, got, ok, txn.ReadTimestamp())
		}
		first := e.clock.Now()
		ss.next = first
		if _, _, err := txn.Get(ctx, []byte("a")); err != nil {
			t.Fatal(err)
		}
		ss.next = e.clock.Now()
		if _, _, err := txn.Get(ctx, []byte("b")); err != nil {
			t.Fatal(err)
		}
		if got, ok := observed(txn, 9); !ok || got != first {
			t.Fatalf("%v: node 9 observation %s, %v; want the first, %s", iso, got, ok, first)
		}
		ss.next = hlc.Timestamp{}
		if iso == ReadCommitted {
			if err := txn.Step(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := observed(txn, 9); ok {
				t.Fatalf("a new statement's snapshot kept an observation from before it")
			}
			if got, ok := observed(txn, 7); !ok || got.Less(txn.ReadTimestamp()) {
				t.Fatalf("gateway observation %s, %v after Step; want one at or above the new read timestamp %s", got, ok, txn.ReadTimestamp())
			}
		} else {
			_ = txn.setRetryable(&kvpb.TransactionRetryError{Reason: kvpb.RetrySerializable})
			if err := txn.PrepareForRetry(ctx); err != nil {
				t.Fatal(err)
			}
			if got, ok := observed(txn, 9); !ok || got != first {
				t.Fatalf("a restart dropped node 9's observation (%s, %v): it stays valid", got, ok)
			}
		}
		if err := txn.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestObservationsAllocs: a transaction's first readings (the gateway's,
// and one leaseholder's) live in the Txn, and a new snapshot (READ
// COMMITTED's next statement) writes its reading over the last
// snapshot's in place: neither allocates (each was an object of every
// transaction and of every READ COMMITTED statement). The readings are
// still those of the snapshot: the gateway's, taken at its start.
func TestObservationsAllocs(t *testing.T) {
	mc := hlc.NewManualClock(100)
	db := &DB{clock: hlc.NewClock(mc.UnixNano, 0)}
	db.opts.NodeID = 1
	ctx := context.Background()
	now := hlc.Timestamp{WallTime: 100}
	var txn *Txn
	n := testing.AllocsPerRun(100, func() { txn = db.buildTxn(ctx, "t", ReadCommitted, 0, now) })
	if n > 1 && !raceEnabled {
		t.Errorf("a transaction allocates %.0f objects, want 1 (the Txn)", n)
	}
	txn.mu.Lock()
	defer txn.mu.Unlock()
	txn.absorbObservationsLocked(&kvpb.Transaction{ObservedTimestamps: []kvpb.ObservedTimestamp{{NodeID: 2, Timestamp: hlc.Timestamp{WallTime: 150}}}})
	if got := len(txn.mu.proto.ObservedTimestamps); got != 2 {
		t.Fatalf("%d readings, want the gateway's and node 2's", got)
	}
	first := txn.mu.proto.Clone()
	mc.Set(200)
	n = testing.AllocsPerRun(100, func() { txn.resetObservationsLocked() })
	if n > 0 && !raceEnabled {
		t.Errorf("a new snapshot allocates %.0f objects, want 0", n)
	}
	if got := txn.mu.proto.ObservedTimestamps; len(got) != 1 || got[0].NodeID != 1 || got[0].Timestamp.WallTime != 200 {
		t.Errorf("readings after a new snapshot %v, want node 1's at 200", got)
	}
	// A copy sent with an earlier batch keeps its readings.
	if got := first.ObservedTimestamps; len(got) != 2 || got[0].Timestamp.WallTime != 100 || got[1].NodeID != 2 {
		t.Errorf("the earlier copy's readings became %v", got)
	}
}
