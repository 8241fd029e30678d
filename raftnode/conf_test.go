package raftnode

import (
	"bytes"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestMembershipChange moves a group from nodes {1,2,3} to {2,3,4} the
// way placement does: node 4 joins as a learner (it is far behind, the
// log was compacted, so a snapshot brings it up), is promoted to voter,
// and a follower is removed; the group keeps committing throughout, and
// the members end with identical state.
func TestMembershipChange(t *testing.T) {
	s := newSim(t, 42, 3)
	s.lossy = false
	n4 := &simNode{id: 4, fs: vfs.NewCrashableMem(), joining: true}
	s.nodes = append(s.nodes, n4)
	s.start(n4)
	for range 400 {
		s.step(true, false)
	}
	const tid = 1
	leader := func() *simNode { return s.leader(tid) }
	change := func(typ pb.ConfChangeType, node uint64, done func(*pb.ConfState) bool) {
		t.Helper()
		s.change(tid, typ, node, done)
	}
	change(pb.ConfChangeType_ConfChangeAddLearnerNode, 4, func(cs *pb.ConfState) bool { return slices.Contains(cs.GetLearners(), 4) })
	if got := n4.sms[tid].contents(); len(got) == 0 {
		// Give the learner time to catch up before checking it did.
		for range 300 {
			s.step(false, false)
		}
	}
	caughtUp := func() bool {
		return len(n4.sms[tid].contents()) > 0 && n4.node.Replica(tid).Applied() >= leader().node.Replica(tid).Applied()
	}
	for range 1000 {
		if caughtUp() {
			break
		}
		s.step(false, false)
	}
	if !caughtUp() {
		t.Fatalf("the learner applied %d, the leader %d", n4.node.Replica(tid).Applied(), leader().node.Replica(tid).Applied())
	}
	if s.snapshots == 0 {
		t.Errorf("the learner caught up without a snapshot; the test meant to exercise one")
	}
	change(pb.ConfChangeType_ConfChangeAddNode, 4, func(cs *pb.ConfState) bool { return slices.Contains(cs.GetVoters(), 4) })
	// Remove a follower among 1..3.
	var victim uint64
	for _, n := range s.nodes[:3] {
		if n.node.Replica(tid).Status().RaftState != raft.StateLeader {
			victim = n.id
			break
		}
	}
	change(pb.ConfChangeType_ConfChangeRemoveNode, victim, func(cs *pb.ConfState) bool { return !slices.Contains(cs.GetVoters(), victim) })
	before := len(s.applied[tid])
	for range 600 {
		s.step(true, false)
	}
	for range 600 {
		s.step(false, false)
	}
	if len(s.applied[tid]) <= before {
		t.Fatalf("no entries committed after the removal (%d before, %d after)", before, len(s.applied[tid]))
	}
	cs := leader().node.Config(tid)
	var members []uint64
	for _, n := range s.nodes {
		if slices.Contains(cs.GetVoters(), n.id) {
			members = append(members, n.id)
		}
	}
	if len(members) != 3 || slices.Contains(members, victim) || !slices.Contains(members, 4) {
		t.Fatalf("voters %v, want three including 4 and not %d", cs.GetVoters(), victim)
	}
	want := s.nodes[members[0]-1].sms[tid].contents()
	for _, id := range members[1:] {
		got := s.nodes[id-1].sms[tid].contents()
		if len(got) != len(want) {
			t.Fatalf("node %d holds %d entries, node %d %d", id, len(got), members[0], len(want))
		}
		for i, v := range want {
			if !bytes.Equal(got[i], v) {
				t.Fatalf("node %d differs at %d", id, i)
			}
		}
	}
}

// leader steps the simulation until tablet tid has a leader among the
// nodes up, and returns it.
func (s *sim) leader(tid uint64) *simNode {
	s.t.Helper()
	for range 500 {
		for _, n := range s.nodes {
			if n.up && n.node.Replica(tid) != nil && n.node.Replica(tid).Status().RaftState == raft.StateLeader {
				return n
			}
		}
		s.step(false, false)
	}
	s.t.Fatal("no leader")
	return nil
}

// change proposes a configuration change of node to tablet tid's group
// at its leader, stepping (with proposals) until done holds of the
// leader's configuration, again if it is lost.
func (s *sim) change(tid uint64, typ pb.ConfChangeType, node uint64, done func(*pb.ConfState) bool) {
	s.t.Helper()
	for range 20 {
		l := s.leader(tid)
		cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &typ, NodeId: &node}}}
		if err := l.node.ProposeConfChange(tid, cc); err != nil {
			s.t.Fatal(err)
		}
		for range 300 {
			s.step(true, false)
			if done(l.node.Config(tid)) {
				return
			}
		}
	}
	s.t.Fatalf("change %v of node %d never applied", typ, node)
}
