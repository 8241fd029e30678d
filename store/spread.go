package store

import (
	"fmt"
	"slices"

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
func (s *Store) spreadLease(req *kvpb.SpreadLeaseRequest) (*kvpb.SpreadLeaseResponse, error) {
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
	voters := slices.Sorted(slices.Values(g.Voters))
	if el := s.cfg.Raft.LeaseEligible; el != nil {
		// Dead, decommissioning and clock-fenced voters take no lease:
		// waiting for them would only run out the caller's time.
		voters = slices.DeleteFunc(voters, func(v uint64) bool { return !el(v) })
	}
	if len(voters) == 0 || len(voters) == 1 && voters[0] == self {
		return &kvpb.SpreadLeaseResponse{Done: true, Target: self}, nil
	}
	to := voters[((req.Ordinal%len(voters))+len(voters))%len(voters)]
	if to == self {
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
