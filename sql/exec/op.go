package exec

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// op is one running operator of a plan (pull-based: Next returns the next
// row, or nil at the end).
type op interface {
	Next(ctx context.Context) ([]types.Datum, error)
	Close()
}

// runner builds and runs the operators of one statement. The query
// operators extend it; the DML operators (dml.go) build their inputs
// through it.
//
// Everything runs on the caller's goroutine: evaluators are not safe for
// concurrent use (sem invariant 5) and kv.Txn wants one caller at a time.
// Parallelism comes from kv: a kv.Batch touching several tablets is sent
// to them in parallel by the DistSender.
type runner struct {
	x *Context
	p *plan.Plan

	// lockOnRead is the scan of the row a single-row UPDATE changes
	// (lockingPointScan): its read takes the row's lock.
	lockOnRead *plan.Scan

	// ev is the EvalContext every compiled expression runs with: the
	// session's, with Subqueries answered by this runner.
	ev sem.EvalContext
	// ctx is the statement's context, kept for subqueries, which sem asks
	// for through an interface that carries none.
	ctx context.Context
	// outer holds the values of columns of enclosing scopes, by ID: the
	// current outer row of a correlated subquery or a LATERAL join. IDs
	// are unique per plan, so nested scopes never overwrite each other.
	outer map[sem.ColumnID]types.Datum

	subs map[int]*subqueryState
	// sets are uncorrelated IN subqueries' value sets (subset.go), nil
	// for a subquery sem compares value by value; setKey is a lookup's
	// key buffer.
	sets   map[int]*subquerySet
	setKey []byte
	// ctes are the materialized CTEs, run once on first use.
	ctes map[int][][]types.Datum
	// work are the current iteration's rows of each recursive CTE.
	work map[int][][]types.Datum
	// layout1 and layouts cache table layouts by descriptor.
	layout1 struct {
		t *catalog.Table
		l *rowenc.TableLayout
	}
	layouts map[*catalog.Table]*rowenc.TableLayout

	// mem accounts the statement's operators (one Account each, bounded
	// by work_mem) in the node's budget; scope holds their temporary
	// files. Both are made on first use (most statements need neither:
	// two of a point SELECT's objects), through memStmt and tempScope,
	// and released when the statement's Rows close.
	mem   *mon.Statement
	scope *rowcontainer.Scope
	// large is the account of large values the statement is holding
	// (spill.go: accountLarge); largePeak its most, which decides whether
	// closing gives the memory back to the OS.
	large     *mon.Account
	largePeak int64
	// held accounts rows held outside operators (spill.go: heldAccount).
	held *mon.Account

	// fragSpan, in a distributed fragment's runner (distsql_proc.go), is
	// the KV span its one scan reads instead of the scan's own spans.
	fragSpan *kvpb.Span
	// fragScans, in a join fragment, is the span each of its scans reads
	// (a colocated join reads two tablets).
	fragScans map[*plan.Scan]kvpb.Span
	// dist is the gateway's state of distributed planning
	// (distsql_plan.go), held in the runner: made on first use, it was
	// an object of every INSERT and UPDATE (TestDistOnAllocs).
	dist distState
	// out is the Rows Start returns, allocated with the runner it
	// belongs to (one of the objects of every statement).
	out rows
}

func newRunner(ctx context.Context, x *Context, p *plan.Plan) *runner {
	r := &runner{
		x:   x,
		p:   p,
		ctx: ctx,
		// outer, subs, ctes and work are made on first write: most
		// statements need none (four of the objects every point SELECT
		// allocated).
	}
	if x.Eval != nil {
		r.ev = *x.Eval
	}
	if r.ev.Fn == nil {
		// Without a session (distributed fragments, tests), one fixed
		// context for the statement: fn and sem's evaluator would
		// otherwise make one per aggregate input and builtin call.
		r.ev.Fn = &builtins.FixedContext{}
	}
	r.ev.Subqueries = r
	return r
}

// evalCtx is the EvalContext expressions of this statement evaluate
// with (parameters, session, subquery values). The DML operators use it
// for defaults and checks they evaluate outside compile.
func (r *runner) evalCtx() *sem.EvalContext { return &r.ev }

