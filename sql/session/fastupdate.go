package session

import (
	"sync/atomic"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
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
// fastUpdates counts the statements it ran (TestFastPointUpdate).

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
	var dst []types.Datum
	if !sq.paramsUsed {
		// The first start of the query's statement, as startQuery's.
		sq.paramsUsed, dst = true, sq.paramBuf[:0]
	}
	params, ok := literalParams(x, e.types, sq.lits, dst)
	if !ok {
		return false, nil
	}
	f := s.fastRead()
	key := f.key[:0]
	if len(pp.keys) > len(f.key) {
		return false, nil
	}
	for _, ke := range pp.keys {
		p, isParam := ke.(*sem.Param)
		if !isParam {
			return false, nil
		}
		d := paramValue(p, params)
		if d == nil {
			return false, nil // a NULL key: the general path plans it
		}
		key = append(key, d)
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
	s.noteMutations(pp.p, n)
	return true, w.Complete(rowsTag(pp.p.Tag, n))
}
