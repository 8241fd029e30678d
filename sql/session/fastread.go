package session

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// The Execute of a kept point read (issue 22; docs/performance.md, item
// 19). A portal of a prepared SELECT whose kept plan reads one row by its
// whole primary key without a kv.Txn (implicit.go) goes from the Execute
// to one KV batch and back: the parameters are the key's values, which
// the plan's kept point shape encodes into its key prefix
// (exec.PointCache.ReadPoint), the batch is the implicit read with its
// catalog generation checked before and after (readImplicit), and the
// row, projected by the kept compiled projections, is encoded by the
// session's one row encoder (encodeRow) into the Execute's writer. No
// statement state, plan instance, execution context, runner, operator,
// Rows or cursor is made, and no statement retry wraps it: it has
// nothing to retry that the general path would not do again.
//
// What a client sees is the general path's: the same Execute prologue
// (ParameterStatus reports, pg_stat_activity, the failed-transaction
// check, the implicit transaction and its held CommandComplete), the
// same checks (the plan key and generation at a clock reading before the
// read and the generation after it, the privilege check passed under
// the key for a user other than the superuser, the result columns
// against the statement's), statement_timeout and cancellation (the
// read runs under the statement's context), the same row bytes in the
// Bind's result formats, and the same statistics (the plan cache's hits,
// the implicit reads, pg_stat_statements through the Execute's writer).
// Anything else leaves it before it has read or sent anything
// (fastReadOK, ReadPoint's refusals) or after a read that failed (the
// general path reads again and reports its own error with its SQLSTATE,
// or succeeds): the statement then runs as before. fastReads counts the
// Executes it answered (TestFastPointRead).

// fastReadOff, when set, keeps every Execute off the fast path (tests:
// the general path's answer to compare with).
var fastReadOff atomic.Bool

// fastRead is the session's scratch for its kept point reads: one
// statement's at a time.
type fastRead struct {
	s   *Session
	gen []byte        // the plan's generation, checked after the read
	now hlc.Timestamp // the clock reading gen was found at, the read's Now
	pr  exec.PointRead
	key [4]types.Datum
	tc  types.Context
	// lits and params hold a Query's constants and the parameters made
	// of them (queryFast) when they fit.
	lits   [scannedInline]parser.Literal
	params [scannedInline]types.Datum
}

// fastRead returns the session's fastRead, made on first use.
func (s *Session) fastRead() *fastRead {
	if s.fast == nil {
		s.fast = &fastRead{s: s}
	}
	return s.fast
}

var _ exec.ImplicitReader = (*fastRead)(nil)

// ReadImplicit implements exec.ImplicitReader.
func (f *fastRead) ReadImplicit(ctx context.Context, b *kv.Batch) error {
	return f.s.readImplicit(ctx, b, f.gen, f.now)
}

// typesCtx implements typesCtxer: the values a kept point read returns
// print without the catalog (exec.ImplicitPointRead), with the time zone
// alone.
func (f *fastRead) typesCtx() *types.Context {
	f.tc = types.Context{Location: f.s.loc}
	return &f.tc
}

// fastReadOK reports whether pt's Execute may take the fast path, the
// read aside: the statement's kept plan is an implicit point read whose
// key is the parameters themselves, whose shape the executor kept, and
// which the session may run without a kv.Txn now.
func (pt *portal) fastReadOK(maxRows int) bool {
	ps, s := pt.ps, pt.ps.s
	pp := ps.plans.pp
	return maxRows == 0 && pp != nil && !fastReadOff.Load() && pp.fastKey && pp.implicit && pp.point.Ready() &&
		ps.g.main.AsOf == nil && s.implicitReadOK() &&
		(pp.privChecked || s.user == catalog.SuperuserName) &&
		!s.hotVars().distsql
}

