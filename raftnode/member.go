package raftnode

// Membership plumbing: what the placement layer (package membership)
// needs from a node's groups to add, promote and remove replicas.

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// fromLeader reports whether m is one only a group's leader sends to a
// member: the kinds that may create a replica on a node just added.
func fromLeader(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgSnap, pb.MessageType_MsgHeartbeat:
		return true
	}
	return false
}

// pastLastIndex reports whether m is a heartbeat whose commit index is
// past the end of r's log. The leader sends a heartbeat the commit index
// capped at what it knows the member has (its Match), so such a heartbeat
// was meant for an earlier replica of this node in the group, one that
// had acknowledged those entries and was since destroyed: a heartbeat
// sent before the leader applied this node's removal that arrives after
// the replica applied it and was destroyed (and an empty one made again
// for the message), or a heartbeat to a stale replica re-added to the
// group that caught up by log through its own earlier removal and was
// destroyed applying it. Raft, asked to commit entries it has not got,
// panics ("tocommit(N) is out of range [lastIndex(M)]"); dropped, it is
// one more lost message, which raft tolerates. The leader's
// progress for this node stays wrong until the node leaves the group
// again: the replicate queue removes a learner that never catches up, and
// never adds one on a node that still holds a replica of the tablet
// (membership/queue.go), which is what leads here.
func (r *Replica) pastLastIndex(m *pb.Message) bool {
	if m.GetType() != pb.MessageType_MsgHeartbeat || m.GetCommit() == 0 {
		return false
	}
	last, err := r.log.LastIndex()
	return err == nil && m.GetCommit() > last
}

// beyondEmptyLog reports whether m, for a tablet this node has no
// replica of, would be pastLastIndex for the empty replica made for it.
func beyondEmptyLog(m *pb.Message) bool {
	return m.GetType() == pb.MessageType_MsgHeartbeat && m.GetCommit() > 0
}

// isMember reports whether node is a voter or learner of cs (in either
// half of a joint configuration).
func isMember(cs *pb.ConfState, node uint64) bool {
	return slices.Contains(cs.GetVoters(), node) || slices.Contains(cs.GetLearners(), node) ||
		slices.Contains(cs.GetVotersOutgoing(), node) || slices.Contains(cs.GetLearnersNext(), node)
}

// soleVoter reports whether node is the one member of cs: its only
// voter, with no learner and no joint configuration.
func soleVoter(cs *pb.ConfState, node uint64) bool {
	return slices.Equal(cs.GetVoters(), []uint64{node}) && len(cs.GetLearners()) == 0 &&
		len(cs.GetVotersOutgoing()) == 0 && len(cs.GetLearnersNext()) == 0
}

// soloLogBytes is how many bytes of entries a sole voter's log holds
// before it is truncated through the applied index (Node's round): more
// than a round of ordinary writes appends, less than one SST ingested
// through the log (kv.SortedSSTBytes, up to 24 MiB).
const soloLogBytes = 4 << 20

// Tablets lists the tablets this node has a replica of.
func (n *Node) Tablets() []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]uint64, 0, len(n.replicas))
	for id := range n.replicas {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// NodeID is this node's ID.
func (n *Node) NodeID() uint64 { return n.cfg.NodeID }

// Progress is what a leader knows of its group: the commit index and,
// for each member, the highest index known to be in its log (Match) and
// whether it has heard from it within the last election timeout
// (Active: etcd raft's RecentActive, which CheckQuorum refreshes; the
// leader itself is always active).
type Progress struct {
	Commit uint64
	Match  map[uint64]uint64
	Active map[uint64]bool
}

// Progress returns the group's progress if this node's replica of
// tabletID leads it (ok false otherwise).
func (n *Node) Progress(tabletID uint64) (p Progress, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return p, false
	}
	st := r.rn.Status()
	if st.RaftState != raft.StateLeader {
		return p, false
	}
	p.Commit = st.GetCommit()
	p.Match = map[uint64]uint64{}
	p.Active = map[uint64]bool{}
	for id, pr := range st.Progress {
		p.Match[id] = pr.Match
		p.Active[id] = pr.RecentActive || id == n.cfg.NodeID
	}
	return p, true
}

// TransferLeadershipTo asks this node's replica of tabletID, which must
// lead, to hand leadership to node to (used before removing the leader's
// own replica: a leader never removes itself). A leaseholder transfers as
// TransferLeader does (drained first, the lease given up); a leader that
// has not yet taken its lease up gives up the lease of its term too, so
// that it cannot take it up while the target campaigns (transfer.go).
func (n *Node) TransferLeadershipTo(tabletID, to uint64) error {
	if rep := n.Replica(tabletID); rep != nil {
		if term, _ := rep.Lease(); term != 0 {
			return n.TransferLeader(tabletID, to)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, tabletID)
	}
	st := r.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		// Raft would forward the request to the leader, which would then
		// transfer without giving its lease up.
		return fmt.Errorf("raftnode: tablet %d: node %d does not lead", tabletID, n.cfg.NodeID)
	}
	r.giveUpLease(st.GetTerm(), to)
	defer n.signal()
	n.touchLocked(r)
	r.rn.TransferLeader(to)
	return nil
}

// RemoveReplica closes this node's replica of tabletID after it left the
// group and deletes its raft state, keeping only the term and vote of its
// hard state: if the node is later added to the group again, the replica
// starts empty but never votes twice in a term. The caller clears the
// tablet's data.
func (n *Node) RemoveReplica(tabletID uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return nil
	}
	r.cancelApplyLocked()
	hs, _, _ := r.log.InitialState()
	b := n.eng.NewBatch()
	defer b.Close()
	if err := r.log.Destroy(b); err != nil {
		return err
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		term, vote := hs.GetTerm(), hs.GetVote()
		keep := &pb.HardState{Term: &term, Vote: &vote}
		if err := r.log.SetHardState(b, keep); err != nil {
			return err
		}
	}
	if err := b.Delete(n.appliedKey(tabletID)); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("raftnode: removing the replica of tablet %d: %w", tabletID, err)
	}
	n.releaseObsolete(r.log)
	delete(n.replicas, tabletID)
	n.published.Delete(tabletID)
	if ps := r.pendingSnap; ps != nil {
		// A streamed snapshot for the replica just removed.
		r.pendingSnap = nil
		_ = n.eng.RemoveFile(ps.path)
		ps.done <- fmt.Errorf("raftnode: the replica of tablet %d was removed", tabletID)
	}
	return nil
}

// HasState reports whether this node holds raft state for tabletID: a
// configuration (it is or was a member since its last removal).
func HasState(ls *LogStore) bool {
	_, cs, _ := ls.InitialState()
	return len(cs.GetVoters())+len(cs.GetLearners()) > 0
}
