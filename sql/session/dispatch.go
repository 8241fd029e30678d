package session

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgcatalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// stmtState is what one statement (a group) runs with.
type stmtState struct {
	s     *Session
	ctx   context.Context
	start time.Time
	// stepped: the READ COMMITTED snapshot was taken for this statement.
	stepped bool
	tc      *types.Context
	// w is where the statement's results go (functions' WARNINGs too).
	w pgwire.ResultWriter
	// rd is the statement's catalog reader over rdTxn (reader). The
	// first one is rdBuf, allocated with the statement (rdBufUsed says it
	// was handed out: a later one, over another transaction, is
	// allocated on its own, since the first may still be in use).
	rd        *catalog.Reader
	rdTxn     *kv.Txn
	rdBuf     catalog.Reader
	rdBufUsed bool
	// madeTxn: the session's KV transaction was made during this
	// statement, before txn (types).
	madeTxn bool
	// point is the point-read shape kept with the cached plan the
	// statement runs (exec.PointCache), if it runs one.
	point *exec.PointCache
	// implicitGen is the catalog generation of the plan the statement
	// runs without a kv.Txn (implicit.go; nil: it has one), and
	// implicitNow the clock reading it was found at.
	implicitGen []byte
	implicitNow hlc.Timestamp
	// ec and cur are the statement's first execContext and cursor
	// (startExec), allocated with it: two of the objects of every
	// Execute. ecUsed and curUsed say they are taken; a second one (a
	// statement that starts two plans) is allocated on its own.
	ec      execCtxAlloc
	cur     cursor
	ecUsed  bool
	curUsed bool
}

// types is the statement's type context (see Session.regTypes).
func (x *stmtState) types() *types.Context {
	if x.tc == nil {
		// A KV transaction made here is this statement's (txn).
		x.madeTxn = x.madeTxn || x.s.txn == nil
		txn := x.s.kvTxn()
		x.tc = x.s.regTypesOver(x.ctx, txn, x.reader(txn))
	}
	return x.tc
}

// reader returns the statement's catalog reader over txn: the type
// context's resolver and the executor read through the same one (two
// per statement were two more allocations and two generation reads).
func (x *stmtState) reader(txn *kv.Txn) *catalog.Reader {
	if x.rd == nil || x.rdTxn != txn {
		if !x.rdBufUsed {
			x.rdBufUsed = true
			x.rdBuf = *catalog.NewReader(txn, x.s.b.cache)
			x.rd, x.rdTxn = x.rdBuf.UseGenerationUnless(x.s.wroteCatalogFn()), txn
		} else {
			x.rd, x.rdTxn = x.s.catalogReader(txn), txn
		}
	}
	return x.rd
}

// txn returns the KV transaction for the statement, taking a fresh
// snapshot first under READ COMMITTED (once per statement).
func (x *stmtState) txn() (*kv.Txn, error) {
	s := x.s
	fresh := s.txn == nil || x.madeTxn
	t := s.kvTxn()
	if !x.stepped {
		x.stepped = true
		s.txnStmts++
		// A KV transaction made just now, for this statement, reads at
		// a clock reading taken after the statement began: its snapshot
		// is already the statement's, and Step would read the clock
		// twice more (an implicit transaction's one statement).
		if s.txnIso == kv.ReadCommitted && !fresh {
			if err := t.Step(x.ctx); err != nil {
				return nil, err
			}
			// A reader made before the snapshot (a literal's type
			// resolved first) may have read the generation as of the
			// old one: the statement's own lookups start afresh.
			x.rd = nil
		}
	}
	return t, nil
}

func (s *Session) newStmt(ctx context.Context, w pgwire.ResultWriter) *stmtState {
	x := &stmtState{s: s, ctx: ctx, start: s.now(), w: w}
	s.cur = x
	return x
}

