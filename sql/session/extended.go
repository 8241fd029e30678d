package session

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// preparedStatement is a statement of the extended protocol.
type preparedStatement struct {
	s          *Session
	sql        string    // the text Parse sent (pg_stat_activity's query)
	g          stmtGroup // g.main nil: the empty statement
	paramTypes []*types.T
	cols       []plan.Column
	plans      planSlot // plancache.go
	// oids and described are ParamOIDs' and the last Portal.Columns'
	// answers, kept: pgwire asks for them at every Bind and Describe, and
	// they change only with formats (describedFor).
	oids     []uint32
	stmtCols []pgwire.Column
	// regParams caches hasRegParam(paramTypes), fixed once prepared:
	// 0 not yet known, 1 yes, 2 no.
	regParams    int8
	described    []pgwire.Column
	describedFor []int16
	// okCols is the first column of the last plan whose columns
	// checkResult found equal to cols: the instances of a kept plan
	// share its columns, so a hit is not compared again.
	okCols *plan.Column
	// spare is the statement's last closed portal, which its next Bind
	// fills again (portal.Close).
	spare *portal
	// stat is the statement's pg_stat_statements entry (recordKept).
	stat keptStat
}

var (
	_ pgwire.Statement   = (*preparedStatement)(nil)
	_ pgwire.QuickBinder = (*preparedStatement)(nil)
)

// QuickBind implements pgwire.QuickBinder: without a reg* parameter,
// Bind decodes the values and reads no catalog.
func (ps *preparedStatement) QuickBind() bool { return !ps.hasRegParam() }

// hasRegParam is hasRegParam(ps.paramTypes), worked out once.
func (ps *preparedStatement) hasRegParam() bool {
	if ps.regParams == 0 {
		ps.regParams = 2
		if hasRegParam(ps.paramTypes) {
			ps.regParams = 1
		}
	}
	return ps.regParams == 1
}

// Prepare implements pgwire.Session.
func (s *Session) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (pgwire.Statement, error) {
	ps, err := s.prepare(ctx, sql, paramOIDs)
	if err != nil && s.block {
		// Any error inside a block aborts it, Parse's included, as in
		// Postgres.
		s.abortBlock(ctx)
	}
	return ps, err
}

func (s *Session) prepare(ctx context.Context, sql string, paramOIDs []uint32) (pgwire.Statement, error) {
	stmts, err := parse(sql)
	if err != nil {
		return nil, err
	}
	groups := groupStatements(stmts)
	if len(groups) > 1 {
		return nil, pgerror.New(pgerrcode.SyntaxError, "cannot insert multiple commands into a prepared statement")
	}
	ps := &preparedStatement{s: s, sql: sql}
	if len(groups) == 0 {
		return ps, nil
	}
	ps.g = groups[0]
	if s.aborted && !endsTxn(ps.g.main) {
		return nil, errInFailedTxn
	}
	declared := make([]*types.T, len(paramOIDs))
	var userOIDs map[int]uint32 // declared OIDs of no built-in type
	for i, oid := range paramOIDs {
		if oid == 0 {
			continue
		}
		t, ok := types.OidToType(oid)
		if !ok {
			if userOIDs == nil {
				userOIDs = map[int]uint32{}
			}
			userOIDs[i] = oid
			continue
		}
		declared[i] = t
	}
	if userOIDs != nil {
		// An enum type (a client that looked it up declares it): found
		// in the catalog, in the open transaction or a short one.
		find := func(ctx context.Context, txn *kv.Txn) error {
			ut := s.regTypes(ctx, txn).UserTypes()
			for i, oid := range userOIDs {
				var t *types.T
				ok := false
				if ut != nil {
					t, ok = ut.TypeByOID(oid)
				}
				if !ok {
					return pgerror.New(pgerrcode.UndefinedObject, "type with OID %d does not exist", oid)
				}
				declared[i] = t
			}
			return nil
		}
		var err error
		if s.inTxn && !s.aborted {
			err = find(ctx, s.kvTxn())
		} else {
			err = s.b.db.Txn(ctx, kv.Serializable, find)
		}
		if err != nil {
			return nil, sqlError(ctx, err)
		}
	}
	if sel, ok := node(ps.g.main).(*pg_query.Node_SelectStmt); ok {
		if c, err := asCitusCall(sel.SelectStmt); err != nil {
			return nil, err
		} else if c != nil {
			// Run as DDL at Execute (citus.go); its one void column.
			ps.cols = citusColumns(c)
			ps.paramTypes = nil
			return ps, nil
		}
	}
	switch n := node(ps.g.main).(type) {
	case *pg_query.Node_SelectStmt, *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt:
		p, pts, err := s.describe(ctx, ps.g.main, declared)
		if err != nil {
			return nil, err
		}
		ps.paramTypes, ps.cols = pts, p.Columns
		return ps, nil
	case *pg_query.Node_ExplainStmt:
		inner := *ps.g.main
		inner.AST = &pg_query.RawStmt{Stmt: n.ExplainStmt.Query}
		if isPlannable(&inner) {
			_, pts, err := s.describe(ctx, &inner, declared)
			if err != nil {
				return nil, err
			}
			ps.paramTypes = pts
		}
		ps.cols = explainColumns
		return ps, nil
	case *pg_query.Node_VariableShowStmt:
		ps.cols = showColumns(n.VariableShowStmt.Name)
	case *pg_query.Node_FetchStmt:
		// The rows are the cursor's, known once it is declared.
		if c, ok := s.sqlCursors[n.FetchStmt.Portalname]; ok && !n.FetchStmt.Ismove {
			ps.cols = c.cols
		}
	}
	for i, t := range declared {
		if t == nil {
			declared[i] = types.Text
		}
	}
	ps.paramTypes = declared
	return ps, nil
}

