package session

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/types"
)

// The implicit point read (issue 22; docs/performance.md, item 18). An
// autocommitted SELECT of one row by its whole primary key, run from a
// cached plan, is a transaction of one KV read that commits nothing. It
// runs without a kv.Txn: the plan is checked against the catalog
// generation the node holds in memory at a clock reading (no KV read),
// its one batch goes through kv.DB.RunImplicitRead (the tablet's
// leaseholder reads it at its own clock), and after the answer the
// generation is looked up again at a clock reading taken then. The read's
// timestamp lies between the two readings (the leaseholder's clock is
// moved up to the first, which the batch carries, and the answer moves
// this node's clock up to the leaseholder's before the second), and the
// generation only grows with the timestamp, so the same generation at
// both is the one at the read: the row was read under the schema the
// plan was made for. Otherwise (a DDL committed, began, or is unknown in
// between) the statement runs again in a kv.Txn, re-planning if the
// generation moved; nothing of the first attempt reached the client,
// since exec.Start reads the row before it returns.
//
// What the statement's timestamps are: now(), transaction_timestamp()
// and statement_timestamp() are the receipt of the client's message
// (Session.now), as before and as in PostgreSQL; the read's MVCC
// timestamp, which SQL does not show, is the leaseholder's clock at the
// read, after that receipt (a transaction's was a clock reading when the
// kv.Txn was made, also after it). The statement reads nothing else:
// only a plan whose projections are columns, constants and parameters
// takes this path (exec.ImplicitPointRead), so no function evaluated
// above the read reads KV, and a row longer than one KV page, which a
// second batch would read at another timestamp, reruns in a transaction.
//
// When it applies (implicitReadOK): an implicit transaction that has not
// made its kv.Txn, with no AS OF SYSTEM TIME (historical and follower
// reads keep theirs) and no catalog write; either a transaction of one
// statement (a simple-protocol Query of one statement), or READ
// COMMITTED, the default, in which each statement of an extended-protocol
// implicit transaction (Executes before one Sync) reads its own snapshot
// anyway, so the statements after it may open the kv.Txn at a later
// timestamp. Under REPEATABLE READ or SERIALIZABLE such a transaction
// could hold a later statement that must share the read's snapshot: it
// keeps its kv.Txn. A user other than the superuser must have passed the
// privilege check with the plan under its key (genericPlan.privChecked):
// the check reads the catalog in a transaction, and its answer is the
// same for every Execute of the plan while the key's generation, which
// the read is checked against, is the catalog's. The node must answer the
// generation from memory (a cluster of one, or a generation lease:
// catalog.Cache.GenerationAt); a node that reads it from KV per
// statement keeps the kv.Txn. FOR UPDATE/SHARE, a filter, a secondary
// index, hash buckets, EXPLAIN ANALYZE and distsql = on never take it
// (the plan check, then exec.Start's).

// maxImplicitRetries bounds the implicit reads of one cached plan that
// ran again in a transaction before the plan stops trying.
const maxImplicitRetries = 3

// implicitReadHook, when set, runs before an implicit read is sent
// (tests: a DDL committed between the plan's generation and the read).
var implicitReadHook atomic.Pointer[func()]

// implicitReadOK reports whether the statement about to run may read
// without a kv.Txn (see above), the plan aside.
func (s *Session) implicitReadOK() bool {
	return s.inTxn && !s.block && !s.multiImplicit && !s.aborted && s.txn == nil &&
		s.txnAsOf.IsEmpty() && !s.txnWroteCatalog &&
		(s.txnIso == kv.ReadCommitted || !s.extImplicit)
}

// startImplicit starts pp's plan for params without a kv.Txn when it may
// (see above). ok false: it did not, and the caller runs the statement
// as before; nothing of it was read, written or sent.
func (s *Session) startImplicit(x *stmtState, pp *genericPlan, params []types.Datum) (c *cursor, ok bool, err error) {
	if pp == nil || !pp.implicit || !s.implicitReadOK() ||
		!pp.privChecked && s.user != catalog.SuperuserName {
		return nil, false, nil
	}
	now := s.b.db.Clock().Now()
	gen, ok := s.b.cache.GenerationAt(now)
	if !ok || !s.keyMatches(pp.key, gen) {
		return nil, false, nil
	}
	p := pp.instantiate(params, x)
	if p == nil || s.txn != nil {
		// A NULL key, or a key expression whose type context made the
		// kv.Txn (x.types): the transaction's path.
		return nil, false, nil
	}
	x.point, x.implicitGen, x.implicitNow = &pp.point, gen, now
	s.txnStmts++
	c, err = s.startExec(x, nil, p, params, nil)
	if errors.Is(err, exec.ErrImplicitRetry) {
		s.txnStmts--
		x.point, x.implicitGen = nil, nil
		s.b.implicitRetries.Add(1)
		// A plan refused again and again (a row longer than a page,
		// distsql = on) stops trying: each try costs a Start. A DDL's
		// retry makes a new plan anyway.
		if pp.implicitRetries++; pp.implicitRetries >= maxImplicitRetries {
			pp.implicit = false
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	s.b.planHits.Add(1)
	s.b.implicitReads.Add(1)
	return c, true, nil
}

// ReadImplicit reads b for the statement without a transaction
// (exec.ImplicitReader) and checks that the plan's catalog generation is
// the one at the read (see above).
func (x *stmtState) ReadImplicit(ctx context.Context, b *kv.Batch) error {
	return x.s.readImplicit(ctx, b, x.implicitGen, x.implicitNow)
}

// readImplicit reads b without a transaction and checks that gen, the
// plan's catalog generation, is the one at the read (see above). before
// is the clock reading gen was found at: the read sends it as its own,
// and the generation is checked again at the reading the read returns
// (kv.DB.RunImplicitReadAt: the leaseholder's answer's Now, at or above
// the read's timestamp), two
// readings of the clock fewer.
func (s *Session) readImplicit(ctx context.Context, b *kv.Batch, gen []byte, before hlc.Timestamp) error {
	if h := implicitReadHook.Load(); h != nil {
		(*h)()
	}
	after, err := s.b.db.RunImplicitReadAt(ctx, b, before)
	if err != nil {
		return err
	}
	now, ok := s.b.cache.GenerationAt(after)
	if !ok || !bytes.Equal(now, gen) {
		return exec.ErrImplicitRetry
	}
	return nil
}

// ImplicitReadStats returns how many statements read without a kv.Txn
// and how many tried and ran again in one.
func (b *Backend) ImplicitReadStats() (reads, retries uint64) {
	return b.implicitReads.Load(), b.implicitRetries.Load()
}

// FastReads returns how many Executes the fast path of a kept point
// read answered (fastread.go); they count as implicit reads too.
func (b *Backend) FastReads() uint64 { return b.fastReads.Load() }

// FastDML returns how many simple-protocol statements of kept plans (a
// point UPDATE, an INSERT ... VALUES, a point SELECT in a block) ran
// without the executor (fastupdate.go).
func (b *Backend) FastDML() uint64 { return b.fastDML.Load() }

// keyMatches reports whether k, a cached plan's key, is the one
// planCacheKey would make now at generation gen.
func (s *Session) keyMatches(k planKey, gen []byte) bool {
	h := s.hotVars()
	return k.gen == string(gen) && k.db == s.db.ID && k.user == s.user &&
		k.searchPath == h.searchPath && k.timeZone == h.timeZone &&
		k.dateStyle == h.dateStyle && k.intv == h.intervalStyle
}
