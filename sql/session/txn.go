package session

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cairn-db/cairn/kv"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// txnControl runs BEGIN, COMMIT, ROLLBACK and the savepoint statements.
// derived holds BEGIN's AS OF SYSTEM TIME (the parser's SET LOCAL
// cairn_as_of_system_time), applied with the BEGIN.
func (s *Session) txnControl(x *stmtState, n *pg_query.TransactionStmt, derived []*parser.Statement, w pgwire.ResultWriter) error {
	ctx := x.ctx
	switch n.Kind {
	case pg_query.TransactionStmtKind_TRANS_STMT_BEGIN, pg_query.TransactionStmtKind_TRANS_STMT_START:
		tag := "BEGIN"
		if n.Kind == pg_query.TransactionStmtKind_TRANS_STMT_START {
			tag = "START TRANSACTION"
		}
		if s.block {
			// PostgreSQL warns and still applies the options, as SET
			// TRANSACTION would: allowed while no statement has run
			// (psycopg2 sends BEGIN ISOLATION LEVEL ... after its own
			// implicit BEGIN), 25001 after.
			s.notice(w, "WARNING", pgerrcode.ActiveSQLTransaction, "there is already a transaction in progress")
			if err := s.setTxnOptions(n.Options, false); err != nil {
				return err
			}
			return w.Complete(tag)
		}
		if s.inTxn {
			// BEGIN inside an extended-protocol implicit transaction turns
			// it into a block, as in Postgres.
			s.block = true
		} else {
			s.beginTxn(true)
		}
		if err := s.setTxnOptions(n.Options, true); err != nil {
			return err
		}
		for _, d := range derived {
			if err := s.beginAsOf(d); err != nil {
				return err
			}
		}
		return w.Complete(tag)

	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT:
		if !s.block {
			s.notice(w, "WARNING", pgerrcode.NoActiveSQLTransaction, "there is no transaction in progress")
			if s.inTxn {
				if err := s.endTxn(ctx, true); err != nil {
					return err
				}
			}
			return w.Complete("COMMIT")
		}
		if s.aborted {
			_ = s.endTxn(ctx, false)
			return w.Complete("ROLLBACK")
		}
		iso, ro := s.txnIsoName, s.txnReadOnly
		if err := s.endTxn(ctx, true); err != nil {
			return err
		}
		if n.Chain {
			s.beginTxn(true)
			s.txnIsoName, s.txnIso, s.txnReadOnly = iso, isolationOf(iso), ro
		}
		return w.Complete("COMMIT")

	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		if !s.block {
			s.notice(w, "WARNING", pgerrcode.NoActiveSQLTransaction, "there is no transaction in progress")
			if s.inTxn {
				_ = s.endTxn(ctx, false)
			}
			return w.Complete("ROLLBACK")
		}
		iso, ro := s.txnIsoName, s.txnReadOnly
		_ = s.endTxn(ctx, false)
		if n.Chain {
			s.beginTxn(true)
			s.txnIsoName, s.txnIso, s.txnReadOnly = iso, isolationOf(iso), ro
		}
		return w.Complete("ROLLBACK")

	case pg_query.TransactionStmtKind_TRANS_STMT_SAVEPOINT:
		if !s.block {
			return pgerror.New(pgerrcode.NoActiveSQLTransaction, "SAVEPOINT can only be used in transaction blocks")
		}
		tok, err := s.kvTxn().Savepoint(ctx)
		if err != nil {
			return err
		}
		s.savepoints = append(s.savepoints, savepoint{name: n.SavepointName, token: tok, vars: cloneVars(s.vars)})
		return w.Complete("SAVEPOINT")

	case pg_query.TransactionStmtKind_TRANS_STMT_RELEASE:
		if !s.block {
			return pgerror.New(pgerrcode.NoActiveSQLTransaction, "RELEASE SAVEPOINT can only be used in transaction blocks")
		}
		i, err := s.findSavepoint(n.SavepointName)
		if err != nil {
			return err
		}
		if err := s.kvTxn().ReleaseSavepoint(ctx, s.savepoints[i].token); err != nil {
			return err
		}
		s.savepoints = s.savepoints[:i]
		return w.Complete("RELEASE")

	case pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		if !s.block {
			return pgerror.New(pgerrcode.NoActiveSQLTransaction, "ROLLBACK TO SAVEPOINT can only be used in transaction blocks")
		}
		i, err := s.findSavepoint(n.SavepointName)
		if err != nil {
			return err
		}
		sp := s.savepoints[i]
		if err := s.kvTxn().RollbackToSavepoint(ctx, sp.token); err != nil {
			// After a retryable error nothing the transaction read holds
			// any more: it stays aborted and must restart (40001).
			s.aborted = true
			return err
		}
		// The savepoint itself stays; the ones after it go, and settings
		// return to what they were when it was taken, as in Postgres.
		s.savepoints = s.savepoints[:i+1]
		s.saveVars()
		s.vars = cloneVars(sp.vars)
		s.varsGen++
		s.applyDerived()
		s.aborted = false
		return w.Complete("ROLLBACK")

	default:
		return notSupported("two-phase commit is not supported")
	}
}