// fn is the session as builtins (aggregates, windows, SRFs) see it.
func (r *runner) fn() builtins.EvalContext { return r.ev.Fn }

// rowFn evaluates a compiled expression over one input row.
type rowFn func(row []types.Datum) (types.Datum, error)

// compile compiles e over rows laid out as cols. A ColRef whose ID is not
// among cols is an outer reference: it reads the enclosing binding
// (r.outer) at evaluation time. When e holds correlated subqueries whose
// outer columns come from this row, the evaluator binds them before
// evaluating, so the subquery sees this row. A nil e compiles to nil.
func (r *runner) compile(e sem.Expr, cols []plan.Column) (rowFn, error) {
	if e == nil {
		return nil, nil
	}
	if readsNoRow(e) {
		// Nothing to bind: no column positions, outer references or
		// subqueries to look for (their maps and walk were most of what
		// an INSERT's VALUES items and defaults allocated).
		ev, err := sem.Compile(e, nil)
		if err != nil {
			return nil, fmt.Errorf("exec: compiling %s: %w", e, err)
		}
		ectx := &r.ev
		return func(row []types.Datum) (types.Datum, error) { return ev(ectx, row) }, nil
	}
	pos := make(map[sem.ColumnID]int, len(cols))
	for i, c := range cols {
		if _, dup := pos[c.ID]; !dup {
			pos[c.ID] = i
		}
	}
	var outerIDs []sem.ColumnID
	seenOuter := map[sem.ColumnID]bool{}
	type binding struct {
		id  sem.ColumnID
		pos int
	}
	var binds []binding
	seenBind := map[sem.ColumnID]bool{}
	var werr error
	sem.Walk(e, func(e sem.Expr) bool {
		switch v := e.(type) {
		case *sem.ColRef:
			if _, ok := pos[v.ID]; !ok && !seenOuter[v.ID] {
				seenOuter[v.ID] = true
				outerIDs = append(outerIDs, v.ID)
			}
		case *sem.SubqueryRef:
			s := r.subquery(v.ID)
			if s == nil {
				werr = pgerror.New(pgerrcode.InternalError, "exec: subquery %d is not in the plan", v.ID)
				return false
			}
			for _, id := range s.Outer {
				if p, ok := pos[id]; ok && !seenBind[id] {
					seenBind[id] = true
					binds = append(binds, binding{id, p})
				}
			}
		}
		return true
	})
	if werr != nil {
		return nil, werr
	}
	for i, id := range outerIDs {
		pos[id] = len(cols) + i
	}
	ev, err := sem.Compile(e, pos)
	if err != nil {
		return nil, fmt.Errorf("exec: compiling %s: %w", e, err)
	}
	ectx := &r.ev
	if len(outerIDs) == 0 && len(binds) == 0 {
		return func(row []types.Datum) (types.Datum, error) { return ev(ectx, row) }, nil
	}
	var buf []types.Datum
	return func(row []types.Datum) (types.Datum, error) {
		if r.outer == nil && len(binds) > 0 {
			r.outer = map[sem.ColumnID]types.Datum{}
		}
		for _, b := range binds {
			r.outer[b.id] = row[b.pos]
		}
		if len(outerIDs) == 0 {
			return ev(ectx, row)
		}
		buf = append(buf[:0], row...)
		for _, id := range outerIDs {
			d, ok := r.outer[id]
			if !ok {
				return nil, pgerror.New(pgerrcode.InternalError, "exec: outer column %d has no binding", id)
			}
			buf = append(buf, d)
		}
		return ev(ectx, buf)
	}, nil
}

// readsNoRow reports whether e reads nothing of a row: constants and
// parameters, and casts and function calls of them (pgbench's VALUES
// items and CURRENT_TIMESTAMP, a rowid's unique_rowid() default). It
// looks at those node kinds only; anything else answers false and
// compiles the general way.
func readsNoRow(e sem.Expr) bool {
	switch v := e.(type) {
	case *sem.Const, *sem.Param:
		return true
	case *sem.Cast:
		return readsNoRow(v.Expr)
	case *sem.FuncCall:
		for _, a := range v.Args {
			if !readsNoRow(a) {
				return false
			}
		}
		return true
	}
	return false
}

