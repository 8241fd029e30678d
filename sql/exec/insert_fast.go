package exec

import (
	"context"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// The kept INSERT ... VALUES without a runner (issue 22;
// docs/performance.md, item 20). Once a cached plan's INSERT ... VALUES
// has run through Start, its PointCache holds the insert's kept shape
// (insertShape: the target positions, the compiled defaults and VALUES
// items). InsertValues runs the plan again with those alone: no runner,
// operator, Rows or cursor. pgbench's INSERT into pgbench_history built
// them for one row.
//
// What it does is buildInsert's run for a kept VALUES input, through the
// same functions: the same tableInfo (dmlState.table), the items and
// defaults evaluated with the statement's EvalContext in the same order,
// the same inserter (NOT NULL, the generated rowid key, the write and its
// foreign-key work), flush and finishFKs. Whatever buildInsert would have
// compiled per statement is refused (ok false, nothing evaluated or
// written) and the caller starts the plan instead: generated columns,
// CHECKs, RETURNING, ON CONFLICT, CTEs, EXPLAIN ANALYZE, no kept shape or
// another plan's, VALUES that are not kept.

// InsertReady reports whether pc holds a kept INSERT shape with kept
// VALUES items, which InsertValues runs with.
func (pc *PointCache) InsertReady() bool {
	return pc != nil && pc.insert != nil && pc.insert.values != nil
}

// InsertValues runs p, a cached plan's INSERT ... VALUES (its root), in
// x.Txn and returns how many rows it inserted. ok false: it was refused
// before anything was evaluated or written; the caller runs p through
// Start. err is the statement's error, what it wrote left to the
// caller's statement savepoint, as Start's caller does.
func (pc *PointCache) InsertValues(ctx context.Context, x *Context, p *plan.Plan) (count int64, ok bool, err error) {
	n, _ := p.Root.(*plan.Insert)
	if pc == nil || n == nil || x == nil || x.Txn == nil || x.Stats != nil || len(p.CTEs) > 0 || n.Table == nil ||
		n.Returning != nil || n.OnConflict != nil || hasExpr(n.Computed) || len(n.Checks) > 0 {
		return 0, false, nil
	}
	kept := pc.insert
	ncols := len(n.Table.Columns)
	if kept == nil || kept.values == nil || !kept.matches(n) || len(n.TableCols) != ncols {
		return 0, false, nil
	}
	// The runner's EvalContext (newRunner), without its subqueries: the
	// kept items and defaults read none (readsNoRow).
	u := &insertScratch{}
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
	defer s.waitBulk()
	in := &u.in
	*in = inserter{s: s, out: &u.out, count: &count}
	in.spec.ti = ti
	in.generatedKey = generatedRowIDKey(n, ti, kept.given)
	for k, evs := range kept.values {
		if k%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return 0, true, err
			}
		}
		// valuesOp's row, then buildInsert's.
		src := make([]types.Datum, len(evs))
		for j, e := range evs {
			if src[j], err = e(ev, nil); err != nil {
				return 0, true, err
			}
		}
		if len(src) < len(kept.inPos) {
			return 0, true, pgerror.New(pgerrcode.InternalError, "exec: INSERT input row has %d columns for %d target columns", len(src), len(kept.inPos))
		}
		row := make([]types.Datum, ncols)
		for i := range row {
			row[i] = types.DNull
		}
		for j, p := range kept.inPos {
			row[p] = src[j]
		}
		for i := range ncols {
			if i >= len(kept.defaults) || kept.defaults[i] == nil {
				continue
			}
			if row[i], err = kept.defaults[i](ev, nil); err != nil {
				return 0, true, err
			}
		}
		if err := in.insert(ctx, row); err != nil {
			return 0, true, err
		}
	}
	if err := s.flush(ctx); err != nil {
		return 0, true, err
	}
	return count, true, s.finishFKs(ctx)
}

// insertScratch is one InsertValues's state, one object.
type insertScratch struct {
	ev  sem.EvalContext
	s   dmlState
	in  inserter
	out [][]types.Datum
}
