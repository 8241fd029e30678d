package membership

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-db/cairn/rpc"
	pb "go.etcd.io/raft/v3/raftpb"
)

// The replicate queue. Every ScanInterval each node that is itself live
// (its own liveness record fresh: otherwise the records may all be stale)
// looks at the tablets
// whose lease it holds and makes at most one membership change per tablet
// (raft allows one pending change at a time), in this order:
//
//  1. leave a joint configuration, if one is left over;
//  2. a learner: remove it if its node is not eligible or it has not
//     caught up within LearnerTimeout, promote it to voter once its log
//     has every committed entry (it came up through a snapshot), else
//     wait;
//  3. too few good voters (live, active nodes): add a learner on an
//     eligible node without a replica, preferring a locality the tablet
//     has no voter in, then the node with the fewest replicas (never on
//     a node that still holds a replica of the tablet: addable);
//  4. a voter on a node that is leaving (dead, decommissioning): remove
//     it once the good voters suffice;
//  5. more good voters than the replication factor: remove one (in the
//     most crowded locality, then on the fullest node);
//  6. at its target: rebalance (rebalance), adding a learner on a node
//     with clearly fewer replicas, which rule 5 then evens out.
//
// A leaseholder never removes itself: it hands leadership to another good
// voter first, and the new leaseholder's queue removes it.
//
// The number of voters aimed for is the replication factor (the tablet's
// zone's num_replicas, else the cluster's), or the number
// of eligible nodes when fewer, made odd (two voters survive no more
// failures than one and need both for a quorum): 1 node → 1, 2 → 1,
// 3 → 3, 4 or more → the factor.

// neededVoters is the number of voters to aim for given the eligible nodes.
func neededVoters(rf, eligible int) int {
	n := min(rf, eligible)
	if n < rf && n%2 == 0 && n > 1 {
		n--
	}
	return max(n, 1)
}

func (m *Member) scan(ctx context.Context) error {
	v, err := m.View(ctx)
	if err != nil {
		return err
	}
	if err := m.cfg.Store.PersistDescriptors(); err != nil {
		return err
	}
	if v.State(m.NodeID()) != Live {
		// This node's own record has expired: the liveness records could
		// not be written lately (their tablet was electing a leader, or
		// this node is cut off), so the others' may look stale too. Acting
		// on such a view could remove live voters as dead.
		return nil
	}
	for _, id := range m.cfg.Raft.Tablets() {
		rep := m.cfg.Raft.Replica(id)
		if rep == nil {
			continue
		}
		if term, _ := rep.Lease(); term == 0 {
			continue
		}
		if err := m.considerTablet(ctx, id, v); err != nil {
			m.cfg.Logger.Debug("membership: replicate queue", "tablet", id, "err", err)
		}
	}
	return nil
}