// isPlannable reports whether st goes through the binder.
func isPlannable(st *parser.Statement) bool {
	switch n := node(st).(type) {
	case *pg_query.Node_SelectStmt:
		if c, err := asCitusCall(n.SelectStmt); c != nil || err != nil {
			return false // DDL in a SELECT's shape (citus.go)
		}
		return n.SelectStmt.IntoClause == nil // SELECT INTO is CREATE TABLE AS
	case *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt:
		return true
	}
	return false
}

// execGroup runs one statement group to completion in the current
// transaction state, reporting to w. The caller handles the transaction
// outcome of an error (failStatement).
func (s *Session) execGroup(ctx context.Context, g stmtGroup, w pgwire.ResultWriter) error {
	ctx, cancel := s.stmtContext(ctx)
	defer cancel()
	return s.execGroupIn(ctx, g, w)
}

// execGroupIn is execGroup in a context the caller already bounded with
// stmtContext (autocommit, whose commit belongs to the statement).
func (s *Session) execGroupIn(ctx context.Context, g stmtGroup, w pgwire.ResultWriter) error {
	// Before anything opens the KV transaction: it is created at the
	// statement's system time (asof.go).
	if err := s.stmtAsOf(ctx, g.main); err != nil {
		return err
	}
	err := s.retryStatement(ctx, g.main, w, func(w pgwire.ResultWriter) error {
		return s.dispatch(s.newStmt(ctx, w), g, w)
	})
	return sqlError(ctx, err)
}

func (s *Session) dispatch(x *stmtState, g stmtGroup, w pgwire.ResultWriter) error {
	st := g.main
	switch n := node(st).(type) {
	case *pg_query.Node_CreateTableAsStmt:
		return s.createTableAs(x, st, n.CreateTableAsStmt, w)
	case *pg_query.Node_SelectStmt, *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt:
		if sel, ok := n.(*pg_query.Node_SelectStmt); ok && sel.SelectStmt.IntoClause != nil {
			return s.createTableAs(x, st, selectIntoAsCTAS(sel.SelectStmt), w)
		}
		if sel, ok := n.(*pg_query.Node_SelectStmt); ok && g.scanned == nil {
			// SELECT create_distributed_table(...) and the other
			// Citus functions are DDL (citus.go).
			c, err := asCitusCall(sel.SelectStmt)
			if err != nil {
				return err
			}
			if c != nil {
				return s.runCitus(x, st, c, w)
			}
		}
		switch n.(type) {
		case *pg_query.Node_UpdateStmt, *pg_query.Node_InsertStmt:
			if done, err := s.dmlKept(x, g, w); done {
				return err
			}
		case *pg_query.Node_SelectStmt:
			if done, err := s.selectKept(x, g, w); done {
				return err
			}
		}
		c, err := s.startQuery(x, g)
		if err != nil {
			return err
		}
		defer c.close()
		if c.returnsRows() {
			if err := w.BeginRows(c.columns(nil)); err != nil {
				return err
			}
		}
		_, err = c.drain(x.ctx, w, 0)
		return err
	case *pg_query.Node_TransactionStmt:
		return s.txnControl(x, n.TransactionStmt, g.derived, w)
	case *pg_query.Node_VariableSetStmt:
		return s.set(x, n.VariableSetStmt, w)
	case *pg_query.Node_AlterSystemStmt:
		return s.alterSystem(x, n.AlterSystemStmt, w)
	case *pg_query.Node_VariableShowStmt:
		return s.show(n.VariableShowStmt.Name, w, false)
	case *pg_query.Node_ExplainStmt:
		return s.explain(x, st, n.ExplainStmt, w, nil)
	case *pg_query.Node_CopyStmt:
		return s.copy(x, n.CopyStmt, w)
	case *pg_query.Node_PrepareStmt:
		return s.sqlPrepare(x, st, n.PrepareStmt, w)
	case *pg_query.Node_ExecuteStmt:
		return s.sqlExecute(x, n.ExecuteStmt, w)
	case *pg_query.Node_DeallocateStmt:
		return s.sqlDeallocate(n.DeallocateStmt, w)
	case *pg_query.Node_DiscardStmt:
		return s.discard(n.DiscardStmt, w)
	case *pg_query.Node_DeclareCursorStmt:
		return s.declareCursor(x, st, n.DeclareCursorStmt, w)
	case *pg_query.Node_FetchStmt:
		return s.fetch(x, n.FetchStmt, w)
	case *pg_query.Node_ClosePortalStmt:
		return s.closeCursor(n.ClosePortalStmt, w)
	case *pg_query.Node_VacuumStmt:
		return s.vacuum(x, n.VacuumStmt, w)
	case *pg_query.Node_LockStmt:
		// PostgreSQL's RequireTransactionBlock: a lock taken in a
		// transaction of its own would end with it. Several statements of
		// one Query message are an implicit block, which counts.
		if !s.block && !s.multiImplicit {
			return pgerror.New(pgerrcode.NoActiveSQLTransaction, "LOCK TABLE can only be used in transaction blocks")
		}
		return s.execDDL(x, g, w)
	case *pg_query.Node_ListenStmt:
		if err := checkChannel(n.ListenStmt.Conditionname); err != nil {
			return err
		}
		s.queueListen(n.ListenStmt.Conditionname, true)
		return w.Complete("LISTEN")
	case *pg_query.Node_UnlistenStmt:
		s.queueListen(n.UnlistenStmt.Conditionname, false)
		return w.Complete("UNLISTEN")
	case *pg_query.Node_NotifyStmt:
		// PostgreSQL allows NOTIFY in a read-only transaction.
		if err := s.queueNotify(n.NotifyStmt.Conditionname, n.NotifyStmt.Payload); err != nil {
			return err
		}
		return w.Complete("NOTIFY")
	case nil:
		return w.EmptyQuery()
	}
	return s.execDDL(x, g, w)
}

