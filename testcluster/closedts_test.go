package testcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/store"
	"github.com/google/uuid"
)

// TestClosedTimestampPromise runs the closer of tablet/closedts.go on a
// three-node cluster (tablet 1 holds every user key) and checks its rules
// one by one: followers serve a transaction's reads from their own
// engines; a write acknowledged before a follower read began is seen by
// it; no write lands at or below a timestamp any replica has closed, not
// a non-transactional one, not a BulkPut, not after the lease moves; a
// transaction that has written is sent to the leaseholder.
func TestClosedTimestampPromise(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := c.WaitLeader(1, 10*time.Second)
	user := kvpb.Span{Key: []byte("\x03"), EndKey: []byte("\x04")}
	lead := store.CloseLead(c.Nodes[0].Clock.MaxOffset())
	for _, n := range c.Nodes {
		go n.Store.RunCloser(ctx, store.ClosedTSConfig{GlobalSpans: func() []kvpb.Span { return []kvpb.Span{user} }, Lead: lead})
	}
	key := []byte("\x03k")
	if err := c.Nodes[0].DB.Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	maxClosed := func() hlc.Timestamp {
		var m hlc.Timestamp
		for _, n := range c.Nodes {
			m = m.Forward(n.Store.Replica(1).ClosedTimestamp())
		}
		return m
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, n := range c.Nodes {
			if n.Store.Replica(1).ClosedTimestamp().IsEmpty() {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not every replica applied a closed timestamp within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	follower := c.Nodes[l%3] // node l+1 (mod 3)
	get := func(n *ClusterNode, txn *kvpb.Transaction) (*kvpb.GetResponse, error) {
		ba := &kvpb.BatchRequest{}
		ba.Txn = txn
		ba.TabletID = 1
		ba.Add(&kvpb.GetRequest{Key: key})
		br, err := n.Store.Send(ctx, ba)
		if err != nil {
			return nil, err
		}
		return br.Responses[0].(*kvpb.GetResponse), nil
	}
	newTxn := func(n *ClusterNode) *kvpb.Transaction {
		now := n.Clock.Now()
		limit := now
		limit.WallTime += int64(n.Clock.MaxOffset())
		return &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: uuid.New(), WriteTimestamp: now, MinTimestamp: now},
			ReadTimestamp: now, GlobalUncertaintyLimit: limit}
	}

	// Served by the follower, with the acknowledged value; then a newer
	// write through another gateway, read at once on the follower.
	for i, v := range []string{"v1", "v2", "v3"} {
		if i > 0 {
			before := maxClosed()
			if err := c.Nodes[i%3].DB.Put(ctx, key, []byte(v)); err != nil {
				t.Fatal(err)
			}
			lh := c.Nodes[c.WaitLeader(1, 10*time.Second)-1]
			resp, err := get(lh, newTxn(lh))
			if err != nil {
				t.Fatal(err)
			}
			if !before.Less(resp.Timestamp) {
				t.Fatalf("a put landed at %s, at or below the closed timestamp %s applied before it began", resp.Timestamp, before)
			}
		}
		served := follower.Store.Replica(1).Metrics().FollowerReads.Load()
		resp, err := get(follower, newTxn(follower))
		if err != nil {
			t.Fatalf("follower read of %s: %v", v, err)
		}
		if string(resp.Value) != v {
			t.Fatalf("follower read after the put of %s was acknowledged: %q", v, resp.Value)
		}
		if follower.Store.Replica(1).Metrics().FollowerReads.Load() == served {
			t.Fatalf("node %d answered the read without counting it as a follower read (it holds the lease: %v)", follower.ID, follower.Store.Replica(1).HoldsLease())
		}
	}

	// A transaction that wrote must go to the leaseholder.
	wrote := newTxn(follower)
	wrote.Key = []byte("\x03anchor")
	var nle *kvpb.NotLeaseholderError
	if _, err := get(follower, wrote); !errors.As(err, &nle) {
		t.Fatalf("follower read of a transaction that wrote: %v, want NotLeaseholderError", err)
	}

	// A BulkPut at or below the closed timestamp is refused.
	lh := c.Nodes[c.WaitLeader(1, 10*time.Second)-1]
	ba := &kvpb.BatchRequest{}
	ba.TabletID = 1
	ba.Timestamp = lh.Clock.Now()
	ba.Add(&kvpb.BulkPutRequest{Key: []byte("\x03bulk"), Value: []byte("x")})
	var bad *kvpb.InvalidArgumentError
	if _, err := lh.Store.Send(ctx, ba); !errors.As(err, &bad) {
		t.Fatalf("BulkPut below the closed timestamp: %v, want InvalidArgumentError", err)
	}

	// The lease moves to the follower: its writes too land above every
	// closed timestamp any replica applied.
	before := maxClosed()
	if err := lh.Raft.TransferLeader(1, follower.ID); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for c.Leader(1) != follower.ID {
		if time.Now().After(deadline) {
			t.Fatalf("lease not on node %d after 10 s", follower.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := follower.DB.Put(ctx, key, []byte("v4")); err != nil {
		t.Fatal(err)
	}
	resp, err := get(follower, newTxn(follower))
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Value) != "v4" || !before.Less(resp.Timestamp) {
		t.Fatalf("after the transfer: %q at %s, want v4 above %s", resp.Value, resp.Timestamp, before)
	}
}
