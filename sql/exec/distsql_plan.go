package exec

// Distributed plans at the gateway (issue 17): which subtrees of a plan
// run as fragments on the tablets' leaseholders, and the gateway's side
// of them.
//
// A subtree distributes when it is a chain of Project and Filter nodes
// over a Scan, or over an IndexJoin of an inverted scan of a local GIN
// index (a fragment per block read, distInvertedChain) (distChainOf),
// possibly under one of:
//
//	GroupBy  fragments aggregate partially (builtins.PartialOf); the
//	         gateway merges one row per group per fragment
//	Sort     fragments sort (top-k under a LIMIT); the gateway merges
//	         their sorted streams (distMergeOp)
//	Limit    (no sort) every fragment stops after LIMIT+OFFSET rows
//
// and only the chain's outputs (projected, filtered) cross the network.
// Results are the same as local execution's, order included (an
// inverted scan promises none): fragments
// are a span's tablets in key order, the gateway takes them in that
// order (distRowsOp) or merges ties by fragment (distMergeOp), and a
// fragment runs the same operators the gateway would have.

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// distNode is the node whose EXPLAIN ANALYZE figures o's rows count: a
// distributed chain's display node (distDisplay), else n.
func distNode(o op, n plan.Node) plan.Node {
	if d, ok := o.(*distRowsOp); ok && d.node != nil {
		return d.node
	}
	return n
}

// distState is a gateway runner's distributed planning state.
type distState struct {
	decided, on bool
	// auto: distsql = auto, so only plans on more than one node
	// distribute.
	auto bool
	// planned is the last subtree distFragments placed: the node
	// EXPLAIN shows it on and its fragments.
	planned *distPlanned
	// limits bound the rows of a chain's fragments: a Limit's
	// LIMIT+OFFSET, recorded for its input.
	limits map[plan.Node]int64
}

// distOn says whether this statement may distribute at all: a SELECT
// with a node Runner, distsql on or auto, and a transaction whose reads
// fragments may do at its snapshot (distEligible's rules).
func (r *runner) distOn() bool {
	if !r.dist.decided {
		r.dist.decided = true
		r.dist.on = r.fragSpan == nil && r.distTxnOK(r.ctx) && r.setting("sql.testing.distsql_pushdown") != "off"
		r.dist.auto = r.setting("distsql") == "auto"
	}
	return r.dist.on
}

// distChain is a Project/Filter chain over a Scan that fragments can
// run: the chain's top, its Scan, the nodes between, and the fragment's
// processing so far (scan, filter, outputs).
type distChain struct {
	top   plan.Node
	scan  *plan.Scan
	nodes []plan.Node // every node of the chain, top first, scan last
	proc  fragProc
	cols  []plan.Column // the fragment's scan columns (_c1.._cn)
	spans []kvpb.Span
	frags []distsql.Fragment // placed, without their processing yet
	// gatewayLimit is the scan's HardLimit, which the gateway applies
	// again to the fragments' rows together.
	gatewayLimit int64
	// env maps the chain top's columns to expressions over the
	// fragment's scan columns.
	env map[sem.ColumnID]sem.Expr
	// layout is the table's layout when the chain is a whole scan of a
	// hash-partitioned index (a distributed table's): what a colocated
	// join needs (distsql_join.go).
	layout *rowenc.TableLayout
}

// oneRow reports whether a scan of the primary index over spans (encoded
// as keySpans) reads one row: a single span fixing every one of its n key
// columns to one value, which encodes as [k, PrefixEnd(k)).
func oneRow(spans []plan.Span, keySpans []kvpb.Span, n int) bool {
	if len(spans) != 1 || len(keySpans) != 1 {
		return false
	}
	sp := spans[0]
	return len(sp.Start) == n && len(sp.End) == n && !sp.StartExclusive && sp.EndInclusive &&
		bytes.Equal(keySpans[0].EndKey, keys.PrefixEnd(keySpans[0].Key))
}

// distChainOf returns the distributable chain rooted at n, or nil (with
// distsql = auto, also when its fragments would all be on one node).
func (r *runner) distChainOf(n plan.Node) *distChain {
	return r.distChainAt(n, r.dist.auto)
}