// execDDL runs a DDL statement and its derived statements in the
// statement's transaction, with the tag of the one the user typed.
func (s *Session) execDDL(x *stmtState, g stmtGroup, w pgwire.ResultWriter) error {
	if s.txnReadOnly && !readOnlyLock(g.main) {
		return readOnlyError(commandName(g.main))
	}
	txn, err := x.txn()
	if err != nil {
		return err
	}
	// A schema change's writes are intents other transactions meet.
	if err := txn.DisableWriteBuffering(x.ctx); err != nil {
		return err
	}
	skipped := false
	dc := s.ddlContext(x, txn, w, &skipped)
	tag, err := ddl.Exec(x.ctx, dc, g.main)
	if err != nil {
		return err
	}
	// CREATE TABLE IF NOT EXISTS that found the table skips its derived
	// statements (parser.Statement.Derived explains why).
	if !skipped {
		for _, d := range g.derived {
			if _, err := ddl.Exec(x.ctx, dc, d); err != nil {
				return err
			}
		}
	}
	return w.Complete(tag)
}

func (s *Session) ddlContext(x *stmtState, txn *kv.Txn, w pgwire.ResultWriter, skipped *bool) *ddl.Context {
	s.txnWroteCatalog = true
	packed, limit := s.packedRows()
	return &ddl.Context{
		Txn:        txn,
		Writer:     catalog.NewWriter(txn, s.b.cache),
		Database:   s.db,
		User:       s.user,
		SearchPath: s.searchPath(),
		Types:      x.types(),
		Catalog:    s.resolver(txn),
		Describe: func(ctx context.Context, sql string) ([]plan.Column, error) {
			stmts, err := parser.Parse(sql)
			if err != nil {
				return nil, err
			}
			if len(stmts) != 1 {
				return nil, pgerror.New(pgerrcode.SyntaxError, "expected one query, got %d statements", len(stmts))
			}
			p, err := plan.Build(ctx, s.planEnv(txn, sem.NewParamTypes(), x.types()), &stmts[0])
			if err != nil {
				return nil, err
			}
			return p.Columns, nil
		},
		Notice: func(code, msg string) {
			if code == pgerrcode.DuplicateTable || code == pgerrcode.DuplicateObject {
				*skipped = true
			}
			s.notice(w, "NOTICE", code, msg)
		},
		CheckFunctionBodies: s.vars["check_function_bodies"] != "off",
		PackedRows:          packed,
		PackedSizeLimit:     limit,
		DB:                  s.b.db,
		AutoCommit:          !s.block && !s.multiImplicit,
		InBlock:             s.block,
		HashBuckets:         s.hashBuckets,
		DrainTimestamp:      s.b.cfg.DrainTimestamp,
		BackendPID:          int32(s.pid),
		Memory:              s.b.cfg.Memory,
		TempStorage:         s.b.cfg.TempStorage,
		TempSchema:          s.tempSchema,
		OnCommit:            s.recordOnCommit,
	}
}

