package raftnode

// Leadership (and so lease) transfers. Leader = leaseholder, so moving a
// tablet's lease is raft's leadership transfer: the leader stops taking
// proposals, brings the target's log up to its own, and sends it
// MsgTimeoutNow, on which the target campaigns at once at the next term.
//
// A planned transfer drains first. A proposer learns its proposal's fate
// on its own replica (applied, or superseded by a later term's entry);
// one still waiting when its replica gives the lease away waits on the
// new leader's log reaching it, and after a while without that it must
// answer that the outcome is unknown (AmbiguousResultError, SQLSTATE
// 40003 at the SQL boundary) although the transfer was chosen, not
// suffered. So before giving the lease up, TransferLeader asks the state
// machine (LeaseDrainer, the tablet) to take no new work under the lease
// and to finish what is under way (proposals applied), for at most
// DrainTimeout; a replica that cannot drain in time keeps its lease and
// the transfer is refused (the balancer tries again later). Requests
// arriving meanwhile wait at the door and then follow the lease to its
// new holder (NotLeaseholderError, which the router retries: nothing was
// evaluated), or go on under the lease kept. Decision: refuse rather than transfer with proposals still
// in flight; a lease that cannot be moved cleanly is better kept than
// moved at the price of answers nobody can interpret.
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
	"context"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// LeaseDrainer is optionally implemented by a StateMachine that does work
// under its replica's lease (the tablet: proposals waiting to apply). A
// planned transfer drains it before the lease is given up (see the file
// comment).
type LeaseDrainer interface {
	// DrainLease makes the replica take no new work under the lease of
	// term (requests wait at the door) and waits, until ctx ends, for
	// the work under way to finish (proposals applied); it reports
	// whether it did.
	DrainLease(ctx context.Context, term uint64) bool
	// EndDrain ends DrainLease's hold: the replica serves again under
	// term if it still holds that lease, and otherwise sends its waiting
	// requests on to the new leaseholder.
	EndDrain(term uint64)
}

// DrainTimeout bounds how long a planned transfer waits for the
// proposals under way to apply before giving up (the lease stays).
// Proposals apply within a raft round or two; a replica that takes
// longer is overloaded or cut off, and moving its lease then would only
// make their outcome harder to learn.
var DrainTimeout = time.Second

// TransferLeader asks this node's replica of tabletID, which must lead the
// group and hold its lease, to hand leadership (and the lease) to voter
// to. It first drains the replica (LeaseDrainer, up to DrainTimeout;
// refused, lease kept, if that fails), then stops serving and starts the
// transfer, which completes asynchronously (the target is elected at the
// next term and then takes up the lease). Reports an error when this
// replica does not lead or to is not another voter.
func (n *Node) TransferLeader(tabletID, to uint64) error {
	r, term, err := n.transferable(tabletID, to)
	if err != nil {
		return err
	}
	if d, ok := r.sm.(LeaseDrainer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		drained := d.DrainLease(ctx, term)
		cancel()
		// After the lease is given up below (deferred calls run last
		// first): the requests held back then go on to the new holder.
		defer d.EndDrain(term)
		if !drained {
			return fmt.Errorf("raftnode: tablet %d: proposals under the lease did not apply within %s; lease kept", tabletID, DrainTimeout)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.replicas[tabletID] != r {
		return fmt.Errorf("raftnode: tablet %d: replica replaced during the transfer", tabletID)
	}
	if err := r.checkTransferLocked(to); err != nil || r.lease.Load() != term {
		return fmt.Errorf("raftnode: tablet %d: lease of term %d lost while draining", tabletID, term)
	}
	r.giveUpLease(term, to)
	defer n.signal()
	n.touchLocked(r)
	r.rn.TransferLeader(to)
	return nil
}

// transferable returns tabletID's replica and its lease's term if it may
// transfer the lease to to.
func (n *Node) transferable(tabletID, to uint64) (*Replica, uint64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return nil, 0, fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, tabletID)
	}
	if err := r.checkTransferLocked(to); err != nil {
		return nil, 0, err
	}
	return r, r.lease.Load(), nil
}

// checkTransferLocked (the node's lock held) refuses a transfer by a
// replica that does not hold the lease of its current term, or to a node
// that is not another voter.
func (r *Replica) checkTransferLocked(to uint64) error {
	n := r.node
	st := r.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || r.lease.Load() != st.GetTerm() {
		// Also refused between election and lease: the lease is published
		// after the node's lock is released (updateLease), and must not
		// be published after it was given up.
		return fmt.Errorf("raftnode: tablet %d: node %d does not hold the lease", r.TabletID, n.cfg.NodeID)
	}
	if to == n.cfg.NodeID || !slices.Contains(pb.EnsureConfState(r.conf).GetVoters(), to) {
		return fmt.Errorf("raftnode: tablet %d: node %d is not another voter of the group", r.TabletID, to)
	}
	return nil
}

