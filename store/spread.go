package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// spreadLease serves a kvpb.SpreadLeaseRequest: the leaseholder of the
// tablet holding req.Key hands its lease to the voter at req.Ordinal
// (modulo their number) in ascending node ID order, through
// raftnode.Node.TransferLeader (drained first, like the balancer's
// moves). Picking by ordinal over the sorted voters, not by each
// leaseholder's view of the counts, makes a DDL's bucket tablets, which
// share their voters when they come from one split range, land exactly
// round-robin whichever node answers (issue 16). Only the voters that may
// take leases (RaftConfig.LeaseEligible) count, so a dead or
// decommissioning node's share goes to the others.
//
// A target that is not caught up yet (a split's new replicas are probed
// before they replicate) is not forced: the answer is not Done and the
// caller asks again. A replica without the lease answers
// NotLeaseholderError so the router finds the holder, as for a split.
//
// With req.Place the voters are placed first (RaftConfig.Place, one
// configuration change per ask) and the lease then goes to the node the
// placement names; until the voters are placed the answer is not Done.
// The holder that answers Done records the placement (PlacedAt): the
// lease balancer leaves the lease there for LeaseBalancerConfig.Placed's
// hold, so that it judges the new index's leases on counts taken after
// the placement, not on reports and domains from before it.
func (s *Store) spreadLease(ctx context.Context, req *kvpb.SpreadLeaseRequest) (*kvpb.SpreadLeaseResponse, error) {
	r := s.replicaForKey(req.Key)
	if r == nil {
		if s.cfg.Raft != nil && s.cfg.Raft.Membership {
			return nil, &kvpb.TabletNotFoundError{}
		}
		return nil, fmt.Errorf("store: spread lease at %q: %w", req.Key, ErrNoTablet)
	}
	if s.cfg.Raft == nil {
		return &kvpb.SpreadLeaseResponse{Done: true}, nil // one node: nothing to spread
	}
	id := r.Desc().TabletID
	rn := s.cfg.Raft.Node
	g, ok := rn.Group(uint64(id))
	if !ok {
		return nil, &kvpb.TabletNotFoundError{TabletID: id}
	}
	self := rn.NodeID()
	if g.Lease == 0 {
		return nil, &kvpb.NotLeaseholderError{TabletID: id, Replica: self, Leader: g.Leader}
	}
	to := spreadTarget(g.Voters, s.cfg.Raft.LeaseEligible, req.Ordinal)
	if req.Place && req.Node == 0 && s.cfg.Raft.Place != nil {
		lease, placed, err := s.cfg.Raft.Place(ctx, uint64(id), req.Ordinal)
		if err != nil || !placed {
			// A change was proposed, is catching up, or could not be
			// made now: the caller asks again.
			return &kvpb.SpreadLeaseResponse{Target: lease}, nil
		}
		if lease != 0 && slices.Contains(g.Voters, lease) {
			to = lease
		}
	}
	if req.Node != 0 {
		// A named voter (the shard rebalancer): one that is no voter or
		// may take no lease is refused, not replaced by another.
		eligible := s.cfg.Raft.LeaseEligible
		// The answer says so (Refused) rather than failing: the error
		// would reach a caller on another node as text only, and the
		// rebalancer must tell this from a failure worth retrying.
		if !slices.Contains(g.Voters, req.Node) || eligible != nil && !eligible(req.Node) {
			return &kvpb.SpreadLeaseResponse{Target: req.Node, Refused: true}, nil
		}
		to = req.Node
	}
	if to == 0 {
		return &kvpb.SpreadLeaseResponse{Done: true, Target: self}, nil // no voter may take it
	}
	if to == self {
		if req.Place && req.Node == 0 {
			s.placed.mark(uint64(id), time.Now())
		}
		return &kvpb.SpreadLeaseResponse{Done: true, Target: to}, nil
	}
	if !slices.Contains(g.CaughtUp, to) {
		return &kvpb.SpreadLeaseResponse{Target: to}, nil
	}
	if err := rn.TransferLeader(uint64(id), to); err != nil {
		// Refused (proposals did not drain): the caller asks again.
		return &kvpb.SpreadLeaseResponse{Target: to}, nil
	}
	return &kvpb.SpreadLeaseResponse{Target: to}, nil
}

// spreadTarget is the voter at place ordinal (modulo their number) among
// voters in ascending node ID order, leaving out those eligible refuses
// (dead, decommissioning and clock-fenced voters take no lease: waiting
// for them would only run out the caller's time); 0 when none is left.
func spreadTarget(voters []uint64, eligible func(uint64) bool, ordinal int) uint64 {
	vs := slices.Sorted(slices.Values(voters))
	if eligible != nil {
		vs = slices.DeleteFunc(vs, func(v uint64) bool { return !eligible(v) })
	}
	if len(vs) == 0 {
		return 0
	}
	n := len(vs)
	return vs[(ordinal%n+n)%n]
}

// placedLeases are the tablets whose lease this store's replica was
// confirmed to hold as a new index's placement wants it (a Done
// SpreadLeaseRequest with Place), and when. Entries older than
// placedForget are dropped as others are added.
type placedLeases struct {
	mu sync.Mutex
	at map[uint64]time.Time
}

// placedForget bounds how long a placement is remembered: longer than
// any hold the lease balancer gives it (placedHold).
const placedForget = time.Minute

func (p *placedLeases) mark(id uint64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil {
		p.at = map[uint64]time.Time{}
	}
	if len(p.at) >= 256 {
		for k, t := range p.at {
			if now.Sub(t) > placedForget {
				delete(p.at, k)
			}
		}
	}
	p.at[id] = now
}

// PlacedAt is when this store last confirmed tablet id's lease placed
// for its index's creation (zero: never, or forgotten).
func (s *Store) PlacedAt(id uint64) time.Time {
	p := &s.placed
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[id]
}