func (s *Session) packedRows() (bool, int) {
	limit, _ := strconv.Atoi(s.vars["storage.packed_rows.size_limit"])
	return s.vars["storage.packed_rows.enabled"] == "on", limit
}

// resolver is how the binder and DDL resolve names: the session's
// database and search path as of txn, with the virtual schemas.
func (s *Session) resolver(txn *kv.Txn) plan.Catalog {
	r := catalog.NewReader(txn, s.b.cache)
	if !s.txnWroteCatalog {
		// One read of the catalog generation instead of the names and
		// stamps of every object a statement names (catalog/generation.go);
		// a transaction that ran DDL reads its own writes instead.
		r.UseGeneration()
	}
	return plan.NewCatalog(r, s.db, s.searchPath(), pgcatalog.Lookup)
}

func (s *Session) planEnv(txn *kv.Txn, params *sem.ParamTypes, tc *types.Context) *plan.Env {
	return &plan.Env{Catalog: s.resolver(txn), Types: tc, Params: params}
}

// catalogReader is a statement's reader of the catalog: it answers from
// the catalog generation (one read, often none) until the transaction
// writes the catalog, and then looks everything up so it sees its own
// writes. Without the generation every descriptor costs a stamp read and
// every listing a namespace scan: round trips to the system tablet's
// leaseholder, which a 3-region cluster pays up to 145 ms each for
// (pg_dump's index query took 17.6 s with leaders spread, 1.6 s after).
func (s *Session) catalogReader(txn *kv.Txn) *catalog.Reader {
	return catalog.NewReader(txn, s.b.cache).UseGenerationUnless(s.wroteCatalogFn())
}

// wroteCatalogFn says whether the open transaction wrote the catalog
// (UseGenerationUnless's test), made once: a closure per reader was one
// more allocation for every statement's two readers.
func (s *Session) wroteCatalogFn() func() bool {
	if s.wroteCatalog == nil {
		s.wroteCatalog = func() bool { return s.txnWroteCatalog }
	}
	return s.wroteCatalog
}

// execCtxAlloc is what execContext makes, in one allocation.
type execCtxAlloc struct {
	ctx  exec.Context
	eval sem.EvalContext
	ec   evalCtx
	virt plan.VirtualEnv
	txn  *kv.Txn // CatalogWriter's
}

// CatalogWriter implements exec.CatalogWriterMaker: a writer over the
// statement's transaction, which it tells the session wrote the catalog.
func (a *execCtxAlloc) CatalogWriter() *catalog.Writer {
	x := a.ec.x
	x.s.txnWroteCatalog = true
	// Catalog writes go out as intents, as DDL's do; a failed flush is
	// kept by the transaction, which refuses the next operation with it.
	_ = a.txn.DisableWriteBuffering(x.ctx)
	return catalog.NewWriter(a.txn, x.s.b.cache)
}

