package exec

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// insertShape is the part of an INSERT's build that depends on its plan
// only: where the input's columns go in the table's row, the compiled
// defaults and, for an INSERT ... VALUES, the compiled VALUES items. A
// cached plan's PointCache keeps it (PointCache.insert), so that each
// Execute of the plan (pgbench's INSERT into pgbench_history) does not
// compile its items and defaults again: those were 15 of an INSERT's
// objects (TestKeptInsertAllocs).
//
// Only expressions that read no row (constants, parameters, casts and
// function calls of them: readsNoRow) are kept: their evaluators bind
// nothing of the runner, and evaluate with the statement's EvalContext,
// which holds its parameters. Like the point read's kept shape, it is
// checked against the plan it is used for (matches) and made again when
// the plan is another one, and it is used only inside one statement's
// Next (one session's statements run one at a time).
type insertShape struct {
	// table, insertCols, defaultExprs and rows identify the plan the
	// shape was made from (pointers into the cached plan, which its
	// instantiations share).
	table        *catalog.Table
	insertCols   []rowenc.ColumnID
	defaultExprs []sem.Expr
	rows         [][]sem.Expr // nil: the input is not a kept VALUES

	// inPos[j] is the table position input column j fills; given[i]:
	// table column i is an input column.
	inPos []int
	given []bool
	// defaults[i] computes table column i's default (nil: not computed).
	defaults []sem.Evaluator
	// values are the VALUES' compiled items, row by row (nil: the input
	// is built as any other).
	values [][]sem.Evaluator
}

// matches reports whether sh was made from n's plan.
func (sh *insertShape) matches(n *plan.Insert) bool {
	if sh.table != n.Table || !sameSlice(sh.insertCols, n.InsertCols) || !sameSlice(sh.defaultExprs, n.Defaults) {
		return false
	}
	v, ok := n.Input.(*plan.Values)
	if sh.rows == nil {
		return !ok || !keepsValues(v)
	}
	return ok && sameSlice(sh.rows, v.Rows)
}

// keptInsert returns the kept shape of n's build when n may use one: a
// cached plan's (Context.Point), not run under EXPLAIN ANALYZE (whose
// operators are wrapped one by one), every default it computes reading
// no row. It makes the shape when the cache holds none or another
// plan's. nil: build as usual.
func (r *runner) keptInsert(n *plan.Insert, ti *tableInfo) (*insertShape, error) {
	pc := r.x.Point
	if pc == nil || r.x.Stats != nil {
		return nil, nil
	}
	if sh := pc.insert; sh != nil && sh.matches(n) {
		return sh, nil
	}
	pc.insert = nil
	ncols := len(n.Table.Columns)
	sh := &insertShape{table: n.Table, insertCols: n.InsertCols, defaultExprs: n.Defaults,
		inPos: make([]int, len(n.InsertCols)), given: make([]bool, ncols)}
	for j, id := range n.InsertCols {
		p, ok := ti.colPos(id)
		if !ok {
			return nil, nil // buildInsert reports it
		}
		sh.inPos[j], sh.given[p] = p, true
	}
	for i := 0; i < ncols; i++ {
		if sh.given[i] || i >= len(n.Defaults) || n.Defaults[i] == nil {
			continue
		}
		if !readsNoRow(n.Defaults[i]) {
			return nil, nil
		}
		ev, err := sem.Compile(n.Defaults[i], nil)
		if err != nil {
			return nil, fmt.Errorf("exec: compiling %s: %w", n.Defaults[i], err)
		}
		if sh.defaults == nil {
			sh.defaults = make([]sem.Evaluator, ncols)
		}
		sh.defaults[i] = ev
	}
	if v, ok := n.Input.(*plan.Values); ok && keepsValues(v) {
		sh.rows = v.Rows
		sh.values = make([][]sem.Evaluator, len(v.Rows))
		for i, row := range v.Rows {
			sh.values[i] = make([]sem.Evaluator, len(row))
			for j, e := range row {
				ev, err := sem.Compile(e, nil)
				if err != nil {
					return nil, fmt.Errorf("exec: compiling %s: %w", e, err)
				}
				sh.values[i][j] = ev
			}
		}
	}
	pc.insert = sh
	return sh, nil
}

// keepsValues: every item of v reads no row (readsNoRow), so its
// compiled items may be kept.
func keepsValues(v *plan.Values) bool {
	for _, row := range v.Rows {
		for _, e := range row {
			if !readsNoRow(e) {
				return false
			}
		}
	}
	return true
}

// valuesOp returns the rows of kept VALUES items, evaluated with the
// statement's EvalContext (buildValues, without compiling).
type valuesOp struct {
	ectx *sem.EvalContext
	rows [][]sem.Evaluator
	i    int
}

func (o *valuesOp) Next(context.Context) ([]types.Datum, error) {
	if o.i >= len(o.rows) {
		return nil, nil
	}
	evs := o.rows[o.i]
	out := make([]types.Datum, len(evs))
	for j, ev := range evs {
		d, err := ev(o.ectx, nil)
		if err != nil {
			return nil, err
		}
		out[j] = d
	}
	o.i++
	return out, nil
}

func (o *valuesOp) Close() {}

// updateShape is where an UPDATE finds its columns: the old row's
// (fetch) and the new values' (new) among its input's columns, and the
// table positions the new values go to (set). It depends on the plan
// only; a cached plan's PointCache keeps it (PointCache.update), checked
// against the plan as insertShape is: three objects of every UPDATE
// (TestKeptUpdatePositions).
type updateShape struct {
	table              *catalog.Table
	inCols             []plan.Column
	fetchCols, newCols []sem.ColumnID
	setCols            []rowenc.ColumnID

	fetch, new, set []int
}

// updatePositions returns n's column positions (updateShape): the kept
// ones when a cached plan's are kept and were made from n's plan, else
// made (and kept when the plan is cached).
func (r *runner) updatePositions(n *plan.Update, ti *tableInfo, inCols []plan.Column) (*updateShape, error) {
	pc := r.x.Point
	if pc != nil {
		if sh := pc.update; sh != nil && sh.table == n.Table && sameSlice(sh.inCols, inCols) &&
			sameSlice(sh.fetchCols, n.FetchCols) && sameSlice(sh.newCols, n.NewCols) && sameSlice(sh.setCols, n.SetCols) {
			return sh, nil
		}
		pc.update = nil
	}
	sh := &updateShape{table: n.Table, inCols: inCols, fetchCols: n.FetchCols, newCols: n.NewCols, setCols: n.SetCols}
	var err error
	if sh.fetch, err = inputPositions("UPDATE fetch", inCols, n.FetchCols); err != nil {
		return nil, err
	}
	if sh.new, err = inputPositions("UPDATE new value", inCols, n.NewCols); err != nil {
		return nil, err
	}
	sh.set = make([]int, len(n.SetCols))
	for i, id := range n.SetCols {
		p, ok := ti.colPos(id)
		if !ok {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: UPDATE column %d is not in table %q", id, n.Table.Name)
		}
		sh.set[i] = p
	}
	if pc != nil {
		pc.update = sh
	}
	return sh, nil
}