// considerTablet makes at most one change to tablet id's group.
func (m *Member) considerTablet(ctx context.Context, id uint64, v *View) error {
	n := m.cfg.Raft
	self := m.NodeID()
	cs := n.Config(id)
	if len(cs.GetVotersOutgoing()) > 0 {
		return n.ProposeConfChange(id, &pb.ConfChangeV2{})
	}
	voters, learners := cs.GetVoters(), cs.GetLearners()
	now := time.Now()
	for _, l := range learners {
		key := [2]uint64{id, l}
		m.mu.Lock()
		since, ok := m.learners[key]
		if !ok {
			since = now
			m.learners[key] = now
		}
		m.mu.Unlock()
		if !v.Eligible(l) || now.Sub(since) > m.cfg.LearnerTimeout {
			m.forgetLearner(key)
			return m.change(id, pb.ConfChangeType_ConfChangeRemoveNode, l, "remove learner")
		}
		p, ok := n.Progress(id)
		if ok && p.Commit > 0 && p.Match[l] >= p.Commit {
			m.forgetLearner(key)
			return m.change(id, pb.ConfChangeType_ConfChangeAddNode, l, "promote learner")
		}
		return nil
	}
	eligible := 0
	for nid := range v.Nodes {
		if v.Eligible(nid) {
			eligible++
		}
	}
	rf := m.replicationFactor(id)
	need := neededVoters(rf, eligible)
	var good, leaving []uint64
	for _, vo := range voters {
		switch {
		case v.Leaving(vo):
			leaving = append(leaving, vo)
		case v.Eligible(vo) || v.State(vo) == Suspect || vo == self:
			good = append(good, vo)
		}
	}
	if len(good) < need {
		if t := m.addable(ctx, id, v, voters, good); t != 0 {
			return m.change(id, pb.ConfChangeType_ConfChangeAddLearnerNode, t, "add learner")
		}
	}
	if len(leaving) > 0 && (len(good) >= need || len(voters) > 1) {
		// With no replacement possible a leaving voter still goes while
		// another remains: a dead voter only counts against the quorum.
		// A decommissioning leaseholder hands its lease over first.
		victim := leaving[0]
		if victim == self {
			return m.handOff(id, good)
		}
		if len(good) < need && v.State(victim) != Dead {
			// A live decommissioning node keeps its replica until a
			// replacement exists.
			return nil
		}
		return m.change(id, pb.ConfChangeType_ConfChangeRemoveNode, victim, "remove leaving voter")
	}
	if len(good) > rf {
		victim := m.pickVictim(v, good)
		if victim == self {
			return m.handOff(id, good)
		}
		return m.change(id, pb.ConfChangeType_ConfChangeRemoveNode, victim, "remove surplus voter")
	}
	if len(good) == need && len(leaving) == 0 {
		return m.rebalance(ctx, id, v, voters, good)
	}
	return nil
}

// replicationFactor is the number of voters tablet id aims for: its
// zone's num_replicas, else the cluster's factor.
func (m *Member) replicationFactor(id uint64) int {
	if m.cfg.ZoneReplicas != nil {
		if n := m.cfg.ZoneReplicas(id); n > 0 {
			return n
		}
	}
	return m.cfg.ReplicationFactor
}

// rebalance moves one replica of a tablet at its target towards a node
// with fewer (a node that joined a cluster of full ones): it adds a
// learner on the emptiest eligible node without a replica when that node
// holds at least rebalanceGap fewer replicas than the fullest voter and
// is in a locality no other voter has, or the fullest voter shares its
// locality; the surplus voter, the fullest, is removed once the learner
// is promoted (rule 5). One move per node per heartbeat interval, so the
// counts it decides on (from the heartbeats) have caught up with the
// previous move.
func (m *Member) rebalance(ctx context.Context, id uint64, v *View, voters, good []uint64) error {
	m.mu.Lock()
	wait := time.Since(m.lastRebalance) < m.cfg.LivenessTTL/3+m.cfg.ScanInterval
	m.mu.Unlock()
	if wait {
		return nil
	}
	t := m.addable(ctx, id, v, voters, nil)
	if t == 0 {
		return nil
	}
	var full uint64
	for _, g := range good {
		if full == 0 || v.Liveness[g].Replicas > v.Liveness[full].Replicas {
			full = g
		}
	}
	if v.Liveness[full].Replicas-v.Liveness[t].Replicas < rebalanceGap {
		return nil
	}
	others := map[string]bool{}
	shared := false
	for _, g := range good {
		if g != full {
			others[v.Nodes[g].Locality] = true
			shared = shared || v.Nodes[g].Locality == v.Nodes[full].Locality
		}
	}
	if others[v.Nodes[t].Locality] && !shared {
		// Moving would put two voters in one locality.
		return nil
	}
	m.mu.Lock()
	m.lastRebalance = time.Now()
	m.mu.Unlock()
	return m.change(id, pb.ConfChangeType_ConfChangeAddLearnerNode, t, fmt.Sprintf("rebalance from node %d: add learner", full))
}

// rebalanceGap is the difference in replica counts worth a move.
const rebalanceGap = 2

func (m *Member) forgetLearner(key [2]uint64) {
	m.mu.Lock()
	delete(m.learners, key)
	m.mu.Unlock()
}

