package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/hlc"
	keyspkg "github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// This file holds what every row-writing path (INSERT, UPDATE, DELETE,
// ON CONFLICT, COPY FROM and the foreign-key actions) knows about one
// table: its layout and RowWriter, the expressions its descriptor keeps as
// SQL text (defaults, generated columns, CHECKs, partial-index predicates)
// compiled over the table's row, and the point and prefix reads the
// constraint checks need. Rows are always full rows in Table.Columns order.

// tableInfo is one table as the DML of one statement writes it.
type tableInfo struct {
	desc   *catalog.Table
	layout *rowenc.TableLayout
	writer rowenc.RowWriter
	// keyOnly is the set pointDeletes hands writer and the scans.
	keyOnly rowenc.KeyOnlyRows
	// moveWriter, while a job moves the table (catalog.TableMove), keeps
	// the move's target in step with every row change (catalog.MoveWrite).
	moveWriter *rowenc.RowWriter
	// moveConv, when the move is a rewrite (catalog.TableMove.Target),
	// converts the table's rows to the target's columns for moveWriter.
	moveConv func(old []types.Datum) ([]types.Datum, error)
	// partial holds the compiled predicate of each partial index, by ID.
	partial map[uint32]sem.Evaluator
	// sorted is the bulk load's stream of primary-index keys (sortedRun).
	sorted *kv.SortedStream

	// Built on demand from the descriptor's SQL text (COPY and the
	// foreign-key actions, which have no binder-built expressions), with
	// the type context of state, the statement's dmlState.
	state         *dmlState
	textBuilt     bool
	defaults      []sem.Evaluator // nil entry: NULL
	defaultsBuilt []bool
	computed      []sem.Evaluator // nil entry: not generated
	checks        []compiledCheck

	// out are the foreign keys of this table (it is the child); in are
	// the foreign keys of other tables referencing it (loaded on demand).
	out    []*fkInfo
	in     []*fkInfo
	inDone bool

	// resolvedAt is the statement's read timestamp when it took desc;
	// validating says the transaction checks at commit that desc is
	// still current (registered at the table's first row write).
	resolvedAt hlc.Timestamp
	validating bool
}

// colPos returns column id's position in the table's rows: the layout's
// (catalog.Table.Layout lists desc.Columns in their order), shared with
// every statement of the descriptor, where each statement built a map of
// its own.
func (ti *tableInfo) colPos(id rowenc.ColumnID) (int, bool) {
	p := ti.layout.ColumnPos(id)
	return p, p >= 0
}

type compiledCheck struct {
	name string
	eval sem.Evaluator
}

// tableScope resolves column names of one table to their row positions,
// for the expressions a descriptor keeps as text.
type tableScope struct{ t *catalog.Table }

