// Package opt is Cairn's optimizer: it rewrites the logical plans the
// binder (sql/plan) produces into cheaper plans that give the same
// results, before the executor (sql/exec) runs them.
//
// It owns only the rewrites; it must not touch the plan contract beyond
// filling the fields plan.go reserves for it (spans, buckets, ordering
// flags, limits, LookupJoin and IndexJoin nodes), and it never reads KV:
// everything it knows comes from the descriptors in the plan, the table
// statistics its caller supplies (OptimizeStats; sql/stats collects them)
// and, for tables without statistics, the explicit heuristics of cost.go.
//
// First, decorrelate.go turns the sublinks a WHERE or HAVING tests
// (correlated EXISTS, NOT EXISTS, IN and NOT IN) into semi and anti
// joins, as PostgreSQL's pull_up_sublinks does. The rewrites then run in
// this order on every tree of a plan (the root, each subquery, each
// materialized CTE), after prune.go has dropped the columns nothing reads
// from every Scan:
//
//  1. pushdown.go: filters are split into conjuncts and moved as close to
//     the data as their columns allow, into Scan/IndexJoin/VirtualScan
//     filters and join conditions; column equalities of join conditions
//     become LeftEq/RightEq.
//  2. scan.go, spans.go: each Scan's filter is turned into index spans
//     (and the hash bucket or shard, when equalities fix them) for every
//     usable index; the cheapest access wins, with an IndexJoin when the
//     index does not cover the columns the query reads. A hash-sharded
//     index's spans always fix its shard: to the shards the predicate's
//     values (or small integer and date ranges) hash to, else to each
//     bucket in turn. gin.go: a GIN index answers @>, ?, ?|, ?& and &&
//     against constants with token lookups, every conjunct rechecked on
//     the rows found.
//  3. joinorder.go, joinsearch.go: inner-join trees are cut into join
//     lists as PostgreSQL's deconstruct_jointree does (explicit JOINs
//     merged up to join_collapse_limit items, nested lists up to
//     from_collapse_limit); each list below geqo_threshold is searched
//     exhaustively over connected subsets (capped at 65,536 partial
//     plans), larger ones greedily by smallest estimated result. Neither
//     search builds a cross product where a predicate connects the
//     tables, and both check the statement's context while searching.
//  4. lookup.go: joins whose right side is a table scan with an index on
//     the join keys become batched LookupJoins when the left side is small
//     enough that lookups beat reading the whole right table under the
//     storage profile (inner joins may swap sides for it); a join that
//     stays one of both sides read whole is a merge join when both can
//     be read in the order of its keys (merge.go), a hash join otherwise.
//
// Row estimates come from the table statistics the caller supplies
// (OptimizeStats, stats.go: most common values, distinct counts and
// histograms) and, for tables without any, from cost.go's heuristics, so
// a plan over unanalyzed tables is exactly what it was before statistics
// existed.
//  5. order.go: sorts an index already provides are dropped (orders pass
//     through Filter, Project, IndexJoin, LookupJoin and streaming
//     GroupBy, which the executor runs order-preserving), an ORDER BY ...
//     LIMIT may pick an index for its order, limits reach the reader
//     (HardLimit), and GroupBy streams when its input is ordered by the
//     group columns. A hash-sharded index provides the order of its
//     columns after the shard by merging its buckets (Scan.ShardMerge).
//
// Tests: *_test.go build plans by hand over catalog fixtures
// (helpers_test.go) and print them compactly; property_test.go and
// joinprop_test.go check invariant 1 on random filters and joins.
//
// Invariants:
//
//  1. Results never change: a conjunct leaves a filter only when a span,
//     a bucket, a partial index predicate or a join key enforces exactly
//     it; anything the optimizer cannot prove stays in a Filter.
//  2. Column IDs keep their meaning: rewritten nodes output the same IDs;
//     columns the optimizer adds (primary-key columns an IndexJoin needs)
//     get IDs above every ID the plan uses.
//  3. Predicates with volatile functions, subqueries or aggregate
//     references are never moved (pinned in conj.go).
//  4. $n parameters are not constants: they never make spans or buckets,
//     so one plan serves every parameter value.
package opt

import (
	"context"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
)

// Optimize rewrites p in place into a cheaper equivalent plan.
func Optimize(ctx context.Context, p *plan.Plan) error {
	return OptimizeWith(ctx, p, DefaultCosts)
}

// OptimizeWith is Optimize under an explicit cost model (a storage
// profile: local SSD, HDD, object store).
func OptimizeWith(ctx context.Context, p *plan.Plan, costs Costs) error {
	return optimizePlan(ctx, p, costs, nil, DefaultJoinLimits)
}

func optimizePlan(ctx context.Context, p *plan.Plan, costs Costs, st Statistics, lim JoinLimits) error {
	_, err := newOptimizer(costs, st, lim).run(ctx, p)
	return err
}

