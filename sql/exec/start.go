package exec

import (
	"context"

	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// affecter is implemented by root operators whose command tag counts
// something other than the rows they return (INSERT, UPDATE and DELETE
// without RETURNING return no rows but affect some).
type affecter interface {
	RowsAffected() int64
}

// Start builds p's operators and returns them running. Nothing is read
// before the first Next, except what building needs (no KV at all).
// Rows are returned without p.Root's hidden columns.
func Start(ctx context.Context, x *Context, p *plan.Plan) (Rows, error) {
	if p == nil || p.Root == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: empty plan")
	}
	if x == nil || x.Txn == nil && x.Implicit == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: no transaction")
	}
	r := newRunner(ctx, x, p)
	// A read of one row by primary key skips the general operators
	// (point.go).
	root, err := r.buildPoint(p.Root)
	if x.Txn == nil {
		// Without a transaction only the point operator runs, and it reads
		// its row here, so that whatever the read asks of the caller
		// (ErrImplicitRetry) comes before the caller sends anything.
		if err == nil {
			err = startImplicit(ctx, root)
		}
		if err != nil {
			r.release()
			return nil, err
		}
	}
	if root == nil && err == nil && distsql.FromContext(ctx) != nil && r.distOn() {
		root, err = r.tryDist(p.Root)
	}
	if root == nil && err == nil {
		root, err = r.buildNode(p.Root)
	}
	if err != nil {
		r.release()
		return nil, err
	}
	rs := &r.out
	*rs = rows{r: r, inner: root, op: root}
	if x.Stats != nil {
		rs.op = x.Stats.wrap(distNode(root, p.Root), root)
	}
	cols := p.Root.Columns()
	for i, c := range cols {
		if !c.Hidden {
			rs.keep = append(rs.keep, i)
		}
	}
	if len(rs.keep) == len(cols) {
		rs.keep = nil
	}
	return rs, nil
}

type rows struct {
	r      *runner
	inner  op // unwrapped root, for RowsAffected
	op     op
	keep   []int // visible column positions; nil: all
	n      int64
	closed bool
	out    []types.Datum
}

func (rs *rows) Next(ctx context.Context) ([]types.Datum, error) {
	if rs.closed {
		return nil, nil
	}
	rs.r.ctx = ctx
	row, err := rs.op.Next(ctx)
	if err != nil {
		// A failed or cancelled statement gives back its memory and
		// temporary files at once, not when the client gets round to
		// closing the portal.
		rs.Close()
		return nil, err
	}
	if row == nil {
		return nil, nil
	}
	if err := rs.r.accountLarge(row); err != nil {
		rs.Close()
		return nil, err
	}
	rs.n++
	if rs.keep == nil {
		return row, nil
	}
	rs.out = rs.out[:0]
	for _, i := range rs.keep {
		rs.out = append(rs.out, row[i])
	}
	return rs.out, nil
}

func (rs *rows) Close() {
	if !rs.closed {
		rs.closed = true
		rs.op.Close()
		rs.r.release()
	}
}

func (rs *rows) RowsAffected() int64 {
	if a, ok := rs.inner.(affecter); ok {
		return a.RowsAffected()
	}
	return rs.n
}
