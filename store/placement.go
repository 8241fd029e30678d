package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// placement serves a kvpb.PlacementRequest on the leaseholder of the
// tablet holding req.Key: it describes the tablet (its voters and
// learners as this replica's raft configuration has them, its live and
// total bytes, counted now, and its estimated size on disk) and, with From and To set, makes one step of the
// replica move through RaftConfig.MoveReplica. A replica without the
// lease answers NotLeaseholderError so the router finds the holder, as
// for a SpreadLease.
func (s *Store) placement(ctx context.Context, req *kvpb.PlacementRequest) (*kvpb.PlacementResponse, error) {
	r := s.replicaForKey(req.Key)
	if r == nil {
		if s.cfg.Raft != nil && s.cfg.Raft.Membership {
			return nil, &kvpb.TabletNotFoundError{}
		}
		return nil, fmt.Errorf("store: placement at %q: %w", req.Key, ErrNoTablet)
	}
	desc := r.Desc()
	resp := &kvpb.PlacementResponse{Desc: desc}
	move := req.From != 0 || req.To != 0
	if s.cfg.Raft != nil {
		id := desc.TabletID
		rn := s.cfg.Raft.Node
		g, ok := rn.Group(uint64(id))
		if !ok {
			return nil, &kvpb.TabletNotFoundError{TabletID: id}
		}
		if g.Lease == 0 {
			return nil, &kvpb.NotLeaseholderError{TabletID: id, Replica: rn.NodeID(), Leader: g.Leader}
		}
		cs := rn.Config(uint64(id))
		resp.Voters = slices.Sorted(slices.Values(cs.GetVoters()))
		resp.Learners = slices.Sorted(slices.Values(cs.GetLearners()))
		resp.Leaseholder = rn.NodeID()
		if move {
			if s.cfg.Raft.MoveReplica == nil {
				resp.Refused = true
			} else {
				done, refused, err := s.cfg.Raft.MoveReplica(ctx, uint64(id), req.From, req.To)
				if err != nil {
					return nil, fmt.Errorf("store: moving tablet %d's replica from node %d to %d: %w", id, req.From, req.To, err)
				}
				resp.Done, resp.Refused = done, refused
			}
		}
	} else {
		resp.Refused = move // one node: nowhere to move to
	}
	if !move {
		resp.Done = true
	}
	st, err := mvcc.ComputeSpanStats(s.eng, desc.StartKey, desc.EndKey, nil)
	if err != nil {
		return nil, fmt.Errorf("store: live bytes of tablet %d: %w", desc.TabletID, err)
	}
	resp.LiveBytes, resp.TotalBytes = st.LiveBytes, st.TotalBytes
	size, err := s.eng.EstimateDiskUsage(desc.StartKey, desc.EndKey)
	if err != nil {
		return nil, fmt.Errorf("store: size on disk of tablet %d: %w", desc.TabletID, err)
	}
	resp.SizeBytes = size
	return resp, nil
}
