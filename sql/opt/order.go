package opt

import (
	"math"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// orderings removes sorts an index order provides, lets limits reach the
// reader, picks an index for ORDER BY ... LIMIT when that avoids reading
// and sorting everything, and marks streaming aggregations (bottom-up).
//
// Order-preserving nodes: Filter and Project keep their input's order, an
// IndexJoin or LookupJoin emits its rows in input order (the executor
// pairs each batch's lookups with the input rows), and a streaming
// GroupBy emits its groups in input order.
func (o *optimizer) orderings(n plan.Node) plan.Node {
	for _, c := range children(n) {
		*c = o.orderings(*c)
	}
	switch v := n.(type) {
	case *plan.Sort:
		if o.provide(v.Input, v.Order) {
			return v.Input
		}
	case *plan.Limit:
		o.limitOrder(v)
		o.hardLimit(v)
		topK(v)
	case *plan.GroupBy:
		o.groupOrder(v)
	}
	return n
}

// orderedScan finds the Scan whose order n passes through unchanged to
// its columns cols.
func orderedScan(n plan.Node, cols colSet) *plan.Scan {
	below := func(in plan.Node) bool {
		have := colsOf(in.Columns())
		for id := range cols {
			if !have.has(id) {
				return false
			}
		}
		return true
	}
	for {
		switch v := n.(type) {
		case *plan.Scan:
			return v
		case *plan.Filter:
			n = v.Input
		case *plan.Project:
			if !below(v.Input) {
				return nil
			}
			n = v.Input
		case *plan.IndexJoin:
			if !below(v.Input) {
				return nil
			}
			n = v.Input
		case *plan.LookupJoin:
			if !below(v.Input) {
				return nil
			}
			n = v.Input
		case *plan.GroupBy:
			if !v.Ordered {
				return nil
			}
			for id := range cols {
				if !idSet(v.GroupCols).has(id) {
					return nil
				}
			}
			n = v.Input
		default:
			return nil
		}
	}
}

// provide reports whether n can yield rows in order by reading its scan
// in (or against) index order, and if so asks the scan to.
func (o *optimizer) provide(n plan.Node, order []plan.Ordering) bool {
	cols := colSet{}
	for _, k := range order {
		cols[k.Col] = struct{}{}
	}
	s := orderedScan(n, cols)
	if s == nil || s.Table == nil {
		return false
	}
	rev, merge, ok := scanProvides(s, order)
	if !ok {
		return false
	}
	s.Ordered, s.Reverse, s.ShardMerge = true, rev, merge
	return true
}

// entryKey returns the columns idx's entries are ordered by: its key
// columns, then for a secondary index the primary-key columns it lacks
// (rowenc appends them to every entry's key, or to a unique entry's
// value when its key is unique anyway), which makes entries distinct.
func entryKey(t *catalog.Table, idx *catalog.Index) ([]rowenc.ColumnID, []rowenc.Order) {
	keys := append([]rowenc.ColumnID(nil), idx.KeyColumnIDs...)
	orders := append([]rowenc.Order(nil), idx.KeyDirections...)
	if idx.ID == t.PrimaryIndex.ID {
		return keys, orders
	}
	have := map[rowenc.ColumnID]bool{}
	for _, k := range keys {
		have[k] = true
	}
	for i, k := range t.PrimaryIndex.KeyColumnIDs {
		if !have[k] {
			keys = append(keys, k)
			orders = append(orders, t.PrimaryIndex.KeyDirections[i])
		}
	}
	return keys, orders
}

// scanProvides reports whether reading s in index order (or in reverse,
// rev) yields rows ordered by order. Key columns every span fixes to one
// value may be skipped; past the whole entry key (entryKey) every row is
// distinct, so any further keys are satisfied. On a hash-sharded index
// whose spans each fix the shard (one span per bucket, see allBuckets),
// the order of the columns after the shard is provided by merging the
// buckets' streams (merge: plan.Scan.ShardMerge).
func scanProvides(s *plan.Scan, order []plan.Ordering) (rev, merge, ok bool) {
	if s.Inverted != nil {
		return false, false, false // rows in no order (a GIN index)
	}
	idx := s.Index
	if idx == nil {
		idx = &s.Table.PrimaryIndex
	}
	keys, orders := entryKey(s.Table, idx)
	fixed := fixedKeyCols(s.Spans, len(keys))
	if rev, ok := keysProvide(s, keys, orders, fixed, order); ok {
		return rev, false, true
	}
	if idx.HashSharding == nil || !shardPerSpan(s.Spans) {
		return false, false, false
	}
	rev, ok = keysProvide(s, keys[1:], orders[1:], fixedKeyCols(dropFirst(s.Spans), len(keys)-1), order)
	return rev, ok, ok
}

// shardPerSpan reports whether every span holds one value of the first
// key column (the shard of a hash-sharded index).
func shardPerSpan(spans []plan.Span) bool {
	if len(spans) == 0 {
		return false
	}
	for _, sp := range spans {
		if len(sp.Start) == 0 || len(sp.End) == 0 || types.Compare(sp.Start[0], sp.End[0]) != 0 ||
			(len(sp.Start) == 1 && sp.StartExclusive) || (len(sp.End) == 1 && !sp.EndInclusive) {
			return false
		}
	}
	return true
}

// distinctFirst returns the distinct values of the spans' first key
// column (the buckets a hash-sharded scan reads).
func distinctFirst(spans []plan.Span) []types.Datum {
	var out []types.Datum
	for _, sp := range spans {
		if len(sp.Start) == 0 {
			continue
		}
		if len(out) == 0 || types.Compare(out[len(out)-1], sp.Start[0]) != 0 {
			out = append(out, sp.Start[0])
		}
	}
	return out
}

// dropFirst returns spans without their first key column (each a span
// within one bucket, see shardPerSpan).
func dropFirst(spans []plan.Span) []plan.Span {
	out := make([]plan.Span, len(spans))
	for i, sp := range spans {
		out[i] = plan.Span{Start: sp.Start[1:], End: sp.End[1:], StartExclusive: sp.StartExclusive, EndInclusive: sp.EndInclusive}
	}
	return out
}

// keysProvide is scanProvides over the entry key columns keys (with their
// orders, and which of them every span fixes).
func keysProvide(s *plan.Scan, keys []rowenc.ColumnID, orders []rowenc.Order, fixed []bool, order []plan.Ordering) (rev, ok bool) {
	tableCol := map[sem.ColumnID]rowenc.ColumnID{}
	for i, c := range s.Cols {
		tableCol[c.ID] = s.TableCols[i]
	}
	isFixed := func(tc rowenc.ColumnID) bool {
		for i, k := range keys {
			if k == tc && fixed[i] {
				return true
			}
		}
		return false
	}
	dirSet := false
	i := 0
	for _, ok := range order {
		tc, found := tableCol[ok.Col]
		if !found {
			return false, false
		}
		for i < len(keys) && keys[i] != tc && fixed[i] {
			i++
		}
		if i == len(keys) {
			return rev, true
		}
		if i >= len(keys) || keys[i] != tc {
			if isFixed(tc) {
				continue
			}
			return false, false
		}
		desc := orders[i]&rowenc.Descending != 0
		nullsFirst := orders[i]&rowenc.NullsFirst != 0
		nullable := true
		if c := s.Table.ColumnByID(tc); c != nil && !c.Nullable {
			nullable = false
		}
		fwd := ok.Desc == desc && (!nullable || ok.NullsFirst == nullsFirst)
		bwd := ok.Desc != desc && (!nullable || ok.NullsFirst != nullsFirst)
		switch {
		case !dirSet && fwd:
			dirSet, rev = true, false
		case !dirSet && bwd:
			dirSet, rev = true, true
		case dirSet && !(rev && bwd || !rev && fwd):
			return false, false
		case !fwd && !bwd:
			return false, false
		}
		i++
	}
	return rev, true
}

// fixedKeyCols reports, per key position, whether every span holds one
// and the same value there (a single point prefix).
func fixedKeyCols(spans []plan.Span, n int) []bool {
	out := make([]bool, n)
	if len(spans) == 0 {
		return out
	}
	for i := range n {
		var v types.Datum
		for _, sp := range spans {
			if len(sp.Start) <= i || len(sp.End) <= i || types.Compare(sp.Start[i], sp.End[i]) != 0 ||
				// The last value of an exclusive bound is not held.
				(len(sp.Start) == i+1 && sp.StartExclusive) || (len(sp.End) == i+1 && !sp.EndInclusive) {
				return out
			}
			if v == nil {
				v = sp.Start[i]
			} else if types.Compare(v, sp.Start[i]) != 0 {
				return out
			}
		}
		out[i] = true
	}
	return out
}

// constInt returns a constant non-negative int8 limit/offset expression's
// value.
func constInt(e sem.Expr) (int64, bool) {
	if e == nil {
		return 0, true
	}
	k, ok := e.(*sem.Const)
	if !ok {
		return 0, false
	}
	i, ok := k.Datum.(types.DInt)
	if !ok || i < 0 {
		return 0, false
	}
	return int64(i), true
}

// hardLimit lets the reader of a Limit's scan stop after limit+offset
// rows: only Projects and unfiltered IndexJoins (one row out per row in)
// may separate them (a Filter or a Sort between would need more rows than
// the limit).
func (o *optimizer) hardLimit(l *plan.Limit) {
	if l.Limit == nil || l.WithTies {
		return
	}
	lim, ok1 := constInt(l.Limit)
	off, ok2 := constInt(l.Offset)
	if !ok1 || !ok2 || lim > math.MaxInt64-off {
		return
	}
	n := l.Input
	for done := false; !done; {
		switch v := n.(type) {
		case *plan.Project:
			n = v.Input
		case *plan.IndexJoin:
			if v.Filter != nil {
				return
			}
			n = v.Input
		default:
			done = true
		}
	}
	if s, ok := n.(*plan.Scan); ok && lim+off > 0 {
		s.HardLimit = lim + off
	}
}

// topK bounds a Sort right below a Limit (through Projects, which keep
// the row count) to the Limit's count plus offset: the executor then
// keeps only that many rows in a heap instead of sorting everything. Not
// WITH TIES: its last rows depend on rows past the count (PostgreSQL
// bounds no sort there either).
func topK(l *plan.Limit) {
	if l.Limit == nil || l.WithTies || !fixedCount(l.Limit) || !fixedCount(l.Offset) {
		return
	}
	n := l.Input
	for {
		p, ok := n.(*plan.Project)
		if !ok {
			break
		}
		n = p.Input
	}
	if s, ok := n.(*plan.Sort); ok {
		s.Limit, s.Offset = l.Limit, l.Offset
	}
}

// fixedCount reports whether a LIMIT or OFFSET expression gives the same
// value each time it is evaluated (the Sort and the Limit above it each
// evaluate it): a constant or a parameter, possibly cast; not random().
func fixedCount(e sem.Expr) bool {
	switch v := e.(type) {
	case nil, *sem.Const, *sem.Param:
		return true
	case *sem.Cast:
		return fixedCount(v.Expr)
	}
	return false
}

// limitOrder handles Limit over a Sort no index order provided yet: when
// another index of the scan below gives the order, reading the first
// limit+offset rows of it may cost less than reading everything the
// current access reads and sorting it.
func (o *optimizer) limitOrder(l *plan.Limit) {
	sort, ok := l.Input.(*plan.Sort)
	if !ok || l.Limit == nil || l.WithTies {
		return
	}
	lim, ok1 := constInt(l.Limit)
	off, ok2 := constInt(l.Offset)
	if !ok1 || !ok2 || lim > math.MaxInt64-off {
		return
	}
	want := float64(lim + off)
	// Find the access node under Projects.
	n := &sort.Input
	cols := colSet{}
	for _, k := range sort.Order {
		cols[k.Col] = struct{}{}
	}
	for {
		switch v := (*n).(type) {
		case *plan.Filter:
			return // the limit could not reach the reader past it
		case *plan.Project:
			in := colsOf(v.Input.Columns())
			for id := range cols {
				if !in.has(id) {
					return
				}
			}
			n = &v.Input
			continue
		}
		break
	}
	orig, ok := o.orig[*n]
	if !ok {
		return
	}
	cur := o.bestAccess(orig)
	curCost := cur.cost + cur.rows*o.costs.SortRow
	var best *access
	bestCost := curCost
	for _, a := range o.accesses(orig) {
		if a.scan == nil {
			continue
		}
		rev, merge, ok := scanProvides(a.scan, sort.Order)
		if !ok {
			continue
		}
		ij, isJoin := a.node.(*plan.IndexJoin)
		if isJoin && ij.Filter != nil {
			continue // rows dropped after the lookup would break the limit
		}
		// A merge of buckets reads up to the limit from each of them.
		per := want
		if merge {
			per *= float64(len(distinctFirst(a.scan.Spans)))
		}
		rows := min(a.rows, per)
		if a.scan.Filter != nil {
			rows = min(a.rows, per/o.costs.RangeFraction)
		}
		cost := o.costs.scanCost(rows, o.tableSize(orig.Table))
		if isJoin {
			cost += o.costs.lookupCost(want, o.tableSize(orig.Table))
		}
		if cost < bestCost {
			a := a
			a.scan.Ordered, a.scan.Reverse, a.scan.ShardMerge = true, rev, merge
			best, bestCost = &a, cost
		}
	}
	if best == nil {
		return
	}
	o.orig[best.node] = orig
	o.rows[best.node] = want
	best.scan.HardLimit = int64(want)
	*n = best.node
	// The scan yields the order (an index join keeps it): the sort goes.
	l.Input = sort.Input
}

// groupOrder marks a GroupBy streaming when its input arrives ordered by
// the group columns, asking an unbucketed scan for its (free) index order
// when that gives it.
func (o *optimizer) groupOrder(g *plan.GroupBy) {
	if len(g.GroupCols) == 0 {
		return
	}
	want := idSet(g.GroupCols)
	if prefixIs(providedOrder(g.Input), want) {
		g.Ordered = true
		return
	}
	s := orderedScan(g.Input, want)
	if s == nil || s.Table == nil || s.Ordered || bucketed(s) {
		return
	}
	s.Ordered = true
	if prefixIs(providedOrder(g.Input), want) {
		g.Ordered = true
	} else {
		s.Ordered = false
	}
}

// bucketed reports whether s reads several buckets, which an ordered read
// would have to merge.
func bucketed(s *plan.Scan) bool {
	t := s.Table
	if t.Partitioning.Kind != catalog.PartitionHash || t.Partitioning.HashColumns == 0 || len(s.Buckets) == 1 {
		return false
	}
	return s.Index == nil || s.Index.ID == t.PrimaryIndex.ID || s.Index.Placement != catalog.IndexGlobal
}

func prefixIs(cols []sem.ColumnID, want colSet) bool {
	if len(cols) < len(want) {
		return false
	}
	for _, id := range cols[:len(want)] {
		if !want.has(id) {
			return false
		}
	}
	return true
}

// providedOrder returns the columns n's rows are sorted by, major first
// (directions aside: grouping only needs equal values adjacent).
func providedOrder(n plan.Node) []sem.ColumnID {
	switch v := n.(type) {
	case *plan.Scan:
		if !v.Ordered || v.Table == nil || v.Inverted != nil {
			return nil
		}
		idx := v.Index
		if idx == nil {
			idx = &v.Table.PrimaryIndex
		}
		byTable := map[rowenc.ColumnID]sem.ColumnID{}
		for i, c := range v.Cols {
			byTable[v.TableCols[i]] = c.ID
		}
		var out []sem.ColumnID
		keys, _ := entryKey(v.Table, idx)
		for _, k := range keys {
			id, ok := byTable[k]
			if !ok {
				return out
			}
			out = append(out, id)
		}
		// Rows differ in their entry key: sorted by it, they are sorted by
		// it followed by any other columns.
		have := idSet(out)
		for _, c := range v.Cols {
			if !have.has(c.ID) {
				out = append(out, c.ID)
			}
		}
		return out
	case *plan.Sort:
		var out []sem.ColumnID
		for _, k := range v.Order {
			out = append(out, k.Col)
		}
		return out
	case *plan.Filter:
		return providedOrder(v.Input)
	case *plan.IndexJoin:
		return providedOrder(v.Input)
	case *plan.LookupJoin:
		return providedOrder(v.Input)
	case *plan.Limit:
		return providedOrder(v.Input)
	case *plan.Project:
		out := providedOrder(v.Input)
		have := colsOf(v.Cols)
		for i, id := range out {
			if !have.has(id) {
				return out[:i]
			}
		}
		return out
	}
	return nil
}
