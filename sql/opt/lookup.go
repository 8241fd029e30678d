package opt

import (
	"fmt"
	"math"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
)

// lookupJoins turns a Join whose right side is a table scan (filtered or
// not) into a LookupJoin when the join keys cover a prefix of one of the
// table's indexes and batched lookups for the left side's rows cost less
// than reading the right side whole for a hash join. That is the storage-
// aware choice of read-planning.txt: with cheap seeks (SSD) a few hundred
// lookups win; with HDD seeks or object-store round trips a sequential
// read of the table wins much sooner (Costs).
//
// An inner join is commutative and a right join is a left join with the
// sides swapped: when the left side is the big table with an index on the
// keys and the right side the small one, the sides are swapped for the
// lookup and a Project puts the columns back in the join's order.
func (o *optimizer) lookupJoins(n plan.Node) plan.Node {
	for _, c := range children(n) {
		*c = o.lookupJoins(*c)
	}
	j, ok := n.(*plan.Join)
	if !ok || j.Lateral || len(j.LeftEq) == 0 {
		return n
	}
	lj, alt := o.lookupJoin(j)
	if lj != nil {
		return lj
	}
	kind := plan.InnerJoin
	switch j.Kind {
	case plan.InnerJoin:
	case plan.RightJoin:
		kind = plan.LeftJoin
	default:
		return o.keepJoin(j, alt)
	}
	swapped := &plan.Join{Kind: kind, Left: j.Right, Right: j.Left, On: j.On, LeftEq: j.RightEq, RightEq: j.LeftEq}
	lj, alt2 := o.lookupJoin(swapped)
	if lj == nil {
		if alt == nil || (alt2 != nil && alt2.RejectedCost < alt.RejectedCost) {
			alt = alt2
		}
		return o.keepJoin(j, alt)
	}
	p := &plan.Project{Input: lj, Cols: j.Columns()}
	for _, c := range p.Cols {
		p.Exprs = append(p.Exprs, &sem.ColRef{ID: c.ID, T: c.T, Name: c.Name})
	}
	o.rows[p] = o.rows[lj]
	return p
}

// keepJoin keeps j a join of both sides read whole: a merge join when
// both can be read in key order (merge.go), else a hash join; alt is the
// lookup join that lost, if one was priced.
func (o *optimizer) keepJoin(j *plan.Join, alt *JoinChoice) plan.Node {
	read, ok := o.rightReadCost(j)
	if !ok {
		o.noteChoice(j, alt)
		return j
	}
	hash := o.hashCost(j, read)
	if o.mergeJoin(j) {
		c := &JoinChoice{Chosen: "merge join", ChosenCost: read, Rejected: "hash join", RejectedCost: hash}
		if alt != nil && alt.RejectedCost < hash {
			c.Rejected, c.RejectedCost = alt.Rejected, alt.RejectedCost
		}
		o.noteChoice(j, c)
		return j
	}
	if alt != nil {
		// The lookup join lost to this hash join (priced as a merge
		// join where one seemed possible but its sides could not be
		// ordered).
		alt.Chosen, alt.ChosenCost = "hash join", hash
	}
	o.noteChoice(j, alt)
	return j
}

// JoinChoice is how lookupJoins chose between a lookup join, a merge join
// and a hash join: the estimated cost of the method chosen and of the
// best method rejected, in the cost model's units (Costs). A merge join's
// figure is reading its right side whole; a hash join's is that and
// building its hash table from those rows; a lookup join's is its
// batches' keys, round trips and storage reads, and the rows they find.
// Every method reads the left input alike, so it is left out.
type JoinChoice struct {
	Chosen       string
	ChosenCost   float64
	Rejected     string
	RejectedCost float64
}

// String is EXPLAIN (VERBOSE)'s line.
func (c JoinChoice) String() string {
	return fmt.Sprintf("Join Method Cost: %s %.0f (rejected: %s %.0f)", c.Chosen, c.ChosenCost, c.Rejected, c.RejectedCost)
}

