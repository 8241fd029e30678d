package membership

import (
	"context"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// MoveReplica makes one step of moving tablet id's replica from node from
// to node to, on the tablet's leaseholder (kvpb.PlacementRequest: the
// shard rebalancer's replica moves). It makes the move as the replicate
// queue makes its own rebalancing moves, and shares their bookkeeping so
// that the queue finishes it rather than undoing it:
//
//  1. done: to is a voter and from is not;
//  2. refused: to may not hold a replica (not eligible: dead,
//     decommissioning, or no member), or from is no voter and to none
//     either (nothing to move);
//  3. this node is from: it hands its lease to another voter first (a
//     leaseholder never removes itself), and the next call reaches the
//     new leaseholder;
//  4. to is no member yet: a learner is added there, and from is
//     remembered as the voter the move takes the replica off
//     (movingFrom), so that the queue's rule 5 removes from, not
//     another, once the learner is promoted (rule 2);
//  5. otherwise (a learner catching up, a joint configuration, the
//     removal pending): wait; the queue's next scan takes the next step.
//
// The caller asks again until done or refused, within its own deadline.
func (m *Member) MoveReplica(ctx context.Context, id, from, to uint64) (done, refused bool, err error) {
	n := m.cfg.Raft
	cs := n.Config(id)
	voters, learners := cs.GetVoters(), cs.GetLearners()
	switch {
	case slices.Contains(voters, to) && !slices.Contains(voters, from):
		return true, false, nil
	case !slices.Contains(voters, from) && !slices.Contains(voters, to) && !slices.Contains(learners, to):
		return false, true, nil
	}
	v, err := m.View(ctx)
	if err != nil {
		return false, false, err
	}
	if !v.Eligible(to) {
		return false, true, nil
	}
	if from == m.NodeID() {
		var good []uint64
		for _, vo := range voters {
			if vo != from && v.Eligible(vo) {
				good = append(good, vo)
			}
		}
		return false, false, m.handOff(id, good)
	}
	if len(cs.GetVotersOutgoing()) > 0 || len(learners) > 0 || slices.Contains(voters, to) {
		// A step is under way (the queue promotes the learner, leaves
		// the joint configuration, removes the surplus voter).
		m.mu.Lock()
		if slices.Contains(voters, to) || slices.Contains(learners, to) {
			m.movingFrom[id] = startedMove{from: from, at: time.Now()}
		}
		m.mu.Unlock()
		return false, false, nil
	}
	if holds, err := m.holdsReplica(ctx, v, to, id); err != nil || holds {
		// A stale replica there is destroyed by replica GC in a while
		// (addable explains why adding it back before then breaks raft).
		return false, false, err
	}
	m.mu.Lock()
	m.movingFrom[id] = startedMove{from: from, at: time.Now()}
	m.mu.Unlock()
	return false, false, m.change(id, pb.ConfChangeType_ConfChangeAddLearnerNode, to, "move replica (shard rebalancer): add learner")
}
