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

// TestTrailingClosedTimestampPromise runs the closer with trailing closed
// timestamps (tablet/closedts.go, "Trailing closed timestamps") on three
// nodes, the side transport delivering each node's closings to the
// others' stores, and checks: an idle tablet's closed timestamp advances
// on every replica with no raft entry; a follower serves a historical
// read (no uncertainty window) at T from its own engine once its closed
// timestamp reaches T, and sees every write acknowledged before T was
// taken; a read above the follower's closed timestamp is sent to the
// leaseholder; no write lands at or below a closed timestamp any replica
// applied, not an old transaction's, not after the lease moves.
func TestTrailingClosedTimestampPromise(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := c.WaitLeader(1, 10*time.Second)
	const target = 300 * time.Millisecond
	for _, n := range c.Nodes {
		go n.Store.RunCloser(ctx, store.ClosedTSConfig{
			GlobalSpans: func() []kvpb.Span { return nil },
			Target:      target,
			Publish: func(_ context.Context, cs []store.SideClosing) {
				for _, m := range c.Nodes {
					if m != n {
						m.Store.SideClosed(cs)
					}
				}
			},
		})
	}
	key := []byte("\x03k")
	follower := c.Nodes[l%3]
	closedOn := func(n *ClusterNode) hlc.Timestamp { return n.Store.Replica(1).ClosedTimestamp() }
	maxClosed := func() hlc.Timestamp {
		var m hlc.Timestamp
		for _, n := range c.Nodes {
			m = m.Forward(closedOn(n))
		}
		return m
	}
	waitClosed := func(n *ClusterNode, ts hlc.Timestamp) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for closedOn(n).Less(ts) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: closed timestamp %s did not reach %s within 20 s", n.ID, closedOn(n), ts)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	get := func(n *ClusterNode, txn *kvpb.Transaction, k []byte) (*kvpb.GetResponse, error) {
		ba := &kvpb.BatchRequest{}
		ba.Txn = txn
		ba.TabletID = 1
		ba.Add(&kvpb.GetRequest{Key: k})
		br, err := n.Store.Send(ctx, ba)
		if err != nil {
			return nil, err
		}
		return br.Responses[0].(*kvpb.GetResponse), nil
	}
	// A historical read at ts: no uncertainty window (kv.NewAsOfTxn).
	asOf := func(ts hlc.Timestamp) *kvpb.Transaction {
		return &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: uuid.New(), WriteTimestamp: ts, MinTimestamp: ts},
			ReadTimestamp: ts, GlobalUncertaintyLimit: ts}
	}

	// Writes through every gateway, each acknowledged before T is taken,
	// are all seen by the follower's read at T.
	for i, v := range []string{"v1", "v2", "v3"} {
		before := maxClosed()
		if err := c.Nodes[i%3].DB.Put(ctx, key, []byte(v)); err != nil {
			t.Fatal(err)
		}
		at := follower.Clock.Now()
		lh := c.Nodes[c.WaitLeader(1, 10*time.Second)-1]
		resp, err := get(lh, asOf(at), key)
		if err != nil {
			t.Fatal(err)
		}
		if !before.Less(resp.Timestamp) {
			t.Fatalf("a put landed at %s, at or below the closed timestamp %s applied before it", resp.Timestamp, before)
		}
		waitClosed(follower, at)
		served := follower.Store.Replica(1).Metrics().FollowerReads.Load()
		resp, err = get(follower, asOf(at), key)
		if err != nil {
			t.Fatalf("follower read at %s: %v", at, err)
		}
		if string(resp.Value) != v {
			t.Fatalf("follower read at %s, after the put of %s was acknowledged: %q", at, v, resp.Value)
		}
		if follower.Store.Replica(1).Metrics().FollowerReads.Load() == served {
			t.Fatalf("node %d answered without counting a follower read", follower.ID)
		}
	}

	// Idle: the closed timestamp advances on the followers, the log does
	// not grow.
	lh := c.Nodes[c.WaitLeader(1, 10*time.Second)-1]
	p0, ok := lh.Raft.Progress(1)
	if !ok {
		t.Fatal("the leaseholder does not lead")
	}
	from := closedOn(follower)
	waitClosed(follower, hlc.Timestamp{WallTime: from.WallTime + int64(3*target)})
	if p1, ok := lh.Raft.Progress(1); ok && p1.Commit != p0.Commit {
		t.Fatalf("an idle tablet's log grew from %d to %d entries while its closed timestamp advanced", p0.Commit, p1.Commit)
	}

	// Above the closed timestamp the follower refuses: the read is the
	// leaseholder's.
	var nle *kvpb.NotLeaseholderError
	if _, err := get(follower, asOf(follower.Clock.Now()), key); !errors.As(err, &nle) {
		t.Fatalf("follower read above its closed timestamp %s: %v, want NotLeaseholderError (node %d, leader %d, holds lease %v)", closedOn(follower), err, follower.ID, c.Leader(1), follower.Store.Replica(1).HoldsLease())
	}

	// An old transaction's write is pushed above every closed timestamp.
	before := maxClosed()
	old := hlc.Timestamp{WallTime: before.WallTime - int64(time.Second)}
	ba := &kvpb.BatchRequest{}
	ba.TabletID = 1
	ba.Txn = &kvpb.Transaction{TxnMeta: kvpb.TxnMeta{ID: uuid.New(), Key: []byte("\x03old"), WriteTimestamp: old, MinTimestamp: old},
		ReadTimestamp: old, GlobalUncertaintyLimit: old}
	ba.Add(&kvpb.PutRequest{Key: []byte("\x03old"), Value: []byte("x")})
	br, err := lh.Store.Send(ctx, ba)
	if err != nil {
		t.Fatal(err)
	}
	if !before.Less(br.Txn.WriteTimestamp) {
		t.Fatalf("a transaction's write landed at %s, at or below the closed timestamp %s", br.Txn.WriteTimestamp, before)
	}

	// The lease moves to the follower: its writes land above every
	// closed timestamp any replica applied, and the old leaseholder, now
	// a follower, serves historical reads once the new one's closings
	// reach it.
	before = maxClosed()
	if err := lh.Raft.TransferLeader(1, follower.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Leader(1) != follower.ID {
		if time.Now().After(deadline) {
			t.Fatalf("lease not on node %d after 10 s", follower.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := follower.DB.Put(ctx, key, []byte("v4")); err != nil {
		t.Fatal(err)
	}
	at := follower.Clock.Now()
	resp, err := get(follower, asOf(at), key)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Value) != "v4" || !before.Less(resp.Timestamp) {
		t.Fatalf("after the transfer: %q at %s, want v4 above %s", resp.Value, resp.Timestamp, before)
	}
	waitClosed(lh, at)
	if resp, err = get(lh, asOf(at), key); err != nil || string(resp.Value) != "v4" {
		t.Fatalf("the old leaseholder's follower read at %s: %v %v, want v4", at, resp, err)
	}
}
