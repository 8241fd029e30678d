package distsql

import (
	"bytes"
	"context"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
)

// Planner places fragments: it cuts a span at tablet boundaries (the
// gateway's tablet cache) and puts each piece on its tablet's
// leaseholder as far as the gateway knows (invariant 1: a wrong guess
// costs a hop, not correctness).
type Planner struct {
	// Gateway is this node's ID: where a fragment goes whose
	// leaseholder is unknown.
	Gateway uint64
	Tablets *kv.TabletCache
	// Leaseholder returns the node believed to hold tablet's lease (0:
	// unknown).
	Leaseholder func(kvpb.TabletID) uint64
	// Avoid, when set, names nodes to place no fragment on for now
	// (Gateway.Suspect): their fragments run on the gateway.
	Avoid func(node uint64) bool
	// Local, when set, reports a tablet this node reads from its own
	// replica without the lease (a closed one: a reference table's,
	// tablet/closedts.go): its fragment runs on the gateway, so the read
	// crosses no link.
	Local func(kvpb.TabletID) bool
}

// PlanScan returns one fragment per tablet that span touches, in key
// order, each reading at snap.
func (p *Planner) PlanScan(ctx context.Context, span kvpb.Span, snap Snapshot) ([]Fragment, error) {
	var out []Fragment
	key := span.Key
	for bytes.Compare(key, span.EndKey) < 0 {
		d, err := p.Tablets.Lookup(ctx, key, false)
		if err != nil {
			return nil, err
		}
		end := span.EndKey
		if len(d.EndKey) > 0 && bytes.Compare(d.EndKey, end) < 0 {
			end = d.EndKey
		}
		node := uint64(0)
		if p.Leaseholder != nil {
			node = p.Leaseholder(d.TabletID)
		}
		if node == 0 || (p.Avoid != nil && p.Avoid(node)) || (p.Local != nil && p.Local(d.TabletID)) {
			node = p.Gateway
		}
		out = append(out, Fragment{Node: node, Spec: Spec{
			Fragment: len(out),
			TabletID: d.TabletID,
			Span:     kvpb.Span{Key: key, EndKey: end},
			Snapshot: snap,
		}})
		key = end
	}
	return out, nil
}

// Nodes returns how many distinct nodes frags run on.
func Nodes(frags []Fragment) int {
	seen := map[uint64]bool{}
	for _, f := range frags {
		seen[f.Node] = true
	}
	return len(seen)
}