// executeFast runs pt's Execute by the fast path (see above), in the
// implicit transaction execute began (started: this Execute began it).
// done false: it did not, and nothing of the statement was sent or
// counted (but a read the generation check refused, counted as a retry
// as startImplicit counts it); the caller runs it as before.
func (pt *portal) executeFast(ctx context.Context, w pgwire.ResultWriter, started bool, a *execAlloc) (done bool, err error) {
	ps, s := pt.ps, pt.ps.s
	pp := ps.plans.pp
	if ps.checkResult(pp.p.Columns) != nil {
		return false, nil
	}
	now := s.b.db.Clock().Now()
	gen, ok := s.b.cache.GenerationAt(now)
	if !ok || !s.keyMatches(pp.key, gen) {
		return false, nil
	}
	f := s.fastRead()
	key := f.key[:0]
	if len(pp.keys) > len(f.key) {
		key = make([]types.Datum, 0, len(pp.keys))
	}
	for _, e := range pp.keys {
		d := paramValue(e.(*sem.Param), pt.params)
		if d == nil {
			return false, nil // a NULL key: the general path plans it
		}
		key = append(key, d)
	}
	sctx, cancel := s.stmtContext(ctx)
	defer cancel()
	f.gen, f.now = gen, now
	row, fall, err := s.readKept(ctx, sctx, f, pp, key, pt.params)
	clear(f.key[:])
	if fall {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	n := int64(0)
	if row != nil {
		if err := s.encodeRow(w, pp.p.Columns, nil, pt.formats, row, f); err != nil {
			err = sqlError(sctx, err)
			s.failStatement(ctx)
			return true, err
		}
		n = 1
	}
	tag := rowsTag("SELECT", n)
	if n > 0 || !started {
		// Rows went out, or not the implicit transaction's first
		// statement: its tag goes out now (execute's tw.sent or hold).
		return true, w.Complete(tag)
	}
	h := &a.h
	*h = heldExecute{pt: pt, tag: tag}
	s.extHeld = h
	return true, nil
}

// The same read for a Query (the simple protocol, twenty-third session).
// A query of a known shape (plancache.go, "Query shapes") outside a
// transaction block whose shape's kept plan is such a point read, every
// constant it takes as a parameter an integer, goes from the Query to
// the KV batch and back without the statement group, the autocommit's
// writers, the statement state, the plan instance, the executor or a
// cursor: the constants are converted as literalParams converts them
// (an integer must meet an integer parameter and fit its width) and are
// the key, and the read, its catalog check and the row's encoding are
// the Execute's (above). What the client sees is the general path's:
// the RowDescription the statement's cursor sends (describeText), the
// row in text, the tag after the implicit transaction ended (it has no
// kv.Txn to commit) and the ParameterStatus reports; pg_stat_activity,
// statement_timeout (the read runs under the statement's context) and
// pg_stat_statements (SimpleQuery records it) are the Query's as
// before. A quoted constant, whose type input may read the catalog
// (x.types), a plan that is not a fast point read, a refusal or a failed
// read leave it before anything was sent, and the query runs by the
// general path, which reads again and reports its own error.

// queryFast runs sql, a Query of shape sh (nil: none), by the fast path
// when it may (see above). done false: it did not, nothing was sent or
// counted (but a read the generation check refused, counted as
// executeFast counts it), and the caller runs it as before.
func (s *Session) queryFast(ctx context.Context, sql string, sh *queryShape, w pgwire.ResultWriter) (done bool, err error) {
	if sh == nil || s.inTxn || fastReadOff.Load() {
		return false, nil
	}
	se := s.entryOf(sh)
	if se == nil || se.st == nil || se.simple == nil || se.st.AsOf != nil {
		return false, nil
	}
	pp := se.simple.slot.pp
	if pp == nil || !pp.fastKey || !pp.implicit || !pp.point.Ready() ||
		!pp.privChecked && s.user != catalog.SuperuserName || s.hotVars().distsql {
		return false, nil
	}
	f := s.fastRead()
	lits, ok := se.literals(sql, sh, f.lits[:0])
	if !ok {
		return false, nil
	}
	for _, l := range lits {
		if !l.IsInt {
			return false, nil // its type input takes the statement's type context
		}
	}
	params, ok := literalParams(nil, se.simple.types, lits, f.params[:0])
	if !ok {
		return false, nil
	}
	defer clear(f.params[:])
	key := f.key[:0]
	if len(pp.keys) > len(f.key) {
		key = make([]types.Datum, 0, len(pp.keys))
	}
	for _, e := range pp.keys {
		d := paramValue(e.(*sem.Param), params)
		if d == nil {
			return false, nil
		}
		key = append(key, d)
	}
	defer clear(f.key[:])
	// The implicit transaction the general path would begin. Given up,
	// it is left again as it was found: it holds nothing yet (no kv.Txn,
	// no saved settings), and autocommit begins its own (beginTxn sets
	// every field it reads).
	s.beginTxn(false)
	defer func() {
		if !done {
			s.inTxn = false
		}
	}()
	if !s.implicitReadOK() {
		return false, nil
	}
	now := s.b.db.Clock().Now()
	gen, ok := s.b.cache.GenerationAt(now)
	if !ok || !s.keyMatches(pp.key, gen) {
		return false, nil
	}
	// statement_timeout bounds the statement with its (empty) commit, as
	// autocommit's context does.
	sctx, cancel := s.stmtContext(ctx)
	defer cancel()
	f.gen, f.now = gen, now
	row, fall, err := s.readKept(ctx, sctx, f, pp, key, params)
	if fall {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	cols := pp.p.Columns
	if err := w.BeginRows(s.describeText(cols)); err != nil {
		s.failStatement(ctx)
		return true, err
	}
	n := int64(0)
	if row != nil {
		if err := s.encodeRow(w, cols, nil, nil, row, f); err != nil {
			err = sqlError(sctx, err)
			s.failStatement(ctx)
			return true, err
		}
		n = 1
	}
	if err := s.endTxn(sctx, true); err != nil {
		return true, sqlError(sctx, err)
	}
	if err := w.Complete(rowsTag("SELECT", n)); err != nil {
		return true, err
	}
	return true, s.flushReports(w)
}

// readKept reads the row of pp's kept point read for key, under sctx
// (the statement's context, derived from ctx), for both fast paths, and
// sorts out how the read ended. fall true: the general path takes the
// statement, nothing of it sent or counted (but a read the generation
// check refused, counted as startImplicit counts it; the general path
// then runs it in a kv.Txn); a refusal or another failure is read again
// there, which reports what it meets. An error with fall false: the
// read failed after sctx ended (statement_timeout, or a cancel), and
// that is the statement's error, the statement ended: handed to the
// general path, it would be read again under a fresh statement_timeout,
// and a statement could take twice its timeout before it failed.
// Otherwise row is the row (nil: none), counted as a fast read.
func (s *Session) readKept(ctx, sctx context.Context, f *fastRead, pp *genericPlan, key, params []types.Datum) (row []types.Datum, fall bool, err error) {
	row, ok, err := pp.point.ReadPoint(sctx, f, key, params, &f.pr)
	if errors.Is(err, exec.ErrImplicitRetry) {
		s.b.implicitRetries.Add(1)
		if pp.implicitRetries++; pp.implicitRetries >= maxImplicitRetries {
			pp.implicit = false
		}
		return nil, true, nil
	}
	if err != nil && sctx.Err() != nil {
		err = sqlError(sctx, err)
		s.failStatement(ctx)
		return nil, false, err
	}
	if !ok || err != nil {
		return nil, true, nil
	}
	s.txnStmts++
	s.b.planHits.Add(1)
	s.b.implicitReads.Add(1)
	s.b.fastReads.Add(1)
	return row, false, nil
}
