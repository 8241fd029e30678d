package testcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// TestLeaseTransferKeepsUnreplicatedLocks: a buffered transaction's
// statement takes an unreplicated lock on the leaseholder; a planned lease
// transfer replicates it before giving the lease up, so on the new
// leaseholder another writer still meets it, and the holder then commits
// without a retry (a lost lock would have let the other writer in first
// and failed the holder's commit with 40001).
func TestLeaseTransferKeepsUnreplicatedLocks(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx := context.Background()
	from := c.WaitLeader(1, 10*time.Second)
	key := []byte("\x03locked")

	a := c.Nodes[0].DB.NewTxn(ctx, "holder", kv.Serializable)
	a.EnableWriteBuffering()
	if err := a.Put(ctx, key, []byte("a")); err != nil {
		t.Fatal(err)
	}

	to := from%3 + 1
	if err := c.Nodes[from-1].Raft.TransferLeader(1, to); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Leader(1) != to {
		if time.Now().After(deadline) {
			t.Fatalf("node %d never took up the lease", to)
		}
		time.Sleep(5 * time.Millisecond)
	}

	b := c.Nodes[1].DB.NewTxn(ctx, "other", kv.Serializable)
	var wb kv.Batch
	wb.WaitPolicy = kvpb.WaitError
	wb.Put(key, []byte("b"))
	err := b.Run(ctx, &wb)
	var wie *kvpb.WriteIntentError
	if !errors.As(err, &wie) || len(wie.Intents) == 0 || wie.Intents[0].Txn.ID != a.ID() {
		t.Fatalf("other writer on the new leaseholder node %d: %v, want the holder's lock", to, err)
	}
	_ = b.Rollback(ctx)

	if err := a.Commit(ctx); err != nil {
		t.Fatalf("holder's commit after the transfer: %v", err)
	}
	got, ok, err := c.Nodes[2].DB.Get(ctx, key)
	if err != nil || !ok || string(got) != "a" {
		t.Fatalf("after the commit: %q %v %v", got, ok, err)
	}
}

// TestLeaseTransferKeepsTxnTombstones: a committed transaction whose
// record its own EndTxn never left (every intent resolved in the batch)
// is remembered by a tombstone that travels in the log, so after the
// lease moves the new leaseholder still answers a late heartbeat with
// COMMITTED instead of creating a pending record for it, and a replayed
// commit is a status error, not a second commit.
func TestLeaseTransferKeepsTxnTombstones(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx := context.Background()
	from := c.WaitLeader(1, 10*time.Second)
	key := []byte("\x03tomb")
	gw := c.Nodes[0]

	now := gw.Clock.Now()
	txn := &kvpb.Transaction{
		TxnMeta: kvpb.TxnMeta{ID: uuid.New(), Key: key, WriteTimestamp: now, MinTimestamp: now},
		Name:    "tomb", Status: kvpb.Pending, ReadTimestamp: now,
	}
	put := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn}}
	put.Add(&kvpb.PutRequest{Key: key, Value: []byte("v")})
	pbr, err := gw.DB.Send(ctx, put)
	if err != nil {
		t.Fatal(err)
	}
	// The write may have been pushed above the new lease's low-water mark;
	// with no reads to refresh, the coordinator would commit there.
	txn = pbr.Txn.Clone()
	txn.ReadTimestamp = txn.WriteTimestamp
	end := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn}}
	end.Add(&kvpb.EndTxnRequest{Key: key, Commit: true, LockSpans: []kvpb.Span{{Key: key}}})
	if _, err := gw.DB.Send(ctx, end); err != nil {
		t.Fatalf("commit: %v", err)
	}

	to := from%3 + 1
	if err := c.Nodes[from-1].Raft.TransferLeader(1, to); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Leader(1) != to {
		if time.Now().After(deadline) {
			t.Fatalf("node %d never took up the lease", to)
		}
		time.Sleep(5 * time.Millisecond)
	}

	hb := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn}}
	hb.Add(&kvpb.HeartbeatTxnRequest{Key: key, Now: gw.Clock.Now()})
	br, err := gw.DB.Send(ctx, hb)
	if err != nil {
		t.Fatalf("late heartbeat on the new leaseholder: %v", err)
	}
	if got := br.Responses[0].(*kvpb.HeartbeatTxnResponse).Txn.Status; got != kvpb.Committed {
		t.Fatalf("late heartbeat on the new leaseholder node %d: status %v, want COMMITTED", to, got)
	}
	var status *kvpb.TransactionStatusError
	if _, err := gw.DB.Send(ctx, end); !errors.As(err, &status) || status.Status != kvpb.Committed {
		t.Fatalf("replayed commit on the new leaseholder: %v, want a COMMITTED status error", err)
	}
}