// setTxnOptions applies the characteristics of BEGIN / SET TRANSACTION
// (isolation level, read only, deferrable). first: nothing has run in the
// transaction yet.
func (s *Session) setTxnOptions(opts []*pg_query.Node, first bool) error {
	for _, o := range opts {
		de := o.GetDefElem()
		if de == nil {
			continue
		}
		v, _ := constText(de.Arg)
		switch de.Defname {
		case "transaction_isolation":
			if err := s.setTxnIsolation(v); err != nil {
				return err
			}
		case "transaction_read_only":
			if err := s.setTxnReadOnly(v == "on" || v == "1" || v == "true"); err != nil {
				return err
			}
		case "transaction_deferrable":
			// DEFERRABLE only matters for SERIALIZABLE READ ONLY in
			// Postgres (waiting for a safe snapshot); Cairn's serializable
			// reads never need to wait for that.
		}
	}
	return nil
}

func (s *Session) setTxnIsolation(v string) error {
	name, err := checkIsolation(s, v)
	if err != nil {
		return invalidValue("transaction_isolation", v)
	}
	// The KV transaction's level is fixed when it is created (by the first
	// statement that reads or writes).
	if (s.txnStmts > 0 || s.txn != nil) && name != s.txnIsoName {
		return pgerror.New(pgerrcode.ActiveSQLTransaction, "SET TRANSACTION ISOLATION LEVEL must be called before any query")
	}
	s.txnIsoName, s.txnIso = name, isolationOf(name)
	return nil
}

func (s *Session) setTxnReadOnly(ro bool) error {
	if !ro && !s.txnAsOf.IsEmpty() {
		return pgerror.New(pgerrcode.ReadOnlySQLTransaction, "AS OF SYSTEM TIME: a historical transaction is read-only")
	}
	if !ro && s.txnReadOnly && s.txnStmts > 0 {
		return pgerror.New(pgerrcode.ActiveSQLTransaction, "transaction read-write mode must be set before any query")
	}
	s.txnReadOnly = ro
	return nil
}

// txnSetting answers SHOW transaction_isolation / transaction_read_only:
// the open transaction's value, or the default for the next one.
func (s *Session) txnSetting(name string) (string, bool) {
	switch strings.ToLower(name) {
	case "transaction_isolation":
		if s.inTxn {
			return s.txnIsoName, true
		}
		return s.vars["default_transaction_isolation"], true
	case "transaction_read_only":
		ro := s.vars["default_transaction_read_only"] == "on"
		if s.inTxn {
			ro = s.txnReadOnly
		}
		if ro {
			return "on", true
		}
		return "off", true
	}
	return "", false
}

// savepoint is one SAVEPOINT of the open block.
type savepoint struct {
	name  string
	token kv.SavepointToken
	// vars are the settings when it was taken (ROLLBACK TO restores them).
	vars map[string]string
}

// findSavepoint returns the index of the latest savepoint named name.
func (s *Session) findSavepoint(name string) (int, error) {
	for i := len(s.savepoints) - 1; i >= 0; i-- {
		if s.savepoints[i].name == name {
			return i, nil
		}
	}
	return 0, pgerror.New(pgerrcode.InvalidSavepointSpecification, "savepoint %q does not exist", name)
}

// maxStatementRetries bounds how often one READ COMMITTED statement is
// rerun after conflicts before the client gets 40001.
const maxStatementRetries = 100