// compilePred compiles a boolean expression; the result is true only
// for a true (not NULL) value. A nil e is always true.
func (r *runner) compilePred(e sem.Expr, cols []plan.Column) (func(row []types.Datum) (bool, error), error) {
	if e == nil {
		return func([]types.Datum) (bool, error) { return true, nil }, nil
	}
	f, err := r.compile(e, cols)
	if err != nil {
		return nil, err
	}
	return func(row []types.Datum) (bool, error) {
		d, err := f(row)
		if err != nil {
			return false, err
		}
		b, ok := d.(types.DBool)
		return ok && bool(b), nil
	}, nil
}

// build builds the operator of any node (and, through it, its inputs).
// With Stats set, every operator is wrapped to count its rows and time.
func (r *runner) build(n plan.Node) (op, error) {
	if r.fragSpan == nil && distsql.FromContext(r.ctx) != nil && r.distOn() {
		// A subtree that runs as distributed fragments (distsql_plan.go).
		o, err := r.tryDist(n)
		if err != nil {
			return nil, err
		}
		if o != nil {
			if r.x.Stats != nil {
				return r.x.Stats.wrap(distNode(o, n), o), nil
			}
			return o, nil
		}
	}
	o, err := r.buildLocking(n)
	if err != nil {
		return nil, err
	}
	if r.x.Stats != nil {
		return r.x.Stats.wrap(n, o), nil
	}
	return o, nil
}

func (r *runner) buildNode(n plan.Node) (op, error) {
	switch n := n.(type) {
	case *plan.Insert:
		return r.buildInsert(n)
	case *plan.Update:
		return r.buildUpdate(n)
	case *plan.Delete:
		return r.buildDelete(n)
	case *plan.Scan:
		return r.buildScan(n)
	case *plan.IndexJoin:
		return r.buildIndexJoin(n)
	case *plan.LookupJoin:
		return r.buildLookupJoin(n)
	case *plan.VirtualScan:
		return r.buildVirtualScan(n)
	case *plan.Values:
		return r.buildValues(n)
	case *plan.Filter:
		return r.buildFilter(n)
	case *plan.Project:
		return r.buildProject(n)
	case *plan.Join:
		return r.buildJoin(n)
	case *plan.GroupBy:
		return r.buildGroupBy(n)
	case *plan.Window:
		return r.buildWindow(n)
	case *plan.Sort:
		return r.buildSort(n)
	case *plan.Limit:
		return r.buildLimit(n)
	case *plan.Distinct:
		return r.buildDistinct(n)
	case *plan.SetOp:
		return r.buildSetOp(n)
	case *plan.RecursiveCTE:
		return r.buildRecursiveCTE(n)
	case *plan.WorkTable:
		return r.buildWorkTable(n)
	case *plan.CTEScan:
		return r.buildCTEScan(n)
	case *plan.ProjectSet:
		return r.buildProjectSet(n)
	case *plan.Max1Row:
		return r.buildMax1Row(n)
	case nil:
		return nil, pgerror.New(pgerrcode.InternalError, "exec: nil plan node")
	}
	return nil, pgerror.New(pgerrcode.FeatureNotSupported, "exec: plan node %T is not supported", n)
}

// nextChecked is in.Next for the k-th turn of a loop that drains in: every
// checkEvery turns it checks ctx first, since a sort, a hash table or a
// buffer over an input that never itself checks (generate_series) must
// still stop when the statement is cancelled.
func nextChecked(ctx context.Context, in op, k int) ([]types.Datum, error) {
	if k%checkEvery == checkEvery-1 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return in.Next(ctx)
}

// drain runs o to the end and returns its rows, checking ctx as
// nextChecked does.
func drain(ctx context.Context, o op) ([][]types.Datum, error) {
	var rows [][]types.Datum
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, o, k)
		if err != nil {
			return nil, err
		}
		if row == nil {
			return rows, nil
		}
		rows = append(rows, row)
	}
}

// checkEvery is how many rows a tight loop processes between checks of
// the context.
const checkEvery = 1024
