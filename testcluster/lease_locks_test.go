package testcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
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