func (o *optimizer) noteChoice(n plan.Node, c *JoinChoice) {
	if c == nil {
		return
	}
	if o.choices == nil {
		o.choices = map[plan.Node]JoinChoice{}
	}
	o.choices[n] = *c
}

// lookupJoin returns the cheapest LookupJoin equivalent to j, or nil when
// a hash join is cheaper or none applies; when a lookup join was priced
// and lost, alt says by how much.
func (o *optimizer) lookupJoin(j *plan.Join) (_ *plan.LookupJoin, alt *JoinChoice) {
	switch j.Kind {
	case plan.InnerJoin, plan.LeftJoin, plan.SemiJoin, plan.AntiJoin:
	default:
		return nil, nil
	}
	right, ok := o.orig[j.Right]
	if !ok {
		return nil, nil
	}
	if _, empty := j.Right.(*plan.Values); empty {
		return nil, nil
	}
	leftRows := o.estimate(j.Left)
	limit := o.costs.TableRows
	if ts := o.tableStats(right.Table); ts != nil {
		limit = math.Max(ts.RowCount, 1)
	}
	if leftRows >= limit {
		return nil, nil
	}
	// The alternative: reading the right side whole, for a merge join
	// where one can be, else a hash join.
	read := o.bestAccess(right).cost
	other, otherCost := "hash join", o.hashCost(j, read)
	if o.canMerge(j) {
		other, otherCost = "merge join", read
	}
	size := o.tableSize(right.Table)
	var best *plan.LookupJoin
	bestCost, bestRows := otherCost, 0.0
	lostCost := math.Inf(1) // the cheapest lookup join that lost
	for _, idx := range lookupIndexes(right.Table) {
		keyCols, full := lookupKeys(j, right, idx)
		if len(keyCols) == 0 || !covers(right, idx) {
			continue
		}
		if right.Lock != plan.LockNone && idx.ID != right.Table.PrimaryIndex.ID {
			continue // the locks belong on the rows, in the primary index
		}
		perKey := o.costs.EqRows
		if full && idx.Unique {
			perKey = 1
		}
		if r, ok := o.lookupRowsPerKey(right, idx, len(keyCols), full); ok {
			perKey = r
		}
		cost := o.costs.lookupCost(leftRows, size) + leftRows*perKey*o.costs.SeqRow
		if o.costs.NestLoopOff {
			cost += disableCost
		}
		if cost >= bestCost {
			lostCost = min(lostCost, cost)
			continue
		}
		lj := &plan.LookupJoin{
			Kind: j.Kind, Input: j.Left, Table: right.Table, KeyCols: keyCols,
			Cols: right.Cols, TableCols: right.TableCols,
			On:   and(append(conjuncts(j.On), conjuncts(right.Filter)...)),
			Lock: right.Lock, LockWait: right.LockWait,
		}
		if idx.ID != right.Table.PrimaryIndex.ID {
			lj.Index = idx
		}
		best, bestCost, bestRows = lj, cost, leftRows*perKey
	}
	if best == nil {
		if math.IsInf(lostCost, 1) {
			return nil, nil
		}
		return nil, &JoinChoice{Chosen: other, ChosenCost: otherCost, Rejected: "lookup join", RejectedCost: lostCost}
	}
	o.rows[best] = bestRows
	if r, ok := o.joinRows(j, leftRows, o.estimate(j.Right)); ok {
		o.rows[best] = r
	}
	o.noteChoice(best, &JoinChoice{Chosen: "lookup join", ChosenCost: bestCost, Rejected: other, RejectedCost: otherCost})
	return best, nil
}

