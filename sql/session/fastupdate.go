package session

import (
	"context"
	"sync/atomic"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// The kept point UPDATE and INSERT ... VALUES of a Query (issue 22;
// docs/performance.md, item 20). A Query of a known shape (plancache.go,
// "Query shapes") whose kept plan is an UPDATE of one row by its whole
// primary key, every key value a parameter, or an INSERT ... VALUES of
// kept items, runs by exec.PointCache.UpdatePoint or InsertValues
// instead of the plan instance, exec.Start's runner and operators and a
// cursor: for the UPDATE the locking read, the new row, its write and the
// statement's tag, for the INSERT the row, its write and the tag, nothing
// else. Everything around the statement is the general path's, because
// it runs in the general path's place inside dispatch: the statement
// group, the statement state and its snapshot (stmtState.txn: a READ
// COMMITTED statement steps the kv.Txn), statement_timeout and lock
// timeout (the statement's context), the statement retry and its
// savepoint (retryStatement), the failure of the block or implicit
// transaction (failStatement), pg_stat_statements and the reports.
//
// Of startQuery's kept path it keeps the same checks in the same order:
// the constants as parameters (literalParams), the transaction, the plan
// key (a catalog change, another user, database, search path or setting
// re-plans), the privilege check passed under the key
// (genericPlan.privChecked; the superuser's always passes), and
// startExec's read-only check (a read-only transaction leaves it, for the
// general path's error). What it reports is the cursor's: the tag of the
// rows it wrote, counted for auto-statistics (noteMutations) and as a
// plan hit. Anything it does not serve (the exec functions' refusals, a
// NULL key, a hash-sharded key, distsql on) leaves it before anything was
// read, evaluated, written or sent, and the statement runs as before.
// fastUpdates counts the statements it ran (TestFastPointUpdate), and
// Backend.FastDML those of its backend (/metrics cairn_sql_fast_dml_total).

// fastUpdateOff, when set, keeps every statement off this fast path
// (tests: the general path's answer to compare with).
var fastUpdateOff atomic.Bool

// fastUpdates counts the statements the fast path ran, in every session
// of the process (tests).
var fastUpdates atomic.Uint64

// dmlKept runs g, an UPDATE or INSERT of the simple protocol, by the
// fast path when it may (see above). done false: it did not, nothing of
// it was read, written or sent, and the caller starts it as before.
func (s *Session) dmlKept(x *stmtState, g stmtGroup, w pgwire.ResultWriter) (done bool, err error) {
	sq := g.scanned
	if sq == nil || fastUpdateOff.Load() || s.txnReadOnly {
		return false, nil
	}
	e := sq.simple
	if e == nil {
		return false, nil
	}
	pp := e.slot.pp
	if pp == nil || pp.buckets != 0 || !pp.privChecked && s.user != catalog.SuperuserName || s.hotVars().distsql {
		return false, nil
	}
	switch pp.p.Root.(type) {
	case *plan.Update:
		if !pp.scan || !pp.point.UpdateReady() {
			return false, nil
		}
	case *plan.Insert:
		if pp.scan || !pp.point.InsertReady() {
			return false, nil
		}
	default:
		return false, nil
	}
	f := s.fastRead()
	params, key, ok := f.keptKey(x, sq, e, pp)
	if !ok {
		return false, nil
	}
	defer clear(f.key[:])
	txn, err := x.txn()
	if err != nil {
		return true, err
	}
	pk, ok, err := s.planCacheKey(x, txn)
	if err != nil {
		return true, err
	}
	if !ok || pk != pp.key {
		return false, nil
	}
	x.point = &pp.point
	ec := s.execContext(x, txn, params)
	var n int64
	if pp.scan {
		n, ok, err = pp.point.UpdatePoint(x.ctx, ec, pp.p, key)
	} else {
		n, ok, err = pp.point.InsertValues(x.ctx, ec, pp.p)
	}
	if !ok {
		x.point = nil
		return false, nil
	}
	if err != nil {
		return true, err
	}
	s.b.planHits.Add(1)
	fastUpdates.Add(1)
	s.b.fastDML.Add(1)
	s.noteMutations(pp.p, n)
	return true, w.Complete(rowsTag(pp.p.Tag, n))
}

// The kept point SELECT of a Query in a transaction block takes the same
// place in dispatch (selectKept): a block's statement reads in its
// kv.Txn (implicitReadOK refuses a block), so the read fastread.go makes
// without one does not serve it, but the plan's kept point read does,
// sent through the kv.Txn as the point operator sends it
// (exec.PointCache.ReadPoint with a txnReader): the same batch of one
// Scan, the same fetcher and projections, the buffer's rows read through
// as the operator reads them. The row is encoded as queryFast encodes
// it (describeText, encodeRow: the plan is one that prints without the
// catalog, genericPlan.implicit), through the statement's writer, which
// holds it until the statement ends (retryStatement), and the tag is
// the cursor's. A refusal (a second page, a value of a megabyte or
// more) after the read leaves nothing but the read done, which the
// general path does again: a plain SELECT takes no lock.

// txnReader sends a kept point read's batch in a kv.Txn.
type txnReader struct{ txn *kv.Txn }

// ReadImplicit implements exec.ImplicitReader.
func (r txnReader) ReadImplicit(ctx context.Context, b *kv.Batch) error { return r.txn.Run(ctx, b) }

// selectKept runs g, a SELECT of the simple protocol in a transaction
// block, by the kept point read when it may (see above). done false: it
// did not, nothing was sent, and the caller starts it as before.
func (s *Session) selectKept(x *stmtState, g stmtGroup, w pgwire.ResultWriter) (done bool, err error) {
	sq := g.scanned
	if sq == nil || fastUpdateOff.Load() || !s.block || g.main.AsOf != nil {
		return false, nil
	}
	e := sq.simple
	if e == nil {
		return false, nil
	}
	pp := e.slot.pp
	if pp == nil || !pp.fastKey || !pp.implicit || !pp.point.Ready() ||
		!pp.privChecked && s.user != catalog.SuperuserName || s.hotVars().distsql {
		return false, nil
	}
	if _, ok := pp.p.Root.(*plan.Update); ok {
		return false, nil
	}
	f := s.fastRead()
	params, key, ok := f.keptKey(x, sq, e, pp)
	if !ok {
		return false, nil
	}
	defer clear(f.key[:])
	txn, err := x.txn()
	if err != nil {
		return true, err
	}
	pk, ok, err := s.planCacheKey(x, txn)
	if err != nil {
		return true, err
	}
	if !ok || pk != pp.key {
		return false, nil
	}
	// A PointRead of its own: the kv.Txn may keep the batch's keys (its
	// read spans) past the statement.
	pr := new(exec.PointRead)
	row, ok, err := pp.point.ReadPoint(x.ctx, txnReader{txn}, key, params, pr)
	if !ok && err == nil {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	s.b.planHits.Add(1)
	fastUpdates.Add(1)
	s.b.fastDML.Add(1)
	cols := pp.p.Columns
	if err := w.BeginRows(s.describeText(cols)); err != nil {
		return true, err
	}
	n := int64(0)
	if row != nil {
		if err := s.encodeRow(w, cols, nil, nil, row, f); err != nil {
			return true, err
		}
		n = 1
	}
	return true, w.Complete(rowsTag("SELECT", n))
}

// keptKey makes the parameters of sq's constants (literalParams, into
// the query's own buffer on its statement's first start, as
// startQuery's) and collects pp's key values from them into f.key. ok
// false: a constant did not convert, a key value is not a parameter or
// is NULL (the general path plans it), or the key has more columns than
// f.key holds; nothing was read or written, and the caller leaves the
// statement to the general path.
func (f *fastRead) keptKey(x *stmtState, sq *scannedQuery, e *simpleEntry, pp *genericPlan) (params, key []types.Datum, ok bool) {
	var dst []types.Datum
	if !sq.paramsUsed {
		sq.paramsUsed, dst = true, sq.paramBuf[:0]
	}
	if params, ok = literalParams(x, e.types, sq.lits, dst); !ok || len(pp.keys) > len(f.key) {
		return nil, nil, false
	}
	key = f.key[:0]
	for _, ke := range pp.keys {
		p, isParam := ke.(*sem.Param)
		if !isParam {
			return nil, nil, false
		}
		d := paramValue(p, params)
		if d == nil {
			return nil, nil, false
		}
		key = append(key, d)
	}
	return params, key, true
}