// describe binds st to learn its parameter types and result columns, in
// the open transaction or a short one of its own.
func (s *Session) describe(ctx context.Context, st *parser.Statement, declared []*types.T) (*plan.Plan, []*types.T, error) {
	var p *plan.Plan
	var pts []*types.T
	build := func(ctx context.Context, txn *kv.Txn) error {
		pt := sem.NewParamTypes(declared...)
		var err error
		if p, err = plan.Build(ctx, s.planEnv(txn, pt, s.regTypes(ctx, txn)), st); err != nil {
			return err
		}
		pts, err = pt.Types()
		return err
	}
	var err error
	if s.inTxn && !s.aborted {
		err = build(ctx, s.kvTxn())
	} else {
		err = s.b.db.Txn(ctx, kv.Serializable, build)
	}
	if err != nil {
		return nil, nil, sqlError(ctx, err)
	}
	return p, pts, nil
}

// ParamOIDs implements pgwire.Statement. The types are fixed once
// prepared, so the answer is made once.
func (ps *preparedStatement) ParamOIDs() []uint32 {
	if ps.oids == nil || len(ps.oids) != len(ps.paramTypes) {
		out := make([]uint32, len(ps.paramTypes))
		for i, t := range ps.paramTypes {
			out[i] = t.Oid
		}
		ps.oids = out
	}
	return ps.oids
}

// Columns implements pgwire.Statement, made once (pgwire asks at every
// Bind, for the number of result formats).
func (ps *preparedStatement) Columns() []pgwire.Column {
	if ps.stmtCols == nil {
		ps.stmtCols = describeColumns(ps.cols, nil)
	}
	return ps.stmtCols
}

// Close implements pgwire.Statement.
func (ps *preparedStatement) Close() {}

// Bind implements pgwire.Statement: it decodes the parameter values.
func (ps *preparedStatement) Bind(ctx context.Context, p pgwire.BindParams) (pgwire.Portal, error) {
	// The portal holds the values of up to len(paramBuf) parameters
	// itself: one allocation for both, or none when the statement's last
	// closed portal is there to be bound again (spare).
	pt := ps.spare
	if pt != nil {
		ps.spare = nil
		*pt = portal{ps: ps, formats: p.ResultFormats}
	} else {
		pt = &portal{ps: ps, formats: p.ResultFormats}
	}
	params, err := ps.decodeParams(ctx, p, pt.paramBuf[:0])
	if err != nil {
		if ps.s.block {
			ps.s.abortBlock(ctx)
		}
		return nil, err
	}
	pt.params = params
	return pt, nil
}