func (s *Session) execContext(x *stmtState, txn *kv.Txn, params []types.Datum) *exec.Context {
	packed, limit := s.packedRows()
	// pg_catalog's tables and DDL's lookups read through it too.
	r := x.reader(txn)
	// One allocation for the context and what it points to: these were
	// five of the objects every statement allocates; the statement's
	// first is its stmtState's.
	var a *execCtxAlloc
	if !x.ecUsed {
		x.ecUsed, a = true, &x.ec
	} else {
		a = &execCtxAlloc{}
	}
	a.ec = evalCtx{x: x}
	a.eval = sem.EvalContext{Fn: &a.ec, Params: params}
	a.virt = plan.VirtualEnv{
		Txn: txn, Catalog: r, Database: s.db, User: s.user,
		// pg_stat_activity shows this backend with the pid the
		// client got in BackendKeyData, as pg_backend_pid() does.
		Session: a.ec.Session(),
		Tablets: s.b.cfg.Tablets,
	}
	a.virt.Activity, a.virt.Cursors, a.virt.Statements, a.virt.Settings = s.virtualLists()
	workMem := s.workMem()
	a.ctx = exec.Context{
		Memory:          s.b.cfg.Memory,
		WorkMem:         workMem,
		TempStorage:     s.b.cfg.TempStorage,
		Txn:             txn,
		Eval:            &a.eval,
		Catalog:         r,
		Virtual:         &a.virt,
		PackedRows:      packed,
		PackedSizeLimit: limit,
		// The storage profile sizes lookup batches (opt.Costs.LookupBatch).
		LookupBatch:      s.lookupBatch(),
		LookupInputOrder: s.vars["sql.testing.lookup_input_order"] == "on",
		ReadInOrder:      s.readInOrder(),
		Point:            x.point,
		CatalogWriter:    a,
	}
	a.txn = txn
	return &a.ctx
}

// virtualLists returns what pg_stat_activity, pg_cursors,
// pg_stat_statements and pg_settings list, as method values made once per
// session: made in execContext they were four allocations of every
// statement.
func (s *Session) virtualLists() (func() []plan.SessionActivity, func() []plan.SessionCursor, func() []plan.StatementStats, func() [][3]string) {
	v := &s.virtFns
	if v.activity == nil {
		v.activity, v.cursors, v.statements, v.settings = s.b.sessions.snapshot, s.cursorRows, s.b.stmts.snapshot, s.settingRows
	}
	return v.activity, v.cursors, v.statements, v.settings
}

// workMem is work_mem in bytes (sql.testing.work_mem_bytes, when set,
// instead), parsed again only when either setting's text changed: every
// statement asks for it.
func (s *Session) workMem() int64 {
	c := &s.workMemCache
	wm, tb := s.vars["work_mem"], s.vars["sql.testing.work_mem_bytes"]
	if c.ok && c.workMem == wm && c.testing == tb {
		return c.bytes
	}
	b, _, _ := mon.ParseKB(wm)
	b <<= 10
	if t, _ := strconv.ParseInt(tb, 10, 64); t > 0 {
		b = t
	}
	c.ok, c.workMem, c.testing, c.bytes = true, wm, tb, b
	return b
}

// readOnlyLock reports a LOCK TABLE, which PostgreSQL allows in a
// read-only transaction in every mode (only a hot standby limits the
// modes); pg_dump locks every table it dumps in its read-only one.
func readOnlyLock(st *parser.Statement) bool {
	_, ok := node(st).(*pg_query.Node_LockStmt)
	return ok
}

func readOnlyError(what string) error {
	return pgerror.New(pgerrcode.ReadOnlySQLTransaction, "cannot execute %s in a read-only transaction", what)
}