// distChainAt is distChainOf, refusing one-node chains only when
// oneNodeLocal (a join judges its two inputs' nodes together).
func (r *runner) distChainAt(n plan.Node, oneNodeLocal bool) *distChain {
	ch := &distChain{top: n}
	for {
		ch.nodes = append(ch.nodes, n)
		switch v := n.(type) {
		case *plan.Project:
			n = v.Input
			continue
		case *plan.Filter:
			n = v.Input
			continue
		}
		break
	}
	// An index join over an inverted scan of a local GIN index: each
	// fragment reads its block's entries and joins them to its rows
	// (distInvertedChain).
	ij, _ := n.(*plan.IndexJoin)
	if ij != nil {
		n = ij.Input
	}
	scan, ok := n.(*plan.Scan)
	if !ok || scan.Lock != plan.LockNone || scan.Reverse || scan.ShardMerge || (scan.Inverted != nil) != (ij != nil) {
		return nil
	}
	if ij != nil {
		return r.distInvertedChain(ch, ij, scan, oneNodeLocal)
	}
	if scan.HardLimit > 0 {
		// A filter above a limited scan sees only the limit's rows:
		// merging it into the fragments' filter would change that.
		for _, x := range ch.nodes {
			if _, ok := x.(*plan.Filter); ok {
				return nil
			}
		}
		ch.gatewayLimit = scan.HardLimit
	}
	for _, c := range scan.Table.Columns {
		if c.Type.Family == types.EnumFamily {
			// An enum's labels live in a type descriptor the fragment
			// would have to read as well.
			return nil
		}
	}
	l, err := r.tableLayout(scan.Table)
	if err != nil {
		return nil
	}
	idx, err := indexLayout(l, scan.Table, scan.Index)
	if err != nil {
		return nil
	}
	if bucketed(l, idx) {
		// A hash-partitioned table's index (a distributed table's):
		// only a whole, unordered scan of every bucket distributes,
		// reading the group's span as the local scan does (so in the
		// same order); a scan of some buckets (a router query) or in
		// key order stays local.
		if len(scan.Spans) > 0 || scan.Buckets != nil || scan.Ordered {
			return nil
		}
		ch.spans = []kvpb.Span{l.IndexSpan(idx)}
		if idx.IsPrimary() {
			ch.layout = l
		}
	} else if ch.spans, err = indexSpans(l, idx, 0, scan.Spans); err != nil || len(ch.spans) == 0 {
		return nil
	} else if oneNodeLocal && idx.IsPrimary() && oneRow(scan.Spans, ch.spans, len(idx.KeyColumns)) {
		// One row lies on one tablet, so on one node: auto keeps it
		// local without asking where (PlanScan's tablet lookup and the
		// node list were 3% of the CPU of pgbench's select-only).
		return nil
	}
	// Placing the fragments first lets auto keep a one-node plan local
	// before any expression is checked.
	run := distsql.FromContext(r.ctx)
	for _, sp := range ch.spans {
		f, err := run.Planner.PlanScan(r.ctx, sp, distsql.Snapshot{})
		if err != nil {
			return nil
		}
		ch.frags = append(ch.frags, f...)
	}
	if oneNodeLocal && distsql.Nodes(ch.frags) < 2 {
		return nil
	}
	ch.scan = scan
	if !ch.climb(scan.Cols, scan.TableCols, scan.Filter) {
		return nil
	}
	ch.proc.Index = scan.Table.PrimaryIndex.ID
	if scan.Index != nil {
		ch.proc.Index = scan.Index.ID
	}
	ch.proc.Cols = scan.TableCols
	ch.proc.HardLimit = scan.HardLimit
	return ch
}