func (s tableScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	name := fields[len(fields)-1]
	if len(fields) > 2 || (len(fields) == 2 && fields[0] != s.t.Name) {
		return 0, nil, "", sem.ErrUndefinedColumn(fields...)
	}
	for i, c := range s.t.Columns {
		if c.Name == name {
			return sem.ColumnID(i), c.Type, name, nil
		}
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

// buildTextExpr builds a descriptor's SQL expression text over t's row
// (ColumnIDs are row positions). want nil builds as is; assignCol >= 0
// coerces to that column's type as an assignment would.
func buildTextExpr(t *catalog.Table, text string, want *types.T, assignCol int, tctx *types.Context) (sem.Expr, error) {
	stmts, err := parser.Parse("SELECT " + text)
	if err != nil || len(stmts) != 1 {
		return nil, fmt.Errorf("table %q: parsing expression %q: %w", t.Name, text, err)
	}
	sel := stmts[0].AST.GetStmt().GetSelectStmt()
	if sel == nil || len(sel.TargetList) != 1 {
		return nil, fmt.Errorf("table %q: expression %q is not one expression", t.Name, text)
	}
	node := sel.TargetList[0].GetResTarget().GetVal()
	// The session's type context resolves reg* literals
	// ('t_id_seq'::regclass) as the binder's would.
	bc := sem.BuildContext{Scope: tableScope{t}, Types: tctx}
	if assignCol >= 0 {
		c := t.Columns[assignCol]
		return sem.BuildAssign(bc, node, c.Type, c.Name)
	}
	return sem.Build(bc, node, want)
}

// dmlState is the per-statement state shared by every table a statement
// writes (the target and the tables foreign-key actions reach).
type dmlState struct {
	x *Context
	// ev is what expressions evaluate with (the runner's, which answers
	// subqueries, or the session's for COPY).
	ev *sem.EvalContext
	// tctx is the session's type context (time zone, reg* names), for
	// expressions built here from descriptor text; made on first use
	// (typesCtx), since the session makes its reg* resolver for it and
	// most statements build no such expression (tctxSet: taken or set).
	tctx    *types.Context
	tctxSet bool
	// first is the first table the statement wrote, tables the others
	// (made on first use: most statements write one table, and the map
	// was two objects per statement).
	first  *tableInfo
	tables map[catalog.ID]*tableInfo

	batch      *kv.Batch
	batchTable *tableInfo
	batchRows  int

	// copyLines (COPY FROM) records the input line of every row in the
	// pending batch, so a failed uniqueness condition names the line of
	// the row that failed (curLine is the line being written).
	copyLines  bool
	curLine    int
	batchLines []lineRow

	// bulk: the rows go to fresh storage as committed values (bulk.go);
	// bulkErr is what kv.BulkWrites refused; bulkWrites is the one the
	// row being written goes through.
	bulk       bool
	bulkErr    error
	bulkWrites kv.BulkWrites
	// inflight are the bulk batches being written, oldest first, at most
	// bulkWriters of them (startBulk).
	inflight []*bulkWrite

	// Deferred foreign-key work, run at the end of the statement as
	// PostgreSQL's RI triggers are (after every row is written, so rows of
	// one statement may reference each other).
	childChecks  []childCheck
	parentEvents []parentEvent
}

// batchSize is how many row changes go in one KV batch.
const batchSize = 1000

func newDMLState(x *Context, ev *sem.EvalContext) *dmlState {
	if ev == nil {
		ev = x.Eval
	}
	if ev == nil {
		ev = &sem.EvalContext{}
	}
	return &dmlState{x: x, ev: ev}
}

// lookupTable returns the statement's tableInfo of table id, if any.
func (s *dmlState) lookupTable(id catalog.ID) (*tableInfo, bool) {
	if s.first != nil && s.first.desc.ID == id {
		return s.first, true
	}
	ti, ok := s.tables[id]
	return ti, ok
}

// addTable records ti as the statement's tableInfo of its table.
func (s *dmlState) addTable(ti *tableInfo) {
	if s.first == nil || s.first.desc.ID == ti.desc.ID {
		s.first = ti
		return
	}
	if s.tables == nil {
		s.tables = map[catalog.ID]*tableInfo{}
	}
	s.tables[ti.desc.ID] = ti
}

// dropTable forgets the statement's tableInfo of table id.
func (s *dmlState) dropTable(id catalog.ID) {
	if s.first != nil && s.first.desc.ID == id {
		s.first = nil
		return
	}
	delete(s.tables, id)
}

// allTables returns the statement's tableInfos.
func (s *dmlState) allTables() []*tableInfo {
	var out []*tableInfo
	if s.first != nil {
		out = append(out, s.first)
	}
	for _, ti := range s.tables {
		out = append(out, ti)
	}
	return out
}

// typesCtx returns the statement's type context, taking it from the
// session the first time.
func (s *dmlState) typesCtx() *types.Context {
	if !s.tctxSet {
		s.tctx, s.tctxSet = typesCtx(s.x), true
	}
	return s.tctx
}

// setTypesCtx makes tc the statement's type context (COPY's).
func (s *dmlState) setTypesCtx(tc *types.Context) { s.tctx, s.tctxSet = tc, true }

// table returns the statement's tableInfo for desc.
func (s *dmlState) table(desc *catalog.Table) (*tableInfo, error) {
	if ti, ok := s.lookupTable(desc.ID); ok {
		return ti, nil
	}
	layout, err := desc.SharedLayout()
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", desc.Name, err)
	}
	ti := &tableInfo{desc: desc, layout: layout, state: s}
	if s.x.Txn != nil {
		ti.resolvedAt = s.x.Txn.ReadTimestamp()
	}
	ti.writer = rowenc.RowWriter{
		Table:           layout,
		PackedRows:      s.x.PackedRows && desc.RowFormat.Packed,
		PackedSizeLimit: s.x.PackedSizeLimit,
	}
	if s.bulk {
		// A bulk load's keys and rows live until their batch is
		// written: carved from chunks, not allocated one by one.
		ti.writer.Arena = &rowenc.ByteArena{}
	}
	for i := range desc.Indexes {
		idx := &desc.Indexes[i]
		if idx.Predicate == "" {
			continue
		}
		e, err := buildTextExpr(desc, idx.Predicate, types.Bool, -1, s.typesCtx())
		if err != nil {
			return nil, fmt.Errorf("index %q predicate: %w", idx.Name, err)
		}
		ev, err := sem.Compile(e, nil)
		if err != nil {
			return nil, fmt.Errorf("index %q predicate: %w", idx.Name, err)
		}
		if ti.partial == nil {
			ti.partial = map[uint32]sem.Evaluator{}
		}
		ti.partial[uint32(idx.ID)] = ev
	}
	if ti.partial != nil {
		ti.writer.InPartialIndex = func(idx *rowenc.IndexLayout, row []types.Datum) (bool, error) {
			ev := ti.partial[idx.ID]
			if ev == nil {
				return true, nil
			}
			d, err := ev(s.ev, row)
			if err != nil {
				return false, err
			}
			b, ok := d.(types.DBool)
			return ok && bool(b), nil
		}
	}
	if desc.Move != nil {
		ml, err := desc.MoveLayout()
		if err != nil {
			return nil, fmt.Errorf("table %q move target: %w", desc.Name, err)
		}
		mw := ti.writer
		mw.Table, mw.KeyOnly = ml, nil
		if desc.Move.Target != nil {
			if err := s.rewriteTarget(ti, &mw); err != nil {
				return nil, fmt.Errorf("table %q rewrite target: %w", desc.Name, err)
			}
		}
		ti.moveWriter = &mw
	}
	s.addTable(ti)
	for i := range desc.ForeignKeys {
		fk, err := s.newFK(ti, &desc.ForeignKeys[i])
		if err != nil {
			return nil, err
		}
		ti.out = append(ti.out, fk)
	}
	return ti, nil
}

// rewriteTarget prepares ti to maintain the target of a rewrite
// (catalog.TableMove.Target): rows are converted to the target's columns
// (its new shard columns computed from the row), and mw's partial-index
// predicates are compiled over the target's rows.
func (s *dmlState) rewriteTarget(ti *tableInfo, mw *rowenc.RowWriter) error {
	desc := ti.desc
	target, err := desc.MoveTarget()
	if err != nil {
		return err
	}
	conv, err := catalog.RowConv(desc, target, func(c *catalog.Column) (func([]types.Datum) (types.Datum, error), error) {
		e, err := buildTextExpr(desc, c.ComputedExpr, nil, -1, s.typesCtx())
		if err != nil {
			return nil, err
		}
		if e, err = sem.CoerceToAssign(e, c.Type, c.Name); err != nil {
			return nil, err
		}
		ev, err := sem.Compile(e, nil)
		if err != nil {
			return nil, err
		}
		return func(row []types.Datum) (types.Datum, error) { return ev(s.ev, row) }, nil
	})
	if err != nil {
		return err
	}
	preds := map[uint32]sem.Evaluator{}
	for i := range target.Indexes {
		idx := &target.Indexes[i]
		if idx.Predicate == "" {
			continue
		}
		e, err := buildTextExpr(target, idx.Predicate, types.Bool, -1, s.typesCtx())
		if err != nil {
			return fmt.Errorf("index %q predicate: %w", idx.Name, err)
		}
		if preds[uint32(idx.ID)], err = sem.Compile(e, nil); err != nil {
			return fmt.Errorf("index %q predicate: %w", idx.Name, err)
		}
	}
	mw.InPartialIndex = func(idx *rowenc.IndexLayout, row []types.Datum) (bool, error) {
		ev := preds[idx.ID]
		if ev == nil {
			return true, nil
		}
		d, err := ev(s.ev, row)
		if err != nil {
			return false, err
		}
		b, ok := d.(types.DBool)
		return ok && bool(b), nil
	}
	ti.moveConv = conv
	return nil
}

// tableByID reads a table descriptor in the statement's transaction.
func (s *dmlState) tableByID(ctx context.Context, id catalog.ID) (*tableInfo, error) {
	if ti, ok := s.lookupTable(id); ok {
		return ti, nil
	}
	if s.x.Catalog == nil {
		return nil, fmt.Errorf("exec: no catalog to read table %d", id)
	}
	desc, err := s.x.Catalog.TableByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.table(desc)
}

// buildText compiles the table's generated columns and CHECKs from the
// descriptor's SQL text (the binder does this for INSERT and UPDATE; COPY
// and the foreign-key actions need it here).
func (ti *tableInfo) buildText() error {
	if ti.textBuilt {
		return nil
	}
	t := ti.desc
	ti.computed = make([]sem.Evaluator, len(t.Columns))
	for i, c := range t.Columns {
		if c.ComputedExpr == "" {
			continue
		}
		e, err := buildTextExpr(t, c.ComputedExpr, nil, i, ti.state.typesCtx())
		if err != nil {
			return fmt.Errorf("column %q generation expression: %w", c.Name, err)
		}
		if ti.computed[i], err = sem.Compile(e, nil); err != nil {
			return fmt.Errorf("column %q generation expression: %w", c.Name, err)
		}
	}
	for _, ck := range t.Checks {
		e, err := buildTextExpr(t, ck.Expr, types.Bool, -1, ti.state.typesCtx())
		if err != nil {
			return fmt.Errorf("check constraint %q: %w", ck.Name, err)
		}
		ev, err := sem.Compile(e, nil)
		if err != nil {
			return fmt.Errorf("check constraint %q: %w", ck.Name, err)
		}
		ti.checks = append(ti.checks, compiledCheck{name: ck.Name, eval: ev})
	}
	sort.SliceStable(ti.checks, func(i, j int) bool { return ti.checks[i].name < ti.checks[j].name })
	ti.textBuilt = true
	return nil
}

// defaultEval compiles column i's default from the descriptor's text on
// first use (nil: the default is NULL). Only the defaults a statement uses
// are built: one may name an object the statement never needs.
func (ti *tableInfo) defaultEval(i int) (sem.Evaluator, error) {
	if ti.defaults == nil {
		ti.defaults = make([]sem.Evaluator, len(ti.desc.Columns))
		ti.defaultsBuilt = make([]bool, len(ti.desc.Columns))
	}
	if ti.defaultsBuilt[i] {
		return ti.defaults[i], nil
	}
	c := ti.desc.Columns[i]
	def := c.DefaultExpr
	if def == "" && c.Identity != "" && c.SequenceID != 0 {
		// An identity column's default is its sequence (descriptor IDs are
		// the OIDs regclass names).
		def = fmt.Sprintf("nextval(%d::regclass)", c.SequenceID)
	}
	if def != "" && c.ComputedExpr == "" {
		e, err := buildTextExpr(ti.desc, def, nil, i, ti.state.typesCtx())
		if err != nil {
			return nil, fmt.Errorf("column %q default: %w", c.Name, err)
		}
		if ti.defaults[i], err = sem.Compile(e, nil); err != nil {
			return nil, fmt.Errorf("column %q default: %w", c.Name, err)
		}
	}
	ti.defaultsBuilt[i] = true
	return ti.defaults[i], nil
}

// failingRow formats a row as PostgreSQL's "Failing row contains (...)"
// detail does: every column's output text, null for NULL, each value
// clipped to 64 bytes.
func (ti *tableInfo) failingRow(x *Context, row []types.Datum) string {
	var b strings.Builder
	b.WriteString("Failing row contains (")
	first := true
	for i, c := range ti.desc.Columns {
		if c.Hidden {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		if types.IsNull(row[i]) {
			b.WriteString("null")
			continue
		}
		b.WriteString(clip(types.Format(typesCtx(x), c.Type, row[i]), 64))
	}
	b.WriteString(").")
	return b.String()
}

// clip cuts s to at most n bytes at a character boundary, as
// pg_mbcliplen does.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !isRuneStart(s[i]) {
		i--
	}
	return s[:i]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func typesCtx(x *Context) *types.Context {
	if x.Eval != nil && x.Eval.Fn != nil {
		return x.Eval.Fn.Types()
	}
	return nil
}

// checkNotNull fails with 23502 for the first NOT NULL column holding NULL.
func (ti *tableInfo) checkNotNull(x *Context, row []types.Datum) error {
	for i, c := range ti.desc.Columns {
		if !c.Nullable && types.IsNull(row[i]) {
			return pgerror.New(pgerrcode.NotNullViolation,
				"null value in column %q of relation %q violates not-null constraint", c.Name, ti.desc.Name).
				WithDetail("%s", ti.failingRow(x, row)).
				WithTable(ti.schemaName(x), ti.desc.Name).WithColumn(c.Name)
		}
	}
	return nil
}

// checkFailed is the 23514 error of CHECK constraint name.
func (ti *tableInfo) checkFailed(x *Context, name string, row []types.Datum) error {
	return pgerror.New(pgerrcode.CheckViolation,
		"new row for relation %q violates check constraint %q", ti.desc.Name, name).
		WithDetail("%s", ti.failingRow(x, row)).
		WithTable(ti.schemaName(x), ti.desc.Name).WithConstraint(name)
}

// schemaName names ti's schema in errors; "" when it cannot be read. Only
// error paths call it, so the lookup costs nothing otherwise.
func (ti *tableInfo) schemaName(x *Context) string {
	if x == nil || x.Catalog == nil {
		return ""
	}
	d, err := x.Catalog.ByID(context.Background(), ti.desc.SchemaID)
	if err != nil {
		return ""
	}
	if sc, ok := d.(*catalog.Schema); ok {
		return sc.Name
	}
	return ""
}

// checkPasses is a CHECK's verdict: only false fails (NULL passes).
func checkPasses(d types.Datum) bool {
	b, ok := d.(types.DBool)
	return !ok || bool(b)
}

// applyText fills generated columns and checks NOT NULL and CHECK
// constraints of row with the descriptor's own expressions.
func (ti *tableInfo) applyText(s *dmlState, row []types.Datum) error {
	x := s.x
	if err := ti.buildText(); err != nil {
		return err
	}
	for i, ev := range ti.computed {
		if ev == nil {
			continue
		}
		d, err := ev(s.ev, row)
		if err != nil {
			return err
		}
		row[i] = d
	}
	if err := ti.checkNotNull(x, row); err != nil {
		return err
	}
	for _, ck := range ti.checks {
		d, err := ck.eval(s.ev, row)
		if err != nil {
			return err
		}
		if !checkPasses(d) {
			return ti.checkFailed(x, ck.name, row)
		}
	}
	return nil
}

// --- writing ---

// write adds one row change to the statement's batch (old nil inserts,
// new nil deletes), flushing first when the batch is full or belongs to
// another table (a batch holds one table's writes so that a failed
// uniqueness condition is reported against the right table).
func (s *dmlState) write(ctx context.Context, ti *tableInfo, old, new []types.Datum) error {
	return s.writeRow(ctx, ti, old, new, false)
}

// writeRow is write; generated says an insert's primary key is a
// unique_rowid() the statement generated (inserter.generatedKey), which
// the row writer sends as such (rowenc.RowWriter.InsertGenerated).
func (s *dmlState) writeRow(ctx context.Context, ti *tableInfo, old, new []types.Datum, generated bool) error {
	if !ti.validating && s.x.Txn != nil {
		// The row is shaped by desc: a schema change of the table that
		// commits before this transaction does must fail its commit
		// (kv/txn_validate.go), or the row could miss what the change
		// built (a new index) or land where it no longer looks.
		s.x.Txn.ValidateAtCommit(catalog.WriterKey(ti.desc.ID, ti.desc.Version), ti.resolvedAt)
		ti.validating = true
	}
	limit := batchSize
	if s.bulk {
		limit = bulkBatchRows
	}
	if s.batch != nil && (s.batchTable != ti || s.batchRows >= limit) {
		flush := s.flush
		if s.bulk {
			// Written in the background while the next batch fills.
			flush = s.startBulk
		}
		if err := flush(ctx); err != nil {
			return err
		}
	}
	if s.batch == nil {
		s.batch, s.batchTable, s.batchRows = &kv.Batch{}, ti, 0
	}
	s.batchRows++
	if s.copyLines && new != nil {
		s.batchLines = append(s.batchLines, lineRow{line: s.curLine, row: new})
	}
	if s.bulk {
		if ti.moveWriter != nil {
			// bulkLoadTable never loads a moving table in bulk.
			return fmt.Errorf("exec: bulk load into table %q, which a job is moving", ti.desc.Name)
		}
		// Passed by pointer to a field: a BulkWrites value made an
		// interface allocated once per row.
		s.bulkWrites = kv.BulkWrites{Batch: s.batch, Err: &s.bulkErr}
		if err := ti.writer.Write(&s.bulkWrites, old, new); err != nil {
			return err
		}
		return s.bulkErr
	}
	write := ti.writer.Write
	if generated && old == nil {
		write = func(b rowenc.Writes, _, new []types.Datum) error { return ti.writer.InsertGenerated(b, new) }
	}
	if err := write(s.batch, old, new); err != nil {
		return err
	}
	if ti.moveWriter != nil {
		mo, mn := old, new
		if ti.moveConv != nil {
			var err error
			if mo, err = ti.moveConv(old); err != nil {
				return err
			}
			if mn, err = ti.moveConv(new); err != nil {
				return err
			}
		}
		if err := catalog.MoveWrite(ti.moveWriter, s.batch, mo, mn); err != nil {
			return err
		}
	}
	return s.lockUpdated(ti, old, new)
}

// lineRow is a row of the pending batch and the COPY input line it came
// from.
type lineRow struct {
	line int
	row  []types.Datum
}

// lineOf finds the COPY line of the pending row whose primary key or
// unique index entry is key: the last such row, since when two rows of
// the batch share the key it is the second that failed.
func (s *dmlState) lineOf(ti *tableInfo, key []byte) (int, bool) {
	return lineOfKey(ti, s.batchLines, key, true)
}

// lineOfKey finds the line of the last (or first) row of lines whose
// primary key or unique index entry is key.
func lineOfKey(ti *tableInfo, lines []lineRow, key []byte, last bool) (int, bool) {
	for n := range lines {
		j := n
		if last {
			j = len(lines) - 1 - n
		}
		lr := lines[j]
		if k, err := ti.primaryKey(lr.row); err == nil && string(k) == string(key) {
			return lr.line, true
		}
		for i := range ti.layout.Secondary {
			idx := &ti.layout.Secondary[i]
			if !idx.Unique {
				continue
			}
			if e, err := ti.layout.EncodeIndexEntry(idx, lr.row); err == nil && string(e.Key) == string(key) {
				return lr.line, true
			}
		}
	}
	return 0, false
}

// flush runs the pending batch in the transaction and, for a bulk load,
// waits for every batch still being written: what follows (foreign-key
// checks, reads, the end of the statement) sees all the rows.
func (s *dmlState) flush(ctx context.Context) error {
	if s.bulk {
		if err := s.startBulk(ctx); err != nil {
			s.waitBulk()
			return err
		}
		for _, ti := range s.allTables() {
			if err := s.flushSorted(ctx, ti); err != nil {
				s.waitBulk()
				return err
			}
		}
		return s.finishBulk(ctx, 0)
	}
	b, ti := s.batch, s.batchTable
	s.batch, s.batchTable, s.batchRows = nil, nil, 0
	lines := s.batchLines
	s.batchLines = s.batchLines[:0]
	if b == nil || b.Len() == 0 {
		return nil
	}
	if err := s.x.Txn.Run(ctx, b); err != nil {
		return s.writeError(ti, err, lines, nil)
	}
	return nil
}

// writeError converts a failed batch's error for the client: SQLSTATE,
// table, and for COPY the line of the row that failed. later are the
// bulk batches that were written beside it and succeeded: a duplicate
// key one of them wrote first, the row of the failed batch being the
// first of the two in the input, is reported at that batch's row, which
// PostgreSQL, inserting in input order, would have refused.
func (s *dmlState) writeError(ti *tableInfo, err error, lines []lineRow, later [][]lineRow) error {
	conv := ti.layout.ConvertWriteError(err)
	if pe, ok := conv.(*pgerror.Error); ok && pe.TableName != "" {
		conv = pe.WithTable(ti.schemaName(s.x), pe.TableName)
	}
	if cf, ok := errors.AsType[*kvpb.ConditionFailedError](err); ok && s.copyLines {
		for _, l := range later {
			if line, ok := lineOfKey(ti, l, cf.Key, false); ok {
				return copyLineError(conv, ti.desc.Name, line, "", "")
			}
		}
		if line, ok := lineOfKey(ti, lines, cf.Key, true); ok {
			conv = copyLineError(conv, ti.desc.Name, line, "", "")
		}
	}
	return conv
}

// Parallel bulk writes (issue #18). A bulk load's batches are written
// outside the transaction (kv.Txn.RunBulk, safe to call concurrently), so
// the statement need not wait for one before filling the next: up to
// bulkWriters batches are in flight at once, each split by the DistSender
// into one request per tablet, sent in parallel. Atomicity is the bulk
// path's own: the rows are reachable only through the descriptor version
// the transaction writes, so a failure anywhere fails the statement, and
// what any batch wrote is cleared with the rest (sql/bulkclean). Every
// batch is waited for before the statement returns, success or not, so
// nothing lands after that clear. Two batches writing one key meet in
// the tablet's latches, and the second fails its MustNotExist check.

// bulkWriters bounds the bulk batches in flight.
var bulkWriters = max(2, min(runtime.GOMAXPROCS(0), 4))

// bulkWrite is one bulk batch being written.
type bulkWrite struct {
	ti    *tableInfo
	lines []lineRow
	done  chan struct{}
	err   error
	// run: part of the batch is a sorted run, ingested as SSTs.
	run bool
}

// runsInflight reports whether a batch in flight carries a sorted run.
func (s *dmlState) runsInflight() bool {
	for _, w := range s.inflight {
		if w.run {
			return true
		}
	}
	return false
}

// startBulk sends the pending batch in the background, first waiting
// for the oldest batch in flight when bulkWriters are.
func (s *dmlState) startBulk(ctx context.Context) error {
	b, ti := s.batch, s.batchTable
	s.batch, s.batchTable, s.batchRows = nil, nil, 0
	lines := slices.Clone(s.batchLines)
	s.batchLines = s.batchLines[:0]
	if b == nil || b.Len() == 0 {
		return nil
	}
	if len(s.inflight) >= bulkWriters {
		if err := s.finishBulk(ctx, bulkWriters-1); err != nil {
			return err
		}
	}
	run, err := ti.sortedRun(ctx, s.x.Txn, b)
	if err != nil {
		return err
	}
	if run == nil && ti.sorted.Broken() {
		// The stream broke: this batch's puts of the primary index go
		// as BulkPuts and may repeat a key of a run still in flight,
		// or of the SST the stream was filling, whose ingestion checks
		// nothing. Once they are in, the BulkPut's uniqueness check
		// finds any such key.
		if err := s.flushSorted(ctx, ti); err != nil {
			return err
		}
	}
	if run == nil && ti.sorted.Broken() && s.runsInflight() {
		if err := s.finishBulk(ctx, 0); err != nil {
			return err
		}
	}
	w := &bulkWrite{ti: ti, lines: lines, done: make(chan struct{}), run: run != nil}
	s.inflight = append(s.inflight, w)
	txn := s.x.Txn
	go func() {
		defer close(w.done)
		w.err = txn.RunBulkSorted(ctx, b, run)
	}()
	return nil
}

// sortedRun takes out of b the table's primary-index puts when they
// continue the load's primary-key order (kv.SortedStream): a COPY whose
// input is in key order (pgbench's accounts, a dump's tables) has its
// rows ingested as SSTs, and only its other indexes' entries go as
// BulkPuts. The bulk path writes only fresh storage no one else reaches,
// which is what the stream needs. Called in batch order, on the
// statement's goroutine.
func (ti *tableInfo) sortedRun(ctx context.Context, txn *kv.Txn, b *kv.Batch) (*kv.SortedRun, error) {
	if ti.sorted == nil {
		sp := ti.layout.IndexSpan(&ti.layout.Primary)
		ti.sorted = &kv.SortedStream{In: func(k []byte) bool {
			return bytes.Compare(k, sp.Key) >= 0 && bytes.Compare(k, sp.EndKey) < 0
		}}
	}
	return ti.sorted.Take(ctx, txn, b)
}

// flushSorted ingests the SST that ti's sorted stream is filling (the
// stream fills one across batches, kv.SortedStream), as a bulk write of
// its own in flight, so that what waits for the writes in flight
// (finishBulk) also waits for it.
func (s *dmlState) flushSorted(ctx context.Context, ti *tableInfo) error {
	if ti == nil || ti.sorted == nil {
		return nil
	}
	run, err := ti.sorted.Flush()
	if err != nil || run == nil {
		return err
	}
	w := &bulkWrite{ti: ti, done: make(chan struct{}), run: true}
	s.inflight = append(s.inflight, w)
	txn := s.x.Txn
	go func() {
		defer close(w.done)
		w.err = txn.RunBulkSorted(ctx, &kv.Batch{}, run)
	}()
	return nil
}

// finishBulk waits until at most keep batches are in flight, oldest
// first; on a failure it waits for every batch and returns the error of
// the oldest failed one.
func (s *dmlState) finishBulk(ctx context.Context, keep int) error {
	for len(s.inflight) > keep {
		w := s.inflight[0]
		<-w.done
		if w.err != nil {
			rest := s.inflight[1:]
			s.waitBulk()
			var later [][]lineRow
			for _, o := range rest {
				if o.err == nil && o.ti == w.ti {
					later = append(later, o.lines)
				}
			}
			return s.writeError(w.ti, w.err, w.lines, later)
		}
		s.inflight = s.inflight[1:]
	}
	return nil
}

// waitBulk waits for every batch in flight, whatever their outcome: a
// failed statement must not leave writes landing after it returned.
func (s *dmlState) waitBulk() {
	for _, w := range s.inflight {
		<-w.done
	}
	s.inflight = nil
}

// --- reading ---

// primaryKey is the primary-index row key of row.
func (ti *tableInfo) primaryKey(row []types.Datum) ([]byte, error) {
	return ti.layout.PrimaryKey(nil, row)
}

// fetchByPrimaryKeys reads the rows at the given row keys (nil entries for
// rows that do not exist), one scan per row in one batch.
func (s *dmlState) fetchByPrimaryKeys(ctx context.Context, ti *tableInfo, rowKeys [][]byte) ([][]types.Datum, error) {
	out := make([][]types.Datum, len(rowKeys))
	if len(rowKeys) == 0 {
		return out, nil
	}
	b := &kv.Batch{}
	for _, k := range rowKeys {
		b.Scan(k, keyspkg.PrefixEnd(k), 0)
	}
	if err := s.x.Txn.Run(ctx, b); err != nil {
		return nil, err
	}
	for i := range rowKeys {
		rows, err := s.decodePrimary(ti, b.Results[i].Rows)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			out[i] = rows[0]
		}
	}
	return out, nil
}

