package exec

import (
	"context"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// The kept point UPDATE without a runner (issue 22; docs/performance.md,
// item 20). Once a cached plan's UPDATE of one row by its whole primary
// key has run through Start, its PointCache holds the shape of its input
// (the point read with the SET values compiled over the row: input) and
// where the UPDATE finds its columns (update). UpdatePoint runs such an
// UPDATE for new key values with those alone: no runner, operator tree,
// Rows or cursor, and no copy of the input row (drainCopy). pgbench's
// UPDATE built all of them for one row.
//
// What it does is what Start's UPDATE does, step by step and through the
// same functions: the same locking read (the span and the lock span
// buildPointIn makes, the batch pointOp.fetch sends through the same
// kv.Txn, the same fetcher with the statement's key-only set), the same
// compiled SET values evaluated with the statement's EvalContext, the
// same tableInfo (newDMLState, dmlState.table: its RowWriter with
// WholeRow as buildUpdate sets it, partial indexes, a moving table's
// second writer), the same NOT NULL check (rowWriterSpec.finish), write,
// foreign-key work and flush. Whatever buildUpdate would have compiled
// per statement is refused (ok false, nothing read or written), and the
// caller starts the plan instead: generated columns, CHECKs, RETURNING,
// CTEs, EXPLAIN ANALYZE, no kept or matching shape, a key that is not
// the whole primary key.

// UpdateReady reports whether pc holds the shapes UpdatePoint runs with:
// a cached plan's UPDATE ran through Start once, its input a point read
// whose projections compiled over the row alone.
func (pc *PointCache) UpdateReady() bool {
	return pc != nil && pc.update != nil && pc.input != nil && pc.input.evs != nil
}

// UpdatePoint runs p, a cached plan's UPDATE (its root) of the row whose
// primary key columns are key (in the primary index's order, no NULL),
// in x.Txn, and returns how many rows it updated (0 or 1). ok false: it
// was refused before anything was read or written; the caller runs p
// through Start. err is the statement's error, with what it wrote left
// to the caller's statement savepoint, as Start's caller does.
func (pc *PointCache) UpdatePoint(ctx context.Context, x *Context, p *plan.Plan, key []types.Datum) (count int64, ok bool, err error) {
	n, _ := p.Root.(*plan.Update)
	if pc == nil || n == nil || x == nil || x.Txn == nil || x.Stats != nil || len(p.CTEs) > 0 ||
		n.Returning != nil || hasExpr(n.Computed) || len(n.Checks) > 0 || n.Table == nil {
		return 0, false, nil
	}
	scan := lockingPointScan(n)
	if scan == nil || scan.Buckets != nil || scan.ShardMerge {
		return 0, false, nil
	}
	var projs []*plan.Project
	for in := n.Input; ; {
		proj, isProj := in.(*plan.Project)
		if !isProj {
			break
		}
		projs = append(projs, proj)
		in = proj.Input
	}
	sh, up := pc.input, pc.update
	if sh == nil || sh.evs == nil || !sh.matches(scan, projs) || up == nil || up.table != n.Table ||
		!sameSlice(up.inCols, n.Input.Columns()) || !sameSlice(up.fetchCols, n.FetchCols) ||
		!sameSlice(up.newCols, n.NewCols) || !sameSlice(up.setCols, n.SetCols) {
		return 0, false, nil
	}
	ncols := len(n.Table.Columns)
	if len(up.fetch) != ncols {
		return 0, false, nil
	}
	// One object for what the statement needs besides its tableInfo:
	// it lives as long as the statement (the batch, the key, the rows
	// the writer reads), so nothing of it is reused by the next one.
	u := &updateScratch{}
	span, ok, err := pointSpan(u.key[:0], sh, plan.Span{Start: key, End: key, EndInclusive: true})
	if !ok || err != nil {
		return 0, false, err
	}
	// The lock span buildPointIn makes: the row key as the writer makes
	// it from the key values.
	keyPos, err := tableRowPositions(sh.l, sh.idx.KeyColumns)
	if err != nil {
		return 0, false, err
	}
	var krow []types.Datum
	if len(sh.l.Columns) <= len(u.old) {
		krow = u.old[:len(sh.l.Columns)]
	} else {
		krow = make([]types.Datum, len(sh.l.Columns))
	}
	for i, p := range keyPos {
		krow[p] = key[i]
	}
	rowKey, err := sh.l.PrimaryKey(nil, krow)
	if err != nil {
		return 0, false, err
	}
	clear(krow)
	if err := ctx.Err(); err != nil {
		return 0, true, err
	}

	// What buildUpdate sets up, without what it compiles: the runner's
	// EvalContext (newRunner) without its subqueries, which the kept SET
	// values do not read (compileLocal), and the statement's dmlState.
	ev := &u.ev
	if x.Eval != nil {
		*ev = *x.Eval
	}
	if ev.Fn == nil {
		ev.Fn = &builtins.FixedContext{}
	}
	s := &u.s
	*s = dmlState{x: x, ev: ev} // newDMLState's
	ti, err := s.table(n.Table)
	if err != nil {
		return 0, true, err
	}
	spec := rowWriterSpec{ti: ti}
	ti.writer.WholeRow = x.Txn.BufferServesReads()
	if ti.writer.WholeRow {
		ctx = ti.pointDeletes(ctx)
	}

	// pointOp.fetch's locking read: the row's lock with its first page,
	// further pages (a row of more column entries than a page) after it.
	f := &u.f
	sh.fetch.CopyTo(f, &u.m)
	var got []types.Datum
	emit := func(r []types.Datum) error { got = r; return nil }
	b := &u.b
	for first := true; ; first = false {
		*b = kv.Batch{}
		b.Scan(span.Key, span.EndKey, firstPage)
		if first {
			b.LockOnRead(rowKey, keys.PrefixEnd(rowKey))
		}
		if err := x.Txn.Run(ctx, b); err != nil {
			return 0, true, err
		}
		res := &b.Results[0]
		noteKeyOnly(ctx, f)
		if err := f.Add(res.Rows, emit); err != nil {
			return 0, true, err
		}
		if res.ResumeSpan == nil {
			break
		}
		span = *res.ResumeSpan
	}
	if err := f.Finish(emit); err != nil {
		return 0, true, err
	}
	if got == nil {
		return 0, true, s.finishFKs(ctx)
	}
	if err := ctx.Err(); err != nil {
		return 0, true, err // eachTarget's check before its first row
	}
	src := projectInto(u.src[:0], got, sh.outPos)
	for lvl, evs := range sh.evs {
		var out []types.Datum
		if lvl == len(sh.evs)-1 && len(evs) <= len(u.out) {
			out = u.out[:len(evs):len(evs)]
		} else {
			out = make([]types.Datum, len(evs))
		}
		for i, e := range evs {
			if out[i], err = e(ev, src); err != nil {
				return 0, true, err
			}
		}
		src = out
	}

	// buildUpdate's run for its one target row (eachTarget).
	var old, nr []types.Datum
	if ncols <= len(u.old) {
		old, nr = u.old[:ncols:ncols], u.new[:ncols:ncols]
	} else {
		old, nr = make([]types.Datum, ncols), make([]types.Datum, ncols)
	}
	for i, p := range up.fetch {
		old[i] = src[p]
	}
	copy(nr, old)
	for i, p := range up.set {
		nr[p] = src[up.new[i]]
	}
	if err := spec.finish(s, nr); err != nil {
		return 0, true, err
	}
	if err := s.write(ctx, ti, old, nr); err != nil {
		return 0, true, err
	}
	if err := s.noteWrite(ctx, ti, old, nr); err != nil {
		return 0, true, err
	}
	if err := s.flush(ctx); err != nil {
		return 0, true, err
	}
	return 1, true, s.finishFKs(ctx)
}

// updateRowBuf is how many columns UpdatePoint's rows hold without
// another allocation.
const updateRowBuf = 16

// updateScratch is one UpdatePoint's state (see UpdatePoint).
type updateScratch struct {
	ev       sem.EvalContext
	s        dmlState
	f        rowenc.RowFetcher
	m        rowenc.RowMerger
	b        kv.Batch
	key      [2 * pointKeyBuf]byte
	src, out [updateRowBuf]types.Datum
	old, new [updateRowBuf]types.Datum
}
