package raftnode

// Fencing: a node that must not serve as leaseholder (its clock is
// beyond the maximum offset from a majority of its peers, or its engine
// failed) is fenced. A fenced node still replicates as a follower — its
// log and its votes for others do not depend on its clock — but:
//
//   - none of its replicas holds a lease: Lease and ReadLease report
//     none, ProposeAt refuses, and the leases held when the fence went up
//     are dropped at once, so a request already past the door waits for
//     nothing it could serve wrongly;
//   - every group it leads hands leadership to its most caught-up voter
//     (raft's leadership transfer, retried each tick until it sticks);
//   - it stands for no election: its own pre-vote and vote requests are
//     not sent, and a MsgTimeoutNow (another leader handing it
//     leadership) is dropped, so the transfer times out and that leader
//     stays.
//
// Lifting the fence does not restore a lease as it was: the next round
// takes the lease up afresh (raftnode's LeaseAcquired), with a new lease
// start after the maximum clock offset, as after any election.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Fence stops this node from serving as leaseholder for the given reason,
// until Unfence(source). Sources are independent (the clock monitor and
// the engine each fence for their own reason); the node stays fenced
// while any is set.
func (n *Node) Fence(source string, reason error) {
	n.fenceMu.Lock()
	if n.fences == nil {
		n.fences = map[string]error{}
	}
	n.fences[source] = reason
	n.fenced.Store(true)
	n.fenceMu.Unlock()
	// Drop the leases now: the next round would too, but a request may
	// arrive before it.
	n.mu.Lock()
	for _, r := range n.replicas {
		r.lease.Store(0)
		r.readUntil.Store(0)
		r.confirmed.Store(0)
	}
	n.mu.Unlock()
	n.signal()
}

// Unfence lifts the fence of source (a no-op if it is not set).
func (n *Node) Unfence(source string) {
	n.fenceMu.Lock()
	delete(n.fences, source)
	n.fenced.Store(len(n.fences) > 0)
	n.fenceMu.Unlock()
	n.relook.Store(true)
	n.signal()
}

// relookLeases takes up the leases of the groups this node leads once the
// fence has lifted. Each round does so for the groups with a Ready; a
// group of one voter, with no follower to send heartbeats to, may have
// none for a long time (found by bench/cluster's single node, whose
// first lease was fenced while the clock was unverified and never came).
func (n *Node) relookLeases() []func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	var after []func()
	for _, r := range n.replicas {
		obs, _ := r.sm.(ApplyObserver)
		if f := r.updateLease(obs); f != nil {
			after = append(after, f)
		}
	}
	return after
}

// Fenced returns why the node is fenced, or nil.
func (n *Node) Fenced() error {
	if !n.fenced.Load() {
		return nil
	}
	n.fenceMu.Lock()
	defer n.fenceMu.Unlock()
	var format []string
	args := []any{n.cfg.NodeID}
	for _, s := range slices.Sorted(maps.Keys(n.fences)) {
		format = append(format, "%s: %w")
		args = append(args, s, n.fences[s])
	}
	if len(format) == 0 {
		return nil
	}
	return fmt.Errorf("raftnode: node %d is fenced ("+strings.Join(format, "; ")+")", args...)
}

// fail marks the node's engine failed: from now on no message is stepped
// (raft would read its log from the failed engine and panic), and the
// node is fenced.
func (n *Node) fail(err error) {
	n.failed.Store(true)
	n.Fence("engine", err)
}

// handOffLocked moves the leadership of every group this fenced node leads
// to its most caught-up other voter (n.mu held). A group whose only voter
// is this node has nobody to hand to.
func (n *Node) handOffLocked() {
	for _, r := range n.replicas {
		if r.alone.Load() {
			continue
		}
		st := r.rn.BasicStatus()
		if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 {
			continue
		}
		var to, match uint64
		full := r.rn.Status()
		for _, v := range pb.EnsureConfState(r.conf).GetVoters() {
			if v == n.cfg.NodeID {
				continue
			}
			if p, ok := full.Progress[v]; ok && (to == 0 || p.Match > match) {
				to, match = v, p.Match
			}
		}
		if to != 0 {
			n.touchLocked(r)
			r.rn.TransferLeader(to)
		}
	}
}

// fencedOut reports whether a fenced node must not send m: its own
// requests for votes.
func fencedOut(m *pb.Message) bool {
	t := m.GetType()
	return t == pb.MessageType_MsgPreVote || t == pb.MessageType_MsgVote
}

// fencedIn reports whether a fenced node must drop m: a leader handing it
// leadership.
func fencedIn(m *pb.Message) bool {
	return m.GetType() == pb.MessageType_MsgTimeoutNow
}