// distInvertedChain is distChainAt for a chain over ij, an index join
// of the rows an inverted scan of a distributed table's local GIN index
// finds (docs/distributed.md, "Local GIN indexes"). A block's entries lie
// in the tablet of its first bucket, beside its rows, so each block of
// the scan (all, or those of its Buckets) is a fragment on that tablet's
// leaseholder: it reads the block's token spans, intersects them, looks
// its rows up and filters, projects (and aggregates or sorts, as for any
// chain) there, and only its outputs cross the network. The rows of a
// shard that had split before the index was made lie partly in later
// tablets: its fragment still finds them (the lookup reads any tablet),
// remotely. A filter on the inverted scan's own columns does not ship.
func (r *runner) distInvertedChain(ch *distChain, ij *plan.IndexJoin, scan *plan.Scan, oneNodeLocal bool) *distChain {
	if ij.Lock != plan.LockNone || scan.Filter != nil || scan.HardLimit > 0 || ij.Table.ID != scan.Table.ID {
		return nil
	}
	for _, c := range scan.Table.Columns {
		if c.Type.Family == types.EnumFamily {
			return nil // as distChainAt
		}
	}
	l, err := r.tableLayout(scan.Table)
	if err != nil {
		return nil
	}
	idx, err := indexLayout(l, scan.Table, scan.Index)
	if err != nil || idx.Inverted == "" || !bucketed(l, idx) || idx.Blocks == 0 {
		// A global GIN index (an ordinary table's, or one made before
		// local ones existed) has no blocks to cut the work by.
		return nil
	}
	keyCols := make([]rowenc.ColumnID, len(ij.KeyCols))
	for i, id := range ij.KeyCols {
		p := slices.IndexFunc(scan.Cols, func(c plan.Column) bool { return c.ID == id })
		if p < 0 {
			return nil
		}
		keyCols[i] = scan.TableCols[p]
	}
	run := distsql.FromContext(r.ctx)
	for _, b := range l.InvertedBlocks(idx, scan.Buckets) {
		f, err := run.Planner.PlanScan(r.ctx, rowenc.BucketSpan(l.GroupID, b, b), distsql.Snapshot{})
		if err != nil {
			return nil
		}
		ch.frags = append(ch.frags, f...)
	}
	if len(ch.frags) == 0 || (oneNodeLocal && distsql.Nodes(ch.frags) < 2) {
		return nil
	}
	ch.scan = scan
	ch.nodes = append(ch.nodes, scan)
	if !ch.climb(ij.Cols, ij.TableCols, ij.Filter) {
		return nil
	}
	ch.proc.Index = scan.Table.PrimaryIndex.ID
	ch.proc.Cols = ij.TableCols
	ch.proc.Inverted = &fragInverted{Index: scan.Index.ID, Groups: scan.Inverted.Groups, KeyCols: keyCols, Buckets: scan.Buckets}
	return ch
}

// climb fills ch's processing from the rows its source yields (cols,
// reading the table's columns tableCols, filtered by filter) up through
// the Filter and Project nodes of the chain: the fragment's filter and
// output expressions. It reports false when one cannot ship.
func (ch *distChain) climb(cols []plan.Column, tableCols []rowenc.ColumnID, filter sem.Expr) bool {
	var err error
	if ch.cols, err = scanCols(ch.scan.Table, tableCols); err != nil {
		return false
	}
	for i, c := range ch.cols {
		if c.T.Oid != cols[i].T.Oid {
			return false
		}
	}
	// env maps the columns of the node being climbed to expressions over
	// the fragment's scan columns.
	env := make(map[sem.ColumnID]sem.Expr, len(cols))
	for i, c := range cols {
		env[c.ID] = &sem.ColRef{ID: ch.cols[i].ID, T: ch.cols[i].T, Name: ch.cols[i].Name}
	}
	var filters []string
	addFilter := func(e sem.Expr) bool {
		text, ok := shipExpr(subst(e, env), ch.cols, types.Bool)
		filters = append(filters, "("+text+")")
		return ok
	}
	if filter != nil && !addFilter(filter) {
		return false
	}
	for i := len(ch.nodes) - 2; i >= 0; i-- {
		switch v := ch.nodes[i].(type) {
		case *plan.Filter:
			if !addFilter(v.Pred) {
				return false
			}
		case *plan.Project:
			next := make(map[sem.ColumnID]sem.Expr, len(v.Exprs))
			for j, e := range v.Exprs {
				next[v.Cols[j].ID] = subst(e, env)
			}
			env = next
		}
	}
	ch.env = env
	for i, f := range filters {
		if i > 0 {
			ch.proc.Filter += " AND "
		}
		ch.proc.Filter += f
	}
	for _, c := range ch.top.Columns() {
		if c.T.Family == types.ArrayFamily {
			return false // rows ship without array element types
		}
		text, ok := shipExpr(env[c.ID], ch.cols, nil)
		if !ok {
			return false
		}
		ch.proc.Exprs = append(ch.proc.Exprs, text)
	}
	return true
}

