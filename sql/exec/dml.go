package exec

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// The DML operators (INSERT, UPDATE, DELETE). Each runs its whole
// statement on the first Next, as PostgreSQL runs a ModifyTable to
// completion before a portal returns any RETURNING row, then streams the
// RETURNING rows it buffered. Writes go through rowenc.RowWriter into
// kv.Batches of batchSize rows (dml_table.go); constraint checks are NOT
// NULL and CHECK per row, uniqueness by the RowWriter's conditional puts,
// and foreign keys at the end of the statement (dml_fk.go).
//
// The operator reports its count through RowsAffected (Start's affecter).
//
// Reads: UPDATE and DELETE materialize their input before writing, and an
// INSERT whose input reads its own target does too, because a
// transaction's reads see its own writes (no statement snapshot in KV).
// Foreign keys need the tables that reference the target: they come from
// the target's catalog.Table.ReferencedBy, read through Context.Catalog in
// the statement's transaction (the one place the DML executor reads
// descriptors the plan does not carry).
//
// Known limits: constraints are never deferrable (there is no
// DEFERRABLE in the catalog) and foreign keys are MATCH SIMPLE; the
// CONTEXT PostgreSQL gives COPY errors goes in the detail, without the
// input line's text.

// dmlOp runs a DML statement once and streams its RETURNING rows.
type dmlOp struct {
	run   func(ctx context.Context) error
	input op
	out   [][]types.Datum
	next  int
	ran   bool
	err   error
	count int64
}

