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
// leader and estimated size on disk.
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
		replicas, leader := []int32{localNodeID}, int32(localNodeID)
		if r := d.s.repl; r != nil {
			// A member of a cluster: the group's voters and the leader
			// this node's replica knows of (0: none known yet).
			replicas = replicas[:0]
			for _, v := range r.raft.Config(uint64(desc.TabletID)).GetVoters() {
				replicas = append(replicas, int32(v))
			}
			leader = 0
			if rep := r.raft.Replica(uint64(desc.TabletID)); rep != nil {
				_, l := rep.Lease()
				leader = int32(l)
			}
		}
		out = append(out, plan.TabletState{
			ID: uint64(desc.TabletID), StartKey: desc.StartKey, EndKey: desc.EndKey,
			Replicas: replicas, Leader: leader, SizeBytes: size,
		})
	}
	return out, nil
}