func (s *dmlState) decodePrimary(ti *tableInfo, kvs []kvpb.KeyValue) ([][]types.Datum, error) {
	f, err := rowenc.NewRowFetcher(ti.layout, &ti.layout.Primary, nil)
	if err != nil {
		return nil, err
	}
	rows, err := f.DecodeRows(kvs)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", ti.desc.Name, err)
	}
	return rows, nil
}

// scanAll reads every row of the table (in pages) and calls emit for each.
func (s *dmlState) scanAll(ctx context.Context, ti *tableInfo, emit func(row []types.Datum) error) error {
	f, err := rowenc.NewRowFetcher(ti.layout, &ti.layout.Primary, nil)
	if err != nil {
		return err
	}
	span := ti.layout.IndexSpan(&ti.layout.Primary)
	return scanPages(ctx, s.x.Txn, span.Key, span.EndKey, f, emit)
}

// lookupChunk is how many keys one batch of foreign-key lookups holds.
const lookupChunk = 2000

// scanPageSize is how many KVs one read of a long scan returns.
const scanPageSize = 10000

// scanPages feeds [start, end) to f page by page.
func scanPages(ctx context.Context, txn *kv.Txn, start, end []byte, f *rowenc.RowFetcher, emit func(row []types.Datum) error) error {
	for {
		kvs, err := txn.Scan(ctx, start, end, scanPageSize)
		if err != nil {
			return err
		}
		if err := f.Add(kvs, emit); err != nil {
			return err
		}
		if len(kvs) < scanPageSize {
			return f.Finish(emit)
		}
		start = keyspkg.Next(kvs[len(kvs)-1].Key)
	}
}

