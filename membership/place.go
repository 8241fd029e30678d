package membership

import (
	"context"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Placement at creation (issue 16). A new hash-sharded index's buckets
// are split off one tablet, so they all start on that tablet's voters;
// on more nodes than the replication factor the replicate queue's
// rebalancing (queue.go, rule 6) spreads them only a heartbeat interval
// and a settling period per move later, some 85-95 s after the CREATE on
// five nodes with the default intervals, and the first writes all land
// on three nodes. Place lets the DDL put each bucket where it belongs
// before the index takes writes:
//
//  1. The placement of the bucket at ordinal o is computed from the
//     eligible (live, active) nodes in ascending ID order, n of them:
//     voters nodes[o mod n], nodes[o+1 mod n], ... (as many as the
//     queue aims for, neededVoters), and the lease on nodes[o mod n]. So
//     consecutive ordinals put one lease and the replication factor's
//     replicas on each node in turn: over n buckets every node leads one
//     and holds rf. It depends on the ordinal and the node set only, so
//     whichever node holds a bucket's lease when asked (it changes as
//     replicas move) computes the same placement; counts reported by the
//     liveness records are a heartbeat old and change as the buckets
//     themselves move, so a choice by counts would differ per bucket.
//  2. Each call makes at most one configuration change, the queue's
//     steps in the queue's order: leave a joint configuration; remove a
//     learner that is not wanted, promote a wanted one once caught up;
//     add a learner on a wanted node (never on one still holding a
//     replica: addable's reason); remove an unwanted voter once every
//     wanted node votes or there is one voter too many (a promoted
//     learner), so a bucket needing two moves makes them one after the
//     other. The voter to go is recorded as the queue's
//     movingFrom, so the queue, which also promotes and removes on its
//     own scans, removes the same one.
//  3. A leaseholder never removes itself (as in the queue): it hands the
//     lease to the bucket's wanted leaseholder and the caller's next ask
//     reaches that node.
//
// Nothing here is needed for correctness: the queue would reach a
// balanced placement too, only later. The caller (store.spreadLease) asks
// until placed, then moves the lease.

// placeViewAge is how long Place reuses a View: the DDL asks every
// bucket's leaseholder in rounds a few tens of milliseconds apart, and
// reading the node table and liveness records per ask would cost more
// than the moves.
const placeViewAge = time.Second

// Place makes at most one change towards tablet id's placement as the
// bucket at ordinal (rules above), and returns the node the lease should
// go to and whether the voters are placed (the lease is the caller's to
// move then). Called on the tablet's leaseholder.
func (m *Member) Place(ctx context.Context, id uint64, ordinal int) (lease uint64, placed bool, err error) {
	v, err := m.recentView(ctx)
	if err != nil {
		return 0, false, err
	}
	var nodes []uint64
	for nid := range v.Nodes {
		if v.Eligible(nid) {
			nodes = append(nodes, nid)
		}
	}
	if len(nodes) == 0 {
		return 0, true, nil
	}
	want := placementOf(nodes, neededVoters(m.replicationFactor(id), len(nodes)), ordinal)
	lease = want[0]
	n := m.cfg.Raft
	cs := n.Config(id)
	if cs == nil {
		return lease, false, fmt.Errorf("membership: node %d has no replica of tablet %d", m.NodeID(), id)
	}
	if len(cs.GetVotersOutgoing()) > 0 {
		return lease, false, n.ProposeConfChange(id, &pb.ConfChangeV2{})
	}
	voters, learners := cs.GetVoters(), cs.GetLearners()
	for _, l := range learners {
		if !slices.Contains(want, l) {
			return lease, false, m.change(id, pb.ConfChangeType_ConfChangeRemoveNode, l, "placement: remove learner")
		}
		if p, ok := n.Progress(id); ok && p.Commit > 0 && p.Match[l] >= p.Commit {
			return lease, false, m.change(id, pb.ConfChangeType_ConfChangeAddNode, l, "placement: promote learner")
		}
		return lease, false, nil // catching up
	}
	var missing, extra []uint64
	for _, w := range want {
		if !slices.Contains(voters, w) {
			missing = append(missing, w)
		}
	}
	for _, vo := range voters {
		if !slices.Contains(want, vo) {
			extra = append(extra, vo)
		}
	}
	self := m.NodeID()
	// The voter to go: another node's first, so the lease moves once.
	victim := uint64(0)
	for _, e := range extra {
		if victim == 0 || victim == self {
			victim = e
		}
	}
	if victim != 0 && (len(missing) == 0 || len(voters) > len(want)) {
		// Every wanted node votes, or a move's learner was promoted:
		// one voter too many goes first, so a bucket that needs two
		// moves never has more than one voter beyond its count.
		if victim == self {
			return lease, false, n.TransferLeader(id, lease)
		}
		return lease, false, m.change(id, pb.ConfChangeType_ConfChangeRemoveNode, victim, "placement: remove voter")
	}
	if len(missing) > 0 {
		holds, err := m.holdsReplica(ctx, v, missing[0], id)
		if err != nil || holds {
			// A replica the group removed is still there: replica GC
			// destroys it in a while (addable); ask again then.
			return lease, false, err
		}
		if victim != 0 {
			m.mu.Lock()
			m.movingFrom[id] = startedMove{from: victim, at: time.Now()}
			m.mu.Unlock()
		}
		return lease, false, m.change(id, pb.ConfChangeType_ConfChangeAddLearnerNode, missing[0], "placement: add learner")
	}
	return lease, true, nil
}

// placementOf is the placement of the bucket at ordinal over nodes (any
// order; sorted here): need voters from place ordinal on, round-robin,
// the first the leaseholder.
func placementOf(nodes []uint64, need, ordinal int) []uint64 {
	ns := slices.Sorted(slices.Values(nodes))
	n := len(ns)
	need = min(need, n)
	out := make([]uint64, need)
	for j := range need {
		out[j] = ns[((ordinal+j)%n+n)%n]
	}
	return out
}

// recentView is the last View if it is younger than placeViewAge, else
// a new one.
func (m *Member) recentView(ctx context.Context) (*View, error) {
	m.mu.Lock()
	v, at := m.placeView, m.placeViewAt
	m.mu.Unlock()
	if v != nil && time.Since(at) < placeViewAge {
		return v, nil
	}
	v, err := m.View(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.placeView, m.placeViewAt = v, time.Now()
	m.mu.Unlock()
	return v, nil
}