func (o *dmlOp) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.ran {
		o.ran = true
		o.err = o.run(ctx)
		if o.input != nil {
			o.input.Close()
			o.input = nil
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	if o.next >= len(o.out) {
		return nil, nil
	}
	row := o.out[o.next]
	o.out[o.next] = nil
	o.next++
	return row, nil
}

func (o *dmlOp) Close() {
	if o.input != nil {
		o.input.Close()
		o.input = nil
	}
}

func (o *dmlOp) RowsAffected() int64 { return o.count }

// colsOf is a row layout of the given IDs, for compile.
func colsOf(ids []sem.ColumnID) []plan.Column {
	cols := make([]plan.Column, len(ids))
	for i, id := range ids {
		cols[i] = plan.Column{ID: id}
	}
	return cols
}

// compileAll compiles exprs (nil entries stay nil) over cols.
func (r *runner) compileAll(exprs []sem.Expr, cols []plan.Column) ([]rowFn, error) {
	out := make([]rowFn, len(exprs))
	for i, e := range exprs {
		f, err := r.compile(e, cols)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

// hasExpr reports whether exprs holds an expression (not only nils).
func hasExpr(exprs []sem.Expr) bool {
	return slices.ContainsFunc(exprs, func(e sem.Expr) bool { return e != nil })
}

// compileComputed compiles a table's generated columns (exprs in
// Table.Columns order, padded to n, nil where a column is not
// generated) over cols: nil when no column is (rowWriterSpec.finish
// then computes nothing), without the padded and compiled slices.
func (r *runner) compileComputed(exprs []sem.Expr, n int, cols []plan.Column) ([]rowFn, error) {
	if !hasExpr(exprs) {
		return nil, nil
	}
	return r.compileAll(padExprs(exprs, n), cols)
}

type planCheck struct {
	name string
	// view names the view of a WITH CHECK OPTION condition ("" for a
	// table CHECK).
	view string
	eval rowFn
}

func (r *runner) compileChecks(checks []plan.Check, cols []plan.Column) ([]planCheck, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	out := make([]planCheck, len(checks))
	for i, c := range checks {
		f, err := r.compile(c.Expr, cols)
		if err != nil {
			return nil, err
		}
		out[i] = planCheck{name: c.Name, view: c.View, eval: f}
	}
	// PostgreSQL evaluates a table's CHECKs in name order, so the first
	// failing one by name is the one reported; views' check options come
	// after them (ExecWithCheckOptions runs after ExecConstraints), in the
	// binder's order.
	slices.SortStableFunc(out, func(a, b planCheck) int {
		if (a.view == "") != (b.view == "") {
			if a.view == "" {
				return -1
			}
			return 1
		}
		if a.view == "" {
			return strings.Compare(a.name, b.name)
		}
		return 0
	})
	return out, nil
}

// rowWriterSpec is what the binder compiled for new rows of a table:
// generated columns and CHECKs over the new row (Table.Columns order).
type rowWriterSpec struct {
	ti       *tableInfo
	computed []rowFn
	checks   []planCheck
}

// finish computes generated columns and checks NOT NULL and CHECK on a
// new row, in PostgreSQL's order (ExecConstraints).
func (w *rowWriterSpec) finish(s *dmlState, row []types.Datum) error {
	for i, f := range w.computed {
		if f == nil {
			continue
		}
		d, err := f(row)
		if err != nil {
			return err
		}
		row[i] = d
	}
	if err := w.ti.checkNotNull(s.x, row); err != nil {
		return err
	}
	for _, c := range w.checks {
		d, err := c.eval(row)
		if err != nil {
			return err
		}
		if !checkPasses(d) {
			if c.view != "" {
				return pgerror.New(pgerrcode.WithCheckOptionViolation,
					"new row violates check option for view %q", c.view).
					WithDetail("%s", w.ti.failingRow(s.x, row))
			}
			return w.ti.checkFailed(s.x, c.name, row)
		}
	}
	return nil
}

// readsTable reports whether any node of the plan reads table id: an
// INSERT ... SELECT from its own target must not see its own rows.
func readsTable(p *plan.Plan, root plan.Node, id catalog.ID) bool {
	found := false
	var walk func(n plan.Node)
	walk = func(n plan.Node) {
		if n == nil || found {
			return
		}
		switch n := n.(type) {
		case *plan.Scan:
			found = n.Table != nil && n.Table.ID == id
		case *plan.IndexJoin:
			found = n.Table != nil && n.Table.ID == id
			walk(n.Input)
		case *plan.LookupJoin:
			found = n.Table != nil && n.Table.ID == id
			walk(n.Input)
		case *plan.Filter:
			walk(n.Input)
		case *plan.Project:
			walk(n.Input)
		case *plan.Join:
			walk(n.Left)
			walk(n.Right)
		case *plan.GroupBy:
			walk(n.Input)
		case *plan.Window:
			walk(n.Input)
		case *plan.Sort:
			walk(n.Input)
		case *plan.Limit:
			walk(n.Input)
		case *plan.Distinct:
			walk(n.Input)
		case *plan.SetOp:
			walk(n.Left)
			walk(n.Right)
		case *plan.RecursiveCTE:
			walk(n.Init)
			walk(n.Recursive)
		case *plan.ProjectSet:
			walk(n.Input)
		case *plan.Max1Row:
			walk(n.Input)
		case *plan.Insert:
			walk(n.Input)
		case *plan.Update:
			walk(n.Input)
		case *plan.Delete:
			walk(n.Input)
		case *plan.Values, *plan.VirtualScan, *plan.WorkTable, *plan.CTEScan:
		default:
			// Unknown node: assume it may read the table.
			found = true
		}
	}
	walk(root)
	if p != nil {
		for _, sq := range p.Subqueries {
			if sq != nil {
				walk(sq.Root)
			}
		}
		for _, c := range p.CTEs {
			walk(c)
		}
	}
	return found
}

// --- INSERT ---

// inserter inserts full rows into one table: the plan's INSERT and COPY
// FROM share it.
type inserter struct {
	s    *dmlState
	spec rowWriterSpec
	oc   *conflictSpec
	// returning, when set, is evaluated over each new row.
	returning []rowFn
	out       *[][]types.Datum
	count     *int64
	// generatedKey: the rows' primary key is the table's rowid, filled
	// by its unique_rowid() default (the statement names no rowid), so
	// no row can clash with one the statement did not write but by a
	// key a user chose: the row key's uniqueness is checked when the
	// write is sent, not read at the statement (kv.Batch.CPutGenerated).
	generatedKey bool
}

// insert finishes row (generated columns, constraints), handles ON
// CONFLICT and writes it.
func (in *inserter) insert(ctx context.Context, row []types.Datum) error {
	if err := in.spec.finish(in.s, row); err != nil {
		return err
	}
	return in.insertFinished(ctx, row, nil)
}

// conflictChunk is how many proposed rows ON CONFLICT probes at once.
const conflictChunk = 256

// insertChunk inserts rows with ON CONFLICT, probing the arbiters for the
// whole chunk in one batch. Rows are finished first, up to the first that
// fails, whose error is returned after the rows before it are handled
// (the order PostgreSQL meets them in).
func (in *inserter) insertChunk(ctx context.Context, rows [][]types.Datum) error {
	n, ferr := len(rows), error(nil)
	for i, row := range rows {
		if err := in.spec.finish(in.s, row); err != nil {
			n, ferr = i, err
			break
		}
	}
	probes, err := in.oc.prefetch(ctx, rows[:n])
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := in.insertFinished(ctx, rows[i], probes[i]); err != nil {
			return err
		}
	}
	return ferr
}

// insertFinished inserts a finished row, handling ON CONFLICT with its
// probe (nil: probe now).
func (in *inserter) insertFinished(ctx context.Context, row []types.Datum, p *probe) error {
	s := in.s
	if in.oc != nil {
		done, err := in.oc.handle(ctx, in, row, p)
		if err != nil || done {
			return err
		}
	}
	if err := s.writeRow(ctx, in.spec.ti, nil, row, in.generatedKey); err != nil {
		return err
	}
	if in.oc != nil && in.oc.update {
		if err := in.oc.markWritten(row); err != nil {
			return err
		}
	}
	if err := s.noteWrite(ctx, in.spec.ti, nil, row); err != nil {
		return err
	}
	return in.emit(row)
}

// emit counts a written row and evaluates RETURNING over it.
func (in *inserter) emit(row []types.Datum) error {
	*in.count++
	if in.returning == nil {
		return nil
	}
	out, err := evalRow(in.returning, row)
	if err != nil {
		return err
	}
	*in.out = append(*in.out, out)
	return nil
}

func evalRow(fns []rowFn, row []types.Datum) ([]types.Datum, error) {
	out := make([]types.Datum, len(fns))
	for i, f := range fns {
		d, err := f(row)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (r *runner) buildInsert(n *plan.Insert) (op, error) {
	if n.Table == nil || n.Input == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: INSERT without a table or input")
	}
	s := newDMLState(r.x, r.evalCtx())
	ti, err := s.table(n.Table)
	if err != nil {
		return nil, err
	}
	ncols := len(n.Table.Columns)
	if len(n.TableCols) != ncols {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: INSERT into %q has %d table column IDs for %d columns", n.Table.Name, len(n.TableCols), ncols)
	}
	var rowCols []plan.Column // built only for expressions over the row
	if hasExpr(n.Computed) || len(n.Checks) > 0 || n.Returning != nil {
		rowCols = colsOf(n.TableCols)
	}
	// inPos[j] is the table position input column j fills. A cached
	// plan's are kept, with its compiled defaults and VALUES (kept).
	var inPos []int
	var given []bool
	var defaults []rowFn // or kept.defaults
	kept, err := r.keptInsert(n, ti)
	if err != nil {
		return nil, err
	}
	if kept != nil {
		inPos, given = kept.inPos, kept.given
	} else {
		inPos, given = make([]int, len(n.InsertCols)), make([]bool, ncols)
		for j, id := range n.InsertCols {
			p, ok := ti.colPos(id)
			if !ok {
				return nil, pgerror.New(pgerrcode.InternalError, "exec: INSERT column %d is not in table %q", id, n.Table.Name)
			}
			inPos[j], given[p] = p, true
		}
		defaults = make([]rowFn, ncols)
		for i := 0; i < ncols; i++ {
			if given[i] || i >= len(n.Defaults) || n.Defaults[i] == nil {
				continue
			}
			if defaults[i], err = r.compile(n.Defaults[i], nil); err != nil {
				return nil, err
			}
		}
	}
	o := &dmlOp{}
	in := &inserter{s: s, out: &o.out, count: &o.count}
	in.spec.ti = ti
	if in.spec.computed, err = r.compileComputed(n.Computed, ncols, rowCols); err != nil {
		return nil, err
	}
	if in.spec.checks, err = r.compileChecks(n.Checks, rowCols); err != nil {
		return nil, err
	}
	if n.Returning != nil {
		if in.returning, err = r.compileAll(n.Returning.Exprs, rowCols); err != nil {
			return nil, err
		}
	}
	if n.OnConflict != nil {
		if in.oc, err = r.buildConflict(s, ti, n); err != nil {
			return nil, err
		}
	}
	in.generatedKey = generatedRowIDKey(n, ti, given)
	var input op
	if kept != nil && kept.values != nil {
		input = &valuesOp{ectx: r.evalCtx(), rows: kept.values}
	} else if input, err = r.build(n.Input); err != nil {
		return nil, err
	}
	o.input = input
	materialize := readsTable(r.p, n.Input, n.Table.ID)
	_, values := n.Input.(*plan.Values)
	o.run = func(ctx context.Context) error {
		// Bulk batches still being written end before the statement does,
		// whatever its outcome.
		defer s.waitBulk()
		// INSERT ... SELECT into a table created or truncated in this
		// transaction (CREATE TABLE AS) loads in bulk (bulk.go); ON CONFLICT needs the
		// transactional path's reads, and a VALUES list is too short to
		// pay for moving the table to fresh storage.
		if in.oc == nil && !materialize && !values {
			nt, err := bulkLoadTable(ctx, r.x, n.Table, false)
			if err != nil {
				return err
			}
			if nt != nil {
				s.dropTable(nt.ID)
				s.bulk = true
				if in.spec.ti, err = s.table(nt); err != nil {
					return err
				}
			}
		}
		next := input.Next
		if materialize {
			rows, err := drainCopy(ctx, input)
			if err != nil {
				return err
			}
			i := 0
			next = func(context.Context) ([]types.Datum, error) {
				if i >= len(rows) {
					return nil, nil
				}
				i++
				return rows[i-1], nil
			}
		}
		var chunk [][]types.Datum
		for k := 0; ; k++ {
			if k%checkEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			src, err := next(ctx)
			if err != nil {
				return err
			}
			if src == nil {
				break
			}
			if len(src) < len(inPos) {
				return pgerror.New(pgerrcode.InternalError, "exec: INSERT input row has %d columns for %d target columns", len(src), len(inPos))
			}
			row := make([]types.Datum, ncols)
			for i := range row {
				row[i] = types.DNull
			}
			for j, p := range inPos {
				row[p] = src[j]
			}
			for i := range ncols {
				if kept != nil {
					if i >= len(kept.defaults) || kept.defaults[i] == nil {
						continue
					}
					row[i], err = kept.defaults[i](r.evalCtx(), nil)
				} else {
					if defaults[i] == nil {
						continue
					}
					row[i], err = defaults[i](nil)
				}
				if err != nil {
					if in.oc != nil {
						if cerr := in.insertChunk(ctx, chunk); cerr != nil {
							return cerr
						}
					}
					return err
				}
			}
			if in.oc == nil {
				if err := in.insert(ctx, row); err != nil {
					return err
				}
				continue
			}
			if chunk = append(chunk, row); len(chunk) >= conflictChunk {
				if err := in.insertChunk(ctx, chunk); err != nil {
					return err
				}
				chunk = chunk[:0]
			}
		}
		if len(chunk) > 0 {
			if err := in.insertChunk(ctx, chunk); err != nil {
				return err
			}
		}
		if err := s.flush(ctx); err != nil {
			return err
		}
		return s.finishFKs(ctx)
	}
	return o, nil
}

// generatedRowIDKey reports whether the rows n inserts take their primary
// key from the table's unique_rowid() default: the key is the hidden
// rowid and the statement does not name it (given[i]: table column i is
// an insert column), and no ON CONFLICT probes for it. Such keys are
// unique unless a user chose one (INSERT naming rowid, UPDATE ... SET
// rowid), which the condition still checked when the write is sent
// catches.
func generatedRowIDKey(n *plan.Insert, ti *tableInfo, given []bool) bool {
	id, ok := n.Table.RowIDKey()
	if !ok || n.OnConflict != nil {
		return false
	}
	p, ok := ti.colPos(id)
	return ok && !given[p] && p < len(n.Defaults) && n.Defaults[p] != nil && n.Table.Columns[p].DefaultExpr == catalog.RowIDDefault
}

func padExprs(es []sem.Expr, n int) []sem.Expr {
	if len(es) >= n {
		return es[:n]
	}
	out := make([]sem.Expr, n)
	copy(out, es)
	return out
}

// --- UPDATE and DELETE ---

// inputPositions maps IDs to their position among the input's columns.
func inputPositions(what string, cols []plan.Column, ids []sem.ColumnID) ([]int, error) {
	pos := make(map[sem.ColumnID]int, len(cols))
	for i, c := range cols {
		if _, dup := pos[c.ID]; !dup {
			pos[c.ID] = i
		}
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		p, ok := pos[id]
		if !ok {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: %s column %d is not among the input's columns", what, id)
		}
		out[i] = p
	}
	return out, nil
}

func (r *runner) buildUpdate(n *plan.Update) (op, error) {
	if n.Table == nil || n.Input == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: UPDATE without a table or input")
	}
	s := newDMLState(r.x, r.evalCtx())
	ti, err := s.table(n.Table)
	if err != nil {
		return nil, err
	}
	ncols := len(n.Table.Columns)
	inCols := n.Input.Columns()
	if len(n.FetchCols) != ncols || len(n.TableCols) != ncols || len(n.SetCols) != len(n.NewCols) {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: UPDATE of %q has mismatched column lists", n.Table.Name)
	}
	pos, err := r.updatePositions(n, ti, inCols)
	if err != nil {
		return nil, err
	}
	fetchPos, newPos, setPos := pos.fetch, pos.new, pos.set
	var rowCols []plan.Column // built only for expressions over the row
	if hasExpr(n.Computed) || len(n.Checks) > 0 {
		rowCols = colsOf(n.TableCols)
	}
	spec := rowWriterSpec{ti: ti}
	if spec.computed, err = r.compileComputed(n.Computed, ncols, rowCols); err != nil {
		return nil, err
	}
	if spec.checks, err = r.compileChecks(n.Checks, rowCols); err != nil {
		return nil, err
	}
	// RETURNING sees the new row first, then the input row (UPDATE ...
	// FROM's other tables).
	var returning []rowFn
	if n.Returning != nil {
		if returning, err = r.compileAll(n.Returning.Exprs, append(colsOf(n.TableCols), inCols...)); err != nil {
			return nil, err
		}
	}
	r.lockOnRead = lockingPointScan(n)
	// The UPDATE of one row by its whole primary key (its rows are whole:
	// every column fetched), in a transaction whose later statements read
	// through its write buffer, rewrites a small row whole, so that a
	// read of it later in the transaction (pgbench's SELECT after its
	// UPDATE) is answered from the buffer without a KV round trip
	// (rowenc.RowWriter.WholeRow). Not for an UPDATE of many rows: a
	// range deletion per row would fill the buffer faster and cost a
	// DeleteRange per row at commit, for reads that may not come.
	ti.writer.WholeRow = r.lockOnRead != nil && r.x.Txn != nil && r.x.Txn.BufferServesReads()
	input, err := r.buildPointInput(n.Input)
	r.lockOnRead = nil
	if err != nil {
		return nil, err
	}
	o := &dmlOp{input: input}
	o.run = func(ctx context.Context) error {
		if ti.writer.WholeRow && (r.p == nil || len(r.p.CTEs) == 0) {
			// The only writer of the table in this statement, which
			// reads its one row under its lock: a row read as its row
			// key alone has no column entries for the whole-row
			// rewrite to delete, so the rewrite's deletion of them
			// sends nothing at commit (kv.Batch.DelRangeSeenEmpty).
			ctx = ti.pointDeletes(ctx)
		}
		err := o.eachTarget(ctx, ti, ncols, fetchPos, func(old, src []types.Datum) error {
			nr := append([]types.Datum(nil), old...)
			for i, p := range setPos {
				nr[p] = src[newPos[i]]
			}
			if err := spec.finish(s, nr); err != nil {
				return err
			}
			if err := s.write(ctx, ti, old, nr); err != nil {
				return err
			}
			if err := s.noteWrite(ctx, ti, old, nr); err != nil {
				return err
			}
			o.count++
			if returning != nil {
				out, err := evalRow(returning, append(nr, src...))
				if err != nil {
					return err
				}
				o.out = append(o.out, out)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := s.flush(ctx); err != nil {
			return err
		}
		return s.finishFKs(ctx)
	}
	return o, nil
}

func (r *runner) buildDelete(n *plan.Delete) (op, error) {
	if n.Table == nil || n.Input == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: DELETE without a table or input")
	}
	s := newDMLState(r.x, r.evalCtx())
	ti, err := s.table(n.Table)
	if err != nil {
		return nil, err
	}
	ncols := len(n.Table.Columns)
	inCols := n.Input.Columns()
	if len(n.FetchCols) != ncols {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: DELETE from %q fetches %d of %d columns", n.Table.Name, len(n.FetchCols), ncols)
	}
	fetchPos, err := inputPositions("DELETE fetch", inCols, n.FetchCols)
	if err != nil {
		return nil, err
	}
	var returning []rowFn
	if n.Returning != nil {
		if returning, err = r.compileAll(n.Returning.Exprs, inCols); err != nil {
			return nil, err
		}
	}
	input, err := r.buildPointInput(n.Input)
	if err != nil {
		return nil, err
	}
	o := &dmlOp{input: input}
	o.run = func(ctx context.Context) error {
		if r.p == nil || len(r.p.CTEs) == 0 {
			// The only writer of the table in this statement (no
			// writable CTE): rows its scans read as a lone row key are
			// deleted by point (delete_keyonly.go).
			ctx = ti.pointDeletes(ctx)
		}
		err := o.eachTarget(ctx, ti, ncols, fetchPos, func(old, src []types.Datum) error {
			if err := s.write(ctx, ti, old, nil); err != nil {
				return err
			}
			if err := s.noteWrite(ctx, ti, old, nil); err != nil {
				return err
			}
			o.count++
			if returning != nil {
				out, err := evalRow(returning, src)
				if err != nil {
					return err
				}
				o.out = append(o.out, out)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := s.flush(ctx); err != nil {
			return err
		}
		return s.finishFKs(ctx)
	}
	return o, nil
}

// eachTarget runs an UPDATE's or DELETE's input to the end and calls fn
// once per target row: old is the table row the input fetched (at
// fetchPos), src the input row. The input is materialized first: the
// transaction's reads see its own writes, so writing while scanning could
// meet written rows again. A join may produce a target row more than
// once; Postgres writes it once, so a repeat of a primary key is skipped.
func (o *dmlOp) eachTarget(ctx context.Context, ti *tableInfo, ncols int, fetchPos []int, fn func(old, src []types.Datum) error) error {
	rows, err := drainCopy(ctx, o.input)
	if err != nil {
		return err
	}
	o.input.Close()
	o.input = nil
	// seen skips a row the input returned twice (a join's); one row,
	// pgbench's UPDATE's, needs no map.
	var seen map[string]bool
	if len(rows) > 1 {
		seen = make(map[string]bool, len(rows))
	}
	for k, src := range rows {
		if k%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		old := make([]types.Datum, ncols)
		for i, p := range fetchPos {
			old[i] = src[p]
		}
		key, err := ti.primaryKey(old)
		if err != nil {
			return err
		}
		if seen != nil {
			if seen[string(key)] {
				continue
			}
			seen[string(key)] = true
		}
		if err := fn(old, src); err != nil {
			return err
		}
	}
	return nil
}

// drainCopy runs o to the end and returns copies of its rows: an operator
// may reuse a row's storage once Next is called again.
func drainCopy(ctx context.Context, o op) ([][]types.Datum, error) {
	var rows [][]types.Datum
	for {
		if len(rows)%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		row, err := o.Next(ctx)
		if err != nil {
			return nil, err
		}
		if row == nil {
			return rows, nil
		}
		rows = append(rows, append([]types.Datum(nil), row...))
	}
}