func newOptimizer(costs Costs, st Statistics, lim JoinLimits) *optimizer {
	return &optimizer{costs: costs, orig: map[plan.Node]*plan.Scan{}, rows: map[plan.Node]float64{},
		stats: st, colStats: map[sem.ColumnID]colStat{}, limits: lim}
}

// run optimizes p and returns the optimizer, whose estimates describe the
// optimized plan.
func (o *optimizer) run(ctx context.Context, p *plan.Plan) (*optimizer, error) {
	o.nextID = maxColumnID(p) + 1
	o.decorrelate(p)
	prune(p)
	var err error
	if p.Root, err = o.optimize(ctx, p.Root); err != nil {
		return nil, err
	}
	for _, sq := range p.Subqueries {
		if sq.Root, err = o.optimize(ctx, sq.Root); err != nil {
			return nil, err
		}
	}
	for i := range p.CTEs {
		if p.CTEs[i], err = o.optimize(ctx, p.CTEs[i]); err != nil {
			return nil, err
		}
	}
	// Columns only a filter read are not needed once spans enforce it.
	prune(p)
	// Hash joins keep their estimates for execution, which chooses how
	// to distribute them (sql/exec, distsql_join.go).
	note := func(n plan.Node) {
		walk(n, func(x plan.Node) {
			if j, ok := x.(*plan.Join); ok {
				j.LeftRows, j.RightRows, j.Rows = o.estimate(j.Left), o.estimate(j.Right), o.estimate(j)
			}
		})
	}
	note(p.Root)
	for _, sq := range p.Subqueries {
		note(sq.Root)
	}
	for _, c := range p.CTEs {
		note(c)
	}
	return o, ctx.Err()
}

// prune drops unneeded columns from every Scan of p (prune.go).
func prune(p *plan.Plan) {
	need := neededColumns(p)
	pruneScans(p.Root, need)
	for _, sq := range p.Subqueries {
		pruneScans(sq.Root, need)
	}
	for _, c := range p.CTEs {
		pruneScans(c, need)
	}
}

// optimizer holds the state of one Optimize call.
type optimizer struct {
	costs Costs
	// nextID is the next free column ID (invariant 2).
	nextID sem.ColumnID
	// produced holds every column the tree being optimized produces, to
	// tell outer references from local columns.
	produced colSet
	// orig remembers, for each node scan planning produced, the Scan it
	// came from (with its whole filter and no index chosen), so later
	// rules can plan it again for another purpose (a lookup join's right
	// side, an index chosen for its order).
	orig map[plan.Node]*plan.Scan
	// rows holds the row estimates of the nodes scan planning and lookup
	// joins made.
	rows map[plan.Node]float64
	// stats supplies table statistics (nil: none, stats.go); colStats
	// holds those of the columns the scans planned so far produce.
	stats    Statistics
	colStats map[sem.ColumnID]colStat
	// limits bound the join order search (joinorder.go); searches
	// records each search made, for tests.
	limits   JoinLimits
	searches []searchRecord
	// choices records, per join lookupJoins decided, the cost of the
	// method chosen and of the best one rejected (EXPLAIN (VERBOSE)).
	choices map[plan.Node]JoinChoice
}

func (o *optimizer) optimize(ctx context.Context, n plan.Node) (plan.Node, error) {
	if n == nil {
		return nil, nil
	}
	o.produced = colSet{}
	walk(n, func(m plan.Node) {
		for _, c := range m.Columns() {
			o.produced[c.ID] = struct{}{}
		}
	})
	n = o.pushdown(n, nil)
	var err error
	if n, err = o.planScans(n); err != nil {
		return nil, err
	}
	if n, err = o.reorderJoins(ctx, n); err != nil {
		return nil, err
	}
	n = o.lookupJoins(n)
	n = o.orderings(n)
	return n, nil
}

func (o *optimizer) newID() sem.ColumnID {
	id := o.nextID
	o.nextID++
	return id
}

// maxColumnID is the largest column ID any node or expression of p uses.
func maxColumnID(p *plan.Plan) sem.ColumnID {
	var m sem.ColumnID
	see := func(n plan.Node) {
		walk(n, func(x plan.Node) {
			for _, c := range x.Columns() {
				m = max(m, c.ID)
			}
			for _, e := range exprsOf(x) {
				sem.Walk(e, func(y sem.Expr) bool {
					if c, ok := y.(*sem.ColRef); ok {
						m = max(m, c.ID)
					}
					return true
				})
			}
			for _, id := range colIDsOf(x) {
				m = max(m, id)
			}
		})
	}
	see(p.Root)
	for _, sq := range p.Subqueries {
		see(sq.Root)
		for _, id := range sq.Outer {
			m = max(m, id)
		}
	}
	for _, c := range p.CTEs {
		see(c)
	}
	return m
}
