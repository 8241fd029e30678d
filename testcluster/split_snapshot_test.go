package testcluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
)

// engineImage is every raw engine key and value of desc's replicated
// spans on node n (data, locks, transaction records, replicated
// per-tablet state), as a map from the encoded key.
func engineImage(t *testing.T, n *ClusterNode, desc kvpb.TabletDescriptor) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, sp := range tablet.ReplicatedSpans(desc) {
		it, err := n.Engine.NewIter(storage.IterOptions{LowerBound: sp.Key, UpperBound: sp.EndKey})
		if err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.UnsafeValue()
			if err != nil {
				it.Close()
				t.Fatalf("node %d: %v", n.ID, err)
			}
			out[string(it.UnsafeKey().Encode(nil))] = string(v)
		}
		err = it.Err()
		it.Close()
		if err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
	}
	return out
}

// waitTablets waits until node n's store holds exactly the tablets want.
func waitTablets(t *testing.T, n *ClusterNode, want []kvpb.TabletDescriptor) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for fmt.Sprint(n.Store.Tablets()) != fmt.Sprint(want) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d has tablets %v, want %v", n.ID, n.Store.Tablets(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClusterSplitLearnedBySnapshot: a follower is stopped, a tablet
// splits and the sides take writes until their logs are truncated past
// the split, so the restarted follower can learn of the split only from
// a snapshot. It must end with every tablet, the same engine image of each
// as the leaseholder's, and then lead them all without losing a row.
// Cases: the split of the tablet it knew (learned from the left's
// snapshot), and a second split of a right side it knew, while the left
// side it knew took no writes (so the first tablet, which holds the
// directory, catches up by log and brings no news of the split).
func TestClusterSplitLearnedBySnapshot(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before are split keys applied everywhere before the follower
		// stops; during, those split while it is stopped.
		before, during []string
		// written are the key prefixes written while it is stopped.
		written []string
	}{
		{name: "left", during: []string{"\x03m"}, written: []string{"\x03a", "\x03x"}},
		{name: "right-again", before: []string{"\x03m"}, during: []string{"\x03t"}, written: []string{"\x03p", "\x03x"}},
	} {
		for _, form := range snapshotForms {
			t.Run(tc.name+"/"+form.name, func(t *testing.T) {
				testSplitLearnedBySnapshot(t, form.inlineLimit, tc.before, tc.during, tc.written)
			})
		}
	}
}

// snapshotForms are the two forms a snapshot travels in: inside the raft
// message (images this small always are) and streamed as an SST (every
// image, with a limit of one byte).
var snapshotForms = []struct {
	name        string
	inlineLimit int
}{{"inline", 0}, {"streamed", 1}}

func testSplitLearnedBySnapshot(t *testing.T, inlineLimit int, before, during, written []string) {
	const keep = 10
	c := StartCluster(t, ClusterOptions{LogKeep: keep, InlineSnapshotLimit: inlineLimit})
	ctx := context.Background()
	leader := c.WaitLeader(1, 10*time.Second)
	gateway := c.Nodes[leader-1]
	lagging := c.Nodes[leader%3]
	third := c.Nodes[(leader+1)%3]
	want := map[string]string{}
	put := func(via *ClusterNode, prefixes []string, from, to int) {
		for i := from; i < to; i++ {
			for _, p := range prefixes {
				k, v := fmt.Sprintf("%s%03d", p, i), fmt.Sprintf("v%d", i)
				putRetry(t, via.DB, k, v)
				want[k] = v
			}
		}
	}
	// A split whose answer was lost with the stopped node's connection
	// is ambiguous; retried, it splits or finds the boundary there.
	split := func(key string) {
		for attempt := 0; ; attempt++ {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.SplitRequest{SplitKey: []byte(key)})
			_, err := gateway.DB.Send(ctx, ba)
			var amb *kvpb.AmbiguousResultError
			var inv *kvpb.InvalidArgumentError
			if err == nil || (attempt > 0 && errors.As(err, &inv)) {
				break
			}
			if !errors.As(err, &amb) || attempt > 5 {
				t.Fatalf("split at %q: %v", key, err)
			}
		}
		for _, d := range gateway.Store.Tablets() {
			c.WaitLeader(d.TabletID, 10*time.Second)
		}
	}
	all := []string{"\x03a", "\x03p", "\x03x"}
	for _, k := range before {
		split(k)
	}
	put(gateway, all, 0, 5)
	waitTablets(t, lagging, gateway.Store.Tablets())
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}

	for _, k := range during {
		split(k)
	}
	// Enough entries that the logs written to are truncated past their
	// start: the follower cannot catch up on those by log.
	put(gateway, written, 5, 5+4*keep)
	tablets := gateway.Store.Tablets()
	if len(tablets) != 1+len(before)+len(during) {
		t.Fatalf("node %d has tablets %v after the splits", gateway.ID, tablets)
	}

	applied := lagging.Raft.SnapshotsApplied.Load()
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitTablets(t, lagging, tablets)
	waitReplicated(t, lagging, "\x03", "\x04", want)
	// (A streamed image shows in the engine moments before the count.)
	waitFor(t, 20*time.Second, "a snapshot applied for each side of the split", func() bool { return lagging.Raft.SnapshotsApplied.Load() >= applied+2 })
	if inlineLimit == 1 {
		waitFor(t, 20*time.Second, "two streamed snapshots ingested", func() bool { return lagging.Raft.SnapshotsIngested.Load() >= 2 })
	} else if got := lagging.Raft.SnapshotsIngested.Load(); got != 0 {
		t.Fatalf("node %d ingested %d streamed snapshots of images under the inline limit", lagging.ID, got)
	}
	for _, d := range tablets {
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, exp := engineImage(t, lagging, d), engineImage(t, gateway, d)
			if equalMaps(got, exp) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tablet %s: node %d's engine differs from node %d's: %s", &d, lagging.ID, gateway.ID, firstDiff(got, exp))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Make the follower the leaseholder of every tablet: with the third
	// node down it is the only other voter with every entry, so once the
	// old leaseholder is gone too only it can be elected.
	if err := third.Stop(); err != nil {
		t.Fatal(err)
	}
	put(gateway, all, 5+4*keep, 5+4*keep+3)
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if err := gateway.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := third.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, d := range tablets {
		if l := c.WaitLeader(d.TabletID, 20*time.Second); l != lagging.ID {
			t.Fatalf("tablet %d: node %d leads, want node %d", d.TabletID, l, lagging.ID)
		}
	}
	put(lagging, all, 5+4*keep+3, 5+4*keep+6)
	rows, err := lagging.DB.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatalf("scan through node %d: %v", lagging.ID, err)
	}
	got := map[string]string{}
	for _, kv := range rows {
		got[string(kv.Key)] = string(kv.Value)
	}
	if !equalMaps(got, want) {
		t.Fatalf("scan through node %d (leading every tablet): %d rows, want %d: %s", lagging.ID, len(got), len(want), firstDiff(got, want))
	}
	waitReplicated(t, third, "\x03", "\x04", want)
}