// decodeParams decodes Bind's values. A reg* parameter in text form
// ('pg_catalog.pg_class' bound to CAST($1 AS regclass), as SQLAlchemy's
// reflection sends) is a name to look up, so it is read with the catalog
// resolver, in the open transaction or a short one of its own, as
// describe does; other parameters need no catalog.
func (ps *preparedStatement) decodeParams(ctx context.Context, p pgwire.BindParams, dst []types.Datum) ([]types.Datum, error) {
	s := ps.s
	if !ps.hasRegParam() {
		return decodeParams(s.typesCtx(), ps.paramTypes, p.Values, p.Formats, dst)
	}
	var params []types.Datum
	dec := func(ctx context.Context, txn *kv.Txn) error {
		var err error
		params, err = decodeParams(s.regTypes(ctx, txn), ps.paramTypes, p.Values, p.Formats, dst)
		return err
	}
	var err error
	if s.inTxn && !s.aborted {
		err = dec(ctx, s.kvTxn())
	} else {
		err = s.b.db.Txn(ctx, kv.Serializable, dec)
	}
	if err != nil {
		return nil, sqlError(ctx, err)
	}
	return params, nil
}

// hasRegParam says whether any parameter is of a reg* type.
func hasRegParam(pts []*types.T) bool {
	for _, t := range pts {
		if t == nil {
			continue
		}
		for _, r := range types.RegTypes {
			if t.Oid == r.Oid {
				return true
			}
		}
	}
	return false
}

