package exec

// Distributed scans (sql/distsql): a plain forward scan of one span of a
// table's primary or secondary index, in a statement that only reads,
// may read its KVs through a flow of per-tablet fragments on the tablets'
// leaseholders instead of paging through the gateway's transaction. The
// gateway still decodes, filters and projects the rows (no pushdown
// yet). The session's distsql setting decides: off never, on whenever
// the statement qualifies, auto when the span's tablets are led by more
// than one node.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/plan"
)

// setting reads a session parameter as SHOW prints it ("" when the
// session's context has none).
func (r *runner) setting(name string) string {
	sa, ok := r.fn().(builtins.SettingsAccess)
	if !ok {
		return ""
	}
	v, _, err := sa.Setting(name, true)
	if err != nil {
		return ""
	}
	return v
}

// distEligible says whether a scan of n may read through a flow: the
// statement reads only (a SELECT), the scan does not lock, and a limit
// it carries bounds its KVs (no filter between: then every fragment gets
// that bound, startDist), and the transaction's reads need not be tracked by the gateway
// (distsql invariant 2): under READ COMMITTED each statement has its
// own snapshot and nothing is refreshed across statements; a
// SERIALIZABLE transaction qualifies only when it is read-only. A
// transaction that has written reads its own writes only locally.
func (r *runner) distEligible(ctx context.Context, n *plan.Scan) bool {
	if n.Reverse || (n.HardLimit > 0 && n.Filter != nil) || n.Lock != plan.LockNone || n.Inverted != nil {
		return false
	}
	return r.distTxnOK(ctx)
}

// distTxnOK is distEligible's part about the statement and its
// transaction, shared with the distributed plans of distsql_plan.go.
func (r *runner) distTxnOK(ctx context.Context) bool {
	if distsql.FromContext(ctx) == nil || r.x.Txn == nil || r.p == nil || r.p.Tag != "SELECT" {
		return false
	}
	switch r.setting("distsql") {
	case "on", "auto":
	default:
		return false
	}
	if r.x.Txn.Isolation() != kv.ReadCommitted && r.setting("transaction_read_only") != "on" {
		return false
	}
	buffered, sent, _, err := r.x.Txn.CommitPlan(ctx)
	return err == nil && buffered == 0 && !sent
}

// startDist plans s's single span as fragments and starts their ordered
// flow, or returns nil to read locally (auto with one node).
func (s *kvStream) startDist(ctx context.Context) (*distsql.Flow, error) {
	run := distsql.FromContext(ctx)
	frags, err := run.Planner.PlanScan(ctx, s.spans[0], run.SnapshotAt(s.r.x.Txn.ReadTimestamp()))
	if err != nil {
		return nil, err
	}
	if s.kvBound > 0 {
		// The limit's rows take at most kvBound KVs: no fragment needs
		// more (LIMIT in every fragment).
		for i := range frags {
			frags[i].Spec.Limit = s.kvBound
		}
	}
	if s.r.setting("distsql") == "auto" && distsql.Nodes(frags) < 2 {
		return nil, nil
	}
	s.r.x.Stats.addDist(s.node, frags)
	return run.Gateway.StartOrdered(ctx, frags, s.r.x.Memory), nil
}

// fillDist takes the flow's next batch into the fetcher.
func (s *kvStream) fillDist(ctx context.Context) error {
	b, ok, err := s.flow.Next()
	if err != nil {
		return err
	}
	if !ok {
		s.r.x.Stats.addDistDone(s.node, s.flow.Stats())
		s.flow.Close()
		s.flow = nil
		s.spans = nil
		s.done = true
		return s.f.Finish(s.emit)
	}
	noteKeyOnly(ctx, s.f)
	return s.f.Add(b.KVs, s.emit)
}

// addDist records the fragments a distributed scan of n started.
func (s *Stats) addDist(n plan.Node, frags []distsql.Fragment) {
	if s == nil || n == nil {
		return
	}
	s.node(n).Fragments = append(s.node(n).Fragments, frags...)
}

// addDistDone records what the fragments of n's finished flow reported.
func (s *Stats) addDistDone(n plan.Node, st []distsql.FragmentStats) {
	if s == nil || n == nil {
		return
	}
	s.node(n).FragmentStats = append(s.node(n).FragmentStats, st...)
}

// annotateDist is the EXPLAIN ANALYZE lines of a distributed scan:
// "Distribution: full" (fragments on more than one node) or "local",
// then per fragment its node, tablet, KVs shipped, bytes and time.
func annotateDist(ns *NodeStats) string {
	if len(ns.Fragments) == 0 {
		return ""
	}
	return "\n" + distributionText(ns.Fragments, ns.FragmentStats, ns.FragmentRows, ns.DistJoin)
}

// distributionText is the "Distribution: ..." line of frags, the line of
// a distributed join (join, if any), and a line per fragment: its node
// and tablet (or hash partition), and with stats (EXPLAIN ANALYZE) the
// rows (or keys) and bytes it shipped and its time; then, with stats, a
// line per node: its fragments' rows, bytes and longest time.
func distributionText(frags []distsql.Fragment, stats []distsql.FragmentStats, rows bool, join string) string {
	dist := "local"
	nodes := distsql.Nodes(frags)
	if nodes > 1 {
		dist = "full"
	}
	out := fmt.Sprintf("Distribution: %s, %d %s on %d %s", dist, len(frags), plural(int64(len(frags)), "fragment", "fragments"),
		nodes, plural(int64(nodes), "node", "nodes"))
	if join != "" {
		out += "\n" + join
	}
	one, many := "key", "keys"
	if rows {
		one, many = "row", "rows"
	}
	type perNode struct {
		frags       int
		rows, bytes int64
		time        time.Duration
	}
	var order []uint64
	byNode := map[uint64]*perNode{}
	for i, f := range frags {
		if f.Spec.TabletID == 0 && len(f.Spec.Span.Key) == 0 {
			out += fmt.Sprintf("\nFragment %d: node %d, hash partition %d of %d", i, f.Node, i, len(frags))
		} else {
			out += fmt.Sprintf("\nFragment %d: node %d, tablet %d", i, f.Node, f.Spec.TabletID)
		}
		if i < len(stats) {
			st := stats[i]
			out += fmt.Sprintf(": %d %s (%s)", st.Rows, plural(st.Rows, one, many), byteSize(st.Bytes))
			if st.Time > 0 {
				out += fmt.Sprintf(" in %.3f ms", float64(st.Time.Nanoseconds())/1e6)
			} else {
				out += ", stopped early"
			}
			pn := byNode[f.Node]
			if pn == nil {
				pn = &perNode{}
				byNode[f.Node] = pn
				order = append(order, f.Node)
			}
			pn.frags++
			pn.rows += st.Rows
			pn.bytes += st.Bytes
			pn.time = max(pn.time, st.Time)
		}
	}
	slices.Sort(order)
	for _, id := range order {
		pn := byNode[id]
		out += fmt.Sprintf("\nNode %d: %d %s, %d %s (%s), longest %.3f ms", id, pn.frags, plural(int64(pn.frags), "fragment", "fragments"),
			pn.rows, plural(pn.rows, one, many), byteSize(pn.bytes), float64(pn.time.Nanoseconds())/1e6)
	}
	return out
}
