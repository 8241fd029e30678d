package pgcatalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rebalance"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

var _ builtins.RebalanceInfo = (*Resolver)(nil)

// RebalancePlan implements builtins.RebalanceInfo: the shard moves
// (replica moves, then lease transfers) that balance the bytes each node
// stores, then serves, in each colocation group of the database's
// distributed tables (or of req.Relation's), planned by package rebalance
// over the tablets of each group's table group: their live bytes,
// leaseholders and voters as their leaseholders describe them
// (groupTablets). A tablet whose leaseholder is not known does not move.
func (res *Resolver) RebalancePlan(req builtins.RebalanceRequest) ([]builtins.RebalanceMove, error) {
	s, err := res.load()
	if err != nil {
		return nil, err
	}
	// The groups to balance, each reported as its first table (by OID)
	// or as the relation asked for.
	type group struct {
		table  uint32
		shards int
	}
	groups := map[uint64]*group{}
	found := req.Relation == 0
	for _, r := range s.citusTables() {
		t := r.desc.(*catalog.Table)
		if !t.Partitioning.Distributed {
			continue
		}
		if req.Relation == r.oid() {
			found = true
			groups = map[uint64]*group{t.GroupID: {table: r.oid(), shards: t.Partitioning.InitialTablets}}
			break
		}
		if g := groups[t.GroupID]; g == nil || r.oid() < g.table {
			groups[t.GroupID] = &group{table: r.oid(), shards: t.Partitioning.InitialTablets}
		}
	}
	if !found {
		if name, ok := res.RegName(types.RegClass, req.Relation); ok {
			return nil, pgerror.New(pgerrcode.InvalidParameterValue, "table %s is not a distributed table", name)
		}
		return nil, pgerror.New(pgerrcode.UndefinedTable, "relation with OID %d does not exist", req.Relation)
	}
	if req.MaxMoves < 0 || len(groups) == 0 || res.tablets == nil {
		return nil, nil
	}
	states, err := res.groupTablets(slices.Sorted(maps.Keys(groups)))
	if err != nil {
		return nil, fmt.Errorf("get_rebalance_table_shards_plan: %w", err)
	}
	excluded := map[int64]bool{}
	for _, id := range req.Excluded {
		excluded[id] = true
	}
	var in []rebalance.Tablet
	keys := map[uint64][]byte{}
	nodes := map[uint64][]int32{}
	for _, st := range states {
		var gid uint64
		var g *group
		bucket := 0
		for id, gr := range groups {
			if b, ok := bucketIn(st.StartKey, id); ok {
				gid, g, bucket = id, gr, b
				break
			}
		}
		if g == nil || st.Leader == 0 {
			continue
		}
		shard := int64(g.table)*100000 + int64(shardOf(bucket, g.shards))
		b := st.LiveBytes
		if req.ByShardCount {
			b = 1
		}
		in = append(in, rebalance.Tablet{ID: st.ID, Group: gid, Shard: shard, Excluded: excluded[shard],
			Bytes: b, Node: st.Leader, Voters: slices.Clone(st.Replicas)})
		keys[st.ID] = st.StartKey
		for _, v := range st.Replicas {
			if !slices.Contains(nodes[gid], v) {
				nodes[gid] = append(nodes[gid], v)
			}
		}
	}
	var out []builtins.RebalanceMove
	ids := make([]uint64, 0, len(groups))
	for gid := range groups {
		ids = append(ids, gid)
	}
	slices.Sort(ids)
	for _, gid := range ids {
		g := groups[gid]
		var ts []rebalance.Tablet
		for _, t := range in {
			if t.Group == gid {
				ts = append(ts, t)
			}
		}
		budget := req.MaxMoves
		if budget > 0 {
			if budget -= len(out); budget <= 0 {
				break
			}
		}
		for _, m := range rebalance.Plan(ts, nodes[gid], rebalance.Options{Threshold: req.Threshold, MaxMoves: budget}) {
			out = append(out, builtins.RebalanceMove{Table: g.table, ShardID: m.Tablet.Shard, ShardSize: m.Tablet.Bytes,
				Source: m.From, Target: m.To, Tablet: m.Tablet.ID, Key: keys[m.Tablet.ID], Replica: m.Replica})
		}
	}
	return out, nil
}

// clusterTablets is what a node's tablet directory offers beside its own
// replicas (server's): the tablets of a span as their leaseholders
// describe them, whether or not this node holds a replica.
type clusterTablets interface {
	TabletsIn(ctx context.Context, span kvpb.Span) ([]plan.TabletState, error)
}

// groupTablets lists the tablets of the groups: every tablet of each
// group's span from its leaseholder when the directory can (a node of a
// cluster with more nodes than replicas holds some of them only), else
// the tablets this node holds a replica of.
func (res *Resolver) groupTablets(ids []uint64) ([]plan.TabletState, error) {
	ct, ok := res.tablets.(clusterTablets)
	if !ok {
		return res.tablets.Tablets(res.ctx)
	}
	var out []plan.TabletState
	for _, g := range ids {
		ts, err := ct.TabletsIn(res.ctx, rowenc.GroupSpan(g))
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// bucketIn returns the first bucket of a tablet of group g that starts
// at start, false when it does not start inside g: a group's first
// tablet starts at the bare group prefix (bucket 0), the others at a
// bucket (or, split at a row by an older release, inside one). Group
// prefixes are self-delimiting, so a prefix match is exact.
func bucketIn(start []byte, g uint64) (int, bool) {
	p := rowenc.GroupPrefix(nil, g)
	if !bytes.HasPrefix(start, p) {
		return 0, false
	}
	if rest := start[len(p):]; len(rest) >= 2 {
		return int(binary.BigEndian.Uint16(rest)), true
	}
	return 0, true
}

// shardOf is the index of the shard of a table of n shards holding
// bucket b (shardRanges).
func shardOf(b, n int) int {
	for i, rg := range shardRanges(n) {
		if b <= rg[1] {
			return i
		}
	}
	return max(n, 1) - 1
}

var _ builtins.RebalanceStatusInfo = (*Resolver)(nil)

// SetJobs gives the resolver what it reads the jobs through
// (citus_rebalance_status): the statement's transaction.
func (res *Resolver) SetJobs(rd jobs.Reader) { res.jobs = rd }

// RebalanceJobs implements builtins.RebalanceStatusInfo: the rebalance
// jobs (sql/session's REBALANCE), oldest first, their moves counted from
// the plan each recorded as its payload and their progress.
func (res *Resolver) RebalanceJobs() ([]builtins.RebalanceJob, error) {
	if res.jobs == nil {
		return nil, nil
	}
	recs, err := jobs.List(res.ctx, res.jobs)
	if err != nil {
		return nil, fmt.Errorf("citus_rebalance_status: %w", err)
	}
	var out []builtins.RebalanceJob
	for _, r := range recs {
		if r.Type != RebalanceJobType {
			continue
		}
		var moves []json.RawMessage
		_ = json.Unmarshal(r.Payload, &moves)
		state := map[jobs.Status]string{jobs.StatusRunning: "running", jobs.StatusSucceeded: "finished",
			jobs.StatusCanceled: "cancelled", jobs.StatusFailed: "failed"}[r.Status]
		out = append(out, builtins.RebalanceJob{ID: r.ID, State: state, Description: r.Description,
			Started: r.Started, Finished: r.Finished, Moves: len(moves), Done: int(math.Round(r.Fraction * float64(len(moves))))})
	}
	return out, nil
}

// RebalanceJobType is the job type of a rebalance (sql/session records
// them).
const RebalanceJobType = "REBALANCE"