// statementRetries reports whether st, about to run, may be rerun by
// retryStatement: the transaction is READ COMMITTED (each statement is on
// its own snapshot, so rerunning one at a newer snapshot is what
// PostgreSQL's re-evaluation of a concurrently updated row amounts to) and
// st is a query or DML statement, whose only effects are its KV writes
// (undone by the statement savepoint) and the rows it sends.
func (s *Session) statementRetries(st *parser.Statement) bool {
	if !s.inTxn || s.aborted || s.txnIso != kv.ReadCommitted || st == nil {
		return false
	}
	switch node(st).(type) {
	case *pg_query.Node_SelectStmt, *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt,
		*pg_query.Node_DeleteStmt, *pg_query.Node_ExecuteStmt:
		return true
	}
	return false
}

// retryStatement runs one statement (run) and, under READ COMMITTED, reruns
// it when it fails with a retryable KV error before anything of its result
// reached the client: the statement's writes are rolled back to a
// savepoint taken before it and it runs again at a fresh snapshot
// (kv.Txn.RetryStatement), up to maxStatementRetries times. Write-write
// conflicts wait on the lock holder in the tablets, so each rerun starts
// after the transaction it lost to has finished. A transaction that was
// aborted (deadlock victim) cannot be saved this way and fails as before;
// REPEATABLE READ and SERIALIZABLE never rerun a statement (their clients
// retry the transaction on 40001).
func (s *Session) retryStatement(ctx context.Context, st *parser.Statement, w pgwire.ResultWriter, run func(w pgwire.ResultWriter) error) error {
	return s.retryStatementIn(ctx, st, w, nil, run)
}

// retryStatementIn is retryStatement whose first attempt writes through
// first, when not nil: a stmtWriter the caller allocated with its own
// state (an Execute's execAlloc), which nothing else uses.
func (s *Session) retryStatementIn(ctx context.Context, st *parser.Statement, w pgwire.ResultWriter, first *stmtWriter, run func(w pgwire.ResultWriter) error) error {
	if !s.statementRetries(st) {
		return run(w)
	}
	// A transaction not made yet is not made here: the statement may read
	// without one (implicit.go). If it makes one, its savepoint is the
	// transaction's start (kv.Txn.StartSavepoint).
	txn := s.txn
	var sp kv.SavepointToken
	if txn != nil {
		var err error
		if sp, err = txn.Savepoint(ctx); err != nil {
			return run(w) // the transaction is unusable: let the statement say so
		}
	}
	var sw *stmtWriter
	defer func() { sw.giveBufs(&s.heldBufs) }()
	for attempt := 1; ; attempt++ {
		prev := sw
		if prev == nil && first != nil {
			sw = first
			*sw = stmtWriter{ResultWriter: w}
		} else {
			sw = &stmtWriter{ResultWriter: w}
		}
		if prev == nil {
			sw.takeBufs(&s.heldBufs)
		} else {
			// The failed attempt's held rows are dropped; its buffers
			// serve the next.
			sw.takeBufs(&prev.heldBufs)
		}
		err := run(sw)
		if err == nil {
			// A portal suspended at its row limit: what it produced goes
			// out now.
			return sw.flush()
		}
		if sw.sent || !isRetryable(err) || attempt > maxStatementRetries || ctx.Err() != nil {
			// A row description and rows held back by a statement that
			// failed are dropped: clients take the error in their place.
			return err
		}
		if txn == nil && s.txn != nil {
			// Made by the statement: it undoes back to the start.
			txn, sp = s.txn, s.txn.StartSavepoint()
		}
		if txn != s.txn {
			return err // the statement ended the transaction
		}
		// txn nil: read without a transaction, nothing to undo.
		if txn != nil {
			if rerr := txn.RetryStatement(ctx, sp); rerr != nil {
				s.log.Debug("session: statement cannot be retried", "err", rerr)
				return err
			}
		}
		s.log.Debug("session: retrying READ COMMITTED statement", "attempt", attempt, "err", err)
		if attempt > 3 {
			// Contention that waiting on locks did not settle: spread the
			// contenders out a little.
			d := time.Duration(rand.Int64N(int64(min(attempt, 20)) * int64(time.Millisecond)))
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return err
			}
		}
	}
}

// Held-back output of a retryable statement: up to this many rows and
// bytes wait for the statement to finish before they go to the client, so
// a statement failing on a conflict after producing them (a FOR UPDATE
// meeting a row updated since its snapshot, after locking others) can
// still be rerun. A bigger result goes out as it comes and is not rerun.
const (
	maxHeldRows  = 1000
	maxHeldBytes = 1 << 20
)

