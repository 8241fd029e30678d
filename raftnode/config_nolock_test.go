package raftnode

import (
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// blockingSM stops in Apply (inside a round, under the node's lock) until
// released, saying when it got there.
type blockingSM struct {
	nopSM
	in, release chan struct{}
}

func (b *blockingSM) Apply(*storage.Batch, *pb.Entry) error {
	b.in <- struct{}{}
	<-b.release
	return nil
}

// TestConfigDuringRound: Config answers while a round holds the node's
// lock (the KV client asks it for a tablet's voters on every request,
// and a round holds the lock through its synced commit), with the
// configuration as of the last finished pass; a configuration change
// shows once the round that applied it has committed.
func TestConfigDuringRound(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := NewNode(Config{NodeID: 1}, eng, nil)
	sm := &blockingSM{in: make(chan struct{}), release: make(chan struct{})}
	if _, err := n.AddReplica(1, []uint64{1}, sm); err != nil {
		t.Fatal(err)
	}
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Propose(1, []byte("x")); err != nil {
		t.Fatal(err)
	}
	round := make(chan error, 1)
	go func() { _, err := n.ProcessReady(); round <- err }()
	<-sm.in // the round is applying "x", under the lock
	got := make(chan *pb.ConfState, 1)
	go func() { got <- n.Config(1) }()
	select {
	case cs := <-got:
		if !slices.Equal(cs.GetVoters(), []uint64{1}) {
			t.Errorf("Config during the round: voters %v, want [1]", cs.GetVoters())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Config waited for the round holding the node's lock")
	}
	close(sm.release)
	if err := <-round; err != nil {
		t.Fatal(err)
	}
	if n.Config(2) != nil {
		t.Error("Config of a tablet with no replica here is not nil")
	}

	// A learner added: visible once a round has applied the change.
	two := uint64(2)
	typ := pb.ConfChangeType_ConfChangeAddLearnerNode
	if err := n.ProposeConfChange(1, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &typ, NodeId: &two}}}); err != nil {
		t.Fatal(err)
	}
	if cs := n.Config(1); len(cs.GetLearners()) != 0 {
		t.Fatalf("learners %v before any round applied the change", cs.GetLearners())
	}
	for range 3 {
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
	}
	if cs := n.Config(1); !slices.Equal(cs.GetLearners(), []uint64{2}) || !slices.Equal(cs.GetVoters(), []uint64{1}) {
		t.Fatalf("after the change: voters %v learners %v, want [1] and [2]", cs.GetVoters(), cs.GetLearners())
	}
	if err := n.RemoveReplica(1); err != nil {
		t.Fatal(err)
	}
	if n.Config(1) != nil {
		t.Error("Config of a removed replica is not nil")
	}
}
