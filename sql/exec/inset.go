package exec

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgx/v5/pgtype"
)

// IN and NOT IN over an uncorrelated subquery, as a conjunct of a WHERE
// (a Filter's predicate).
//
// sem evaluates `x IN (SELECT y ...)` by comparing x with every value of
// the subquery's column, which the statement holds (subquery.go). As a
// conjunct of a filter it is a semi-join (NOT IN: an anti-join with
// PostgreSQL's NULL rules), run here instead:
//
//   - the subquery runs once, when the first row reaches the test (as
//     sem would run it), and its values' keys (hashKey) go to a hash set
//     reserved in the operator's account;
//   - past work_mem (or when the node budget refuses) the set spills: its
//     keys, and every input row tagged with its key and input position,
//     are sorted (rowcontainer.Sorter, spilling) and merged; the rows that
//     pass are sorted back by position. The filter's output order is its
//     input's, spilled or not (sql/opt relies on filters keeping order).
//
// A NULL x, or a set holding NULL, follow SQL: x IN S is true when some
// value equals x, NULL when none does but x or a value is NULL, false
// otherwise; NOT IN is its negation (true for every x, NULL included, when
// S is empty); a WHERE keeps only true.
type inSet struct {
	sub  *plan.Subquery
	left rowFn
	not  bool
}

// inSetOf recognizes c as `x IN (uncorrelated subquery)`, `x NOT IN
// (...)` or `x <> ALL (...)` whose equality is key equality (hashKey:
// equal keys exactly when the values are equal).
func (r *runner) inSetOf(c sem.Expr, cols []plan.Column) (*inSet, error) {
	not := false
	if n, ok := c.(*sem.Not); ok {
		not, c = true, n.Arg
	}
	s, ok := c.(*sem.SubqueryRef)
	if !ok || s.Fn == nil || len(s.Fn.ArgTypes) != 2 {
		return nil, nil
	}
	switch {
	case s.Kind == sem.AnySubquery && s.Op == sem.EQ:
	case s.Kind == sem.AllSubquery && s.Op == sem.NE && !not:
		not = true
	default:
		return nil, nil
	}
	sub := r.subquery(s.ID)
	if sub == nil || len(sub.Outer) > 0 {
		return nil, nil
	}
	if !keyEquality(s.Left.Type(), s.Fn.ArgTypes[0]) || !keyEquality(s.Fn.ArgTypes[0], s.Fn.ArgTypes[1]) ||
		s.Col == nil || !keyEquality(s.Col, s.Fn.ArgTypes[1]) {
		return nil, nil
	}
	left, err := r.compile(s.Left, cols)
	if err != nil {
		return nil, err
	}
	return &inSet{sub: sub, left: left, not: not}, nil
}

// keyEquality reports whether values of a and b are equal under `=`
// exactly when their hashKeys are: the same type, of a family whose
// equality is its key encoding's (text and varchar compare bytewise;
// bpchar ignores trailing blanks and is left to sem).
func keyEquality(a, b *types.T) bool {
	if a == nil || b == nil || a.Family != b.Family {
		return false
	}
	switch a.Family {
	case types.StringFamily:
		txt := func(o uint32) bool { return o == pgtype.TextOID || o == pgtype.VarcharOID }
		return txt(a.Oid) && txt(b.Oid)
	case types.BoolFamily, types.IntFamily, types.FloatFamily, types.NumericFamily, types.BytesFamily,
		types.DateFamily, types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily,
		types.UUIDFamily, types.OidFamily:
		return a.Oid == b.Oid
	}
	return false
}

// splitAnd lists e's conjuncts.
func splitAnd(e sem.Expr) []sem.Expr {
	if a, ok := e.(*sem.And); ok {
		var out []sem.Expr
		for _, x := range a.Args {
			out = append(out, splitAnd(x)...)
		}
		return out
	}
	return []sem.Expr{e}
}

