package opt

import (
	"context"
	"math"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/stats"
)

// Statistics supplies the statistics ANALYZE collected for a table (nil:
// none). With none, a table is estimated by cost.go's heuristics, exactly
// as before statistics existed.
type Statistics func(*catalog.Table) *stats.Table

// OptimizeStats is OptimizeWith using table statistics for row estimates:
// scan sizes and filter selectivities (equalities from the most common
// values and distinct counts, ranges from histograms), join and grouping
// cardinalities from distinct counts. Those estimates choose between
// index and full scans, between lookup and hash joins, and the order of
// small inner join trees (joinorder.go).
func OptimizeStats(ctx context.Context, p *plan.Plan, costs Costs, st Statistics, lim JoinLimits) error {
	return optimizePlan(ctx, p, costs, st, lim)
}

// OptimizeEstimated is OptimizeStats that also returns how many rows the
// optimizer expects each node of the optimized plan to produce (per run),
// for EXPLAIN (COSTS ON).
func OptimizeEstimated(ctx context.Context, p *plan.Plan, costs Costs, st Statistics, lim JoinLimits) (map[plan.Node]float64, error) {
	est, _, err := OptimizeExplained(ctx, p, costs, st, lim)
	return est, err
}

// OptimizeExplained is OptimizeEstimated, also returning how each join of
// the optimized plan chose between a lookup join and a hash join
// (EXPLAIN (VERBOSE)).
func OptimizeExplained(ctx context.Context, p *plan.Plan, costs Costs, st Statistics, lim JoinLimits) (map[plan.Node]float64, map[plan.Node]JoinChoice, error) {
	o, err := newOptimizer(costs, st, lim).run(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	out := map[plan.Node]float64{}
	see := func(n plan.Node) {
		walk(n, func(x plan.Node) { out[x] = math.Round(o.estimate(x)) })
	}
	see(p.Root)
	for _, sq := range p.Subqueries {
		see(sq.Root)
	}
	for _, c := range p.CTEs {
		see(c)
	}
	choices := map[plan.Node]JoinChoice{}
	for n, c := range o.choices {
		if _, ok := out[n]; ok { // still in the plan
			choices[n] = c
		}
	}
	return out, choices, nil
}

// colStat is what the optimizer knows of a column a scan of a table with
// statistics produces.
type colStat struct {
	table    *stats.Table
	tableCol rowenc.ColumnID
	col      *stats.Column // nil: the table has statistics, the column none
}

// tableStats returns t's statistics, or nil.
func (o *optimizer) tableStats(t *catalog.Table) *stats.Table {
	if o.stats == nil || t == nil {
		return nil
	}
	ts := o.stats(t)
	if ts == nil || ts.TableID != t.ID {
		return nil
	}
	return ts
}

// defaultEqSel is an equality's selectivity on a column without
// statistics (PostgreSQL's DEFAULT_EQ_SEL).
const defaultEqSel = 0.005

// consSel is the fraction of rows of a table with statistics ts whose
// column tc satisfies c.
func consSel(ts *stats.Table, tc rowenc.ColumnID, c constraint) float64 {
	cs := ts.Column(tc)
	if cs == nil {
		if c.points() {
			return math.Min(1, defaultEqSel*float64(c.count()))
		}
		return stats.DefaultRangeSel
	}
	rs := make([]stats.Range, len(c.ivs))
	for i, iv := range c.ivs {
		rs[i] = stats.Range{Lo: iv.lo, Hi: iv.hi, LoIncl: iv.loIncl, HiIncl: iv.hiIncl}
	}
	return cs.Selectivity(rs, c.null)
}

// statsRows estimates, for reading s through idx with statistics ts, how
// many index entries the spans read and how many rows remain after the
// rest of the filter (columns assumed independent, as PostgreSQL does).
func (o *optimizer) statsRows(ts *stats.Table, s *plan.Scan, idx *catalog.Index, fc *filterConstraints, cons map[rowenc.ColumnID]constraint, sr spanResult, implied map[int]bool) (read, out float64) {
	n := math.Max(ts.RowCount, 1)
	enforced := map[rowenc.ColumnID]bool{}
	for _, k := range idx.KeyColumnIDs[:sr.used] {
		enforced[k] = true
	}
	readSel := 1.0
	for k := range enforced {
		if c, ok := cons[k]; ok {
			readSel *= consSel(ts, k, c)
		}
	}
	if idx.Predicate != "" {
		// A partial index holds only the rows of its predicate: the
		// conjuncts it implies.
		for i := range implied {
			if col := fc.col[i]; col != 0 && !enforced[col] {
				readSel *= consSel(ts, col, fc.cons[col])
			} else if col == 0 {
				readSel *= stats.DefaultRangeSel
			}
		}
	}
	outSel := readSel
	seen := map[rowenc.ColumnID]bool{}
	for i := range fc.conj {
		if implied[i] {
			continue
		}
		col := fc.col[i]
		switch {
		case col == 0:
			outSel *= stats.DefaultRangeSel
		case enforced[col] || seen[col]:
		default:
			seen[col] = true
			outSel *= consSel(ts, col, fc.cons[col])
		}
	}
	read = math.Max(1, n*readSel)
	if idx.Unique && sr.eq == len(idx.KeyColumnIDs) && !sr.nullPoint {
		read = math.Min(read, float64(max(len(sr.spans), 1)))
	}
	return read, math.Max(1, math.Min(read, n*outSel))
}

// noteScanStats remembers the statistics of the columns a scan of a table
// with statistics produces, for the estimates of the nodes above it.
func (o *optimizer) noteScanStats(s *plan.Scan) {
	ts := o.tableStats(s.Table)
	if ts == nil {
		return
	}
	for i, c := range s.Cols {
		o.colStats[c.ID] = colStat{table: ts, tableCol: s.TableCols[i], col: ts.Column(s.TableCols[i])}
	}
}

// distinct estimates how many distinct values column id takes among rows
// rows of its node, or 0 when no statistics say.
func (o *optimizer) distinct(id sem.ColumnID, rows float64) float64 {
	cs, ok := o.colStats[id]
	if !ok || cs.col == nil {
		return 0
	}
	d := math.Max(cs.col.Distinct, 1)
	if rows > 0 && d > rows {
		d = rows
	}
	return d
}

// joinRows estimates an equi-join's output from its inputs' sizes and the
// keys' distinct counts (PostgreSQL's eqjoinsel without MCV matching:
// each key pair keeps 1/max(ndv) of the cross product); ok is false when
// no key has statistics.
func (o *optimizer) joinRows(j *plan.Join, l, r float64) (float64, bool) {
	sel, ok := 1.0, false
	for i := range j.LeftEq {
		dl, dr := o.distinct(j.LeftEq[i], l), o.distinct(j.RightEq[i], r)
		if dl == 0 && dr == 0 {
			continue
		}
		ok = true
		sel /= math.Max(math.Max(dl, dr), 1)
	}
	if !ok {
		return 0, false
	}
	rows := math.Max(1, l*r*sel)
	switch j.Kind {
	case plan.LeftJoin:
		rows = math.Max(rows, l)
	case plan.RightJoin:
		rows = math.Max(rows, r)
	case plan.FullJoin:
		rows = math.Max(rows, l+r)
	case plan.SemiJoin:
		rows = math.Min(rows, l)
	case plan.AntiJoin:
		rows = math.Max(1, l-math.Min(rows, l))
	}
	return rows, true
}

// filterSel estimates the fraction of its input a predicate keeps from the
// statistics of the columns it constrains; ok is false when none has any.
func (o *optimizer) filterSel(pred sem.Expr) (float64, bool) {
	cols := map[sem.ColumnID]colInfo{}
	tables := map[rowenc.ColumnID]colStat{}
	for id, cs := range o.colStats {
		if cs.col == nil {
			continue
		}
		// Constraints are keyed by table column; one table's columns at a
		// time would need a scan, so key them by column ID instead.
		cols[id] = colInfo{tableCol: rowenc.ColumnID(id), t: cs.col.Type}
		tables[rowenc.ColumnID(id)] = cs
	}
	fc := readConstraints(conjuncts(pred), cols)
	if len(fc.cons) == 0 {
		return 0, false
	}
	sel := 1.0
	for i := range fc.conj {
		if fc.col[i] == 0 {
			sel *= stats.DefaultRangeSel
		}
	}
	for id, c := range fc.cons {
		cs := tables[id]
		sel *= consSel(cs.table, cs.tableCol, c)
	}
	return sel, true
}

// lookupRowsPerKey estimates how many rows of right one lookup of keyCols
// (a prefix of idx's key) finds, from the key columns' distinct counts;
// ok is false without statistics.
func (o *optimizer) lookupRowsPerKey(right *plan.Scan, idx *catalog.Index, nkeys int, full bool) (float64, bool) {
	ts := o.tableStats(right.Table)
	if ts == nil {
		return 0, false
	}
	if full && idx.Unique {
		return 1, true
	}
	rows := math.Max(ts.RowCount, 1)
	for _, k := range idx.KeyColumnIDs[:nkeys] {
		if cs := ts.Column(k); cs != nil {
			rows *= cs.AvgEqSel()
		} else {
			rows *= defaultEqSel
		}
	}
	return math.Max(rows, 1), true
}

// tableSize is t's size: its statistics' rows, bytes and bytes on disk,
// or the cost model's heuristics without any (TableRows rows of
// RowBytes, as many on disk).
func (o *optimizer) tableSize(t *catalog.Table) tableSize {
	c := o.costs
	if ts := o.tableStats(t); ts != nil {
		rows := math.Max(ts.RowCount, 1)
		bytes := float64(ts.Bytes)
		if bytes <= 0 {
			bytes = rows * c.RowBytes
		}
		return tableSize{rows: rows, bytes: bytes, disk: float64(ts.DiskBytes)}
	}
	return tableSize{rows: c.TableRows, bytes: c.TableRows * c.RowBytes}
}
