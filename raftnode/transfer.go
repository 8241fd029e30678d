package raftnode

// Leadership (and so lease) transfers. Leader = leaseholder, so moving a
// tablet's lease is raft's leadership transfer: the leader stops taking
// proposals, brings the target's log up to its own, and sends it
// MsgTimeoutNow, on which the target campaigns at once at the next term.
//
// The read lease needs care. It rests on CheckQuorum's rule that a
// follower which heard from its leader grants no vote for an election
// timeout; a transfer's campaign is exempt from that rule (voters grant
// it at once, as they must for the transfer to work), so a new leader can
// be elected while the old one's read lease would still run. Hence the
// old leader gives up its lease, reads included, when it starts the
// transfer (before MsgTimeoutNow can leave: the message goes out in a
// later round), and never takes it up again in that term: MsgTimeoutNow
// can arrive late, so even a transfer raft gave up on (the target did not
// campaign within an election timeout) may still elect the target. A
// leader left without a lease that way hands leadership on to a follower
// that is up and caught up (Tick, retryTransfers), and that follower takes
// the lease up at a new term with the usual rules ("Taking up a lease" in
// docs/architecture.md: it waits out the maximum clock offset).

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// TransferLeader asks this node's replica of tabletID, which must lead the
// group and hold its lease, to hand leadership (and the lease) to voter to. The replica stops
// serving at once; the transfer completes asynchronously (the target is
// elected at the next term and then takes up the lease). Reports an error
// when this replica does not lead or to is not another voter.
func (n *Node) TransferLeader(tabletID, to uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, tabletID)
	}
	st := r.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || r.lease.Load() != st.GetTerm() {
		// Also refused between election and lease: the lease is published
		// after the node's lock is released (updateLease), and must not
		// be published after it was given up.
		return fmt.Errorf("raftnode: tablet %d: node %d does not hold the lease", tabletID, n.cfg.NodeID)
	}
	if to == n.cfg.NodeID || !slices.Contains(pb.EnsureConfState(r.conf).GetVoters(), to) {
		return fmt.Errorf("raftnode: tablet %d: node %d is not another voter of the group", tabletID, to)
	}
	r.giveUpLease(st.GetTerm(), to)
	defer n.signal()
	r.rn.TransferLeader(to)
	return nil
}

// giveUpLease ends the replica's lease for good in term (see the file
// comment); to is the intended new leader.
func (r *Replica) giveUpLease(term, to uint64) {
	r.transferTerm.Store(term)
	r.transferTo.Store(to)
	r.lease.Store(0)
	r.readUntil.Store(0)
}

// retryTransfers runs on every tick (the node's lock held): a leader
// that gave up its lease in its current term and whose transfer raft
// abandoned tries again, to its intended target if that is up, otherwise
// to another follower that is up and whose log is closest to its own.
func (n *Node) retryTransfers() {
	for _, r := range n.replicas {
		term := r.transferTerm.Load()
		if term == 0 {
			continue
		}
		st := r.rn.BasicStatus()
		if st.RaftState != raft.StateLeader || st.GetTerm() != term || st.LeadTransferee != 0 {
			continue
		}
		full := r.rn.Status()
		target, best := uint64(0), uint64(0)
		for id, pr := range full.Progress {
			if id == n.cfg.NodeID || pr.IsLearner || !pr.RecentActive {
				continue
			}
			if id == r.transferTo.Load() {
				target = id
				break
			}
			if target == 0 || pr.Match > best {
				target, best = id, pr.Match
			}
		}
		if target != 0 {
			r.rn.TransferLeader(target)
		}
	}
}

// GroupInfo is what a lease balancer needs of one of a node's replicas.
type GroupInfo struct {
	TabletID uint64
	// Lease is the term of the lease this replica holds (0: none).
	Lease uint64
	// Leader is the node this replica believes leads the group (0:
	// unknown).
	Leader uint64
	// Voters are the group's voters as of this replica's applied entry.
	Voters []uint64
	// Active are the voters the leader has heard from recently, itself
	// included (only filled when this replica leads).
	Active []uint64
}

// Groups describes every replica of the node.
func (n *Node) Groups() []GroupInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]GroupInfo, 0, len(n.replicas))
	for id, r := range n.replicas {
		g := GroupInfo{TabletID: id, Lease: r.lease.Load(), Leader: r.leader.Load(),
			Voters: slices.Clone(pb.EnsureConfState(r.conf).GetVoters())}
		if g.Lease != 0 {
			g.Active = activeVoters(r.rn.Status().Progress, g.Voters)
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b GroupInfo) int { return int(a.TabletID) - int(b.TabletID) })
	return out
}

func activeVoters(prs map[uint64]tracker.Progress, voters []uint64) []uint64 {
	var out []uint64
	for _, v := range voters {
		if pr, ok := prs[v]; ok && pr.RecentActive {
			out = append(out, v)
		}
	}
	return out
}
