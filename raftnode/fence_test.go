package raftnode

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestFenceHandsOffLeadership fences a node that leads groups in the
// seeded simulation: at once none of its replicas holds a lease or
// accepts a proposal; within a few election timeouts every group it led
// is led by another node, which holds the lease and commits; and while
// fenced it never leads again (it asks for no votes). Unfenced, it may
// lead again.
func TestFenceHandsOffLeadership(t *testing.T) {
	s := newSim(t, 11, 3)
	s.lossy = false
	for range 600 {
		s.step(true, false)
	}
	var victim *simNode
	led := 0
	for _, n := range s.nodes {
		c := 0
		for tid := uint64(1); tid <= simTablets; tid++ {
			if n.node.Replica(tid).Status().RaftState == raft.StateLeader {
				c++
			}
		}
		if c > led {
			victim, led = n, c
		}
	}
	if victim == nil {
		t.Fatal("no node leads any group")
	}
	reason := errors.New("clock beyond the maximum offset")
	victim.node.Fence("test", reason)
	if err := victim.node.Fenced(); !errors.Is(err, reason) {
		t.Fatalf("Fenced() = %v", err)
	}
	for tid := uint64(1); tid <= simTablets; tid++ {
		r := victim.node.Replica(tid)
		if term, _ := r.Lease(); term != 0 {
			t.Fatalf("tablet %d: a fenced node reports the lease of term %d", tid, term)
		}
		if _, ok := r.ReadLease(); ok {
			t.Fatalf("tablet %d: a fenced node may serve reads", tid)
		}
		if st := r.Status(); st.RaftState == raft.StateLeader {
			if err := victim.node.ProposeAt(nil, tid, st.GetTerm(), []byte("x")); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("tablet %d: ProposeAt on a fenced leader: %v", tid, err)
			}
		}
	}
	applied := func() int {
		c := 0
		for tid := uint64(1); tid <= simTablets; tid++ {
			c += len(s.applied[tid])
		}
		return c
	}
	before := applied()
	for i := range 1500 {
		s.step(true, false)
		if i < 300 {
			continue // the hand-offs take a few election timeouts
		}
		for tid := uint64(1); tid <= simTablets; tid++ {
			if victim.node.Replica(tid).Status().RaftState == raft.StateLeader {
				t.Fatalf("step %d: the fenced node leads tablet %d", i, tid)
			}
		}
	}
	for tid := uint64(1); tid <= simTablets; tid++ {
		holder := uint64(0)
		for _, n := range s.nodes {
			if term, _ := n.node.Replica(tid).Lease(); term != 0 {
				holder = n.id
			}
		}
		if holder == 0 || holder == victim.id {
			t.Fatalf("tablet %d: lease held by node %d after the hand-off", tid, holder)
		}
	}
	if applied() <= before {
		t.Fatalf("nothing committed after the fence (%d entries before)", before)
	}
	t.Logf("node %d led %d of %d groups; %d entries applied before the fence, %d after", victim.id, led, simTablets, before, applied())

	victim.node.Unfence("test")
	if err := victim.node.Fenced(); err != nil {
		t.Fatalf("Fenced() after Unfence = %v", err)
	}
}

// nopSM applies nothing.
type nopSM struct{}

func (nopSM) Apply(*storage.Batch, *pb.Entry) error            { return nil }
func (nopSM) Snapshot() ([]byte, error)                        { return nil, nil }
func (nopSM) ApplySnapshot(*storage.Batch, *pb.Snapshot) error { return nil }

// TestUnfenceAlone: a group whose only voter is this node, elected while
// the node was fenced (a node starts fenced until its clock is verified),
// takes its lease up once the fence lifts, though it has no follower and
// so no Ready that would make a round look at it.
func TestUnfenceAlone(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := NewNode(Config{NodeID: 1}, eng, nil)
	if _, err := n.AddReplica(1, []uint64{1}, nopSM{}); err != nil {
		t.Fatal(err)
	}
	n.Fence("clock", errors.New("unverified"))
	if err := n.Campaign(1); err != nil {
		t.Fatal(err)
	}
	settle := func() {
		for range 10 {
			if _, err := n.ProcessReady(); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle()
	if st := n.Replica(1).Status(); st.RaftState != raft.StateLeader {
		t.Fatalf("the sole voter is %v, not leader", st.RaftState)
	}
	if term, _ := n.Replica(1).Lease(); term != 0 {
		t.Fatalf("a fenced node holds the lease of term %d", term)
	}
	n.Unfence("clock")
	settle()
	if term, _ := n.Replica(1).Lease(); term == 0 {
		t.Fatal("the lease was not taken up after the fence lifted")
	}
}
