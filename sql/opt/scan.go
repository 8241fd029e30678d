package opt

import (
	"slices"
	"sort"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// planScans plans every Scan of the tree (bottom-up): spans, buckets and
// the index to read.
func (o *optimizer) planScans(n plan.Node) (plan.Node, error) {
	for _, c := range children(n) {
		var err error
		if *c, err = o.planScans(*c); err != nil {
			return nil, err
		}
	}
	s, ok := n.(*plan.Scan)
	if !ok || s.Table == nil || planned(s) {
		return n, nil
	}
	best := o.bestAccess(s)
	o.orig[best.node] = best.orig
	o.rows[best.node] = best.rows
	if best.out > 0 {
		o.rows[best.node] = best.out
	}
	o.noteScanStats(s)
	return best.node, nil
}

// planned reports whether s carries an earlier Optimize's decisions
// (spans, buckets, an order or a limit the plan above relies on): planning
// it again from its residual filter would lose them, so it is kept.
func planned(s *plan.Scan) bool {
	return s.Spans != nil || s.Buckets != nil || s.Ordered || s.Reverse || s.HardLimit > 0 ||
		(s.Index != nil && s.Index.ID != s.Table.PrimaryIndex.ID)
}

// access is one way to read a Scan: the node replacing it (a Scan, an
// IndexJoin over a Scan, or an empty Values), with its estimated rows and
// cost.
type access struct {
	node plan.Node
	scan *plan.Scan // the index scan inside node; nil for Values
	orig *plan.Scan // the Scan planned
	rows float64
	cost float64
	// out, when statistics exist, is how many rows remain after the
	// filter (rows counts the index entries read).
	out float64
}

// bestAccess returns the cheapest access to s (ties go to the primary
// index, then to the first secondary index).
func (o *optimizer) bestAccess(s *plan.Scan) access {
	orig := *s
	var best access
	for _, a := range o.accesses(&orig) {
		if best.node == nil || a.cost < best.cost {
			best = a
		}
	}
	return best
}

// scanInfo maps a Scan's column IDs to table columns and their types.
func scanInfo(s *plan.Scan) map[sem.ColumnID]colInfo {
	m := make(map[sem.ColumnID]colInfo, len(s.Cols))
	for i, c := range s.Cols {
		t := c.T
		if tc := s.Table.ColumnByID(s.TableCols[i]); tc != nil && tc.Type != nil {
			t = tc.Type
		}
		m[c.ID] = colInfo{tableCol: s.TableCols[i], t: t}
	}
	return m
}

// accesses lists every way to read s: its own index (the primary index
// unless the binder chose one), each public secondary btree index, and
// each public GIN index a conjunct can use (gin.go).
func (o *optimizer) accesses(s *plan.Scan) []access {
	conj := conjuncts(s.Filter)
	for _, c := range conj {
		if k, ok := c.(*sem.Const); ok && (k.Datum == types.DBool(false) || types.IsNull(k.Datum)) {
			// WHERE false (or NULL): no row qualifies.
			return []access{{node: &plan.Values{Cols: s.Cols}, orig: s}}
		}
	}
	info := scanInfo(s)
	fc := readConstraints(conj, info)
	primary := &s.Table.PrimaryIndex
	chosen := s.Index
	if chosen == nil {
		chosen = primary
	}
	out := []access{o.accessVia(s, chosen, fc, nil)}
	if chosen.ID != primary.ID {
		return out
	}
	if o.costs.IndexScanOff && len(fc.cons) > 0 {
		// A sequential scan filtering every row: the plan PostgreSQL
		// falls back on with enable_indexscan off (otherwise a bounded
		// read of the primary index always costs less).
		out = append(out, o.accessVia(s, chosen, &filterConstraints{conj: fc.conj, col: fc.col, cons: map[rowenc.ColumnID]constraint{}}, nil))
	}
	for i := range s.Table.Indexes {
		idx := &s.Table.Indexes[i]
		if idx.State != catalog.IndexPublic || (idx.Kind != "" && idx.Kind != catalog.IndexBTree && idx.Kind != catalog.IndexGIN) {
			continue
		}
		implied := map[int]bool{}
		if idx.Predicate != "" {
			var ok bool
			if implied, ok = partialImplied(s, idx, conj); !ok {
				continue
			}
		}
		if idx.Kind == catalog.IndexGIN {
			if a, ok := o.invertedAccess(s, idx, conj, implied, fc.cons); ok {
				out = append(out, a)
			}
			continue
		}
		ifc := fc
		if rc, rinfo, ok := o.indexExprConjuncts(s, idx, conj, info); ok {
			// The spans bound the index's expression columns; the filter
			// left over still evaluates the query's own expressions.
			ifc = readConstraints(rc, rinfo)
			ifc.conj = conj
		}
		out = append(out, o.accessVia(s, idx, ifc, implied))
	}
	return out
}

// indexExprConjuncts rewrites conj for reading through idx: every
// subexpression equal to one of idx's key expressions (compared as
// printed over the same columns, as partialImplied compares predicates)
// becomes a reference to a fresh column ID standing for that expression
// index's hidden column, which the returned info maps to the table column.
// Only the span constraints see the rewritten conjuncts: the hidden column
// is never read (prune.go dropped it, and the primary row does not hold
// it), so a conjunct the spans do not enforce stays in the filter as the
// query wrote it. ok is false when the filter mentions none of idx's key
// expressions.
func (o *optimizer) indexExprConjuncts(s *plan.Scan, idx *catalog.Index, conj []sem.Expr, info map[sem.ColumnID]colInfo) ([]sem.Expr, map[sem.ColumnID]colInfo, bool) {
	var targets map[string]*sem.ColRef
	var rinfo map[sem.ColumnID]colInfo
	for _, k := range idx.KeyColumnIDs {
		c := s.Table.ColumnByID(k)
		if c == nil || !c.IsIndexExpr() {
			continue
		}
		byTableCol := map[rowenc.ColumnID]sem.ColumnID{}
		for i, sc := range s.Cols {
			byTableCol[s.TableCols[i]] = sc.ID
		}
		e, err := buildTableExpr(s.Table, c.ComputedExpr, nil, func(tc *catalog.Column) (sem.ColumnID, bool) {
			id, ok := byTableCol[tc.ID]
			return id, ok
		})
		if err != nil || volatileOrStable(e) {
			continue
		}
		if targets == nil {
			targets = map[string]*sem.ColRef{}
			rinfo = make(map[sem.ColumnID]colInfo, len(info)+1)
			for id, ci := range info {
				rinfo[id] = ci
			}
		}
		id := o.newID()
		targets[canon(e)] = &sem.ColRef{ID: id, T: c.Type, Name: c.Name}
		rinfo[id] = colInfo{tableCol: c.ID, t: c.Type}
	}
	if targets == nil {
		return nil, nil, false
	}
	changed := false
	out := make([]sem.Expr, len(conj))
	for i, e := range conj {
		out[i] = sem.Map(e, func(x sem.Expr) sem.Expr {
			switch x.(type) {
			case *sem.ColRef, *sem.Const:
				return x
			}
			if r, ok := targets[canon(x)]; ok {
				changed = true
				return r
			}
			return x
		})
	}
	return out, rinfo, changed
}

// partialImplied reports whether the query's conjuncts include every
// conjunct of idx's predicate (compared as printed expressions over the
// same columns), and which conjuncts those are: the index holds only rows
// satisfying them, so they leave the filter.
func partialImplied(s *plan.Scan, idx *catalog.Index, conj []sem.Expr) (map[int]bool, bool) {
	byTableCol := map[rowenc.ColumnID]sem.ColumnID{}
	for i, c := range s.Cols {
		byTableCol[s.TableCols[i]] = c.ID
	}
	pred, err := buildTableExpr(s.Table, idx.Predicate, types.Bool, func(c *catalog.Column) (sem.ColumnID, bool) {
		id, ok := byTableCol[c.ID]
		return id, ok
	})
	if err != nil {
		return nil, false
	}
	have := map[string]int{}
	for i, c := range conj {
		have[canon(c)] = i
	}
	implied := map[int]bool{}
	for _, c := range conjuncts(sem.NormalizeBool(pred)) {
		i, ok := have[canon(c)]
		if !ok {
			return nil, false
		}
		implied[i] = true
	}
	return implied, true
}

// accessVia plans reading s through idx.
func (o *optimizer) accessVia(s *plan.Scan, idx *catalog.Index, fc *filterConstraints, implied map[int]bool) access {
	orig := *s
	cons := fc.cons
	keys, orders := idx.KeyColumnIDs, idx.KeyDirections
	notNull := make([]bool, len(keys))
	for i, k := range keys {
		if c := s.Table.ColumnByID(k); c != nil && !c.Nullable {
			notNull[i] = true
		}
	}
	// estSpans are the spans the row estimates see: a hash-sharded scan
	// fanned out over every bucket reads what one unbounded scan would.
	var estSpans *spanResult
	var shardOf func([]types.Datum) (types.Datum, bool)
	if idx.HashSharding != nil {
		var derived bool
		cons, derived, shardOf = shardConstraint(s.Table, idx, cons)
		if !derived {
			est := buildSpans(keys, orders, notNull, cons)
			estSpans = &est
			cons = allBuckets(idx, cons)
		}
	}
	capSpans := maxSpans
	if idx.HashSharding != nil {
		capSpans = max(capSpans, int(idx.HashSharding.Buckets))
	}
	sr := buildSpansCap(keys, orders, notNull, cons, capSpans)
	if shardOf != nil {
		sr.spans = pruneShardSpans(sr.spans, len(keys)-1, shardOf)
	}
	if estSpans == nil {
		estSpans = &sr
	}
	if sr.empty {
		v := &plan.Values{Cols: s.Cols}
		return access{node: v, orig: &orig}
	}
	enforced := map[rowenc.ColumnID]bool{}
	for _, k := range keys[:sr.used] {
		enforced[k] = true
	}
	var residual []sem.Expr
	for i, e := range fc.conj {
		if implied[i] || (fc.col[i] != 0 && enforced[fc.col[i]]) {
			continue
		}
		residual = append(residual, e)
	}
	rows, out := o.estimateRows(idx, *estSpans), 0.0
	if ts := o.tableStats(s.Table); ts != nil {
		rows, out = o.statsRows(ts, s, idx, fc, cons, sr, implied)
	}
	scan := &plan.Scan{
		Table: s.Table, Index: s.Index, Cols: s.Cols, TableCols: s.TableCols,
		Spans: sr.spans, Buckets: buckets(s.Table, idx, cons), Lock: s.Lock, LockWait: s.LockWait,
	}
	a := access{node: scan, scan: scan, orig: &orig, rows: rows, out: out}
	a.cost = o.costs.scanCost(rows, o.tableSize(s.Table))
	// A read of the whole primary index (every bucket of a hash-sharded
	// one) is the sequential scan.
	if seq := idx.ID == s.Table.PrimaryIndex.ID && estSpans.used == 0; seq && o.costs.SeqScanOff || !seq && o.costs.IndexScanOff {
		a.cost += disableCost
	}
	if idx.ID == s.Table.PrimaryIndex.ID {
		scan.Filter = and(residual)
		return a
	}
	scan.Index = idx
	avail := map[rowenc.ColumnID]bool{}
	for _, l := range [][]rowenc.ColumnID{idx.KeyColumnIDs, idx.StoreColumnIDs, s.Table.PrimaryIndex.KeyColumnIDs} {
		for _, c := range l {
			avail[c] = true
		}
	}
	// A locking read (FOR UPDATE) must lock the rows, which live in the
	// primary index: it always looks them up.
	covering := s.Lock == plan.LockNone
	for _, tc := range s.TableCols {
		if !avail[tc] {
			covering = false
		}
	}
	if covering {
		scan.Filter = and(residual)
		return a
	}
	// The index lacks columns the query reads: scan it for the columns it
	// has plus the primary key, then look the rows up.
	scan.Cols, scan.TableCols, scan.Lock = nil, nil, plan.LockNone
	have := map[rowenc.ColumnID]sem.ColumnID{}
	for i, c := range s.Cols {
		if avail[s.TableCols[i]] {
			scan.Cols = append(scan.Cols, c)
			scan.TableCols = append(scan.TableCols, s.TableCols[i])
			have[s.TableCols[i]] = c.ID
		}
	}
	var keyCols []sem.ColumnID
	for _, pk := range s.Table.PrimaryIndex.KeyColumnIDs {
		id, ok := have[pk]
		if !ok {
			col := s.Table.ColumnByID(pk)
			id = o.newID()
			scan.Cols = append(scan.Cols, plan.Column{ID: id, Name: col.Name, T: col.Type, Hidden: true, Table: s.Table.ID, TableCol: pk})
			scan.TableCols = append(scan.TableCols, pk)
			have[pk] = id
		}
		keyCols = append(keyCols, id)
	}
	inIndex := colsOf(scan.Cols)
	var early, late []sem.Expr
	for _, e := range residual {
		if o.within(e, inIndex) {
			early = append(early, e)
		} else {
			late = append(late, e)
		}
	}
	scan.Filter = and(early)
	o.rows[scan] = rows // the entries the index scan yields
	a.node = &plan.IndexJoin{
		Input: scan, Table: s.Table, KeyCols: keyCols,
		Cols: s.Cols, TableCols: s.TableCols, Filter: and(late), Lock: s.Lock, LockWait: s.LockWait,
	}
	a.cost += o.costs.lookupCost(rows, o.tableSize(s.Table))
	return a
}

// estimateRows guesses how many index entries the spans read (cost.go's
// heuristics: one row for a unique index's full key, EqRows per value of
// a shorter prefix, RangeFraction of what a range bounds).
func (o *optimizer) estimateRows(idx *catalog.Index, sr spanResult) float64 {
	c := o.costs
	if sr.used == 0 {
		return c.TableRows
	}
	per := c.TableRows
	if sr.eq > 0 {
		per = c.EqRows
		if idx.Unique && sr.eq == len(idx.KeyColumnIDs) && !sr.nullPoint {
			per = 1
		}
	}
	if sr.rangeCol {
		per *= c.RangeFraction
	}
	rows := per * float64(max(len(sr.spans), 1))
	return min(rows, c.TableRows)
}

// buckets returns the buckets of a hash-partitioned table a scan of idx
// needs when equalities fix the primary key's hash columns (nil: all).
// Global secondary indexes are not bucketed.
func buckets(t *catalog.Table, idx *catalog.Index, cons map[rowenc.ColumnID]constraint) []uint16 {
	hashCols := t.HashColumnIDs()
	if len(hashCols) == 0 {
		return nil
	}
	if idx.ID != t.PrimaryIndex.ID && idx.Placement == catalog.IndexGlobal {
		return nil
	}
	combos, ok := pointValues(hashCols, cons, maxBuckets)
	if !ok {
		return nil
	}
	layout, err := t.Layout()
	if err != nil {
		return nil
	}
	seen := map[uint16]bool{}
	var out []uint16
	for _, vals := range combos {
		row := make([]types.Datum, len(layout.Columns))
		for i := range row {
			row[i] = types.DNull
		}
		for i, id := range hashCols {
			row[layout.ColumnPos(id)] = vals[i]
		}
		b, err := layout.Bucket(row)
		if err != nil {
			return nil
		}
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Hash-sharded indexes (docs/architecture.md, "Hash-sharded indexes").
// The index key is (shard, cols...), the shard a function of cols. The
// planner gives every scan of one a constraint on the shard column:
//
//   - the shards the predicate's values hash to, when equalities or INs
//     fix every hashed column (point spans in those buckets), or when
//     small ranges of integers or dates do (shardConstraint);
//   - else every bucket (allBuckets): one span per bucket, which the
//     executor reads in parallel, or merges when the plan needs the
//     user's column order (plan.Scan.ShardMerge).

// maxPruneValues caps how many values of small integer or date ranges
// are enumerated and hashed to prune buckets (k BETWEEN 10 AND 20 hashes
// 11 values). Past it, the range is likely to reach most buckets anyway
// and planning time would grow with the range: every bucket is read.
const maxPruneValues = 256

// shardConstraint adds to cons the values of a hash-sharded index's
// shard column when equalities (or small integer and date ranges, see
// maxPruneValues) fix every column its computed expression reads: the
// expression is evaluated on each combination, so the shard is whatever
// the DDL that made the column defined. derived reports whether it did.
//
// shardOf, when the expression reads exactly the index's key columns after
// the shard, in order, computes the shard of values of those columns (for
// pruneShardSpans).
func shardConstraint(t *catalog.Table, idx *catalog.Index, cons map[rowenc.ColumnID]constraint) (_ map[rowenc.ColumnID]constraint, derived bool, shardOf func([]types.Datum) (types.Datum, bool)) {
	col := t.ColumnByID(idx.HashSharding.ShardColumnID)
	if col == nil || col.ComputedExpr == "" {
		return cons, false, nil
	}
	if reads, ok := standardShard(t, idx, col); ok {
		// The expression the DDL writes: compute it in Go rather than
		// parse and compile its text for every plan.
		n := uint32(idx.HashSharding.Buckets)
		return shardFromPoints(cons, col, reads, func(vals []types.Datum) (types.Datum, bool) {
			b, err := builtins.ShardBucket(n, vals...)
			return types.DInt(b), err == nil
		}, true)
	}
	var reads []rowenc.ColumnID
	e, err := buildTableExpr(t, col.ComputedExpr, col.Type, func(c *catalog.Column) (sem.ColumnID, bool) {
		reads = append(reads, c.ID)
		return sem.ColumnID(c.ID), true
	})
	if err != nil || pinned(e) || volatileOrStable(e) {
		return cons, false, nil
	}
	reads = uniq(reads)
	pos := map[sem.ColumnID]int{}
	for i, id := range reads {
		pos[sem.ColumnID(id)] = i
	}
	eval, err := sem.Compile(e, pos)
	if err != nil {
		return cons, false, nil
	}
	return shardFromPoints(cons, col, reads, func(vals []types.Datum) (types.Datum, bool) {
		d, err := eval(&sem.EvalContext{}, vals)
		return d, err == nil && !types.IsNull(d)
	}, slices.Equal(reads, idx.KeyColumnIDs[1:]))
}

// standardShard reports whether col's expression is the one the DDL
// writes for idx (builtins.ShardExpr over its key columns after the
// shard), and those columns.
func standardShard(t *catalog.Table, idx *catalog.Index, col *catalog.Column) ([]rowenc.ColumnID, bool) {
	reads := idx.KeyColumnIDs[1:]
	args := make([]string, len(reads))
	for i, id := range reads {
		c := t.ColumnByID(id)
		if c == nil || c.IsIndexExpr() {
			return nil, false
		}
		args[i] = builtins.QuoteIdent(c.Name)
	}
	return reads, col.ComputedExpr == builtins.ShardExpr(args, idx.HashSharding.Buckets)
}

// shardFromPoints is shardConstraint once the shard's function of the
// columns reads is known: keyed says reads are the index's key columns
// after the shard, in order (so the function can also prune spans).
func shardFromPoints(cons map[rowenc.ColumnID]constraint, col *catalog.Column, reads []rowenc.ColumnID,
	shard func([]types.Datum) (types.Datum, bool), keyed bool) (_ map[rowenc.ColumnID]constraint, derived bool, shardOf func([]types.Datum) (types.Datum, bool)) {
	expanded := make(map[rowenc.ColumnID]constraint, len(reads))
	for _, id := range reads {
		c, ok := cons[id]
		if !ok {
			return cons, false, nil
		}
		if !c.points() {
			if c, ok = enumerate(c, maxPruneValues); !ok {
				return cons, false, nil
			}
		}
		expanded[id] = c
	}
	combos, ok := pointValues(reads, expanded, maxPruneValues)
	if !ok {
		return cons, false, nil
	}
	var ivs []interval
	for _, vals := range combos {
		d, ok := shard(vals)
		if !ok {
			return cons, false, nil
		}
		ivs = append(ivs, interval{lo: d, hi: d, loIncl: true, hiIncl: true})
	}
	sort.Slice(ivs, func(i, j int) bool { return types.Compare(ivs[i].lo, ivs[j].lo) < 0 })
	dedup := ivs[:0]
	for i, iv := range ivs {
		if i == 0 || types.Compare(ivs[i-1].lo, iv.lo) != 0 {
			dedup = append(dedup, iv)
		}
	}
	if keyed {
		shardOf = shard
	}
	return withConstraint(cons, col.ID, constraint{ivs: dedup}), true, shardOf
}

// pruneShardSpans drops the point spans whose shard is not the shard of
// the values they fix (the cross product of derived shards and IN lists:
// k IN (5, 6) hashes to shards {1, 4}, of which (1, 6) and (4, 5) cannot
// hold a row). m is the number of hashed key columns after the shard.
func pruneShardSpans(spans []plan.Span, m int, shardOf func([]types.Datum) (types.Datum, bool)) []plan.Span {
	out := spans[:0:0]
	for _, sp := range spans {
		if len(sp.Start) > m && len(sp.End) > m && (len(sp.Start) > m+1 || !sp.StartExclusive) && (len(sp.End) > m+1 || sp.EndInclusive) &&
			slices.EqualFunc(sp.Start[1:m+1], sp.End[1:m+1], func(a, b types.Datum) bool { return types.Compare(a, b) == 0 }) {
			if d, ok := shardOf(sp.Start[1 : m+1]); ok && types.Compare(d, sp.Start[0]) != 0 {
				continue
			}
		}
		out = append(out, sp)
	}
	return out
}

// allBuckets constrains the shard column of a hash-sharded index to all
// its buckets (what its CHECK says), so that its spans are one per bucket.
func allBuckets(idx *catalog.Index, cons map[rowenc.ColumnID]constraint) map[rowenc.ColumnID]constraint {
	ivs := make([]interval, idx.HashSharding.Buckets)
	for b := range ivs {
		d := types.DInt(b)
		ivs[b] = interval{lo: d, hi: d, loIncl: true, hiIncl: true}
	}
	return withConstraint(cons, idx.HashSharding.ShardColumnID, constraint{ivs: ivs})
}

// withConstraint returns a copy of cons with c intersected into id's
// constraint.
func withConstraint(cons map[rowenc.ColumnID]constraint, id rowenc.ColumnID, c constraint) map[rowenc.ColumnID]constraint {
	out := make(map[rowenc.ColumnID]constraint, len(cons)+1)
	for k, v := range cons {
		out[k] = v
	}
	if prev, ok := out[id]; ok {
		c = prev.intersect(c)
	}
	out[id] = c
	return out
}

// enumerate turns a constraint of bounded integer or date intervals into
// the points it allows, or false past limit values (or for other types,
// or when NULL qualifies: a NULL key has a shard too, which the caller
// does not enumerate).
func enumerate(c constraint, limit int) (constraint, bool) {
	if c.null {
		return c, false
	}
	var out []interval
	for _, iv := range c.ivs {
		if iv.lo == nil || iv.hi == nil {
			return c, false
		}
		var lo, hi int64
		var mk func(int64) types.Datum
		switch l := iv.lo.(type) {
		case types.DInt:
			h, ok := iv.hi.(types.DInt)
			if !ok {
				return c, false
			}
			lo, hi, mk = int64(l), int64(h), func(v int64) types.Datum { return types.DInt(v) }
		case types.DDate:
			h, ok := iv.hi.(types.DDate)
			if !ok {
				return c, false
			}
			lo, hi, mk = int64(l), int64(h), func(v int64) types.Datum { return types.DDate(v) }
		default:
			return c, false
		}
		if !iv.loIncl {
			lo++
		}
		if !iv.hiIncl {
			hi--
		}
		if hi < lo {
			continue
		}
		// The difference in uint64 cannot overflow (hi >= lo).
		n := uint64(hi) - uint64(lo)
		if n >= uint64(limit-len(out)) {
			return c, false
		}
		for k := uint64(0); k <= n; k++ {
			d := mk(lo + int64(k))
			out = append(out, interval{lo: d, hi: d, loIncl: true, hiIncl: true})
		}
	}
	return constraint{ivs: out}, true
}

// volatileOrStable reports whether e calls anything but immutable
// functions (a stable one, such as a time-zone dependent cast, could
// differ between planning and the write that stored the shard).
func volatileOrStable(e sem.Expr) bool {
	found := false
	sem.Walk(e, func(x sem.Expr) bool {
		var fn *builtins.Resolved
		switch v := x.(type) {
		case *sem.FuncCall:
			fn = v.Fn
		case *sem.BinOp:
			fn = v.Fn
		case *sem.UnaryOp:
			fn = v.Fn
		case *sem.Cmp:
			fn = v.Fn
		}
		if fn != nil && fn.Overload != nil && fn.Overload.Volatility != builtins.Immutable {
			found = true
		}
		return !found
	})
	return found
}

func uniq(ids []rowenc.ColumnID) []rowenc.ColumnID {
	seen := map[rowenc.ColumnID]bool{}
	var out []rowenc.ColumnID
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
