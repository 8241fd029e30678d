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