// TestClusterSplitLearnedBySnapshotRestart: the follower learns of the
// split from the left's snapshot and is restarted before the right
// group's snapshot reaches it. The right side took its writes before the
// split and none after, so its group's log still starts where the group
// began: a right replica bootstrapped at that start on the follower's
// pre-split data would catch up by log and miss those writes. It must be
// reopened waiting for the snapshot instead.
func TestClusterSplitLearnedBySnapshotRestart(t *testing.T) {
	for _, form := range snapshotForms {
		t.Run(form.name, func(t *testing.T) { testSplitLearnedBySnapshotRestart(t, form.inlineLimit) })
	}
}

func testSplitLearnedBySnapshotRestart(t *testing.T, inlineLimit int) {
	const keep = 10
	c := StartCluster(t, ClusterOptions{LogKeep: keep, InlineSnapshotLimit: inlineLimit})
	ctx := context.Background()
	leader := c.WaitLeader(1, 10*time.Second)
	gateway := c.Nodes[leader-1]
	lagging := c.Nodes[leader%3]
	want := map[string]string{}
	put := func(prefix string, from, to int) {
		for i := from; i < to; i++ {
			k, v := fmt.Sprintf("%s%03d", prefix, i), fmt.Sprintf("v%d", i)
			putRetry(t, gateway.DB, k, v)
			want[k] = v
		}
	}
	put("\x03x", 0, 3)
	waitReplicated(t, lagging, "\x03", "\x04", want)
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}
	put("\x03x", 3, 10)
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.SplitRequest{SplitKey: []byte("\x03m")})
	br, err := gateway.DB.Send(ctx, ba)
	if err != nil {
		t.Fatal(err)
	}
	right := br.Responses[0].(*kvpb.SplitResponse).Right.TabletID
	c.WaitLeader(right, 10*time.Second)
	put("\x03a", 0, 4*keep)
	tablets := gateway.Store.Tablets()

	c.BlockTablet(right, lagging.ID)
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitTablets(t, lagging, tablets)
	if err := lagging.Stop(); err != nil {
		t.Fatal(err)
	}
	c.UnblockTablet(right, lagging.ID)
	if err := lagging.Restart(); err != nil {
		t.Fatal(err)
	}
	waitTablets(t, lagging, tablets)
	waitReplicated(t, lagging, "\x03", "\x04", want)
	for _, d := range tablets {
		deadline := time.Now().Add(20 * time.Second)
		for {
			got, exp := engineImage(t, lagging, d), engineImage(t, gateway, d)
			if equalMaps(got, exp) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tablet %s: node %d's engine differs from node %d's: %s", &d, lagging.ID, gateway.ID, firstDiff(got, exp))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
