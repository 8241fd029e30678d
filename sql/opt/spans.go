package opt

import (
	"math"
	"sort"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Span derivation works in two steps. constraints reads the conjuncts of a
// scan's filter into one constraint per table column: the set of values
// (a sorted list of disjoint intervals, plus whether NULL qualifies) that
// the conjuncts on that column alone allow. buildSpans then walks an
// index's key columns in order: while a column is fixed to a few values
// it multiplies the span prefixes (IN lists become several point spans);
// the first column with a range ends the prefix and bounds each span. A
// conjunct whose column the spans constrain is enforced by them exactly
// (invariant 1) and leaves the filter; the others stay.

// maxSpans caps the spans one scan gets (IN lists multiply them); past it
// the remaining key columns are left to the filter.
const maxSpans = 512

// maxBuckets caps the buckets equalities may select before the scan reads
// them all.
const maxBuckets = 64

// interval is a set of non-NULL values between lo and hi (nil: unbounded).
type interval struct {
	lo, hi         types.Datum
	loIncl, hiIncl bool
}

func (iv interval) isPoint() bool {
	return iv.lo != nil && iv.hi != nil && iv.loIncl && iv.hiIncl && types.Compare(iv.lo, iv.hi) == 0
}

// intersect returns the intersection of a and b, and false when it is
// empty.
func (a interval) intersect(b interval) (interval, bool) {
	r := a
	if b.lo != nil {
		if r.lo == nil {
			r.lo, r.loIncl = b.lo, b.loIncl
		} else if c := types.Compare(b.lo, r.lo); c > 0 || (c == 0 && !b.loIncl) {
			r.lo, r.loIncl = b.lo, b.loIncl
		}
	}
	if b.hi != nil {
		if r.hi == nil {
			r.hi, r.hiIncl = b.hi, b.hiIncl
		} else if c := types.Compare(b.hi, r.hi); c < 0 || (c == 0 && !b.hiIncl) {
			r.hi, r.hiIncl = b.hi, b.hiIncl
		}
	}
	if r.lo != nil && r.hi != nil {
		c := types.Compare(r.lo, r.hi)
		if c > 0 || (c == 0 && !(r.loIncl && r.hiIncl)) {
			return r, false
		}
	}
	return r, true
}

// constraint is the set of values some conjuncts allow one column.
type constraint struct {
	ivs  []interval // sorted and disjoint
	null bool       // NULL qualifies
}

var fullRange = []interval{{}}

func (c constraint) empty() bool { return len(c.ivs) == 0 && !c.null }

// points reports whether c allows finitely many values (NULL included).
func (c constraint) points() bool {
	for _, iv := range c.ivs {
		if !iv.isPoint() {
			return false
		}
	}
	return true
}

func (c constraint) count() int {
	n := len(c.ivs)
	if c.null {
		n++
	}
	return n
}

func (c constraint) intersect(d constraint) constraint {
	var out []interval
	for _, a := range c.ivs {
		for _, b := range d.ivs {
			if r, ok := a.intersect(b); ok {
				out = append(out, r)
			}
		}
	}
	return constraint{ivs: out, null: c.null && d.null}
}

// inIndexOrder returns c's intervals in the order a key column of order o
// stores them, with NULL (as a nil interval pointer) where o puts it.
func (c constraint) inIndexOrder(o rowenc.Order) []*interval {
	var out []*interval
	if c.null && o&rowenc.NullsFirst != 0 {
		out = append(out, nil)
	}
	for i := range c.ivs {
		if o&rowenc.Descending != 0 {
			out = append(out, &c.ivs[len(c.ivs)-1-i])
		} else {
			out = append(out, &c.ivs[i])
		}
	}
	if c.null && o&rowenc.NullsFirst == 0 {
		out = append(out, nil)
	}
	return out
}

// colInfo is what span derivation knows of a column a scan reads.
type colInfo struct {
	tableCol rowenc.ColumnID
	t        *types.T
}

// termConstraint reads one conjunct as a constraint on one column, when
// it is a comparison of a column with a constant of the column's type
// (=, <, <=, >, >=, IS NOT DISTINCT FROM, IN (...), IS [NOT] NULL).
func termConstraint(e sem.Expr, cols map[sem.ColumnID]colInfo) (rowenc.ColumnID, constraint, bool) {
	switch v := e.(type) {
	case *sem.Cmp:
		op := v.Op
		ref, rok := v.Left.(*sem.ColRef)
		k, kok := v.Right.(*sem.Const)
		if !rok || !kok {
			ref, rok = v.Right.(*sem.ColRef)
			k, kok = v.Left.(*sem.Const)
			op = flip(op)
		}
		if !rok || !kok {
			return 0, constraint{}, false
		}
		ci, ok := cols[ref.ID]
		if !ok || !constUsable(ci.t, k) {
			return 0, constraint{}, false
		}
		if types.IsNull(k.Datum) {
			if op == sem.IsNotDistinctFrom {
				return ci.tableCol, constraint{null: true}, true
			}
			if op == sem.IsDistinctFrom {
				return ci.tableCol, constraint{ivs: fullRange}, true
			}
			// Any other comparison with NULL is never true.
			return ci.tableCol, constraint{}, true
		}
		d := k.Datum
		var iv interval
		switch op {
		case sem.EQ, sem.IsNotDistinctFrom:
			iv = interval{lo: d, hi: d, loIncl: true, hiIncl: true}
		case sem.LT:
			iv = interval{hi: d}
		case sem.LE:
			iv = interval{hi: d, hiIncl: true}
		case sem.GT:
			iv = interval{lo: d}
		case sem.GE:
			iv = interval{lo: d, loIncl: true}
		default:
			return 0, constraint{}, false
		}
		return ci.tableCol, constraint{ivs: []interval{iv}}, true

	case *sem.In:
		ref, ok := v.Left.(*sem.ColRef)
		if !ok || v.Negated {
			return 0, constraint{}, false
		}
		ci, ok := cols[ref.ID]
		if !ok {
			return 0, constraint{}, false
		}
		var ds []types.Datum
		for _, x := range v.List {
			k, ok := x.(*sem.Const)
			if !ok || !constUsable(ci.t, k) {
				return 0, constraint{}, false
			}
			ds = append(ds, k.Datum)
		}
		return ci.tableCol, pointSet(ds), true

	case *sem.AnyAll:
		// col = ANY (constant array): an IN list.
		ref, ok := v.Left.(*sem.ColRef)
		k, kok := v.Array.(*sem.Const)
		if !ok || !kok || v.All || v.Op != sem.EQ {
			return 0, constraint{}, false
		}
		ci, ok := cols[ref.ID]
		if !ok {
			return 0, constraint{}, false
		}
		if types.IsNull(k.Datum) {
			return ci.tableCol, constraint{}, true // = ANY (NULL) is never true
		}
		arr, ok := k.Datum.(*types.DArray)
		if !ok || k.T.Elem == nil {
			return 0, constraint{}, false
		}
		for _, d := range arr.Elems {
			if !constUsable(ci.t, &sem.Const{Datum: d, T: k.T.Elem}) {
				return 0, constraint{}, false
			}
		}
		return ci.tableCol, pointSet(arr.Elems), true

	case *sem.IsNull:
		ref, ok := v.Arg.(*sem.ColRef)
		if !ok {
			return 0, constraint{}, false
		}
		ci, ok := cols[ref.ID]
		if !ok {
			return 0, constraint{}, false
		}
		if v.Negated {
			return ci.tableCol, constraint{ivs: fullRange}, true
		}
		return ci.tableCol, constraint{null: true}, true
	}
	return 0, constraint{}, false
}

// pointSet is the constraint "one of ds": sorted, without duplicates, and
// without NULLs (x IN (.., NULL) is NULL, never true, where x is not
// listed).
func pointSet(in []types.Datum) constraint {
	var ds []types.Datum
	for _, d := range in {
		if !types.IsNull(d) {
			ds = append(ds, d)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return types.Compare(ds[i], ds[j]) < 0 })
	var ivs []interval
	for i, d := range ds {
		if i > 0 && types.Compare(ds[i-1], d) == 0 {
			continue
		}
		ivs = append(ivs, interval{lo: d, hi: d, loIncl: true, hiIncl: true})
	}
	return constraint{ivs: ivs}
}

// flip mirrors a comparison (c < x is x > c).
func flip(op sem.CmpOp) sem.CmpOp {
	switch op {
	case sem.LT:
		return sem.GT
	case sem.LE:
		return sem.GE
	case sem.GT:
		return sem.LT
	case sem.GE:
		return sem.LE
	}
	return op
}

// constUsable reports whether constant k may bound a key column of type
// t: its type must be t's (keyTypesMatch), and an integer must fit t's
// width, so the key encoder never sees a value the column cannot hold.
func constUsable(t *types.T, k *sem.Const) bool {
	if !keyTypesMatch(t, k.T) {
		return false
	}
	if i, ok := k.Datum.(types.DInt); ok {
		switch t.Width {
		case 16:
			return i >= math.MinInt16 && i <= math.MaxInt16
		case 32:
			return i >= math.MinInt32 && i <= math.MaxInt32
		}
	}
	return true
}

// filterConstraints reads a filter's conjuncts into per-column
// constraints; used[i] says whether conjunct i was read.
type filterConstraints struct {
	conj []sem.Expr
	col  []rowenc.ColumnID // col[i] is conjunct i's column; 0 when unused
	cons map[rowenc.ColumnID]constraint
}

func readConstraints(conj []sem.Expr, cols map[sem.ColumnID]colInfo) *filterConstraints {
	fc := &filterConstraints{conj: conj, col: make([]rowenc.ColumnID, len(conj)), cons: map[rowenc.ColumnID]constraint{}}
	for i, e := range conj {
		id, c, ok := termConstraint(e, cols)
		if !ok {
			continue
		}
		fc.col[i] = id
		if prev, ok := fc.cons[id]; ok {
			c = prev.intersect(c)
		}
		fc.cons[id] = c
	}
	return fc
}

// residual returns the conjuncts the spans over key columns do not
// enforce.
func (fc *filterConstraints) residual(enforced map[rowenc.ColumnID]bool) []sem.Expr {
	var out []sem.Expr
	for i, e := range fc.conj {
		if fc.col[i] == 0 || !enforced[fc.col[i]] {
			out = append(out, e)
		}
	}
	return out
}

// spanResult is what buildSpans derived for one index.
type spanResult struct {
	spans []plan.Span
	// used key columns are enforced by the spans; the first eq of them
	// are each fixed to a few values (point spans), a range may follow.
	used, eq int
	// fixed leading key columns hold a single value in every span.
	fixed int
	// rangeCol: the last used column is bounded by a range.
	rangeCol bool
	// empty: the conjuncts contradict each other; no row qualifies.
	empty bool
	// nullPoint: some point span holds a NULL key value (which a unique
	// index does not keep unique).
	nullPoint bool
}

// buildSpans derives the spans of an index with key columns keys and
// orders from the constraints; notNull says which key columns cannot hold
// NULL (their open ranges need no bound to skip the NULLs).
func buildSpans(keys []rowenc.ColumnID, orders []rowenc.Order, notNull []bool, cons map[rowenc.ColumnID]constraint) spanResult {
	return buildSpansCap(keys, orders, notNull, cons, maxSpans)
}

// buildSpansCap is buildSpans with at most maxSpans spans (a hash-sharded
// index's scan allows one per bucket, up to 2048).
func buildSpansCap(keys []rowenc.ColumnID, orders []rowenc.Order, notNull []bool, cons map[rowenc.ColumnID]constraint, maxSpans int) spanResult {
	var r spanResult
	prefixes := [][]types.Datum{nil}
	for i, id := range keys {
		c, ok := cons[id]
		if !ok {
			break
		}
		if c.empty() {
			return spanResult{empty: true}
		}
		o := orders[i]
		ordered := c.inIndexOrder(o)
		if c.points() && len(prefixes)*len(ordered) <= maxSpans {
			var next [][]types.Datum
			for _, p := range prefixes {
				for _, iv := range ordered {
					d := types.DNull
					if iv != nil {
						d = iv.lo
					} else {
						r.nullPoint = true
					}
					next = append(next, appendCopy(p, d))
				}
			}
			prefixes = next
			if r.fixed == i && len(ordered) == 1 {
				r.fixed++
			}
			r.used, r.eq = i+1, i+1
			continue
		}
		if len(prefixes)*len(ordered) > maxSpans {
			break
		}
		for _, p := range prefixes {
			for _, iv := range ordered {
				if iv == nil {
					pt := appendCopy(p, types.DNull)
					r.spans = append(r.spans, plan.Span{Start: pt, End: pt, EndInclusive: true})
				} else {
					r.spans = append(r.spans, rangeSpan(p, *iv, o, notNull[i]))
				}
			}
		}
		r.used, r.rangeCol = i+1, true
		return r
	}
	if r.used > 0 {
		for _, p := range prefixes {
			r.spans = append(r.spans, plan.Span{Start: p, End: p, EndInclusive: true})
		}
	}
	return r
}

// rangeSpan is the span of the rows with key prefix p followed by a value
// of iv, for a column of order o. An unbounded end of iv stops short of
// the NULLs when o stores them on that side (and the column has any).
func rangeSpan(p []types.Datum, iv interval, o rowenc.Order, notNull bool) plan.Span {
	desc, nullsFirst := o&rowenc.Descending != 0, o&rowenc.NullsFirst != 0
	nullsLast := !nullsFirst && !notNull
	nullsFirst = nullsFirst && !notNull
	sv, si, ev, ei := iv.lo, iv.loIncl, iv.hi, iv.hiIncl
	if desc {
		sv, si, ev, ei = iv.hi, iv.hiIncl, iv.lo, iv.loIncl
	}
	var sp plan.Span
	switch {
	case sv != nil:
		sp.Start, sp.StartExclusive = appendCopy(p, sv), !si
	case nullsFirst:
		sp.Start, sp.StartExclusive = appendCopy(p, types.DNull), true
	case len(p) > 0:
		sp.Start = appendCopy(p)
	}
	switch {
	case ev != nil:
		sp.End, sp.EndInclusive = appendCopy(p, ev), ei
	case nullsLast:
		sp.End = appendCopy(p, types.DNull)
	case len(p) > 0:
		sp.End, sp.EndInclusive = appendCopy(p), true
	}
	return sp
}

func appendCopy(p []types.Datum, ds ...types.Datum) []types.Datum {
	out := make([]types.Datum, 0, len(p)+len(ds))
	return append(append(out, p...), ds...)
}

// pointValues returns every combination of the single values the
// constraints fix cols to, or false when a column is not fixed to at most
// limit combinations of non-NULL values.
func pointValues(cols []rowenc.ColumnID, cons map[rowenc.ColumnID]constraint, limit int) ([][]types.Datum, bool) {
	combos := [][]types.Datum{nil}
	for _, id := range cols {
		c, ok := cons[id]
		if !ok || c.null || !c.points() || len(c.ivs) == 0 || len(combos)*len(c.ivs) > limit {
			return nil, false
		}
		var next [][]types.Datum
		for _, p := range combos {
			for _, iv := range c.ivs {
				next = append(next, appendCopy(p, iv.lo))
			}
		}
		combos = next
	}
	return combos, true
}