// findRows returns the rows of ti whose columns at positions pos equal
// vals (every val non-NULL).
func (s *dmlState) findRows(ctx context.Context, ti *tableInfo, pos []int, vals []types.Datum) ([][]types.Datum, error) {
	out, err := s.findRowsMulti(ctx, ti, pos, [][]types.Datum{vals})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// findRowsMulti is findRows for many keys at once: out[i] holds the rows
// matching keys[i]. It reads through an index whose leading key columns
// are exactly the columns at pos when one exists (one prefix scan per key,
// all in one batch, then one batch of primary-row reads for a secondary
// index), else by one scan of the table matched against every key.
func (s *dmlState) findRowsMulti(ctx context.Context, ti *tableInfo, pos []int, keys [][]types.Datum) ([][][]types.Datum, error) {
	out := make([][][]types.Datum, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	idx, order := ti.prefixIndex(pos)
	if idx != nil && len(keys) > lookupChunk {
		// Bound one batch; each chunk is one round of reads.
		for i := 0; i < len(keys); i += lookupChunk {
			part, err := s.findRowsMulti(ctx, ti, pos, keys[i:min(i+lookupChunk, len(keys))])
			if err != nil {
				return nil, err
			}
			copy(out[i:], part)
		}
		return out, nil
	}
	if idx == nil {
		want := map[string][]int{}
		for i, k := range keys {
			ek, err := encodeDatums(k)
			if err != nil {
				return nil, err
			}
			want[string(ek)] = append(want[string(ek)], i)
		}
		vals := make([]types.Datum, len(pos))
		err := s.scanAll(ctx, ti, func(row []types.Datum) error {
			for i, p := range pos {
				if types.IsNull(row[p]) {
					return nil
				}
				vals[i] = row[p]
			}
			ek, err := encodeDatums(vals)
			if err != nil {
				return err
			}
			for _, i := range want[string(ek)] {
				out[i] = append(out[i], row)
			}
			return nil
		})
		return out, err
	}
	b := &kv.Batch{}
	for _, k := range keys {
		var bucket uint16
		if idx.Local {
			var err error
			if bucket, err = ti.bucketOf(pos, k); err != nil {
				return nil, err
			}
		}
		prefix := ti.layout.IndexPrefix(nil, idx, bucket)
		var err error
		for i, p := range order {
			if prefix, err = rowenc.EncodeKey(prefix, k[p], idx.KeyOrders[i]); err != nil {
				return nil, err
			}
		}
		b.Scan(prefix, keyspkg.PrefixEnd(prefix), 0)
	}
	if err := s.x.Txn.Run(ctx, b); err != nil {
		return nil, err
	}
	if idx == &ti.layout.Primary {
		for i := range keys {
			rows, err := s.decodePrimary(ti, b.Results[i].Rows)
			if err != nil {
				return nil, err
			}
			out[i] = rows
		}
		return out, nil
	}
	f, err := rowenc.NewRowFetcher(ti.layout, idx, nil)
	if err != nil {
		return nil, err
	}
	var rowKeys [][]byte
	var owner []int
	for i := range keys {
		entries, err := f.DecodeRows(b.Results[i].Rows)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			k, err := ti.primaryKey(e)
			if err != nil {
				return nil, err
			}
			rowKeys = append(rowKeys, k)
			owner = append(owner, i)
		}
	}
	rows, err := s.fetchByPrimaryKeys(ctx, ti, rowKeys)
	if err != nil {
		return nil, err
	}
	for j, r := range rows {
		if r != nil {
			out[owner[j]] = append(out[owner[j]], r)
		}
	}
	return out, nil
}

// encodeDatums is a map key for a tuple of values: their key encodings,
// which are equal exactly when the values Compare equal.
func encodeDatums(vals []types.Datum) ([]byte, error) {
	var k []byte
	var err error
	for _, v := range vals {
		if k, err = rowenc.EncodeKey(k, v, rowenc.Asc); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// prefixIndex finds a complete index (public, not partial) whose leading
// key columns are the columns at pos in some order, and whose entries for
// such a prefix are contiguous (one bucket). order[i] is the index in pos
// of the index's i-th key column.
func (ti *tableInfo) prefixIndex(pos []int) (*rowenc.IndexLayout, []int) {
	try := func(idx *rowenc.IndexLayout) []int {
		if len(idx.KeyColumns) < len(pos) {
			return nil
		}
		order := make([]int, len(pos))
		for i := range pos {
			cp := ti.layout.ColumnPos(idx.KeyColumns[i])
			j := indexOf(pos, cp)
			if j < 0 {
				return nil
			}
			order[i] = j
		}
		return order
	}
	// A local index of a hash-partitioned table spreads a key prefix over
	// every bucket unless the prefix fixes the hash columns.
	oneBucket := ti.hashColumnsIn(pos)
	if oneBucket {
		if order := try(&ti.layout.Primary); order != nil {
			return &ti.layout.Primary, order
		}
	}
	for i := range ti.layout.Secondary {
		idx := &ti.layout.Secondary[i]
		d := ti.desc.IndexByID(catalog.IndexID(idx.ID))
		if d == nil || d.State != catalog.IndexPublic || d.Predicate != "" || idx.Inverted != "" {
			continue
		}
		if idx.Local && !oneBucket {
			continue
		}
		if order := try(idx); order != nil {
			return idx, order
		}
	}
	return nil, nil
}

// hashColumnsIn reports whether the columns at pos include every column
// the table's bucket is hashed from (trivially, when it has none).
func (ti *tableInfo) hashColumnsIn(pos []int) bool {
	for _, id := range ti.layout.HashColumnIDs() {
		if indexOf(pos, ti.layout.ColumnPos(id)) < 0 {
			return false
		}
	}
	return true
}

// bucketOf is the bucket of rows whose columns at pos hold key, for a
// local index (hashColumnsIn(pos) must hold).
func (ti *tableInfo) bucketOf(pos []int, key []types.Datum) (uint16, error) {
	if ti.layout.HashColumns == 0 {
		return 0, nil
	}
	row := make([]types.Datum, len(ti.desc.Columns))
	for i := range row {
		row[i] = types.DNull
	}
	for i, p := range pos {
		row[p] = key[i]
	}
	return ti.layout.Bucket(row)
}

func indexOf(xs []int, v int) int {
	for i, x := range xs {
		if x == v {
			return i
		}
	}
	return -1
}