// inSetOp filters its input by one inSet after the rest of the
// predicate (pred).
type inSetOp struct {
	r    *runner
	in   op
	pred func([]types.Datum) (bool, error)
	set  *inSet
	acc  *mon.Account

	built   bool
	keys    map[string]struct{} // nil once spilled
	n       int64               // values in the subquery
	hasNull bool
	vals    *rowcontainer.Sorter // the values' keys, once spilled
	out     rowcontainer.Iterator
	keybuf  []byte
}

// extractInSet finds the first inSet conjunct of pred and returns it with
// the other conjuncts (nil: none), or a nil inSet.
func (r *runner) extractInSet(pred sem.Expr, cols []plan.Column) (*inSet, sem.Expr, error) {
	conj := splitAnd(pred)
	for i, c := range conj {
		set, err := r.inSetOf(c, cols)
		if err != nil || set == nil {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		rest := append(append([]sem.Expr{}, conj[:i]...), conj[i+1:]...)
		switch len(rest) {
		case 0:
			return set, nil, nil
		case 1:
			return set, rest[0], nil
		}
		return set, &sem.And{Args: rest}, nil
	}
	return nil, nil, nil
}

// buildInSetFilter builds a Filter with an inSet conjunct: the other
// conjuncts first, then the set (nil when there is none).
func (r *runner) buildInSetFilter(n *plan.Filter) (op, error) {
	cols := n.Input.Columns()
	set, rest, err := r.extractInSet(n.Pred, cols)
	if err != nil || set == nil {
		return nil, err
	}
	pred, err := r.compilePred(rest, cols)
	if err != nil {
		return nil, err
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	return &inSetOp{r: r, in: in, pred: pred, set: set, acc: r.account()}, nil
}

// buildInSetScan builds a Scan whose filter has an inSet conjunct: the
// scan with the other conjuncts, then the set (nil when there is none).
// A limit pushed into the scan goes (it counts rows past the whole
// filter); the Limit above still applies.
func (r *runner) buildInSetScan(n *plan.Scan) (op, error) {
	set, rest, err := r.extractInSet(n.Filter, n.Cols)
	if err != nil || set == nil {
		return nil, err
	}
	c := *n
	c.Filter, c.HardLimit = rest, 0
	in, err := r.buildScan(&c)
	if err != nil {
		return nil, err
	}
	always := func([]types.Datum) (bool, error) { return true, nil }
	return &inSetOp{r: r, in: in, pred: always, set: set, acc: r.account()}, nil
}

// build runs the subquery into the hash set, or, past work_mem, into a
// sorter of keys.
func (o *inSetOp) build(ctx context.Context) error {
	o.built = true
	o.keys = map[string]struct{}{}
	sub, err := o.r.build(o.set.sub.Root)
	if err != nil {
		return err
	}
	defer sub.Close()
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, sub, k)
		if err != nil {
			return err
		}
		if row == nil {
			return nil
		}
		o.n++
		if len(row) == 0 || types.IsNull(row[0]) {
			o.hasNull = true
			continue
		}
		if o.keybuf, err = hashKey(o.keybuf[:0], row, []int{0}); err != nil {
			return err
		}
		if o.vals != nil {
			if err := o.vals.Add(ctx, []types.Datum{types.DBytes(o.keybuf)}); err != nil {
				return err
			}
			continue
		}
		if _, dup := o.keys[string(o.keybuf)]; dup {
			continue
		}
		size := int64(len(o.keybuf)) + 64
		err = o.acc.Grow(size)
		if err != nil && o.r.tempScope().Spillable() && len(o.keys) >= minSpillRows {
			// The set outgrew work_mem: its keys go to a sorter.
			o.vals = rowcontainer.NewSorter(compareKey, o.r.account(), o.r.tempScope())
			for k := range o.keys {
				if err := o.vals.Add(ctx, []types.Datum{types.DBytes(k)}); err != nil {
					return err
				}
			}
			o.keys = nil
			o.acc.Clear()
			if err := o.vals.Add(ctx, []types.Datum{types.DBytes(o.keybuf)}); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, mon.ErrWorkMem) {
			err = o.acc.Force(size)
		}
		if err != nil {
			return err
		}
		o.keys[string(o.keybuf)] = struct{}{}
	}
}

