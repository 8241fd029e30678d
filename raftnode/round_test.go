package raftnode

import (
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// countSM records the data of the entries applied and observed.
type countSM struct {
	nopSM
	applied, observed []string
}

func (c *countSM) Apply(_ *storage.Batch, e *pb.Entry) error {
	c.applied = append(c.applied, string(e.GetData()))
	return nil
}

func (c *countSM) Applied(entries []*pb.Entry, _ bool) {
	for _, e := range entries {
		if len(e.GetData()) > 0 {
			c.observed = append(c.observed, string(e.GetData()))
		}
	}
}

func (c *countSM) LeaseAcquired(uint64, bool) {}

// TestOneRoundPerWriteAlone: with a single voter, a proposal is applied
// and observed in the round that makes it durable (the round's second
// pass), so its proposer waits for one sync, not for the next round's.
// Proposals made while the round runs are not part of it.
func TestOneRoundPerWriteAlone(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := NewNode(Config{NodeID: 1}, eng, nil)
	sm := &countSM{}
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
	if st := n.Replica(1).Status(); st.RaftState != raft.StateLeader {
		t.Fatalf("the sole voter is %v, not leader", st.RaftState)
	}
	for i, data := range []string{"a", "b", "c"} {
		if err := n.Propose(1, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := n.ProcessReady(); err != nil {
			t.Fatal(err)
		}
		if len(sm.observed) != i+1 || sm.observed[i] != data {
			t.Fatalf("after one round for proposal %q: observed %q (applied %q)", data, sm.observed, sm.applied)
		}
	}
	// Two proposals before a round: both in it.
	for _, data := range []string{"d", "e"} {
		if err := n.Propose(1, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.ProcessReady(); err != nil {
		t.Fatal(err)
	}
	if got := len(sm.observed); got != 5 || sm.observed[3] != "d" || sm.observed[4] != "e" {
		t.Fatalf("observed %q after a round with two proposals", sm.observed)
	}
	if got := n.Replica(1).Applied(); got == 0 || len(sm.applied) != 5 {
		t.Fatalf("applied index %d, applied %q", got, sm.applied)
	}
	// Nothing left for a further round.
	if more, err := n.ProcessReady(); err != nil || more {
		t.Fatalf("a round with nothing proposed: more=%v err=%v", more, err)
	}
}
