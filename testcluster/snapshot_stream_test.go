package testcluster

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"
)

// streamLimit is the RPC message limit the streamed-snapshot tests run
// under (rpc.MaxBatchSize, lowered from 64 MiB so that a tablet image
// too large for a message takes megabytes, not a gigabyte, to write).
const streamLimit = 1 << 20

// lowerMessageLimit lowers rpc.MaxBatchSize for one test; it must be
// called before the cluster starts (servers and transports read it
// then), and the limit is restored after the cluster stops.
func lowerMessageLimit(t *testing.T, n int) {
	old := rpc.MaxBatchSize
	rpc.MaxBatchSize = n
	t.Cleanup(func() { rpc.MaxBatchSize = old })
}

// imageSize is the bytes of desc's replicated state on node n (keys and
// values), what an inline snapshot of it would carry at least.
func imageSize(t *testing.T, n *ClusterNode, desc kvpb.TabletDescriptor) int {
	size := 0
	for k, v := range engineImage(t, n, desc) {
		size += len(k) + len(v)
	}
	return size
}

// waitSameImage waits until node n's engine image of desc is node ref's.
func waitSameImage(t *testing.T, n, ref *ClusterNode, desc kvpb.TabletDescriptor) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, exp := engineImage(t, n, desc), engineImage(t, ref, desc)
		if equalMaps(got, exp) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tablet %s: node %d's engine differs from node %d's: %s", &desc, n.ID, ref.ID, firstDiff(got, exp))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bigWrites writes rows of 64 KiB values through via, until tablet 1's
// image on via is over the RPC message limit (so no raft message can
// carry it).
func bigWrites(t *testing.T, via *ClusterNode, want map[string]string) {
	t.Helper()
	for i := 0; imageSize(t, via, via.Store.Tablets()[0]) <= 2*streamLimit; i++ {
		k, v := fmt.Sprintf("\x03b%04d", i), fmt.Sprintf("v%d-%s", i, strings.Repeat("x", 64<<10))
		putRetry(t, via.DB, k, v)
		want[k] = v
	}
}

// TestClusterStreamedSnapshotCatchUp: a follower stopped while its
// tablet grows past the RPC message limit, and its peers truncate their
// logs, can catch up only by a snapshot that is not a raft message: the
// leaseholder streams the image as an SST and the follower ingests it.
// It ends with the leaseholder's engine image and follows the log again.
func TestClusterStreamedSnapshotCatchUp(t *testing.T) {
	lowerMessageLimit(t, streamLimit)
	c := StartCluster(t, ClusterOptions{LogKeep: 10})
	leader := c.WaitLeader(1, 10*time.Second)
	lagging := c.Nodes[leader%3]
	gateway := c.Nodes[leader-1]
	want := map[string]string{}
	for i := range 5 {
		k := fmt.Sprintf("\x03a%03d", i)
		putRetry(t, gateway.DB, k, "small")
		want[k] = "small"
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}
	bigWrites(t, gateway, want)
	desc := gateway.Store.Tablets()[0]
	if size := imageSize(t, gateway, desc); size <= streamLimit {
		t.Fatalf("tablet image of %d bytes, want more than the message limit %d", size, streamLimit)
	}
	// Whichever node leads when the follower is back streams it.
	streamedOut := func() (n int64) {
		for _, m := range c.Nodes {
			if m != lagging && m.Running() {
				n += m.Raft.SnapshotsStreamed.Load()
			}
		}
		return n
	}
	ingested, streamed := lagging.Raft.SnapshotsIngested.Load(), streamedOut()
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	waitSameImage(t, lagging, gateway, desc)
	// The counters move once the raft state is written and the sender
	// has its answer, moments after the rows show.
	waitFor(t, 20*time.Second, "the follower to count an ingested snapshot", func() bool { return lagging.Raft.SnapshotsIngested.Load() > ingested })
	waitFor(t, 20*time.Second, "a node to count a streamed snapshot", func() bool { return streamedOut() > streamed })
	// It follows the log again and serves as a gateway.
	for i := 5; i < 15; i++ {
		k := fmt.Sprintf("\x03a%03d", i)
		putRetry(t, gateway.DB, k, "after")
		want[k] = "after"
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if v, ok, err := lagging.DB.Get(t.Context(), []byte("\x03a014")); err != nil || !ok || string(v) != "after" {
		t.Fatalf("read through node %d: %q %v, %v", lagging.ID, v, ok, err)
	}
}

var errCrashAfterIngest = errors.New("testcluster: crash between a snapshot's ingest and its raft state")

// TestClusterStreamedSnapshotCrashAfterIngest: the follower's node fails
// right after ingesting a streamed snapshot's image, before the raft
// state (log start, hard state) is written, and loses power. Restarted,
// with the group's messages to it held back, it must open (raft refuses
// an applied index past its commit index) with the snapshot's raft state
// finished from the intent recorded before the ingest: commit and applied
// at the snapshot's index and the snapshot's data. Let through again, it
// converges with the leaseholder.
func TestClusterStreamedSnapshotCrashAfterIngest(t *testing.T) {
	lowerMessageLimit(t, streamLimit)
	var target, crashedAt atomic.Uint64
	c := StartCluster(t, ClusterOptions{LogKeep: 10, AfterIngest: func(node, tablet, index uint64) error {
		if node == target.Load() && tablet == 1 && crashedAt.CompareAndSwap(0, index) {
			return errCrashAfterIngest
		}
		return nil
	}})
	leader := c.WaitLeader(1, 10*time.Second)
	lagging := c.Nodes[leader%3]
	gateway := c.Nodes[leader-1]
	want := map[string]string{}
	putRetry(t, gateway.DB, "\x03a", "small")
	want["\x03a"] = "small"
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}
	bigWrites(t, gateway, want)
	target.Store(lagging.ID)
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "a streamed snapshot to reach the follower", func() bool { return crashedAt.Load() != 0 })
	index := crashedAt.Load()
	c.BlockTablet(1, lagging.ID)
	if err := lagging.Crash(uint64(time.Now().UnixNano())); !errors.Is(err, errCrashAfterIngest) {
		t.Fatalf("stopping the failed node: %v, want the injected failure", err)
	}
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	r := lagging.Raft.Replica(1)
	if r == nil {
		t.Fatalf("node %d reopened without its replica of tablet 1", lagging.ID)
	}
	if got := r.Applied(); got != index {
		t.Fatalf("node %d reopened at applied index %d, want the snapshot's %d", lagging.ID, got, index)
	}
	if st := r.Status(); st.GetCommit() < index {
		t.Fatalf("node %d reopened with commit index %d, before its applied %d", lagging.ID, st.GetCommit(), index)
	}
	// Every row written before the snapshot is there, from the ingest.
	waitReplicated(t, lagging, "\x03", "\x04", want)
	c.UnblockTablet(1, lagging.ID)
	for i := range 10 {
		k := fmt.Sprintf("\x03c%03d", i)
		putRetry(t, gateway.DB, k, "after")
		want[k] = "after"
	}
	waitReplicated(t, lagging, "\x03", "\x04", want)
	waitSameImage(t, lagging, gateway, gateway.Store.Tablets()[0])
}