// commandName names a statement for messages, as Postgres's
// CreateCommandName does for the common cases.
func commandName(st *parser.Statement) string {
	switch n := node(st).(type) {
	case *pg_query.Node_CreateStmt:
		return "CREATE TABLE"
	case *pg_query.Node_IndexStmt:
		return "CREATE INDEX"
	case *pg_query.Node_ViewStmt:
		return "CREATE VIEW"
	case *pg_query.Node_CreateSeqStmt:
		return "CREATE SEQUENCE"
	case *pg_query.Node_CreateSchemaStmt:
		return "CREATE SCHEMA"
	case *pg_query.Node_AlterTableStmt:
		return "ALTER TABLE"
	case *pg_query.Node_TruncateStmt:
		return "TRUNCATE TABLE"
	case *pg_query.Node_DropStmt:
		switch n.DropStmt.RemoveType {
		case pg_query.ObjectType_OBJECT_TABLE:
			return "DROP TABLE"
		case pg_query.ObjectType_OBJECT_INDEX:
			return "DROP INDEX"
		case pg_query.ObjectType_OBJECT_VIEW:
			return "DROP VIEW"
		case pg_query.ObjectType_OBJECT_SEQUENCE:
			return "DROP SEQUENCE"
		case pg_query.ObjectType_OBJECT_SCHEMA:
			return "DROP SCHEMA"
		}
	}
	// Otherwise the statement's first two words, after any comments.
	sql := st.SQL
	for {
		sql = strings.TrimSpace(sql)
		if strings.HasPrefix(sql, "--") {
			if k := strings.IndexByte(sql, '\n'); k >= 0 {
				sql = sql[k+1:]
				continue
			}
			sql = ""
		} else if strings.HasPrefix(sql, "/*") {
			if k := strings.Index(sql, "*/"); k >= 0 {
				sql = sql[k+2:]
				continue
			}
			sql = ""
		}
		break
	}
	words := strings.Fields(strings.ToUpper(sql))
	if len(words) > 2 {
		words = words[:2]
	}
	if len(words) == 0 {
		return "statement"
	}
	return strings.Join(words, " ")
}

// startPlan binds, optimizes and starts a plannable statement. paramTypes
// are the settled parameter types of a prepared statement (nil: none).
func (s *Session) startPlan(x *stmtState, st *parser.Statement, paramTypes []*types.T, params []types.Datum, stats *exec.Stats) (*cursor, error) {
	return s.startPlanCached(x, st, paramTypes, params, stats, nil)
}

// maxPointPlanMisses bounds the Executes of a prepared statement that try
// to make a cached plan (plancache.go) before it stops trying.
const maxPointPlanMisses = 3

// startPlanCached is startPlan for a prepared statement whose plan cache
// is slot (nil: none).
func (s *Session) startPlanCached(x *stmtState, st *parser.Statement, paramTypes []*types.T, params []types.Datum, stats *exec.Stats, slot *planSlot) (*cursor, error) {
	if slot != nil && stats == nil {
		if c, ok, err := s.startImplicit(x, slot.pp, params); ok || err != nil {
			return c, err
		}
	}
	txn, err := x.txn()
	if err != nil {
		return nil, err
	}
	var key planKey
	keyOK := false
	if slot != nil && stats == nil && (slot.pp != nil || slot.misses < maxPointPlanMisses) {
		if key, keyOK, err = s.planCacheKey(x, txn); err != nil {
			return nil, err
		}
		if keyOK && slot.pp != nil && slot.pp.key == key {
			if p := slot.pp.instantiate(params, x); p != nil {
				if err := s.checkPrivileges(x.ctx, txn, p); err != nil {
					return nil, err
				}
				slot.pp.privChecked = true
				s.b.planHits.Add(1)
				x.point = &slot.pp.point
				return s.startExec(x, txn, p, params, stats)
			}
		}
	}
	if slot != nil {
		s.b.planMisses.Add(1)
	}
	pt := sem.NewParamTypes(paramTypes...)
	pt.Fixed = paramTypes != nil
	p, err := plan.Build(x.ctx, s.planEnv(txn, pt, x.types()), st)
	if err != nil {
		return nil, err
	}
	var shape *genericShape
	if keyOK {
		if shape = genericShapeOf(p, len(params)); shape == nil {
			slot.misses++
		}
	}
	if err := s.checkPrivileges(x.ctx, txn, p); err != nil {
		return nil, err
	}
	if shape != nil {
		// Only the WHERE's parameters become constants (the span); the
		// others stay placeholders the executor reads, as in the plan
		// kept (plancache.go).
		shape.bindWhere(params, x.types())
	} else {
		substituteParams(p, params, x.types())
	}
	if err := s.optimize(x.ctx, p); err != nil {
		return nil, err
	}
	if shape != nil {
		if pp := newGenericPlan(key, p, shape, params, x.types()); pp != nil {
			// checkPrivileges passed above, in txn, whose key is key.
			pp.privChecked = true
			slot.pp = pp
		} else {
			slot.misses++
		}
	}
	return s.startExec(x, txn, p, params, stats)
}

