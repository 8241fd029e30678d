package testcluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
)

// TestClusterAddSSTable ingests SSTs through the raft log of a tablet
// replicated on three nodes: every replica ingests each one (its engine
// image of the tablet ends equal to the leaseholder's); a follower that
// was stopped while one was ingested and the log was truncated past it
// catches up by a snapshot that carries the ingested versions; a node
// crashed right after an ingest (losing what it had not synced) is
// restarted and ends with the same image; a version written above an
// SST's timestamp wins over it on every node.
func TestClusterAddSSTable(t *testing.T) {
	const keep = 10
	c := StartCluster(t, ClusterOptions{LogKeep: keep})
	ctx := context.Background()
	leader := c.WaitLeader(1, 10*time.Second)
	gateway := c.Nodes[leader-1]
	lagging := c.Nodes[leader%3]
	third := c.Nodes[(leader+1)%3]
	want := map[string]string{}
	ingest := func(prefix string, n int) {
		t.Helper()
		ts := gateway.Clock.Now()
		b := storage.NewSSTBuilder()
		for i := range n {
			k := fmt.Sprintf("%s%03d", prefix, i)
			if err := mvcc.PutSSTVersion(b, []byte(k), ts, []byte("sst"+k)); err != nil {
				t.Fatal(err)
			}
			want[k] = "sst" + k
		}
		data, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		for attempt := 0; ; attempt++ {
			got, err := gateway.DB.AddSSTable(ctx, []byte(prefix), []byte(prefix+"\xff"), data, ts)
			if err == nil {
				if got != int64(n) {
					t.Fatalf("ingested %d versions of %d", got, n)
				}
				return
			}
			// Ingesting the same versions again is harmless.
			var amb *kvpb.AmbiguousResultError
			if !errors.As(err, &amb) || attempt > 5 {
				t.Fatalf("AddSSTable %q: %v", prefix, err)
			}
		}
	}
	sameImage := func(nodes ...*ClusterNode) {
		t.Helper()
		for _, d := range gateway.Store.Tablets() {
			for _, n := range nodes {
				deadline := time.Now().Add(20 * time.Second)
				for {
					got, exp := engineImage(t, n, d), engineImage(t, gateway, d)
					if equalMaps(got, exp) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("tablet %s: node %d's engine differs from node %d's: %s", &d, n.ID, gateway.ID, firstDiff(got, exp))
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
	}
	ingested := func(n *ClusterNode) int64 {
		r := n.Store.Replica(1)
		if r == nil {
			return 0
		}
		return r.Metrics().SSTsIngested.Load()
	}

	ingest("\x03a", 100)
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d ingesting the SST", n.ID), func() bool { return ingested(n) >= 1 })
		// Every replica side-loaded the SST beside its log and linked
		// that file into its engine (raftnode's sideload.go).
		if got := n.Raft.SideloadedApplies.Load(); got < 1 {
			t.Fatalf("node %d applied %d side-loaded entries, want the SST's", n.ID, got)
		}
	}
	sameImage(lagging, third)

	// A follower away while an SST is ingested catches up through the
	// leader's appends, read back from its side-loaded log (no snapshot),
	// and side-loads the entry itself.
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}
	ingest("\x03e", 100)
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	sameImage(lagging)
	if got := lagging.Raft.SnapshotsApplied.Load(); got != 0 {
		t.Fatalf("the restarted follower took %d snapshots, want it caught up by appends", got)
	}
	if got := lagging.Raft.SideloadedApplies.Load(); got < 1 {
		t.Fatalf("the follower applied %d side-loaded entries after its restart, want the SST's", got)
	}

	// A later version wins on every node.
	putRetry(t, gateway.DB, "\x03a007", "later")
	want["\x03a007"] = "later"
	for _, n := range c.Nodes {
		waitReplicated(t, n, "\x03", "\x04", want)
	}

	// A follower away while an SST is ingested and the log truncated
	// past it: it catches up by snapshot.
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}
	ingest("\x03b", 100)
	for i := range 4 * keep {
		k := fmt.Sprintf("\x03c%03d", i)
		putRetry(t, gateway.DB, k, "v")
		want[k] = "v"
	}
	applied := lagging.Raft.SnapshotsApplied.Load()
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	waitFor(t, 20*time.Second, "a snapshot applied", func() bool { return lagging.Raft.SnapshotsApplied.Load() > applied })
	sameImage(lagging)

	// A node crashed right after an ingest, with none of its unsynced
	// writes kept, restarts with the same image.
	ingest("\x03d", 100)
	if err := third.Crash(0); err != nil {
		t.Fatal(err)
	}
	if err := third.Restart(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, third, "\x03", "\x04", want)
	sameImage(lagging, third)

	// Reads through another node at the SST's timestamp and now agree.
	rows, err := lagging.DB.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[string(r.Key)] = string(r.Value)
	}
	if !equalMaps(got, want) {
		t.Fatalf("scan through node %d: %s", lagging.ID, firstDiff(got, want))
	}
}
