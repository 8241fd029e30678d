package raftnode

import (
	"slices"
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestSoloLeadersNotTicked: a tick skips the groups no other node takes
// part in once they lead with the lease (a cluster of one's tablets,
// which an idle node used to tick and scan for Readies 20 times a
// second), while they still commit proposals; a group not yet through a
// round (it must campaign) is ticked, and so is one that gained a
// learner, whose leader must send it heartbeats.
func TestSoloLeadersNotTicked(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := NewNode(Config{NodeID: 1}, eng, nil)
	settle := func() {
		t.Helper()
		for range 10 {
			if _, err := n.ProcessReady(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ticked := func() []uint64 {
		n.Tick()
		n.mu.Lock()
		defer n.mu.Unlock()
		return slices.Sorted(slices.Values(n.ticked))
	}
	for id := uint64(1); id <= 3; id++ {
		if _, err := n.AddReplica(id, []uint64{1}, nopSM{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := ticked(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("before any round: ticked %v, want every group", got)
	}
	for id := uint64(1); id <= 3; id++ {
		if err := n.Campaign(id); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	for id := uint64(1); id <= 3; id++ {
		if term, _ := n.Replica(id).Lease(); term == 0 {
			t.Fatalf("tablet %d: no lease after its campaign", id)
		}
	}
	if got := ticked(); len(got) != 0 {
		t.Fatalf("solo leaders with their lease: ticked %v, want none", got)
	}
	// Described without a raft status (nothing in it to move a lease to).
	if g, ok := n.Group(3); !ok || g.Lease == 0 || !slices.Equal(g.Active, []uint64{1}) || len(g.CaughtUp) != 0 {
		t.Fatalf("a solo leader's group: %+v (%v)", g, ok)
	}
	before := n.Replica(2).Applied()
	if err := n.Propose(2, []byte("x")); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := n.Replica(2).Applied(); got <= before {
		t.Fatalf("a proposal to an unticked solo group: applied %d, was %d", got, before)
	}
	typ, learner := pb.ConfChangeType_ConfChangeAddLearnerNode, uint64(2)
	if err := n.ProposeConfChange(1, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &typ, NodeId: &learner}}}); err != nil {
		t.Fatal(err)
	}
	settle()
	if cs := n.Config(1); !slices.Contains(cs.GetLearners(), learner) {
		t.Fatalf("tablet 1's learners %v, want node 2", cs.GetLearners())
	}
	if got := ticked(); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("with a learner on tablet 1: ticked %v, want [1]", got)
	}
}
