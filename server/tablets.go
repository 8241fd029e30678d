package server

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/plan"
)

// localNodeID is the ID of a node that is a cluster of one: every tablet
// has one replica, here, and it is the leader.
const localNodeID = 1

// tabletDirectory is the node's plan.TabletDirectory: the SQL layer reads
// the tablets (cairn_catalog.tablets) through it, never the store itself.
type tabletDirectory struct{ s *Server }

var _ plan.TabletDirectory = tabletDirectory{}

// Tablets lists the store's tablets in key order with their replicas,
// leader, estimated size on disk and live and total bytes.
func (d tabletDirectory) Tablets(ctx context.Context) ([]plan.TabletState, error) {
	descs := d.s.store.Tablets()
	out := make([]plan.TabletState, 0, len(descs))
	for _, desc := range descs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		size, err := d.s.eng.EstimateDiskUsage(desc.StartKey, desc.EndKey)
		if err != nil {
			return nil, fmt.Errorf("size of tablet %d: %w", desc.TabletID, err)
		}
		// The replicas and leader as this node's replica sees them, as
		// the admin UI shows them (admin.go).
		voters, _, leader := d.s.placement(desc.TabletID)
		replicas := make([]int32, len(voters))
		for i, v := range voters {
			replicas[i] = int32(v)
		}
		st, err := d.s.tabletStats(desc)
		if err != nil {
			return nil, err
		}
		out = append(out, plan.TabletState{
			ID: uint64(desc.TabletID), StartKey: desc.StartKey, EndKey: desc.EndKey,
			Replicas: replicas, Leader: int32(leader), SizeBytes: size,
			LiveBytes: st.LiveBytes, TotalBytes: st.TotalBytes,
		})
	}
	return out, nil
}

// TabletsIn lists the tablets of span in key order as their leaseholders
// describe them (kvpb.PlacementRequest, one round trip each), whether or
// not this node holds a replica: on a cluster with more nodes than
// replicas the shard rebalancer sees every tablet of a colocation group
// this way (sql/pgcatalog's groupTablets). The live bytes are counted
// now, not cached. A node that is a cluster of one lists its own.
func (d tabletDirectory) TabletsIn(ctx context.Context, span kvpb.Span) ([]plan.TabletState, error) {
	if d.s.repl == nil {
		all, err := d.Tablets(ctx)
		if err != nil {
			return nil, err
		}
		var out []plan.TabletState
		for _, t := range all {
			if bytes.Compare(t.StartKey, span.EndKey) < 0 && (len(t.EndKey) == 0 || bytes.Compare(span.Key, t.EndKey) < 0) {
				out = append(out, t)
			}
		}
		return out, nil
	}
	var out []plan.TabletState
	for key := span.Key; bytes.Compare(key, span.EndKey) < 0; {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PlacementRequest{Key: key})
		br, err := d.s.db.Send(ctx, ba)
		if err != nil {
			return nil, fmt.Errorf("describing the tablet at %x: %w", key, err)
		}
		r, ok := br.Responses[0].(*kvpb.PlacementResponse)
		if !ok || len(br.Responses) != 1 {
			return nil, fmt.Errorf("describing the tablet at %x: unexpected answer %v", key, br.Responses)
		}
		replicas := make([]int32, len(r.Voters))
		for i, v := range r.Voters {
			replicas[i] = int32(v)
		}
		out = append(out, plan.TabletState{ID: uint64(r.Desc.TabletID), StartKey: r.Desc.StartKey, EndKey: r.Desc.EndKey,
			Replicas: replicas, Leader: int32(r.Leaseholder), LiveBytes: r.LiveBytes})
		if len(r.Desc.EndKey) == 0 || bytes.Compare(r.Desc.EndKey, key) <= 0 {
			break
		}
		key = r.Desc.EndKey
	}
	return out, nil
}

// moveReplica is store.RaftConfig.MoveReplica: the node's membership
// makes the step (the store opens before it exists; nothing moves a
// replica before then).
func (r *replication) moveReplica(ctx context.Context, tablet, from, to uint64) (done, refused bool, err error) {
	if r.member == nil {
		return false, false, fmt.Errorf("membership is not running yet")
	}
	return r.member.MoveReplica(ctx, tablet, from, to)
}
