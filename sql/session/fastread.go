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
	f := s.fast
	if f == nil {
		f = &fastRead{s: s}
		s.fast = f
	}
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
	row, ok, err := pp.point.ReadPoint(sctx, f, key, pt.params, &f.pr)
	clear(f.key[:])
	if errors.Is(err, exec.ErrImplicitRetry) {
		// The generation moved across the read: counted as startImplicit
		// counts it; the general path then runs it in a kv.Txn.
		s.b.implicitRetries.Add(1)
		if pp.implicitRetries++; pp.implicitRetries >= maxImplicitRetries {
			pp.implicit = false
		}
		return false, nil
	}
	if !ok || err != nil {
		// Refused, or failed: the general path reads again and reports
		// what it meets.
		return false, nil
	}
	s.txnStmts++
	s.b.planHits.Add(1)
	s.b.implicitReads.Add(1)
	s.b.fastReads.Add(1)
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
