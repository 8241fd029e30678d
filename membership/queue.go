package membership

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cairn-db/cairn/raftnode"
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
//     most crowded locality, then on the node with the most replicas of
//     the tablet's domain, then the fullest node), but only one whose
//     removal leaves a quorum of the remaining voters up in raft's view,
//     and one that is not up first (removableVoters);
//  6. at its target: rebalance (rebalance), adding a learner on a node
//     with clearly fewer replicas of the tablet's domain (one index's
//     tablets, such as a hash-sharded index's buckets), or of all
//     tablets, which rule 5 then evens out.
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
	m.forgetMoves(time.Now())
	m.scans.Add(1)
	return nil
}

// Scans counts the replicate queue's scans of every tablet this node
// leads (tests wait on it to see the queue has looked again).
func (m *Member) Scans() uint64 { return m.scans.Load() }

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
		since := m.learnerSince(key, now)
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
	if rf == EveryNode {
		// A voter on each eligible node, even when that makes their
		// number even: a Citus reference table, which every node reads
		// from its own replica (docs/distributed.md).
		rf, need = max(eligible, 1), max(eligible, 1)
	}
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
		if t := m.addable(ctx, id, v, voters, good, m.domainOf(id)); t != 0 {
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
		p, ok := n.Progress(id)
		if !ok {
			return nil // no longer leading: the new leader decides
		}
		up := upVoters(p)
		cands := removableVoters(voters, good, up)
		if len(cands) == 0 {
			// Any removal would leave fewer voters up than a quorum of
			// the rest: wait for the others to answer.
			return nil
		}
		victim := m.pickVictim(v, cands, m.domainOf(id))
		m.mu.Lock()
		if mv, ok := m.movingFrom[id]; ok && slices.Contains(good, mv.from) && keepsQuorum(voters, mv.from, up) {
			// The voter a rebalancing move of this node's chose: the
			// counts may have changed since, and removing another would
			// make a different move than the one decided.
			victim = mv.from
		}
		delete(m.movingFrom, id)
		m.mu.Unlock()
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

// upVoters are the members of a group the leader counts as up: heard
// from within the last election timeout (raft's RecentActive), or holding
// everything committed. The second covers the moment after each election
// timeout when CheckQuorum clears every follower's RecentActive until its
// next response; a node that died at its start holds nothing.
func upVoters(p raftnode.Progress) map[uint64]bool {
	up := map[uint64]bool{}
	for id, a := range p.Active {
		up[id] = a || (p.Commit > 0 && p.Match[id] >= p.Commit)
	}
	return up
}

// removableVoters are the voters among good whose removal leaves a quorum
// of the remaining voters up (upVoters), those not up first: only they
// when any is. A liveness view can still count a node that died at its
// start (it never wrote a record); raft's own contact cannot. Removing a
// live voter from tablet 1's five while two others were dead left four
// voters, two of them dead, and the cluster could not serve
// (bench/hashshard -nodes 5).
func removableVoters(voters, good []uint64, active map[uint64]bool) []uint64 {
	var idle, busy []uint64
	for _, g := range good {
		if !keepsQuorum(voters, g, active) {
			continue
		}
		if active[g] {
			busy = append(busy, g)
		} else {
			idle = append(idle, g)
		}
	}
	if len(idle) > 0 {
		return idle
	}
	return busy
}

// keepsQuorum reports whether voters without victim still have a quorum
// of members up.
func keepsQuorum(voters []uint64, victim uint64, active map[uint64]bool) bool {
	rest, up := 0, 0
	for _, vo := range voters {
		if vo == victim {
			continue
		}
		rest++
		if active[vo] {
			up++
		}
	}
	return 2*up > rest
}

// EveryNode, from Config.ZoneReplicas, asks for a voter on every
// eligible node (the number of voters follows the nodes as they come and
// go).
const EveryNode = -1

// replicationFactor is the number of voters tablet id aims for: its
// zone's num_replicas (or EveryNode), else the cluster's factor.
func (m *Member) replicationFactor(id uint64) int {
	if m.cfg.ZoneReplicas != nil {
		if n := m.cfg.ZoneReplicas(id); n > 0 || n == EveryNode {
			return n
		}
	}
	return m.cfg.ReplicationFactor
}

// rebalance moves one replica of a tablet at its target towards a node
// with fewer: it adds a learner on the eligible node without a replica
// with the fewest replicas of the tablet's domain (Config.Domain), then
// the fewest in all, and rule 5 then removes the voter pickVictim
// chooses, the one with the most of the domain, then the most in all
// (the same order, so the move made is the one decided). A move is made
// when it narrows the spread at both ends (issue 16):
//
//   - for the domain, when the fullest voter holds at least rebalanceGap
//     more of the domain's replicas than the target (after the move the
//     one holds no fewer than the other: a move never just swaps them);
//   - for the totals (a node that joined full ones), when the fullest
//     voter holds rebalanceGap more replicas in all and the target fewer
//     of the domain than it, so that no domain's spread widens.
//
// Domain moves shrink the sum of squares of the domain's counts by at
// least 2 and total moves shrink the totals' without growing any
// domain's, so the two never undo each other and placement settles. The
// counts are the leaders' reports in the liveness records, which lag a
// move by up to a heartbeat interval; so each node makes one move per
// heartbeat interval and a scan, stretched by a random part up to as
// much again, so that nodes reading the same counts do not all move onto
// the same target at once. A target must be in a locality no other voter
// has, unless the fullest voter shares its locality with another.
func (m *Member) rebalance(ctx context.Context, id uint64, v *View, voters, good []uint64) error {
	m.mu.Lock()
	wait := time.Now().Before(m.nextRebalance)
	m.mu.Unlock()
	if wait {
		return nil
	}
	d := m.domainOf(id)
	t := m.pickTarget(v, voters, nil, d)
	if t == 0 {
		return nil
	}
	from, why, byDomain, ok := m.worthMoving(v, good, t, d)
	seenFor := m.settle() * time.Duration(1+m.rankAmongMovers(v, from, d, byDomain))
	if !m.seenLongEnough(id, [2]uint64{from, t}, ok, time.Now(), seenFor) {
		return nil
	}
	// Asked only now: a call per tablet and scan would cost too much.
	if holds, err := m.holdsReplica(ctx, v, t, id); err != nil || holds {
		return nil
	}
	pause := m.cfg.LivenessTTL/3 + m.cfg.ScanInterval
	m.mu.Lock()
	m.nextRebalance = time.Now().Add(pause + rand.N(pause))
	m.movingFrom[id] = startedMove{from: from, at: time.Now()}
	m.mu.Unlock()
	return m.change(id, pb.ConfChangeType_ConfChangeAddLearnerNode, t, why+": add learner")
}

// settle is how long a rebalancing move must be found worth making
// before the first node to make it does (seenLongEnough): two heartbeat
// intervals and a scan.
func (m *Member) settle() time.Duration { return 2*(m.cfg.LivenessTTL/3) + m.cfg.ScanInterval }

// rankAmongMovers is how many live nodes with a lower ID than this one
// could make the same move off node from: by their records, they lead a
// tablet of domain d that from holds a replica of (for a move by the
// domain's counts), or any tablet from holds one of. Every such
// leaseholder reads the same reports, so each found the same imbalance
// worth one move at the same moment, and each made it: three nodes
// moved a replica from node 2 to node 5 within 40 ms, overshooting to
// node 5 two above, and the moves back overshot again
// (TestReplicasSpreadPerDomain, under load; the test then saw a
// balanced moment and a move after it). Waiting settle once more per
// lower-ranked node lets the first mover's learner (the records count
// learners) reach its next report and end the others' waits (the
// imbalance it fixes is no longer seen); the first still moves after
// one settle. A node that cannot make the move (its tablets with from
// all hold to already) only delays the next by a settle.
func (m *Member) rankAmongMovers(v *View, from uint64, d string, byDomain bool) int {
	self := m.NodeID()
	rank := 0
	for id, l := range v.Liveness {
		if id >= self || v.State(id) != Live {
			continue
		}
		if byDomain && l.Domains[d][from] > 0 || !byDomain && l.Members[from] > 0 {
			rank++
		}
	}
	return rank
}

// seenLongEnough reports whether the move from→to of tablet id (seen
// says whether this scan, at now, found it worth making) has been found
// worth making in every scan for wait (settle, or more by rank). The counts are the leaders'
// reports, each written at its own moment: a lease that just moved is
// counted by its old holder's record and its new one's until the old
// one's next heartbeat, or by neither, and a balanced domain looked
// uneven for that while (the five-node test thrashed on it). A real
// imbalance outlasts every node's next heartbeat; such a blip does not.
func (m *Member) seenLongEnough(id uint64, move [2]uint64, seen bool, now time.Time, wait time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !seen {
		delete(m.considered, id)
		return false
	}
	c, ok := m.considered[id]
	if !ok || c.move != move || now.Sub(c.last) > m.settle() {
		// New, or not looked at since (the lease was elsewhere).
		m.considered[id] = consideredMove{move: move, since: now, last: now}
		return false
	}
	c.last = now
	m.considered[id] = c
	if now.Sub(c.since) < wait {
		return false
	}
	delete(m.considered, id)
	return true
}

// startedMove is a rebalancing move this node started: the voter the
// replica comes off, and when.
type startedMove struct {
	from uint64
	at   time.Time
}

// learnerSeen is when the queue first saw a learner, and when a scan
// last did.
type learnerSeen struct{ since, last time.Time }

// learnerSince records that a scan at now saw learner key ({tablet,
// node}) and returns since when the queue has watched it.
func (m *Member) learnerSince(key [2]uint64, now time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.learners[key]
	if !ok {
		w.since = now
	}
	w.last = now
	m.learners[key] = w
	return w.since
}

// learnerForget is how long after a scan last saw a learner its entry
// is dropped: the learner was promoted or removed by another
// leaseholder, or the lease went elsewhere. Kept, such an entry grew the
// map for every move the node ever saw start, and a learner added again
// on the same node (a later move of the same tablet) inherited the old
// start and was removed as timed out at once, before its snapshot.
func (m *Member) learnerForget() time.Duration { return 5 * m.cfg.ScanInterval }

// forgetMoves drops what rebalance remembers of tablets that are no
// longer looked at (their lease went elsewhere, or the learner was
// given up on), and the learners no scan has seen for learnerForget.
func (m *Member) forgetMoves(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.learners {
		if now.Sub(w.last) > m.learnerForget() {
			delete(m.learners, key)
		}
	}
	for id, c := range m.considered {
		if now.Sub(c.last) > time.Minute {
			delete(m.considered, id)
		}
	}
	for id, mv := range m.movingFrom {
		if now.Sub(mv.at) > m.cfg.LearnerTimeout+time.Minute {
			delete(m.movingFrom, id)
		}
	}
}

// consideredMove is a rebalancing move of a tablet found worth making in
// every scan from since to last.
type consideredMove struct {
	move        [2]uint64 // from, to
	since, last time.Time
}

// worthMoving decides whether a tablet of domain d with good voters good
// should move a replica to node t (rebalance's rules), from which voter,
// and why.
func (m *Member) worthMoving(v *View, good []uint64, t uint64, d string) (from uint64, why string, byDomain, ok bool) {
	full := m.pickVictim(v, good, d)
	lf, lt := v.load(d, full), v.load(d, t)
	switch {
	case d != "" && lf.dom-lt.dom >= rebalanceGap:
		why = fmt.Sprintf("rebalance domain %q from node %d (%d replicas of it, node %d %d)", d, full, lf.dom, t, lt.dom)
		byDomain = true
	case lf.total-lt.total >= rebalanceGap && (d == "" || lt.dom < lf.dom):
		why = fmt.Sprintf("rebalance from node %d (%d replicas, node %d %d)", full, lf.total, t, lt.total)
	default:
		return full, "", false, false
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
		return full, "", byDomain, false
	}
	return full, why, byDomain, true
}

// rebalanceGap is the difference in replica counts worth a move.
const rebalanceGap = 2

// load is what the queue ranks nodes by: their replicas of a tablet's
// domain, then their replicas in all.
type load struct{ dom, total int }

func (v *View) load(d string, node uint64) load {
	return load{v.DomainReplicasOn(d, node), v.Liveness[node].Replicas}
}

func (a load) cmp(b load) int {
	if c := cmp.Compare(a.dom, b.dom); c != 0 {
		return c
	}
	return cmp.Compare(a.total, b.total)
}

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
func (m *Member) addable(ctx context.Context, id uint64, v *View, members, good []uint64, d string) uint64 {
	skip := slices.Clone(members)
	for {
		t := m.pickTarget(v, skip, good, d)
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
// fewest replicas of domain d, then the fewest in all, then the lowest
// ID. 0: none.
func (m *Member) pickTarget(v *View, members, good []uint64, d string) uint64 {
	used := map[string]bool{}
	for _, g := range good {
		used[v.Nodes[g].Locality] = true
	}
	var best uint64
	var bestUsed bool
	var bestLoad load
	for nid := range v.Nodes {
		if !v.Eligible(nid) || slices.Contains(members, nid) {
			continue
		}
		u, l := used[v.Nodes[nid].Locality], v.load(d, nid)
		if best == 0 || (!u && bestUsed) || (u == bestUsed && (l.cmp(bestLoad) < 0 || (l.cmp(bestLoad) == 0 && nid < best))) {
			best, bestUsed, bestLoad = nid, u, l
		}
	}
	return best
}

// pickVictim chooses the good voter to remove when there are too many:
// one in the most crowded locality, then on the node with the most
// replicas of domain d, then the most in all, then the highest ID (this
// node too: the caller then hands its lease over, and the next
// leaseholder removes it).
func (m *Member) pickVictim(v *View, good []uint64, d string) uint64 {
	count := map[string]int{}
	for _, g := range good {
		count[v.Nodes[g].Locality]++
	}
	var best uint64
	var bestCrowd int
	var bestLoad load
	for _, g := range good {
		c, l := count[v.Nodes[g].Locality], v.load(d, g)
		if best == 0 || c > bestCrowd || (c == bestCrowd && (l.cmp(bestLoad) > 0 || (l.cmp(bestLoad) == 0 && g > best))) {
			best, bestCrowd, bestLoad = g, c, l
		}
	}
	return best
}