// decodeParams turns Bind's values into datums of the parameters' types,
// in dst's array when it has room for them.
func decodeParams(tc *types.Context, pts []*types.T, vals [][]byte, formats []int16, dst []types.Datum) ([]types.Datum, error) {
	var out []types.Datum
	if cap(dst) >= len(vals) {
		out = dst[:len(vals)]
	} else {
		out = make([]types.Datum, len(vals))
	}
	for i, v := range vals {
		if v == nil {
			out[i] = types.DNull
			continue
		}
		t := types.Text
		if i < len(pts) && pts[i] != nil && pts[i].Family != types.UnknownFamily {
			t = pts[i]
		}
		var d types.Datum
		var err error
		if i < len(formats) && formats[i] == 1 {
			if d, err = types.DecodeBinary(t, v); err != nil {
				return nil, pgerror.Wrapf(err, pgerrcode.InvalidBinaryRepresentation, "incorrect binary data format in bind parameter %d", i+1)
			}
		} else if n, ok := intParam(t, v); ok {
			d = types.DInt(n)
		} else if d, err = types.ParseDatum(tc, t, string(v)); err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// intParam parses the text of an integer parameter that is plain digits,
// at most 18 of them after an optional '-', and fits t: the common case,
// taken without the string types.ParseDatum needs (one allocation per
// parameter). Anything else (a sign '+', spaces, an error to report) is
// left to ParseDatum: ok is false.
func intParam(t *types.T, v []byte) (int64, bool) {
	if t.Family != types.IntFamily {
		return 0, false
	}
	neg := len(v) > 0 && v[0] == '-'
	digits := v
	if neg {
		digits = v[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	switch t.Width {
	case 16:
		return n, n >= math.MinInt16 && n <= math.MaxInt16
	case 32:
		return n, n >= math.MinInt32 && n <= math.MaxInt32
	}
	return n, true
}

// portal is a bound prepared statement.
type portal struct {
	ps      *preparedStatement
	params  []types.Datum
	formats []int16
	cur     *cursor
	done    string // the tag of a portal that ran to completion
	// closed: Close ran; the portal may be its statement's spare.
	closed bool
	// paramBuf backs params when they fit (Bind).
	paramBuf [4]types.Datum
}

var _ pgwire.Portal = (*portal)(nil)

// Columns implements pgwire.Portal. pgwire only reads the result, so the
// statement keeps the last one made and hands it out again while the
// formats are the same (libpq describes the portal of every Bind).
func (pt *portal) Columns() []pgwire.Column {
	ps := pt.ps
	if ps.described == nil || !slices.Equal(ps.describedFor, pt.formats) {
		ps.described = describeColumns(ps.cols, pt.formats)
		ps.describedFor = slices.Clone(pt.formats)
	}
	return ps.described
}

// Close implements pgwire.Portal. pgwire forgets a portal it closes (it
// drops it from its map first), and the held result of its last Execute
// went out before the message that closes it (ReleaseHeld, Sync), so the
// portal becomes its statement's spare, which the next Bind fills
// instead of allocating one: pgbench's and libpq's unnamed portal, bound
// for each Execute and closed by the next Bind or at ReadyForQuery.
func (pt *portal) Close() {
	if pt.closed {
		return
	}
	pt.closed = true
	if pt.cur != nil {
		pt.cur.close()
		pt.cur = nil
	}
	if ps := pt.ps; ps.spare == nil && (ps.s.extHeld == nil || ps.s.extHeld.pt != pt) {
		clear(pt.paramBuf[:])
		pt.params = nil
		ps.spare = pt
	}
}

// Execute implements pgwire.Portal.
func (pt *portal) Execute(ctx context.Context, w pgwire.ResultWriter, maxRows int) (bool, error) {
	start := time.Now()
	s := pt.ps.s
	// The writers and the held result of one Execute in one allocation
	// (three of the objects every Execute made), the session's own
	// (execSpare) when no Execute still holds it: taken here, it is given
	// back after the Execute unless a suspended portal's cursor may keep
	// its writers; its held result (a.h) may be waiting for Sync, so it
	// is not taken again while extHeld points into it.
	a := s.execSpare
	s.execSpare = nil
	if a == nil || s.extHeld == &a.h {
		a = new(execAlloc)
	}
	*a = execAlloc{sw: statsWriter{ResultWriter: w}}
	sw := &a.sw
	s.msgTime = start
	suspended, err := pt.execute(ctx, sw, maxRows, a)
	s.msgTime = time.Time{}
	if pt.cur == nil {
		s.execSpare = a
	}
	if h := pt.ps.s.extHeld; err == nil && h != nil && h.pt == pt {
		sw.count(h.tag)
	}
	if err == nil && !sw.empty {
		pt.ps.s.recordKept(&pt.ps.stat, pt.ps.sql, nil, time.Since(start), sw.rows)
	}
	return suspended, err
}

// execAlloc holds what one Execute needs of its own: its first attempt
// uses tw, h and rw, the statement retry's first writer (later attempts
// make theirs).
type execAlloc struct {
	sw statsWriter
	tw trackingWriter
	h  heldExecute
	rw stmtWriter
}

func (pt *portal) execute(ctx context.Context, w pgwire.ResultWriter, maxRows int, a *execAlloc) (bool, error) {
	ps, s := pt.ps, pt.ps.s
	if pt.cur != nil {
		return pt.resume(ctx, w, maxRows)
	}
	if err := s.flushReports(w); err != nil {
		return false, err
	}
	if ps.g.main == nil {
		return false, w.EmptyQuery()
	}
	s.statementStarts(ps.sql)
	if s.aborted && !endsTxn(ps.g.main) {
		return false, errInFailedTxn
	}
	started := false
	if !s.inTxn && !isTxnControl(ps.g.main) {
		s.beginTxn(false)
		s.extImplicit, started = true, true
	}
	if !isPlannable(ps.g.main) {
		if err := pt.execOther(ctx, w); err != nil {
			s.failStatement(ctx)
			return false, err
		}
		// A SET reports its new value right away, as in Postgres.
		return false, s.flushReports(w)
	}
	if pt.fastReadOK(maxRows) {
		if done, err := pt.executeFast(ctx, w, started, a); done {
			return false, err
		}
	}
	for attempt := 0; ; attempt++ {
		// An implicit transaction's statement keeps its CommandComplete
		// back (rows, if any, go out at once): the commit at Sync is
		// where a buffered write first meets other writers, and while the
		// client has heard nothing of the statement a retryable failure
		// there can still be rerun (Sync, heldExecute).
		var tw *trackingWriter
		var rw *stmtWriter
		if attempt == 0 {
			a.tw = trackingWriter{ResultWriter: w, hold: started}
			tw, rw = &a.tw, &a.rw
		} else {
			tw = &trackingWriter{ResultWriter: w, hold: started}
		}
		suspended, err := pt.run(ctx, tw, maxRows, rw)
		if err == nil {
			h := &a.h
			if attempt > 0 {
				h = &heldExecute{}
			}
			h.pt = pt
			h.take(tw)
			if h.tag == "" {
				return suspended, nil
			}
			if tw.sent || suspended || maxRows != 0 {
				return suspended, h.send(w)
			}
			s.extHeld = h
			return false, nil
		}
		if started && isRetryable(err) && !tw.sent && attempt < maxAutoRetries && ctx.Err() == nil {
			_ = s.endTxn(ctx, false)
			if !autoRetryBackoff(ctx, attempt) {
				s.failStatement(ctx)
				return false, err
			}
			s.beginTxn(false)
			s.extImplicit = true
			continue
		}
		s.failStatement(ctx)
		return false, err
	}
}

// run runs the portal's statement; rw, when not nil, is the statement
// retry's first writer (retryStatementIn), the Execute's own.
func (pt *portal) run(ctx context.Context, w pgwire.ResultWriter, maxRows int, rw *stmtWriter) (bool, error) {
	s := pt.ps.s
	sctx, cancel := s.stmtContext(ctx)
	defer cancel()
	suspended := false
	if err := s.stmtAsOf(sctx, pt.ps.g.main); err != nil {
		return false, err
	}
	err := s.retryStatementIn(sctx, pt.ps.g.main, w, rw, func(w pgwire.ResultWriter) error {
		x := s.newStmt(sctx, w)
		c, err := s.startPlanCached(x, pt.ps.g.main, pt.ps.paramTypes, pt.params, nil, &pt.ps.plans)
		if err != nil {
			return err
		}
		if err := pt.ps.checkResult(c.p.Columns); err != nil {
			c.close()
			return err
		}
		c.formats = pt.formats
		if suspended, err = c.drain(sctx, w, maxRows); err != nil {
			c.close()
			return err
		}
		if suspended {
			pt.cur = c
		}
		return nil
	})
	return suspended, sqlError(sctx, err)
}

// errResultChanged is PostgreSQL's error for a prepared statement whose
// result a DDL changed since Parse (plancache.c, fixed_result).
var errResultChanged = pgerror.New(pgerrcode.FeatureNotSupported, "cached plan must not change result type")

// checkResult fails an Execute whose plan returns other columns than the
// statement described at Parse: the client decodes the rows by that
// description (and Describe of the portal repeats it), so a SELECT * that
// a new column widened must not send rows of another shape. As in
// PostgreSQL (equalTupleDescs), the names, types and type modifiers must
// be the same. The columns of a kept plan's instances are its own slice,
// checked once (okCols).
func (ps *preparedStatement) checkResult(cols []plan.Column) error {
	if len(cols) > 0 && len(cols) == len(ps.cols) && &cols[0] == ps.okCols {
		return nil
	}
	if len(cols) != len(ps.cols) {
		return errResultChanged
	}
	for i := range cols {
		a, b := &cols[i], &ps.cols[i]
		if a.Name != b.Name || a.T.Oid != b.T.Oid || a.T.Typmod() != b.T.Typmod() {
			return errResultChanged
		}
	}
	if len(cols) > 0 {
		ps.okCols = &cols[0]
	}
	return nil
}

// resume continues a suspended portal.
func (pt *portal) resume(ctx context.Context, w pgwire.ResultWriter, maxRows int) (bool, error) {
	s := pt.ps.s
	if pt.cur.closed {
		// Finished earlier, or closed with its transaction.
		if s.aborted {
			return false, errInFailedTxn
		}
		return false, w.Complete(rowsTag(pt.cur.p.Tag, 0))
	}
	sctx, cancel := s.stmtContext(ctx)
	defer cancel()
	suspended, err := pt.cur.drain(sctx, w, maxRows)
	if err != nil {
		pt.cur.close()
		s.failStatement(ctx)
		return false, sqlError(sctx, err)
	}
	return suspended, nil
}

// execOther runs a non-plannable statement of a portal.
func (pt *portal) execOther(ctx context.Context, w pgwire.ResultWriter) error {
	s, ps := pt.ps.s, pt.ps
	if n, ok := node(ps.g.main).(*pg_query.Node_ExplainStmt); ok {
		sctx, cancel := s.stmtContext(ctx)
		defer cancel()
		err := s.explain(s.newStmt(sctx, w), ps.g.main, n.ExplainStmt, w, &bound{paramTypes: ps.paramTypes, params: pt.params})
		return sqlError(sctx, err)
	}
	return s.execGroup(ctx, ps.g, w)
}

// bound are the parameters of an EXPLAIN run from a portal.
type bound struct {
	paramTypes []*types.T
	params     []types.Datum
}

// heldExecute is an Execute whose CommandComplete the session holds until
// Sync: the only statement of an implicit transaction, run to completion
// without sending a row, with no message from the client since.
type heldExecute struct {
	pt *portal
	// cols and rows: a result the statement asked to send only after the
	// commit (trackingWriter.holdRows: a Citus call's void row).
	cols []pgwire.Column
	rows [][][]byte
	tag  string
}

// take keeps what tw held back.
func (h *heldExecute) take(tw *trackingWriter) {
	h.cols, h.rows, h.tag = tw.heldCols, tw.heldRows, tw.held
}

// send writes the held result to w.
func (h *heldExecute) send(w pgwire.ResultWriter) error {
	if h.cols != nil {
		if err := w.BeginRows(h.cols); err != nil {
			return err
		}
		for _, r := range h.rows {
			if err := w.WriteRow(r); err != nil {
				return err
			}
		}
	}
	return w.Complete(h.tag)
}

// ReleaseHeld implements pgwire.ResultHolder: the client sent another
// message after the Execute, which may wait for its reply (a Flush) or
// whose reply must follow it, so the held CommandComplete goes out now and
// the implicit transaction can no longer be rerun.
func (s *Session) ReleaseHeld(w pgwire.ResultWriter) error {
	h := s.extHeld
	if h == nil {
		return nil
	}
	s.extHeld = nil
	return h.send(w)
}

// QuickSync implements pgwire.QuickSyncer: with no kv.Txn open, Sync's
// end of the implicit transaction (endTxn) sends nothing to KV and waits
// for nothing (it closes cursors and resets the transaction's state), and
// no held result can be rerun (nothing to retry), so pgwire need not make
// it a cancellable statement context.
func (s *Session) QuickSync() bool { return s.txn == nil }

// Sync implements pgwire.Session: it commits the implicit transaction of
// the preceding Executes. When that transaction is one held Execute, a
// commit failing with a retryable error (40001: a write-write conflict, a
// refresh that failed after a push) reruns the statement in a new
// transaction, up to maxAutoRetries times, as the simple protocol reruns
// its implicit transactions: the client has heard nothing of it yet, so
// it sees one statement that succeeded, as it would in PostgreSQL, where
// an autocommitted UPDATE does not fail because another one touched the
// row first.
func (s *Session) Sync(ctx context.Context, w pgwire.ResultWriter) error {
	h := s.extHeld
	s.extHeld = nil
	if !s.inTxn || s.block {
		if h != nil {
			return h.send(w)
		}
		return nil
	}
	if s.txn == nil {
		// No kv.Txn (QuickSync): endTxn sends nothing, waits for
		// nothing and cannot fail, and nothing is rerun, so it needs no
		// statement context (the lock wait observer's, one object per
		// Sync of a kept point SELECT, and statement_timeout's).
		err := s.endTxn(ctx, true)
		if h != nil {
			if werr := h.send(w); werr != nil {
				return werr
			}
		}
		return sqlError(ctx, err)
	}
	// The commit is where buffered writes meet other transactions'
	// locks: statement_timeout and lock_timeout bound it too.
	sctx, cancel := s.stmtContext(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		err := s.endTxn(sctx, true)
		if h == nil {
			return sqlError(sctx, err)
		}
		if err == nil || !isRetryable(err) || attempt >= maxAutoRetries || sctx.Err() != nil || !autoRetryBackoff(sctx, attempt) {
			if werr := h.send(w); werr != nil {
				return werr
			}
			return sqlError(sctx, err)
		}
		s.log.Debug("session: rerunning the implicit transaction of an Execute", "attempt", attempt+1, "err", err)
		// The rerun is the statement's only outcome the client hears:
		// its error, or its rows and tag.
		s.beginTxn(false)
		s.extImplicit = true
		tw := &trackingWriter{ResultWriter: w, hold: true}
		if _, err := h.pt.run(sctx, tw, 0, nil); err != nil {
			s.failStatement(sctx)
			_ = s.endTxn(sctx, false)
			return err
		}
		h.take(tw)
		if tw.sent {
			// Rows went out this time: the commit's outcome is final.
			if werr := h.send(w); werr != nil {
				return werr
			}
			return sqlError(sctx, s.endTxn(sctx, true))
		}
	}
}