// subst replaces e's column references by env's expressions; a column
// env lacks (an outer reference) leaves a nil result.
func subst(e sem.Expr, env map[sem.ColumnID]sem.Expr) sem.Expr {
	if e == nil {
		return nil
	}
	missing := false
	out := sem.Map(e, func(x sem.Expr) sem.Expr {
		if c, ok := x.(*sem.ColRef); ok {
			if v, ok := env[c.ID]; ok && v != nil {
				return v
			}
			missing = true
		}
		return x
	})
	if missing {
		return nil
	}
	return out
}

// shipExpr returns e's text for a fragment, or false when e must stay at
// the gateway: it is not shippable, or its text does not build back (as
// the remote builds it) to the same expression of the same type.
func shipExpr(e sem.Expr, cols []plan.Column, want *types.T) (string, bool) {
	if e == nil || !shippable(e) {
		return "", false
	}
	text := e.String()
	back, err := buildFragExpr(text, cols, want)
	if err != nil || back.String() != text || back.Type().Oid != e.Type().Oid {
		return "", false
	}
	return text, true
}

// shippable says whether e means the same on any node: no parameters,
// subqueries or aggregate references, only immutable functions and
// operators, and no cast whose result depends on session settings
// (TimeZone, DateStyle, IntervalStyle, extra_float_digits).
func shippable(e sem.Expr) bool {
	ok := true
	immutable := func(fns ...*builtins.Resolved) {
		for _, f := range fns {
			if f == nil || f.Overload == nil || f.Overload.Volatility != builtins.Immutable {
				ok = false
			}
		}
	}
	sem.Walk(e, func(x sem.Expr) bool {
		switch v := x.(type) {
		case *sem.Param, *sem.SubqueryRef, *sem.AggCall, *sem.AggRef, *sem.WindowRef, *sem.DomainCoerce:
			ok = false
		case *sem.FuncCall:
			immutable(v.Fn)
		case *sem.BinOp:
			immutable(v.Fn)
		case *sem.UnaryOp:
			immutable(v.Fn)
		case *sem.Cmp:
			immutable(v.Fn)
		case *sem.In:
			immutable(v.Eq)
		case *sem.AnyAll:
			immutable(v.Fn)
		case *sem.NullIf:
			immutable(v.Eq)
		case *sem.RowCmp:
			immutable(v.Fns...)
		case *sem.Case:
			for _, w := range v.Whens {
				if w.Eq != nil {
					immutable(w.Eq)
				}
			}
		case *sem.Cast:
			ok = ok && castShippable(v.Expr.Type(), v.To)
		}
		return ok
	})
	return ok
}

// castShippable: casts among numbers, booleans and strings, except
// floats to text (extra_float_digits), and casts within one family
// (a typmod), which no session setting changes.
func castShippable(from, to *types.T) bool {
	plain := func(t *types.T) bool {
		switch t.Family {
		case types.IntFamily, types.NumericFamily, types.FloatFamily, types.BoolFamily, types.StringFamily:
			return true
		}
		return false
	}
	if from.Family == to.Family {
		return from.Family != types.TimestampTZFamily || to.Oid == from.Oid
	}
	if from.Family == types.FloatFamily && to.Family == types.StringFamily {
		return false
	}
	return plain(from) && plain(to)
}

