package raftnode

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestHeartbeatOutlivesRemovedReplica adds node 4 to a group, removes it
// and adds it again, with a heartbeat the leader sent to node 4's first
// replica (commit index past 0: that replica had the entries) arriving
// after the replica applied its removal and was destroyed. The message
// comes from the group's leader, so it used to make a new, empty replica
// there, and raft, told to commit entries past the end of an empty log,
// panicked: "tocommit(N) is out of range [lastIndex(0)]" (issue 16, the
// replicate queue adding a learner on a node whose earlier replica was
// gone or stale). The heartbeat is now dropped without making a replica,
// and the node, added again, starts empty and catches up by snapshot.
func TestHeartbeatOutlivesRemovedReplica(t *testing.T) {
	s := newSim(t, 7, 3)
	s.lossy = false
	n4 := &simNode{id: 4, fs: vfs.NewCrashableMem(), joining: true, comeAndGo: true}
	s.nodes = append(s.nodes, n4)
	s.start(n4)
	for range 200 {
		s.step(true, false)
	}
	const tid = 1
	isLearner := func(cs *pb.ConfState) bool { return slices.Contains(cs.GetLearners(), 4) }
	caughtUp := func() bool {
		r := n4.node.Replica(tid)
		return r != nil && r.Applied() > 1 && r.Applied() >= s.leader(tid).node.Replica(tid).Applied()
	}
	waitCaughtUp := func(what string) {
		t.Helper()
		for range 1000 {
			if caughtUp() {
				return
			}
			s.step(false, false)
		}
		t.Fatalf("%s: node 4 never caught up", what)
	}

	s.change(tid, pb.ConfChangeType_ConfChangeAddLearnerNode, 4, isLearner)
	waitCaughtUp("added")

	// Hold back a heartbeat to node 4 that carries a commit index.
	var held *simMsg
	for i := 0; held == nil && i < 100; i++ {
		s.step(false, false)
		for j, m := range s.net {
			if m.to == 4 && m.env.TabletID == tid && m.env.Msg.GetType() == pb.MessageType_MsgHeartbeat && m.env.Msg.GetCommit() > 0 {
				held = &m
				s.net = slices.Delete(s.net, j, j+1)
				break
			}
		}
	}
	if held == nil {
		t.Fatal("the leader sent node 4 no heartbeat with a commit index")
	}

	s.change(tid, pb.ConfChangeType_ConfChangeRemoveNode, 4, func(cs *pb.ConfState) bool { return !isLearner(cs) })
	for i := 0; n4.node.Replica(tid) != nil; i++ {
		if i == 300 {
			// The leader may apply the removal before node 4 hears that
			// it committed, and then sends it nothing more (about one
			// run in 20): node 4 never applies it. In a cluster the
			// replica GC (membership) destroys such a replica, as here.
			if err := n4.node.RemoveReplica(tid); err != nil {
				t.Fatal(err)
			}
			break
		}
		s.step(false, false)
	}

	if err := n4.node.Step(held.env); err != nil {
		t.Fatalf("stepping the late heartbeat (commit %d): %v", held.env.Msg.GetCommit(), err)
	}
	if _, err := n4.node.ProcessReady(); err != nil {
		t.Fatal(err)
	}
	if n4.node.Replica(tid) != nil {
		t.Fatal("the late heartbeat made a replica on node 4, which is no member")
	}

	s.change(tid, pb.ConfChangeType_ConfChangeAddLearnerNode, 4, isLearner)
	snaps := s.snapshots
	waitCaughtUp("added again")
	if s.snapshots == snaps {
		t.Error("node 4's new replica caught up without a snapshot: it did not start empty")
	}
	want := s.leader(tid).sms[tid].contents()
	if got := n4.sms[tid].contents(); len(got) != len(want) {
		t.Fatalf("node 4 holds %d entries, the leader %d", len(got), len(want))
	}
}
