package raftnode

import (
	"bytes"
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestSoleVoterLogTruncatedByBytes: a group whose only member is this
// node's voter truncates its log through the applied index once the log
// holds soloLogBytes (an SST ingested through it is that large), long
// before LogKeep entries; a group with a learner keeps its entries for
// the learner, and small entries leave a sole voter's log to LogKeep.
func TestSoleVoterLogTruncatedByBytes(t *testing.T) {
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
	for id := uint64(1); id <= 2; id++ {
		if _, err := n.AddReplica(id, []uint64{1}, nopSM{}); err != nil {
			t.Fatal(err)
		}
		if err := n.Campaign(id); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	// Tablet 2 gains a learner (on a node that never answers).
	typ, learner := pb.ConfChangeType_ConfChangeAddLearnerNode, uint64(2)
	if err := n.ProposeConfChange(2, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &typ, NodeId: &learner}}}); err != nil {
		t.Fatal(err)
	}
	settle()
	first := func(id uint64) uint64 {
		t.Helper()
		f, err := n.Replica(id).log.FirstIndex()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Small entries: nothing is truncated before LogKeep.
	for id := uint64(1); id <= 2; id++ {
		for range 5 {
			if err := n.Propose(id, []byte("small")); err != nil {
				t.Fatal(err)
			}
			settle()
		}
	}
	for id := uint64(1); id <= 2; id++ {
		if f := first(id); f != 1 && f != 2 {
			t.Fatalf("tablet %d: small entries truncated the log to start at %d", id, f)
		}
	}
	big := bytes.Repeat([]byte("s"), soloLogBytes+1)
	for id := uint64(1); id <= 2; id++ {
		if err := n.Propose(id, big); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	r1 := n.Replica(1)
	if f, applied := first(1), r1.Applied(); f != applied+1 {
		t.Fatalf("sole voter after a large entry: log starts at %d, applied %d (want it truncated through the applied index)", f, applied)
	}
	if b := r1.log.Bytes(); b != 0 {
		t.Fatalf("sole voter's log bytes after the truncation: %d", b)
	}
	if f := first(2); f > 2 {
		t.Fatalf("a group with a learner truncated its log to start at %d", f)
	}
	// The sole voter still commits and applies after the truncation.
	before := r1.Applied()
	if err := n.Propose(1, []byte("after")); err != nil {
		t.Fatal(err)
	}
	settle()
	if got := r1.Applied(); got <= before {
		t.Fatalf("after the truncation: applied %d, was %d", got, before)
	}
}