// tryDist returns a distributed operator for n, or nil to build n as
// usual. It never fails a statement that could run locally: anything it
// cannot ship stays at the gateway.
func (r *runner) tryDist(n plan.Node) (op, error) {
	switch n := n.(type) {
	case *plan.Limit:
		if !n.WithTies {
			lim, err1 := r.evalCount(n.Limit, "LIMIT", "")
			off, err2 := r.evalCount(n.Offset, "OFFSET", "")
			if err1 == nil && err2 == nil && lim >= 0 {
				if r.dist.limits == nil {
					r.dist.limits = map[plan.Node]int64{}
				}
				r.dist.limits[n.Input] = lim + max(off, 0)
			}
		}
		return nil, nil
	case *plan.GroupBy:
		// Counted at the tablets (count.go), no fragment need see a row.
		if o, err := r.countPushdown(n); err != nil || o != nil {
			return o, err
		}
		return r.distGroupBy(n)
	case *plan.Join:
		return r.distJoin(n)
	case *plan.Sort:
		return r.distSort(n)
	case *plan.Project, *plan.Filter, *plan.Scan, *plan.IndexJoin:
		ch := r.distChainOf(n)
		if ch == nil {
			return nil, nil
		}
		if lim, ok := r.dist.limits[n]; ok && lim > 0 {
			ch.proc.Limit = lim
		} else if ok {
			return nil, nil // LIMIT 0: nothing to distribute
		}
		frags, err := r.distFragments(n, ch)
		if err != nil || frags == nil {
			return nil, err
		}
		return &distRowsOp{r: r, node: r.distDisplay(n, ch), frags: frags, limit: ch.gatewayLimit}, nil
	}
	return nil, nil
}

