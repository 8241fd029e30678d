package exec

import (
	"context"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// joinOp is a hash join (with equality keys) or a nested-loop join (without)
// of a streamed left side against a materialized right side, for every join
// kind. NULL keys never match (they still come out of outer joins).
type joinOp struct {
	r       *runner
	n       *plan.Join
	left    op
	right   op
	on      func([]types.Datum) (bool, error)
	leftEq  []int
	rightEq []int
	lw, rw  int

	built   bool
	rrows   [][]types.Datum
	table   map[string][]int // hash key -> right row indexes; nil: nested loop
	matched []bool           // right rows some left row matched (RIGHT/FULL)
	out     [][]types.Datum
	oi      int
	done    bool
	keybuf  []byte
	comb    []types.Datum
}

func (r *runner) buildJoin(n *plan.Join) (op, error) {
	if n.Lateral {
		return r.buildLateralJoin(n)
	}
	lcols, rcols := n.Left.Columns(), n.Right.Columns()
	o := &joinOp{r: r, n: n, lw: len(lcols), rw: len(rcols)}
	var err error
	if o.leftEq, err = colPositions(lcols, n.LeftEq); err != nil {
		return nil, err
	}
	if o.rightEq, err = colPositions(rcols, n.RightEq); err != nil {
		return nil, err
	}
	if len(o.leftEq) != len(o.rightEq) {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: join with %d left and %d right keys", len(o.leftEq), len(o.rightEq))
	}
	both := append(append([]plan.Column{}, lcols...), rcols...)
	if o.on, err = r.compilePred(n.On, both); err != nil {
		return nil, err
	}
	if o.left, err = r.build(n.Left); err != nil {
		return nil, err
	}
	if o.right, err = r.build(n.Right); err != nil {
		o.left.Close()
		return nil, err
	}
	return o, nil
}

func hasNull(row []types.Datum, pos []int) bool {
	for _, p := range pos {
		if types.IsNull(row[p]) {
			return true
		}
	}
	return false
}

func (o *joinOp) build(ctx context.Context) error {
	o.built = true
	rows, err := drain(ctx, o.right)
	if err != nil {
		return err
	}
	o.rrows = rows
	o.matched = make([]bool, len(rows))
	if len(o.rightEq) == 0 {
		return nil
	}
	o.table = make(map[string][]int, len(rows))
	for i, row := range rows {
		if hasNull(row, o.rightEq) {
			continue
		}
		if o.keybuf, err = hashKey(o.keybuf[:0], row, o.rightEq); err != nil {
			return err
		}
		o.table[string(o.keybuf)] = append(o.table[string(o.keybuf)], i)
	}
	return nil
}

func (o *joinOp) candidates(left []types.Datum) ([]int, error) {
	if o.table == nil {
		return nil, nil
	}
	if hasNull(left, o.leftEq) {
		return []int{}, nil
	}
	var err error
	if o.keybuf, err = hashKey(o.keybuf[:0], left, o.leftEq); err != nil {
		return nil, err
	}
	c := o.table[string(o.keybuf)]
	if c == nil {
		c = []int{}
	}
	return c, nil
}

// probe joins one left row, queueing its output rows.
func (o *joinOp) probe(left []types.Datum) error {
	cand, err := o.candidates(left)
	if err != nil {
		return err
	}
	n := len(o.rrows)
	if cand != nil {
		n = len(cand)
	}
	kind := o.n.Kind
	matched := false
	for k := 0; k < n; k++ {
		i := k
		if cand != nil {
			i = cand[k]
		}
		o.comb = append(append(o.comb[:0], left...), o.rrows[i]...)
		ok, err := o.on(o.comb)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		matched = true
		o.matched[i] = true
		switch kind {
		case plan.SemiJoin:
			o.out = append(o.out, left)
			return nil
		case plan.AntiJoin:
			return nil
		}
		o.out = append(o.out, append([]types.Datum(nil), o.comb...))
	}
	if !matched {
		switch kind {
		case plan.LeftJoin, plan.FullJoin:
			o.out = append(o.out, append(append([]types.Datum(nil), left...), nulls(o.rw)...))
		case plan.AntiJoin:
			o.out = append(o.out, left)
		}
	}
	return nil
}

func (o *joinOp) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.built {
		if err := o.build(ctx); err != nil {
			return nil, err
		}
	}
	for k := 0; o.oi >= len(o.out); k++ {
		if o.done {
			return nil, nil
		}
		if k%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		o.out, o.oi = o.out[:0], 0
		left, err := o.left.Next(ctx)
		if err != nil {
			return nil, err
		}
		if left == nil {
			o.done = true
			if o.n.Kind == plan.RightJoin || o.n.Kind == plan.FullJoin {
				for i, row := range o.rrows {
					if !o.matched[i] {
						o.out = append(o.out, append(nulls(o.lw), row...))
					}
				}
			}
			continue
		}
		if err := o.probe(left); err != nil {
			return nil, err
		}
	}
	row := o.out[o.oi]
	o.out[o.oi] = nil
	o.oi++
	return row, nil
}

func (o *joinOp) Close() {
	o.left.Close()
	o.right.Close()
	o.rrows, o.table = nil, nil
}

// buildLateralJoin re-runs Right for every left row, with the left row's
// columns bound as outer references.
func (r *runner) buildLateralJoin(n *plan.Join) (op, error) {
	switch n.Kind {
	case plan.InnerJoin, plan.LeftJoin, plan.SemiJoin, plan.AntiJoin:
	default:
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "exec: LATERAL with a RIGHT or FULL join")
	}
	lcols, rcols := n.Left.Columns(), n.Right.Columns()
	both := append(append([]plan.Column{}, lcols...), rcols...)
	on, err := r.compilePred(n.On, both)
	if err != nil {
		return nil, err
	}
	left, err := r.build(n.Left)
	if err != nil {
		return nil, err
	}
	var out [][]types.Datum
	oi := 0
	var comb []types.Datum
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		for oi >= len(out) {
			out, oi = out[:0], 0
			lrow, err := left.Next(ctx)
			if err != nil || lrow == nil {
				return nil, err
			}
			if r.outer == nil {
				r.outer = map[sem.ColumnID]types.Datum{}
			}
			for i, c := range lcols {
				r.outer[c.ID] = lrow[i]
			}
			right, err := r.build(n.Right)
			if err != nil {
				return nil, err
			}
			matched := false
			for {
				rrow, err := right.Next(ctx)
				if err != nil {
					right.Close()
					return nil, err
				}
				if rrow == nil {
					break
				}
				comb = append(append(comb[:0], lrow...), rrow...)
				ok, err := on(comb)
				if err != nil {
					right.Close()
					return nil, err
				}
				if !ok {
					continue
				}
				matched = true
				if n.Kind == plan.SemiJoin || n.Kind == plan.AntiJoin {
					break
				}
				out = append(out, append([]types.Datum(nil), comb...))
			}
			right.Close()
			switch {
			case n.Kind == plan.SemiJoin && matched, n.Kind == plan.AntiJoin && !matched:
				out = append(out, lrow)
			case n.Kind == plan.LeftJoin && !matched:
				out = append(out, append(append([]types.Datum(nil), lrow...), nulls(len(rcols))...))
			}
		}
		row := out[oi]
		oi++
		return row, nil
	}, close: left.Close}, nil
}
