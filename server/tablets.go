package server

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/keys"
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

// Tablets lists every tablet of the cluster in key order with its
// replicas, leader, estimated size on disk and live and total bytes. A
// tablet this node holds a replica of is described by that replica (the
// node's own placement view, as the admin UI shows it); a tablet it does
// not hold, by its leaseholder (TabletsIn), so that on a cluster with more
// nodes than replicas the view still lists every tablet through every
// node.
func (d tabletDirectory) Tablets(ctx context.Context) ([]plan.TabletState, error) {
	local, err := d.localTablets(ctx)
	if err != nil || d.s.repl == nil {
		return local, err
	}
	out := make([]plan.TabletState, 0, len(local))
	// Walk the keyspace from its start: at each key, the local replica
	// whose tablet starts there, else the leaseholder's description of
	// the tablet holding the key (which may end where a local one
	// starts). A local replica whose tablet starts before the key (a
	// stale descriptor of a replica being removed) is not used.
	key := keys.Min
	i := 0
	for first := true; ; first = false {
		// The first tablet may start below the first addressable key
		// (at the keyspace's start); every later one starts where the
		// previous one ended.
		for i < len(local) && bytes.Compare(local[i].StartKey, key) < 0 && !(first && contains(local[i], key)) {
			i++
		}
		var t plan.TabletState
		if i < len(local) && (bytes.Equal(local[i].StartKey, key) || first && contains(local[i], key)) {
			t = local[i]
			i++
		} else {
			end := []byte(nil)
			if i < len(local) {
				end = local[i].StartKey
			}
			remote, err := d.describeAt(ctx, key)
			if err != nil {
				return nil, err
			}
			if len(end) > 0 && (len(remote.EndKey) == 0 || bytes.Compare(remote.EndKey, end) > 0) && bytes.Compare(remote.StartKey, end) < 0 {
				// The leaseholder's tablet overlaps the next local
				// replica's: one of the two descriptors is behind a
				// split or merge; the leaseholder's is the newer.
				for i < len(local) && (len(remote.EndKey) == 0 || bytes.Compare(local[i].StartKey, remote.EndKey) < 0) {
					i++
				}
			}
			t = remote
		}
		out = append(out, t)
		if len(t.EndKey) == 0 || bytes.Compare(t.EndKey, key) <= 0 || bytes.Compare(t.EndKey, keys.Max) >= 0 {
			return out, nil
		}
		key = t.EndKey
	}
}

// contains reports whether t's span holds key.
func contains(t plan.TabletState, key []byte) bool {
	return bytes.Compare(t.StartKey, key) <= 0 && (len(t.EndKey) == 0 || bytes.Compare(key, t.EndKey) < 0)
}

// localTablets lists the tablets this node holds a replica of, in key
// order, as its replicas see them.
func (d tabletDirectory) localTablets(ctx context.Context) ([]plan.TabletState, error) {
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

// describeAt asks the leaseholder of the tablet holding key to describe
// it (kvpb.PlacementRequest).
func (d tabletDirectory) describeAt(ctx context.Context, key []byte) (plan.TabletState, error) {
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.PlacementRequest{Key: key})
	br, err := d.s.db.Send(ctx, ba)
	if err != nil {
		return plan.TabletState{}, fmt.Errorf("describing the tablet at %x: %w", key, err)
	}
	r, ok := br.Responses[0].(*kvpb.PlacementResponse)
	if !ok || len(br.Responses) != 1 {
		return plan.TabletState{}, fmt.Errorf("describing the tablet at %x: unexpected answer %v", key, br.Responses)
	}
	replicas := make([]int32, len(r.Voters))
	for i, v := range r.Voters {
		replicas[i] = int32(v)
	}
	return plan.TabletState{ID: uint64(r.Desc.TabletID), StartKey: r.Desc.StartKey, EndKey: r.Desc.EndKey,
		Replicas: replicas, Leader: int32(r.Leaseholder), SizeBytes: r.SizeBytes,
		LiveBytes: r.LiveBytes, TotalBytes: r.TotalBytes}, nil
}

// TabletsIn lists the tablets of span in key order as their leaseholders
// describe them (kvpb.PlacementRequest, one round trip each), whether or
// not this node holds a replica: on a cluster with more nodes than
// replicas the shard rebalancer sees every tablet of a colocation group
// this way (sql/pgcatalog's groupTablets). The live bytes are counted
// now, not cached. A node that is a cluster of one lists its own.
func (d tabletDirectory) TabletsIn(ctx context.Context, span kvpb.Span) ([]plan.TabletState, error) {
	if d.s.repl == nil {
		all, err := d.localTablets(ctx)
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
		t, err := d.describeAt(ctx, key)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		if len(t.EndKey) == 0 || bytes.Compare(t.EndKey, key) <= 0 {
			break
		}
		key = t.EndKey
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