// distGroupBy runs n as partial aggregation in fragments and the final
// one here.
func (r *runner) distGroupBy(n *plan.GroupBy) (op, error) {
	type split struct {
		p    builtins.Partial
		args []sem.ColumnID
	}
	var splits []split
	for _, a := range n.Aggs {
		if a.Distinct || a.Filter != nil || len(a.OrderBy) > 0 || a.Fn == nil {
			return nil, nil
		}
		var args []sem.ColumnID
		for _, e := range a.Args {
			c, ok := e.(*sem.ColRef)
			if !ok {
				return nil, nil
			}
			args = append(args, c.ID)
		}
		p, ok := builtins.PartialOf(a.Name, a.Star, a.Fn)
		if !ok {
			return nil, nil
		}
		splits = append(splits, split{p, args})
	}
	ch := r.distChainOf(n.Input)
	if ch == nil {
		return nil, nil
	}
	in := n.Input.Columns()
	pos := func(id sem.ColumnID) int {
		for i, c := range in {
			if c.ID == id {
				return i
			}
		}
		return -1
	}
	ch.proc.Grouped, ch.proc.Streamed = true, n.Ordered
	// The partial rows: the group columns, then every part's result.
	var cols []plan.Column
	for _, g := range n.GroupCols {
		p := pos(g)
		if p < 0 {
			return nil, nil
		}
		ch.proc.Group = append(ch.proc.Group, p)
		cols = append(cols, in[p])
	}
	final := &plan.GroupBy{GroupCols: n.GroupCols, Cols: n.Cols, Ordered: n.Ordered}
	next := sem.ColumnID(-1)
	for i, s := range splits {
		var argPos []int
		var argTypes []*types.T
		for _, id := range s.args {
			p := pos(id)
			if p < 0 {
				return nil, nil
			}
			argPos = append(argPos, p)
			argTypes = append(argTypes, in[p].T)
		}
		fa := plan.Aggregate{Fn: s.p.Final, Name: n.Aggs[i].Name}
		for _, part := range s.p.Parts {
			fn, err := builtins.ResolveFunc(part.Name, argTypes)
			if err != nil || fn.Overload.NewAggregate == nil {
				return nil, nil
			}
			pa := fragAgg{Name: part.Name, Star: part.Star}
			if !part.Star {
				pa.Args = argPos
			}
			ch.proc.Aggs = append(ch.proc.Aggs, pa)
			cols = append(cols, plan.Column{ID: next, Name: part.Name, T: fn.Return})
			next--
		}
		for k := range s.p.Parts {
			c := cols[len(cols)-len(s.p.Parts)+k]
			fa.Args = append(fa.Args, &sem.ColRef{ID: c.ID, T: c.T, Name: c.Name})
		}
		final.Aggs = append(final.Aggs, fa)
	}
	frags, err := r.distFragments(n, ch)
	if err != nil || frags == nil {
		return nil, err
	}
	src := &distRowsOp{r: r, node: n, frags: frags}
	o, err := r.groupByOver(final, cols, src)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// distSort runs n's sort (top-k under its limit) in fragments and merges
// their sorted streams here.
func (r *runner) distSort(n *plan.Sort) (op, error) {
	ch := r.distChainOf(n.Input)
	if ch == nil {
		return nil, nil
	}
	keys, err := orderingKeys(n.Input.Columns(), n.Order)
	if err != nil {
		return nil, nil
	}
	for _, k := range keys {
		ch.proc.Order = append(ch.proc.Order, fragOrder{Pos: k.pos, Desc: k.desc, NullsFirst: k.nullsFirst})
	}
	if n.Limit != nil {
		lim, err1 := r.evalCount(n.Limit, "LIMIT", "")
		off, err2 := r.evalCount(n.Offset, "OFFSET", "")
		if err1 != nil || err2 != nil {
			return nil, nil
		}
		if lim == 0 {
			return nil, nil
		}
		if lim > 0 {
			ch.proc.Limit = lim + max(off, 0)
		}
	}
	frags, err := r.distFragments(n, ch)
	if err != nil || frags == nil {
		return nil, err
	}
	return &distMergeOp{r: r, node: n, frags: frags, keys: keys}, nil
}

// distFragments places ch's fragments (one per tablet of each span, in
// key order) with its processing, or returns nil when distsql = auto and
// they would all run on one node. The snapshot is filled in when the
// flow starts. It records the fragments for EXPLAIN ANALYZE under n, and
// marks the chain's nodes as run inside them.
func (r *runner) distFragments(n plan.Node, ch *distChain) ([]distsql.Fragment, error) {
	frags := ch.frags
	tb, err := catalog.Encode(ch.scan.Table)
	if err != nil {
		return nil, nil
	}
	ch.proc.Table = tb
	ch.proc.WorkMem = r.x.WorkMem
	proc, err := json.Marshal(ch.proc)
	if err != nil {
		return nil, fmt.Errorf("exec: encoding a distributed fragment: %w", err)
	}
	for i := range frags {
		frags[i].Spec.Fragment = i
		frags[i].Spec.Proc = proc
	}
	r.dist.planned = &distPlanned{display: r.distDisplay(n, ch), frags: frags}
	if s := r.x.Stats; s != nil {
		d := r.distDisplay(n, ch)
		s.addDist(d, frags)
		s.node(d).FragmentRows = true
		for _, x := range ch.nodes {
			if x != d {
				s.node(x).Remote = true
			}
		}
	}
	return frags, nil
}

// distDisplay is the node EXPLAIN ANALYZE shows a distributed subtree
// rooted at n on: n, or for a chain topped by projections (which EXPLAIN
// does not print) the first node under them.
func (r *runner) distDisplay(n plan.Node, ch *distChain) plan.Node {
	if _, ok := n.(*plan.Project); !ok || ch == nil {
		return n
	}
	for _, x := range ch.nodes {
		if _, ok := x.(*plan.Project); !ok {
			return x
		}
	}
	return n
}

// How a flow's batches are consumed (startFlow).
const (
	flowOrdered = iota // fragment by fragment
	flowMerged         // each fragment on its own (NextOf)
	flowAny            // as they come
)

// startFlow stamps frags with the statement's snapshot and starts them.
func (r *runner) startFlow(ctx context.Context, frags []distsql.Fragment, mode int) *distsql.Flow {
	run := distsql.FromContext(r.ctx)
	snap := run.SnapshotAt(r.x.Txn.ReadTimestamp())
	for i := range frags {
		frags[i].Spec.Snapshot = snap
	}
	switch mode {
	case flowMerged:
		return run.Gateway.StartMerged(ctx, frags, r.x.Memory)
	case flowAny:
		return run.Gateway.Start(ctx, frags, r.x.Memory)
	}
	return run.Gateway.StartOrdered(ctx, frags, r.x.Memory)
}

func decodeRows(b distsql.Batch, buf [][]types.Datum) ([][]types.Datum, error) {
	for _, enc := range b.Rows {
		row, err := rowcontainer.DecodeRow(enc)
		if err != nil {
			return nil, fmt.Errorf("exec: row of distributed fragment %d: %w", b.Fragment, err)
		}
		buf = append(buf, row)
	}
	return buf, nil
}

// distRowsOp returns the rows of its fragments, fragment by fragment (so
// in key order for a chain in key order), at most limit of them when
// limit > 0; with anyOrder, in the order they arrive.
type distRowsOp struct {
	r        *runner
	node     plan.Node
	frags    []distsql.Fragment
	limit    int64
	anyOrder bool
	flow     *distsql.Flow
	buf      [][]types.Datum
	bi       int
	returned int64
	done     bool
}

func (o *distRowsOp) Next(ctx context.Context) ([]types.Datum, error) {
	for o.bi >= len(o.buf) {
		if o.done {
			return nil, nil
		}
		if o.flow == nil {
			mode := flowOrdered
			if o.anyOrder {
				mode = flowAny
			}
			o.flow = o.r.startFlow(ctx, o.frags, mode)
		}
		b, ok, err := o.flow.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			o.finish()
			return nil, nil
		}
		o.buf, o.bi = o.buf[:0], 0
		if o.buf, err = decodeRows(b, o.buf); err != nil {
			return nil, err
		}
	}
	if o.limit > 0 && o.returned >= o.limit {
		o.finish()
		return nil, nil
	}
	row := o.buf[o.bi]
	o.buf[o.bi] = nil
	o.bi++
	o.returned++
	return row, nil
}