// compareKey orders rows whose first value is a key (DBytes).
func compareKey(a, b []types.Datum) int { return types.Compare(a[0], b[0]) }

// decide is the WHERE outcome for a row whose x is null or not and is
// found in the set or not.
func (o *inSetOp) decide(null, found bool) bool {
	if o.n == 0 {
		return o.set.not // x IN () is false, x NOT IN () true
	}
	if null {
		return false // NULL either way
	}
	if o.set.not {
		return !found && !o.hasNull
	}
	return found
}

func (o *inSetOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.out != nil {
		row, err := o.out.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		return row[2:], nil
	}
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, o.in, k)
		if err != nil || row == nil {
			return nil, err
		}
		ok, err := o.pred(row)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		x, err := o.set.left(row)
		if err != nil {
			return nil, err
		}
		if !o.built {
			if err := o.build(ctx); err != nil {
				return nil, err
			}
			if o.vals != nil {
				if err := o.spilled(ctx, row, x); err != nil {
					return nil, err
				}
				return o.Next(ctx)
			}
		}
		null := types.IsNull(x)
		found := false
		if !null {
			if o.keybuf, err = hashKey(o.keybuf[:0], []types.Datum{x}, []int{0}); err != nil {
				return nil, err
			}
			_, found = o.keys[string(o.keybuf)]
		}
		if o.decide(null, found) {
			return row, nil
		}
	}
}

// spilled runs the filter when the set spilled: the rows from first on
// (first's x already evaluated), tagged (key, position), are sorted by
// key and merged with the sorted keys of the set; the rows that pass are
// sorted back by position into o.out.
func (o *inSetOp) spilled(ctx context.Context, first []types.Datum, x types.Datum) error {
	rows := rowcontainer.NewSorter(func(a, b []types.Datum) int {
		if c := types.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return types.Compare(a[1], b[1])
	}, o.r.account(), o.r.tempScope())
	defer rows.Close()
	passed := rowcontainer.NewSorter(func(a, b []types.Datum) int { return types.Compare(a[1], b[1]) }, o.r.account(), o.r.tempScope())
	passed.SetKey(rowcontainer.FirstKey(types.Int8, 1, false, false))
	keep := func(row []types.Datum, pos int64) error {
		return passed.Add(ctx, append([]types.Datum{types.DNull, types.DInt(pos)}, row...))
	}
	var pos int64
	add := func(row []types.Datum, x types.Datum) error {
		pos++
		if types.IsNull(x) {
			if o.decide(true, false) {
				return keep(row, pos)
			}
			return nil
		}
		var err error
		if o.keybuf, err = hashKey(o.keybuf[:0], []types.Datum{x}, []int{0}); err != nil {
			return err
		}
		return rows.Add(ctx, append([]types.Datum{types.DBytes(o.keybuf), types.DInt(pos)}, row...))
	}
	if err := add(first, x); err != nil {
		return err
	}
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, o.in, k)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		ok, err := o.pred(row)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		x, err := o.set.left(row)
		if err != nil {
			return err
		}
		if err := add(row, x); err != nil {
			return err
		}
	}
	rit, err := rows.Sort(ctx)
	if err != nil {
		return err
	}
	defer rit.Close()
	vit, err := o.vals.Sort(ctx)
	if err != nil {
		return err
	}
	defer vit.Close()
	v, err := vit.Next(ctx)
	if err != nil {
		return err
	}
	for {
		row, err := rit.Next(ctx)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		for v != nil && types.Compare(v[0], row[0]) < 0 {
			if v, err = vit.Next(ctx); err != nil {
				return err
			}
		}
		found := v != nil && types.Compare(v[0], row[0]) == 0
		if o.decide(false, found) {
			if err := passed.Add(ctx, row); err != nil {
				return err
			}
		}
	}
	o.out, err = passed.Sort(ctx)
	return err
}

func (o *inSetOp) Close() {
	o.in.Close()
	if o.out != nil {
		o.out.Close()
	}
	if o.vals != nil {
		o.vals.Close()
	}
	o.keys = nil
	o.acc.Clear()
}