func (m *Member) change(id uint64, t pb.ConfChangeType, node uint64, what string) error {
	m.cfg.Logger.Info("membership: "+what, "tablet", id, "node", node, "by", m.NodeID())
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &t, NodeId: &node}}}
	if err := m.cfg.Raft.ProposeConfChange(id, cc); err != nil {
		return fmt.Errorf("membership: %s %d of tablet %d: %w", what, node, id, err)
	}
	return nil
}

// handOff transfers tablet id's leadership to another good voter.
func (m *Member) handOff(id uint64, good []uint64) error {
	for _, g := range good {
		if g != m.NodeID() {
			return m.cfg.Raft.TransferLeadershipTo(id, g)
		}
	}
	return nil
}

// addable is pickTarget's choice among the nodes that hold no replica of
// tablet id (0: none). A node may still hold one the group removed: it
// was down or cut off when removed, or has not applied its removal yet,
// and replica GC (gc.go) or that application destroys it in a while.
// Added back before then, the stale replica would catch up by log
// through the entry removing it, destroy itself applying it, and leave
// the leader counting entries in a log that is gone (raft panicked on the
// next heartbeat: raftnode's pastLastIndex); added after, its replica
// starts empty and comes up by snapshot. A node that cannot be asked is
// passed over this time.
func (m *Member) addable(ctx context.Context, id uint64, v *View, members, good []uint64) uint64 {
	skip := slices.Clone(members)
	for {
		t := m.pickTarget(v, skip, good)
		if t == 0 {
			return 0
		}
		holds, err := m.holdsReplica(ctx, v, t, id)
		if err == nil && !holds {
			return t
		}
		m.cfg.Logger.Debug("membership: not adding a learner on a node holding a replica", "tablet", id, "node", t, "err", err)
		skip = append(skip, t)
	}
}

// holdsReplica asks node whether it holds a replica of tablet id
// (testingHolds answers instead when set).
func (m *Member) holdsReplica(ctx context.Context, v *View, node, id uint64) (bool, error) {
	if m.testingHolds != nil {
		return m.testingHolds(node, id), nil
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	out, err := rpc.Call(cctx, m.cfg.Creds, v.Nodes[node].RPCAddr, methodReplicaStatus, encode(replicaStatusRequest{TabletID: id}))
	if err != nil {
		return false, err
	}
	resp, err := decode[replicaStatusResponse](out)
	return resp.Holds, err
}

// pickTarget chooses an eligible node holding no replica of the tablet:
// first one whose locality no good voter has, then the one with the
// fewest replicas, then the lowest ID. 0: none.
func (m *Member) pickTarget(v *View, members, good []uint64) uint64 {
	used := map[string]bool{}
	for _, g := range good {
		used[v.Nodes[g].Locality] = true
	}
	var best uint64
	bestKey := [2]int{}
	for nid := range v.Nodes {
		if !v.Eligible(nid) || slices.Contains(members, nid) {
			continue
		}
		k := [2]int{0, v.Liveness[nid].Replicas}
		if used[v.Nodes[nid].Locality] {
			k[0] = 1
		}
		if best == 0 || k[0] < bestKey[0] || (k[0] == bestKey[0] && (k[1] < bestKey[1] || (k[1] == bestKey[1] && nid < best))) {
			best, bestKey = nid, k
		}
	}
	return best
}

// pickVictim chooses the good voter to remove when there are too many:
// one in the most crowded locality, then on the node with the most
// replicas (this node too: the caller then hands its lease over, and the
// next leaseholder removes it).
func (m *Member) pickVictim(v *View, good []uint64) uint64 {
	count := map[string]int{}
	for _, g := range good {
		count[v.Nodes[g].Locality]++
	}
	var best uint64
	bestKey := [2]int{}
	for _, g := range good {
		k := [2]int{count[v.Nodes[g].Locality], v.Liveness[g].Replicas}
		if best == 0 || k[0] > bestKey[0] || (k[0] == bestKey[0] && (k[1] > bestKey[1] || (k[1] == bestKey[1] && g > best))) {
			best, bestKey = g, k
		}
	}
	return best
}