func (o *distRowsOp) finish() {
	o.done = true
	if o.flow != nil {
		o.flow.Close()
		o.r.x.Stats.addDistDone(o.node, o.flow.Stats())
		o.flow = nil
	}
}

func (o *distRowsOp) Close() { o.finish() }

// distMergeOp merges its fragments' sorted streams by keys; ties go to
// the lower fragment, as a stable sort of the rows in key order would
// have them.
type distMergeOp struct {
	r       *runner
	node    plan.Node
	frags   []distsql.Fragment
	keys    []sortKey
	flow    *distsql.Flow
	streams []fragStream
	h       fragHeap
	started bool
	done    bool
}

type fragStream struct {
	buf [][]types.Datum
	bi  int
	end bool
}

func (o *distMergeOp) pull(i int) ([]types.Datum, error) {
	s := &o.streams[i]
	for s.bi >= len(s.buf) {
		if s.end {
			return nil, nil
		}
		b, ok, err := o.flow.NextOf(i)
		if err != nil {
			return nil, err
		}
		if !ok {
			s.end = true
			return nil, nil
		}
		s.buf, s.bi = s.buf[:0], 0
		if s.buf, err = decodeRows(b, s.buf); err != nil {
			return nil, err
		}
	}
	row := s.buf[s.bi]
	s.buf[s.bi] = nil
	s.bi++
	return row, nil
}

func (o *distMergeOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.done {
		return nil, nil
	}
	if !o.started {
		o.started = true
		o.flow = o.r.startFlow(ctx, o.frags, flowMerged)
		o.streams = make([]fragStream, len(o.frags))
		o.h.keys = o.keys
		for i := range o.frags {
			row, err := o.pull(i)
			if err != nil {
				return nil, err
			}
			if row != nil {
				o.h.items = append(o.h.items, fragItem{row, i})
			}
		}
		heap.Init(&o.h)
	}
	if o.h.Len() == 0 {
		o.finish()
		return nil, nil
	}
	top := o.h.items[0]
	row, err := o.pull(top.frag)
	if err != nil {
		return nil, err
	}
	if row == nil {
		heap.Pop(&o.h)
	} else {
		o.h.items[0].row = row
		heap.Fix(&o.h, 0)
	}
	return top.row, nil
}

func (o *distMergeOp) finish() {
	o.done = true
	if o.flow != nil {
		o.flow.Close()
		o.r.x.Stats.addDistDone(o.node, o.flow.Stats())
		o.flow = nil
	}
}

func (o *distMergeOp) Close() { o.finish() }

type fragItem struct {
	row  []types.Datum
	frag int
}

type fragHeap struct {
	keys  []sortKey
	items []fragItem
}