// lookupIndexes lists the indexes a lookup join may read: the primary
// index and the public, complete, non-partial btree secondary indexes
// (a hash-sharded one leads with its shard column, which no join key
// supplies).
func lookupIndexes(t *catalog.Table) []*catalog.Index {
	out := []*catalog.Index{&t.PrimaryIndex}
	for i := range t.Indexes {
		idx := &t.Indexes[i]
		if idx.State == catalog.IndexPublic && (idx.Kind == "" || idx.Kind == catalog.IndexBTree) &&
			idx.Predicate == "" && idx.HashSharding == nil {
			out = append(out, idx)
		}
	}
	return out
}

// lookupKeys returns the left columns supplying the longest prefix of
// idx's key columns through the join's equalities, and whether they
// supply all of them.
func lookupKeys(j *plan.Join, right *plan.Scan, idx *catalog.Index) ([]sem.ColumnID, bool) {
	tableCol := map[sem.ColumnID]rowenc.ColumnID{}
	for i, c := range right.Cols {
		tableCol[c.ID] = right.TableCols[i]
	}
	leftType := map[sem.ColumnID]plan.Column{}
	for _, c := range j.Left.Columns() {
		leftType[c.ID] = c
	}
	var keys []sem.ColumnID
	for _, kc := range idx.KeyColumnIDs {
		found := false
		for i, r := range j.RightEq {
			tc, ok := tableCol[r]
			col := right.Table.ColumnByID(kc)
			if ok && tc == kc && col != nil && keyTypesMatch(leftType[j.LeftEq[i]].T, col.Type) {
				keys, found = append(keys, j.LeftEq[i]), true
				break
			}
		}
		if !found {
			return keys, false
		}
	}
	return keys, true
}

// covers reports whether idx holds every column s reads.
func covers(s *plan.Scan, idx *catalog.Index) bool {
	if idx.ID == s.Table.PrimaryIndex.ID {
		return true
	}
	avail := map[rowenc.ColumnID]bool{}
	for _, l := range [][]rowenc.ColumnID{idx.KeyColumnIDs, idx.StoreColumnIDs, s.Table.PrimaryIndex.KeyColumnIDs} {
		for _, c := range l {
			avail[c] = true
		}
	}
	for _, tc := range s.TableCols {
		if !avail[tc] {
			return false
		}
	}
	return true
}

// estimate guesses how many rows n yields (cost.go's heuristics; scans
// and lookups remember what planning them estimated).
func (o *optimizer) estimate(n plan.Node) float64 {
	if r, ok := o.rows[n]; ok {
		return r
	}
	c := o.costs
	switch v := n.(type) {
	case *plan.Values:
		return float64(len(v.Rows))
	case *plan.Filter:
		if sel, ok := o.filterSel(v.Pred); ok {
			return math.Max(1, o.estimate(v.Input)*sel)
		}
		return o.estimate(v.Input) * c.RangeFraction
	case *plan.Project:
		return o.estimate(v.Input)
	case *plan.Sort:
		return o.estimate(v.Input)
	case *plan.Distinct:
		return o.estimate(v.Input)
	case *plan.Max1Row:
		return 1
	case *plan.Limit:
		in := o.estimate(v.Input)
		if lim, ok := constInt(v.Limit); ok && v.Limit != nil {
			return min(in, float64(lim))
		}
		return in
	case *plan.GroupBy:
		if len(v.GroupCols) == 0 {
			return 1
		}
		in := o.estimate(v.Input)
		groups, known := 1.0, true
		for _, id := range v.GroupCols {
			d := o.distinct(id, in)
			if d == 0 {
				known = false
				break
			}
			groups *= d
		}
		if known {
			return math.Max(1, math.Min(in, groups))
		}
		return in / c.EqRows
	case *plan.Join:
		l := o.estimate(v.Left)
		if r, ok := o.joinRows(v, l, o.estimate(v.Right)); ok {
			return r
		}
		if v.Kind == plan.SemiJoin || v.Kind == plan.AntiJoin {
			return l
		}
		return max(l, o.estimate(v.Right))
	}
	return c.TableRows
}
