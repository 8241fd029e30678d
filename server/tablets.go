package server

import (
	"context"
	"fmt"

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