// giveUpLease ends the replica's lease for good in term (see the file
// comment); to is the intended new leader.
func (r *Replica) giveUpLease(term, to uint64) {
	r.transferTerm.Store(term)
	r.transferTo.Store(to)
	r.transferTries = 0
	r.lease.Store(0)
	r.readUntil.Store(0)
	r.confirmed.Store(0)
}

// retryTransfers runs on every tick (the node's lock held): a leader
// that gave up its lease in its current term and whose transfer raft
// abandoned tries again: once more to its intended target if that is up
// (a message may have been lost), then to the follower that is up and
// whose log is closest to its own. Not to the intended target forever: a
// node that never campaigns (fenced by its clock, it drops MsgTimeoutNow)
// would leave the tablet without a leaseholder.
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
		intended := r.transferTo.Load()
		target, best := uint64(0), uint64(0)
		for id, pr := range full.Progress {
			if id == n.cfg.NodeID || pr.IsLearner || !pr.RecentActive {
				continue
			}
			if id == intended && r.transferTries < 1 {
				target = id
				break
			}
			if id != intended && (target == 0 || pr.Match > best) {
				target, best = id, pr.Match
			}
		}
		if target == 0 {
			if pr, ok := full.Progress[intended]; ok && pr.RecentActive && !pr.IsLearner {
				target = intended
			}
		}
		if target != 0 {
			r.transferTries++
			n.touchLocked(r)
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
	// included (only filled when this replica holds the lease).
	Active []uint64
	// CaughtUp are the other voters a transfer could go to at once: heard
	// from recently, replicating (not being probed or sent a snapshot)
	// and at most MaxTransferLag entries behind the commit index (only
	// filled when this replica holds the lease).
	CaughtUp []uint64
}

// MaxTransferLag is how far behind the leader's commit index a voter may
// be and still count as caught up (GroupInfo.CaughtUp): under writes the
// slower follower of three trails the quorum by the entries in flight.
const MaxTransferLag = 32

// Groups describes every replica of the node.
func (n *Node) Groups() []GroupInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]GroupInfo, 0, len(n.replicas))
	for id, r := range n.replicas {
		g := GroupInfo{TabletID: id, Lease: r.lease.Load(), Leader: r.leader.Load(),
			Voters: slices.Clone(pb.EnsureConfState(r.conf).GetVoters())}
		switch {
		case g.Lease != 0 && r.solo.Load():
			// No other node: nothing a status would add (a copy of
			// every progress, per group, per balancer pass).
			g.Active = []uint64{n.cfg.NodeID}
		case g.Lease != 0:
			st := r.rn.Status()
			g.Active = activeVoters(st.Progress, g.Voters)
			g.CaughtUp = caughtUp(st, g.Voters, n.cfg.NodeID)
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b GroupInfo) int { return int(a.TabletID) - int(b.TabletID) })
	return out
}

// Group describes this node's replica of tabletID as Groups does (ok
// false: no replica here).
func (n *Node) Group(tabletID uint64) (GroupInfo, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return GroupInfo{}, false
	}
	g := GroupInfo{TabletID: tabletID, Lease: r.lease.Load(), Leader: r.leader.Load(),
		Voters: slices.Clone(pb.EnsureConfState(r.conf).GetVoters())}
	switch {
	case g.Lease != 0 && r.solo.Load():
		g.Active = []uint64{n.cfg.NodeID}
	case g.Lease != 0:
		st := r.rn.Status()
		g.Active = activeVoters(st.Progress, g.Voters)
		g.CaughtUp = caughtUp(st, g.Voters, n.cfg.NodeID)
	}
	return g, true
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

// caughtUp lists the voters but self that st (a leader's status) shows
// recently active, replicating and within MaxTransferLag of its commit.
func caughtUp(st raft.Status, voters []uint64, self uint64) []uint64 {
	var out []uint64
	commit := st.GetCommit()
	for _, v := range voters {
		pr, ok := st.Progress[v]
		if v == self || !ok || !pr.RecentActive || pr.State != tracker.StateReplicate || pr.IsPaused() {
			continue
		}
		if pr.Match+MaxTransferLag >= commit {
			out = append(out, v)
		}
	}
	return out
}