// startExec starts an optimized plan.
func (s *Session) startExec(x *stmtState, txn *kv.Txn, p *plan.Plan, params []types.Datum, stats *exec.Stats) (*cursor, error) {
	if !p.ReadOnly && s.txnReadOnly {
		return nil, readOnlyError(p.Tag)
	}
	ec := s.execContext(x, txn, params)
	ec.Stats = stats
	if txn == nil {
		ec.Implicit = x // implicit.go
	}
	rows, err := exec.Start(x.ctx, ec, p)
	if err != nil {
		return nil, err
	}
	var c *cursor
	if !x.curUsed {
		x.curUsed, c = true, &x.cur
	} else {
		c = new(cursor)
	}
	initCursor(c, s, p, rows)
	// The type context prints the rows; made when the first is
	// (cursor.typesCtx), a statement that finds none needs none.
	c.x, c.txn = x, txn
	return c, nil
}

// rowsTag is the command tag of a statement that affected or returned n
// rows. Tags of fewer than smallTagRows rows are made once (a point
// SELECT's or UPDATE's tag was one allocation per statement).
func rowsTag(verb string, n int64) string {
	i := slices.Index(tagVerbs[:], verb)
	if i < 0 {
		return verb
	}
	if n >= 0 && n < smallTagRows {
		return smallTags[i][n]
	}
	return makeRowsTag(verb, n)
}

// tagVerbs are the verbs whose tag counts rows.
var tagVerbs = [...]string{"SELECT", "UPDATE", "DELETE", "INSERT", "MERGE", "FETCH", "MOVE", "COPY"}

const smallTagRows = 16

// smallTags are rowsTag's tags of fewer than smallTagRows rows, by verb.
var smallTags = func() (t [len(tagVerbs)][smallTagRows]string) {
	for i, v := range tagVerbs {
		for n := range t[i] {
			t[i][n] = makeRowsTag(v, int64(n))
		}
	}
	return t
}()

func makeRowsTag(verb string, n int64) string {
	if verb == "INSERT" {
		return "INSERT 0 " + strconv.FormatInt(n, 10)
	}
	return verb + " " + strconv.FormatInt(n, 10)
}

// constText returns the text of a constant argument of a utility
// statement (SET, EXPLAIN options).
func constText(n *pg_query.Node) (string, bool) {
	switch v := n.GetNode().(type) {
	case *pg_query.Node_AConst:
		c := v.AConst
		switch cv := c.Val.(type) {
		case *pg_query.A_Const_Sval:
			return cv.Sval.Sval, true
		case *pg_query.A_Const_Ival:
			return strconv.FormatInt(int64(cv.Ival.Ival), 10), true
		case *pg_query.A_Const_Fval:
			return cv.Fval.Fval, true
		case *pg_query.A_Const_Boolval:
			if cv.Boolval.Boolval {
				return "on", true
			}
			return "off", true
		}
	case *pg_query.Node_String_:
		return v.String_.Sval, true
	case *pg_query.Node_Integer:
		return strconv.FormatInt(int64(v.Integer.Ival), 10), true
	case *pg_query.Node_Float:
		return v.Float.Fval, true
	case *pg_query.Node_Boolean:
		if v.Boolean.Boolval {
			return "on", true
		}
		return "off", true
	case *pg_query.Node_TypeCast:
		// SET TIME ZONE INTERVAL '+02:00' HOUR TO MINUTE and friends.
		return constText(v.TypeCast.Arg)
	}
	return "", false
}

func notSupported(format string, args ...any) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, format, args...)
}