func (h *fragHeap) Len() int { return len(h.items) }
func (h *fragHeap) Less(i, j int) bool {
	if c := compareRows(h.keys, h.items[i].row, h.items[j].row); c != 0 {
		return c < 0
	}
	return h.items[i].frag < h.items[j].frag
}
func (h *fragHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *fragHeap) Push(x any)    { h.items = append(h.items, x.(fragItem)) }
func (h *fragHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

type distPlanned struct {
	display plan.Node
	frags   []distsql.Fragment
	// join says how a distributed join runs (distsql_join.go).
	join string
}

// DistributionAnnotator returns plain EXPLAIN's annotation of p as x
// would run it: under each node that would run as distributed fragments
// "Distribution: full" (fragments on more than one node) or "local",
// then each fragment's node and tablet; nil when nothing would be
// distributed. It plans as execution does (tryDist) and starts nothing.
func DistributionAnnotator(ctx context.Context, x *Context, p *plan.Plan) func(plan.Node) string {
	if distsql.FromContext(ctx) == nil || x == nil || x.Txn == nil || p == nil {
		return nil
	}
	r := newRunner(ctx, x, p)
	defer r.release()
	if r.distOn(); !r.distTxnOK(ctx) {
		return nil
	}
	notes := map[plan.Node]string{}
	var visit func(n plan.Node)
	visit = func(n plan.Node) {
		if r.dist.on {
			r.dist.planned = nil
			o, err := r.tryDist(n)
			if _, ok := o.(*countOp); ok {
				// Counted at the tablets (count.go): nothing below runs.
				o.Close()
				return
			}
			if err == nil && o != nil && r.dist.planned != nil {
				o.Close()
				notes[r.dist.planned.display] = distributionText(r.dist.planned.frags, nil, false, r.dist.planned.join)
				return
			}
		}
		if sc, ok := n.(*plan.Scan); ok {
			// A scan whose expressions cannot ship may still read its
			// KVs through fragments (kvStream.startDist).
			if frags := r.kvFragments(sc); frags != nil {
				notes[n] = distributionText(frags, nil, false, "")
			}
			return
		}
		for _, c := range planInputs(n) {
			visit(c)
		}
	}
	visit(p.Root)
	if len(notes) == 0 {
		return nil
	}
	return func(n plan.Node) string { return notes[n] }
}

// kvFragments returns the fragments a scan reading its KVs through a
// flow would run (buildScan's and startDist's rules), or nil.
func (r *runner) kvFragments(n *plan.Scan) []distsql.Fragment {
	if !r.distEligible(r.ctx, n) || n.ShardMerge {
		return nil
	}
	l, err := r.tableLayout(n.Table)
	if err != nil {
		return nil
	}
	idx, err := indexLayout(l, n.Table, n.Index)
	if err != nil || bucketed(l, idx) {
		return nil
	}
	sp, err := indexSpans(l, idx, 0, n.Spans)
	if err != nil || len(sp) != 1 {
		return nil
	}
	frags, err := distsql.FromContext(r.ctx).Planner.PlanScan(r.ctx, sp[0], distsql.Snapshot{})
	if err != nil || (r.dist.auto && distsql.Nodes(frags) < 2) {
		return nil
	}
	return frags
}

// planInputs lists the inputs of the nodes a distributed subtree may
// sit under.
func planInputs(n plan.Node) []plan.Node {
	switch v := n.(type) {
	case *plan.IndexJoin:
		return []plan.Node{v.Input}
	case *plan.LookupJoin:
		return []plan.Node{v.Input}
	case *plan.Filter:
		return []plan.Node{v.Input}
	case *plan.Project:
		return []plan.Node{v.Input}
	case *plan.Join:
		return []plan.Node{v.Left, v.Right}
	case *plan.GroupBy:
		return []plan.Node{v.Input}
	case *plan.Window:
		return []plan.Node{v.Input}
	case *plan.Sort:
		return []plan.Node{v.Input}
	case *plan.Limit:
		return []plan.Node{v.Input}
	case *plan.Distinct:
		return []plan.Node{v.Input}
	case *plan.SetOp:
		return []plan.Node{v.Left, v.Right}
	case *plan.ProjectSet:
		return []plan.Node{v.Input}
	case *plan.Max1Row:
		return []plan.Node{v.Input}
	}
	return nil
}