// stmtWriter passes a statement's output through, noting whether any of
// it reached the client (after which the statement must not be rerun). The
// row description and the first rows are held back (maxHeldRows) until
// the statement completes, or more rows come.
//
// The held rows are copied (pgwire does not let us keep vals) into one
// buffer, their values' headers into one slice, both the session's
// (takeBufs, giveBufs): a point SELECT held its row in two new slices
// and grew a third every time. The writer itself is not reused: the
// statement's state keeps it (stmtState.w), and a cursor evaluated later
// (a suspended portal, FETCH) may still send a WARNING through it, which
// then passes straight through (sent).
type stmtWriter struct {
	pgwire.ResultWriter
	sent bool
	cols []pgwire.Column
	// described: BeginRows was called (cols may be empty).
	described bool
	heldBufs
	heldBytes int
}

// heldBufs hold a stmtWriter's rows: buf their bytes, vals their values
// (nil = NULL) row after row, ends where each row's values end in vals.
type heldBufs struct {
	buf  []byte
	vals [][]byte
	ends []int
}

// maxKeptHeldBuf bounds the held-row buffer a session keeps between
// statements; a bigger one is dropped after its statement.
const maxKeptHeldBuf = 64 << 10

// takeBufs moves from's buffers, emptied, to w.
func (w *stmtWriter) takeBufs(from *heldBufs) {
	clear(from.vals) // let go of the previous rows' bytes
	w.heldBufs = heldBufs{buf: from.buf[:0], vals: from.vals[:0], ends: from.ends[:0]}
	*from = heldBufs{}
}

// giveBufs moves w's buffers to to, once w holds no rows (flushed, or
// its statement failed); w keeps none, so nothing written through it
// later can touch them.
func (w *stmtWriter) giveBufs(to *heldBufs) {
	if w == nil {
		return
	}
	if cap(w.buf) <= maxKeptHeldBuf && cap(w.vals) <= maxHeldRows {
		*to = w.heldBufs
	}
	w.heldBufs = heldBufs{}
	w.heldBytes = 0
}

// flush sends everything held back; from then on the output is the
// client's.
func (w *stmtWriter) flush() error {
	w.sent = true
	if w.described {
		w.described = false
		cols := w.cols
		w.cols = nil
		if err := w.ResultWriter.BeginRows(cols); err != nil {
			return err
		}
	}
	start := 0
	for _, end := range w.ends {
		if err := w.ResultWriter.WriteRow(w.vals[start:end:end]); err != nil {
			return err
		}
		start = end
	}
	clear(w.vals)
	w.buf, w.vals, w.ends, w.heldBytes = w.buf[:0], w.vals[:0], w.ends[:0], 0
	return nil
}

func (w *stmtWriter) BeginRows(cols []pgwire.Column) error {
	w.cols, w.described = cols, true
	return nil
}

func (w *stmtWriter) WriteRow(vals [][]byte) error {
	if !w.sent && len(w.ends) < maxHeldRows && w.heldBytes < maxHeldBytes {
		n := 0
		for _, v := range vals {
			n += len(v)
		}
		// A value points into buf as it is when appended: a later append
		// that moves buf leaves it in the old array, intact. buf is never
		// nil, so an empty value stays non-NULL.
		if w.buf == nil {
			w.buf = make([]byte, 0, max(n, 256))
		}
		w.buf = slices.Grow(w.buf, n)
		for _, v := range vals {
			if v == nil {
				w.vals = append(w.vals, nil) // NULL stays nil
				continue
			}
			w.buf = append(w.buf, v...)
			w.vals = append(w.vals, w.buf[len(w.buf)-len(v):len(w.buf):len(w.buf)])
		}
		w.ends = append(w.ends, len(w.vals))
		w.heldBytes += n + 24*len(vals)
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	return w.ResultWriter.WriteRow(vals)
}

func (w *stmtWriter) Complete(tag string) error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.ResultWriter.Complete(tag)
}

func (w *stmtWriter) EmptyQuery() error {
	w.sent = true
	return w.ResultWriter.EmptyQuery()
}

func (w *stmtWriter) CopyIn(ctx context.Context, f pgwire.CopyFormat) (pgwire.CopyInReader, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.ResultWriter.CopyIn(ctx, f)
}

func (w *stmtWriter) CopyOut(f pgwire.CopyFormat) (pgwire.CopyOutWriter, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.ResultWriter.CopyOut(f)
}
