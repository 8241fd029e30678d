package session

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgcatalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sequence"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// maxAutoRetries bounds the automatic reruns of an implicit transaction.
const maxAutoRetries = 20

// autoRetryBackoff waits before rerun attempt+1 of an implicit
// transaction: 1 ms doubling up to 200 ms, with jitter, so that the
// retries outlast a conflict as long as a DDL rewrite or a slow commit on
// a loaded node (about 2.5 s over maxAutoRetries) instead of spending
// them all in a few milliseconds; ctx (statement_timeout, a cancel) cuts
// the wait short. It reports whether ctx is still live.
func autoRetryBackoff(ctx context.Context, attempt int) bool {
	d := time.Millisecond << min(attempt, 8)
	d = min(d, 200*time.Millisecond)
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Session is the SQL session of one connection (pgwire.Session). pgwire
// calls it from the connection's goroutine only.
type Session struct {
	// lastGen is the catalog generation of the last plan cache key
	// (planCacheKey).
	lastGen string
	// wroteCatalog reports txnWroteCatalog (catalogReader).
	wroteCatalog func() bool
	// heldBufs are the buffers of the next statement's held rows
	// (stmtWriter).
	heldBufs heldBufs
	// descCache is the last result description a cursor made.
	descCache descCache
	// rowScratch is where cursors encode rows for the client.
	rowScratch rowScratch
	// fast is the scratch of the kept point reads' fast path
	// (fastread.go), made by the first.
	fast *fastRead
	// spCache is searchPath's last answer and what it depends on.
	spCache struct {
		setting, user, temp string
		out                 []string
	}
	// virtFns are virtualLists' method values.
	virtFns struct {
		activity   func() []plan.SessionActivity
		cursors    func() []plan.SessionCursor
		statements func() []plan.StatementStats
		settings   func() [][3]string
	}
	// workMemCache is workMem's last answer and the settings it read.
	workMemCache struct {
		ok               bool
		workMem, testing string
		bytes            int64
	}
	// timeouts are lock_timeout, statement_timeout and the idle
	// timeouts as last parsed, with their text: parsed again only when a
	// SET changed it, not for every statement (stmtContext) and every
	// ReadyForQuery (Idle).
	timeouts struct {
		lock, stmt, idle, idleInTxn durationSetting
	}
	// hot are the settings every statement reads (hotVars).
	hot hotVars
	// temp is the session's temporary tables (temp.go).
	temp tempState
	// notes is the session's LISTEN/NOTIFY state (notify.go).
	notes notifyState
	b     *Backend
	user  string
	super bool
	db    *catalog.Database
	pid   uint32
	log   *slog.Logger
	// act is the session's entry in the node's registry (activity.go).
	act *activity
	// observed is the last statement context found to carry act as its
	// lock wait observer (stmtContext), of a comparable type; nil: none.
	observed context.Context
	// txnWroteCatalog: the current transaction has run DDL, so its
	// statements resolve names by reading them (dispatch.go resolver).
	txnWroteCatalog bool

	// vars holds every setting's canonical value by lower-case name;
	// defaults are the values after startup (RESET's target); reported
	// are the reportable values last sent to the client.
	vars, defaults map[string]string
	// reported[i] is the value of reportedSettings[i] the client was
	// last sent (a slice: flushReports runs twice per statement, and a
	// map lookup per setting was 1% of a point SELECT's CPU).
	reported []string
	// varsGen counts writes to vars (every site that stores a setting
	// bumps it); reportedGen is its value when reported was last brought
	// up to date (flushReports).
	varsGen, reportedGen uint64
	loc                  *time.Location
	rng                  *rand.Rand
	locks                *advisoryHolder
	prepared             map[string]*sqlPrepared
	// simplePlans are the cached plans of simple-protocol statements by
	// parameterized text (plancache.go).
	simplePlans map[string]*simpleEntry
	shapes      map[string]*shapeEntry
	// txnTexts are parsed transaction-control queries by text
	// (plancache.go, parseTxnControl).
	txnTexts map[string][]parser.Statement
	// simpleSW is the statsWriter of the Query SimpleQuery is answering.
	simpleSW statsWriter
	// curShape is the shape of the Query message running (nil: none);
	// fps caches fingerprints by shape or text (stmtstats.go).
	curShape *queryShape
	fps      fingerprints
	// shapeBuf is the shape each Query is scanned into (shapeOf).
	shapeBuf queryShape

	// Transaction state (see the package doc). txn is created lazily by
	// the first statement that reads or writes.
	inTxn, block, aborted bool
	// extImplicit: an implicit transaction opened by an extended-protocol
	// Execute, committed at Sync.
	extImplicit bool
	// extHeld is the Execute whose CommandComplete waits for Sync (nil:
	// none); see Sync.
	extHeld *heldExecute
	// execSpare is the Execute allocation the next Execute may take
	// (portal.Execute); nil while one runs.
	execSpare   *execAlloc
	txn         *kv.Txn
	txnIso      kv.IsolationLevel
	txnIsoName  string
	txnReadOnly bool
	// txnAsOf is the transaction's AS OF SYSTEM TIME (asof.go); empty:
	// none, it reads at the present.
	txnAsOf  hlc.Timestamp
	txnStart time.Time
	// msgTime is when the Query or Execute being answered arrived (now);
	// zero between them.
	msgTime  time.Time
	txnStmts int
	// savedVars are the settings at the start of the transaction (ROLLBACK
	// restores them); localVars the values SET LOCAL overrode, restored at
	// the end either way.
	savedVars, localVars map[string]string
	// cursors are the open portals' running plans, closed at transaction
	// end.
	cursors map[*cursor]struct{}
	// savepoints of the open block, oldest first.
	savepoints []savepoint
	// seqs is the session's sequence access (nextval and friends); cur is
	// the statement running, whose context and transaction it uses.
	seqs *sequence.Session
	cur  *stmtState
	// sqlCursors are the open DECLAREd cursors of the transaction.
	sqlCursors map[string]*cursor
	// multiImplicit: the implicit transaction holds several statements of
	// one Query message (an implicit block, for VACUUM's check).
	multiImplicit bool
	// statsWritten are the tables ANALYZE collected in the transaction;
	// mutations the rows its DML changed per table (analyze.go).
	statsWritten []catalog.ID
	mutations    map[*catalog.Table]int64
	// analyzed: per table the transaction's ANALYZE of the whole table
	// read, the refresher's count of changes when it started (analyze.go).
	analyzed map[catalog.ID]int64
}

var (
	_ pgwire.Session        = (*Session)(nil)
	_ pgwire.StatementBaser = (*Session)(nil)
)

// ParameterStatus implements pgwire.Session.
func (s *Session) ParameterStatus() map[string]string {
	out := make(map[string]string)
	for i, st := range reportedSettings {
		v := s.vars[st.key]
		out[st.name] = v
		s.reported[i] = v
	}
	s.reportedGen = s.varsGen
	return out
}

// flushReports sends ParameterStatus for reportable settings that changed
// since they were last reported. It compares them only when some setting
// was written since (varsGen): every statement calls it, and nearly none
// follows a SET.
func (s *Session) flushReports(w pgwire.ResultWriter) error {
	if s.reportedGen == s.varsGen {
		return nil
	}
	for i, st := range reportedSettings {
		v := s.vars[st.key]
		if s.reported[i] != v {
			if err := w.ParameterStatus(st.name, v); err != nil {
				return err
			}
			s.reported[i] = v
		}
	}
	s.reportedGen = s.varsGen
	return nil
}

// TxnStatus implements pgwire.Session.
func (s *Session) TxnStatus() pgwire.TxnStatus {
	switch {
	case s.aborted:
		return pgwire.TxnFailed
	case s.block:
		return pgwire.TxnActive
	}
	return pgwire.TxnIdle
}

// Close implements pgwire.Session.
func (s *Session) Close() {
	if s.inTxn {
		s.endTxn(context.Background(), false)
	}
	s.dropTempSchema(context.Background())
	s.closeNotify()
	s.locks.close()
	s.b.sessions.remove(s.act)
}

// Errors that end an idle connection (Idle).
var (
	errIdleInTxnTimeout = pgerror.New(pgerrcode.IdleInTransactionSessionTimeout, "terminating connection due to idle-in-transaction timeout")
	errIdleTimeout      = pgerror.New("57P05", "terminating connection due to idle-session timeout")
)

// Idle implements pgwire.Idler: before each ReadyForQuery the session
// shows itself idle in pg_stat_activity, and tells pgwire how long the
// client may stay silent: idle_in_transaction_session_timeout inside a
// block (open or failed), idle_session_timeout outside one. When it
// passes, pgwire ends the connection with the FATAL error and Close rolls
// the transaction back, releasing its locks.
func (s *Session) Idle() (time.Duration, error) {
	h := s.hotVars()
	state, setting, cache, err := "idle", h.idleTimeout, &s.timeouts.idle, errIdleTimeout
	var xactStart time.Time
	if s.block {
		state, setting, cache, err = "idle in transaction", h.idleInTxnTimeout, &s.timeouts.idleInTxn, errIdleInTxnTimeout
		if s.aborted {
			state = "idle in transaction (aborted)"
		}
		xactStart = s.txnStart
	}
	s.act.idle(state, xactStart, h.appName)
	d := cache.get(setting)
	if d <= 0 {
		return 0, nil
	}
	return d, err
}

// statementStarts shows the statement in pg_stat_activity.
func (s *Session) statementStarts(sql string) {
	now := s.now()
	xactStart := now
	if s.block {
		xactStart = s.txnStart
	}
	s.act.begin(sql, now, xactStart)
}

// typesCtx is the type context without catalog access (Bind's parameter
// input, utility statements).
func (s *Session) typesCtx() *types.Context { return &types.Context{Location: s.loc} }

// regTypes is the type context of a statement running in txn: the time
// zone, and the reg* resolver over the catalog as of txn. A resolver keeps
// its catalog snapshot, so each statement gets its own.
func (s *Session) regTypes(ctx context.Context, txn *kv.Txn) *types.Context {
	return s.regTypesOver(ctx, txn, s.catalogReader(txn))
}

// regTypesOver is regTypes reading the catalog through r, a reader over
// txn.
func (s *Session) regTypesOver(ctx context.Context, txn *kv.Txn, r *catalog.Reader) *types.Context {
	// The resolver may be used after the statement's context ends (a
	// portal resumed by a later Execute): it must not inherit its
	// cancellation.
	res := pgcatalog.NewRegResolver(context.WithoutCancel(ctx), r, s.db, s.user, s.searchPath())
	if s.b.cfg.Tablets != nil {
		res.SetSizes(s.b.cfg.Tablets) // pg_table_size and friends
	}
	if txn != nil {
		res.SetJobs(txn) // citus_rebalance_status
	}
	return &types.Context{Location: s.loc, Reg: res}
}

// searchPath is search_path with $user resolved to the session user.
// The result is shared between calls (it was parsed for every statement,
// 5% of the objects a point SELECT allocated) and must not be modified;
// its capacity ends with it, so appending copies.
func (s *Session) searchPath() []string {
	setting := s.vars["search_path"]
	if s.spCache.out != nil && s.spCache.setting == setting && s.spCache.user == s.user && s.spCache.temp == s.temp.name {
		return s.spCache.out
	}
	raw := parseSearchPath(setting)
	out := make([]string, 0, len(raw)+1)
	if s.temp.name != "" {
		// The session's temporary schema is searched first, as
		// PostgreSQL's pg_temp is unless the path lists it elsewhere.
		out = append(out, s.temp.name)
	}
	for _, p := range raw {
		if p == "$user" {
			p = s.user
		}
		if p == "pg_temp" {
			continue // listed first already
		}
		out = append(out, p)
	}
	out = out[:len(out):len(out)]
	s.spCache.setting, s.spCache.user, s.spCache.temp, s.spCache.out = setting, s.user, s.temp.name, out
	return out
}

// isolationOf maps an isolation level name to the KV level.
func isolationOf(name string) kv.IsolationLevel {
	switch name {
	case "serializable":
		return kv.Serializable
	case "repeatable read":
		return kv.Snapshot
	}
	return kv.ReadCommitted // read committed, and read uncommitted as in Postgres
}

// now is the time of the client message being answered (msgTime), or
// the clock's when none is: PostgreSQL's statement_timestamp() is the
// receipt of the latest message, and an implicit transaction starts
// then too, so the statements and the transaction a message starts
// share one clock reading instead of taking three.
func (s *Session) now() time.Time {
	if !s.msgTime.IsZero() {
		return s.msgTime
	}
	return time.Now()
}

// beginTxn opens a transaction (a block when explicit) with the session's
// default characteristics.
func (s *Session) beginTxn(explicit bool) {
	s.inTxn, s.block, s.aborted = true, explicit, false
	h := s.hotVars()
	s.txnIsoName = h.defaultIso
	s.txnIso = isolationOf(s.txnIsoName)
	s.txnReadOnly = h.defaultReadOnly
	s.txnAsOf = hlc.Timestamp{}
	s.txnStart = s.now()
	s.txnStmts = 0
	s.savedVars = nil // saved by saveVars before the first change
	s.localVars = nil
}

// saveVars keeps the settings as the transaction found them, for ROLLBACK,
// before the first change in the transaction. Lazily: cloning them in
// every transaction was 3% of the bytes allocated under pgbench
// select-only, whose transactions change none.
func (s *Session) saveVars() {
	if s.inTxn && s.savedVars == nil {
		s.savedVars = cloneVars(s.vars)
	}
}

// kvTxn returns the transaction's KV transaction, creating it on first
// use. Its heartbeat lives as long as the session's transaction, not the
// statement, so it gets a context of its own.
func (s *Session) kvTxn() *kv.Txn {
	if s.txn == nil && !s.txnAsOf.IsEmpty() {
		// A historical read writes nothing, so buffers nothing.
		s.txn = s.b.db.NewAsOfTxn(context.Background(), "sql txn as of system time", s.txnAsOf)
		s.txnWroteCatalog = false
	}
	if s.txn == nil {
		s.txn = s.b.db.NewTxn(context.Background(), "sql txn", s.txnIso)
		s.txnWroteCatalog = false
		switch s.bufferWrites() {
		case bufferWithLocks:
			s.txn.EnableWriteBuffering()
		case bufferWithoutLocks:
			// auto's transactions are implicit and rerun whole on
			// 40001: an unreplicated lock per statement would only
			// cost them a round trip.
			s.txn.EnableWriteBufferingWithoutLocks()
		}
	}
	return s.txn
}

// bufferWrites decides, by cairn_buffered_writes, whether and how the new
// transaction buffers its writes (kv/txn_buffer.go). on buffers every
// transaction, each writing statement taking unreplicated locks so a
// second writer of a row waits at its statement as in PostgreSQL; a
// transaction whose writes land on one tablet (a colocated database's
// tables) then commits in one phase. auto, the default, is on, except
// that implicit transactions of the simple protocol take no locks: the
// session reruns them whole on 40001 while nothing of theirs has reached
// the client, so a lock would only cost each writing statement a round
// trip (docs/architecture.md, "Write buffering"). off writes intents as
// each statement goes.
func (s *Session) bufferWrites() bufferMode {
	switch s.vars["cairn_buffered_writes"] {
	case "on":
		return bufferWithLocks
	case "auto":
		if !s.block && !s.extImplicit {
			return bufferWithoutLocks
		}
		return bufferWithLocks
	}
	return noBuffer
}

// bufferMode is how a new transaction treats its writes.
type bufferMode int

const (
	noBuffer bufferMode = iota
	// bufferWithLocks: buffered, each writing statement taking
	// unreplicated locks on what it writes, so a second writer waits at
	// its statement as in PostgreSQL.
	bufferWithLocks
	// bufferWithoutLocks: buffered, no locks (an implicit transaction).
	bufferWithoutLocks
)

// endTxn commits or rolls back the open transaction and returns the
// session to idle. A failed commit rolls back. Settings revert on
// rollback; SET LOCAL values revert either way.
func (s *Session) endTxn(ctx context.Context, commit bool) error {
	for c := range s.cursors {
		c.close()
	}
	clear(s.cursors) // kept: a map per implicit transaction was one more allocation per statement
	var err error
	if s.txn != nil {
		if commit {
			err = s.onCommitActions(ctx, s.txn)
			if err != nil {
				_ = s.txn.Rollback(context.WithoutCancel(ctx))
				commit = false
			} else if err = s.txn.Commit(ctx); err != nil {
				_ = s.txn.Rollback(context.WithoutCancel(ctx))
				commit = false
			} else {
				s.b.commits[s.txn.CommitPhases()].Add(1)
			}
		} else {
			err = s.txn.Rollback(context.WithoutCancel(ctx))
			if err != nil {
				s.log.Debug("session: rollback failed", "err", err)
				err = nil // the transaction is gone either way; its intents expire
			}
		}
		s.b.cache.EndDDL(s.txn)
	}
	// What depends on the settings (the time zone) is made again only
	// when they change here: every other write to them applies it.
	if !commit && s.savedVars != nil {
		s.vars = s.savedVars
		s.varsGen++
		s.applyDerived()
	} else if len(s.localVars) > 0 {
		for k, v := range s.localVars {
			s.vars[k] = v
		}
		s.varsGen++
		s.applyDerived()
	}
	s.sqlCursors = s.keepHeldCursors(commit)
	s.endTxnStats(commit)
	s.endTxnNotify(commit)
	s.txn, s.inTxn, s.block, s.aborted, s.extImplicit = nil, false, false, false, false
	// The transaction that wrote the catalog is over: the next statement
	// parsed before its kv.Txn is made (noteShape's simpleEntryFor) must
	// not take it for one that ran DDL, or its shape keeps no plan for
	// the rest of the session.
	s.txnWroteCatalog = false
	s.savedVars, s.localVars, s.savepoints = nil, nil, nil
	s.locks.endTxn()
	return err
}

// abortBlock moves an open block to the aborted state after an error:
// only COMMIT, ROLLBACK (which end the block) and ROLLBACK TO SAVEPOINT
// are accepted from now on.
func (s *Session) abortBlock(ctx context.Context) {
	for c := range s.cursors {
		c.close()
	}
	s.cursors, s.sqlCursors = nil, s.keepHeldCursors(false)
	// Without savepoints nothing can resume the transaction: roll it back
	// now to release its locks early. With them, ROLLBACK TO needs it.
	if s.txn != nil && len(s.savepoints) == 0 {
		_ = s.txn.Rollback(context.WithoutCancel(ctx))
		s.b.cache.EndDDL(s.txn)
		s.txn = nil
	}
	s.aborted = true
}

// FailStatement implements pgwire.StatementFailer: an error pgwire found
// in the extended protocol fails the statement as one of ours would.
func (s *Session) FailStatement(ctx context.Context) { s.failStatement(ctx) }

// failStatement reacts to a statement's error: a block becomes aborted,
// an implicit transaction rolls back.
func (s *Session) failStatement(ctx context.Context) {
	switch {
	case s.block:
		s.abortBlock(ctx)
	case s.inTxn:
		_ = s.endTxn(ctx, false)
	}
}

// applyDerived recomputes what depends on settings (the time zone).
func (s *Session) applyDerived() {
	if loc, _, err := loadZone(s.vars["timezone"]); err == nil {
		s.loc = loc
	}
}

// errStatementTimeout is the cause of a statement's context when
// statement_timeout fires.
var errStatementTimeout = pgerror.New(pgerrcode.QueryCanceled, "canceling statement due to statement timeout")

// errLockTimeout ends a lock wait longer than lock_timeout, on a row (the
// tablet's lock wait, kv.WithLockTimeout) or an advisory lock.
var errLockTimeout = pgerror.New(pgerrcode.LockNotAvailable, "canceling statement due to lock timeout")

// stmtContext bounds one statement by statement_timeout and gives each of
// its lock waits lock_timeout (kv.WithLockTimeout carries it to the
// tablets in every batch the statement sends).
func (s *Session) stmtContext(ctx context.Context) (context.Context, context.CancelFunc) {
	lockD, stmtD := s.stmtTimeouts()
	if !s.observes(ctx) {
		// Not a context pgwire derived from StatementBase's (a caller
		// inside the node, a test).
		ctx = kvpb.WithLockWaitObserver(ctx, s.act)
	}
	if lockD > 0 {
		ctx = kv.WithLockTimeout(ctx, lockD)
	}
	if stmtD <= 0 {
		return ctx, noCancel
	}
	return context.WithTimeoutCause(ctx, stmtD, errStatementTimeout)
}

// observes reports whether ctx carries the session's lock wait observer.
// pgwire hands a connection's statements one context while nothing could
// have seen it end (pgwire invariant 11), derived from StatementBase's:
// the context last found to carry the observer is remembered, and the
// same context is not asked again (a walk up its parents and an interface
// assertion per statement). A context's values never change, so the same
// context carries the same observer. observed holds only a context of a
// comparable type, so comparing another with it cannot panic.
func (s *Session) observes(ctx context.Context) bool {
	if s.observed != nil && ctx == s.observed {
		return true
	}
	if kvpb.LockWaitObserverOf(ctx) != s.act {
		return false
	}
	if reflect.TypeOf(ctx).Comparable() {
		s.observed = ctx
	}
	return true
}

// StatementBase implements pgwire.StatementBaser: every statement's
// context carries the session's lock wait observer (pg_stat_activity's
// wait_event_type 'Lock'), added once rather than by each stmtContext.
func (s *Session) StatementBase(ctx context.Context) context.Context {
	return kvpb.WithLockWaitObserver(ctx, s.act)
}

// noCancel is the CancelFunc of a statement context without a timeout.
func noCancel() {}

// stmtTimeouts returns lock_timeout and statement_timeout (0: none, as
// for a value that does not parse), parsing each again only when its text
// changed.
func (s *Session) stmtTimeouts() (lock, stmt time.Duration) {
	t, h := &s.timeouts, s.hotVars()
	return t.lock.get(h.lockTimeout), t.stmt.get(h.stmtTimeout)
}

// hotVars are the settings every statement reads (the timeouts, the
// transaction defaults, the plan key's settings, distsql), copied out of
// vars once per change of them (varsGen): a map lookup each, eleven per
// prepared point SELECT, were 2-3% of its CPU (issue 22, eighteenth
// session).
type hotVars struct {
	ok                                                      bool
	gen                                                     uint64 // varsGen when copied
	lockTimeout, stmtTimeout, idleTimeout, idleInTxnTimeout string
	appName, defaultIso                                     string
	searchPath, timeZone, dateStyle, intervalStyle          string
	defaultReadOnly, distsql                                bool
}

// hotVars returns the session's hot settings, copied again from vars if
// a setting was written since (every write bumps varsGen).
func (s *Session) hotVars() *hotVars {
	h := &s.hot
	if h.ok && h.gen == s.varsGen {
		return h
	}
	v := s.vars
	*h = hotVars{ok: true, gen: s.varsGen,
		lockTimeout: v["lock_timeout"], stmtTimeout: v["statement_timeout"],
		idleTimeout: v["idle_session_timeout"], idleInTxnTimeout: v["idle_in_transaction_session_timeout"],
		appName: v["application_name"], defaultIso: v["default_transaction_isolation"],
		searchPath: v["search_path"], timeZone: v["timezone"], dateStyle: v["datestyle"], intervalStyle: v["intervalstyle"],
		defaultReadOnly: v["default_transaction_read_only"] == "on", distsql: v["distsql"] == "on"}
	return h
}

// durationSetting is a duration setting's last parse.
type durationSetting struct {
	ok   bool
	text string
	d    time.Duration
}

// get returns the duration text gives (0: none, as for a value that
// does not parse or is not positive), parsing it only when it is not
// the text parsed last.
func (c *durationSetting) get(text string) time.Duration {
	if !c.ok || c.text != text {
		c.ok, c.text, c.d = true, text, 0
		if d, err := parseDuration(text); err == nil && d > 0 {
			c.d = d
		}
	}
	return c.d
}

// sqlError turns an error from below into what the client should see:
// the statement timeout, 40001 for retryable KV errors.
func sqlError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && context.Cause(ctx) == errStatementTimeout {
		return errStatementTimeout
	}
	if wie, ok := errors.AsType[*kvpb.WriteIntentError](err); ok && wie.LockTimeout {
		return &causeError{errLockTimeout, err}
	}
	if fe := faultError(err); fe != nil {
		return fe
	}
	var exhausted *kv.RetriesExhaustedError
	if kvpb.IsRetryable(err) || errors.As(err, &exhausted) || errors.Is(err, kv.ErrTxnAborted) {
		if c := pgerror.Code(err); c == pgerrcode.SerializationFailure || c == pgerrcode.DeadlockDetected {
			return err
		}
		return retryError(err)
	}
	return err
}

// retryError is the 40001 a client sees for a transaction that must
// restart. The message starts with "restart transaction:" (clients that
// know CockroachDB look for it) and goes on with PostgreSQL's wording for
// the same situation; the KV error, keys and timestamps, is the detail.
// A deadlock victim gets PostgreSQL's 40P01.
func retryError(err error) error {
	var abt *kvpb.TransactionAbortedError
	if errors.As(err, &abt) && abt.Reason == kvpb.AbortDeadlock {
		return &causeError{pgerror.New(pgerrcode.DeadlockDetected, "deadlock detected").WithDetail("%s", err.Error()), err}
	}
	var wto *kvpb.WriteTooOldError
	var rty *kvpb.TransactionRetryError
	msg := "could not serialize access due to read/write dependencies among transactions"
	switch {
	case errors.As(err, &wto):
		msg = "could not serialize access due to concurrent update"
	case errors.As(err, &rty) && rty.Reason == kvpb.RetryClockPinned:
		// Nothing conflicted: the transaction's timestamp was one the
		// gateway may not read at (clockmon.Guard).
		msg = "this node's clock was held back while its disk saved the clock's upper bound"
	}
	pe := pgerror.New(pgerrcode.SerializationFailure, "restart transaction: %s", msg).
		WithDetail("%s", err.Error()).
		WithHint("The transaction might succeed if retried.")
	return &causeError{pe, err}
}

// causeError is a client-facing error that keeps the error it stands for
// reachable (kvpb.IsRetryable still sees a KV retry through it) without
// printing it.
type causeError struct {
	pg    *pgerror.Error
	cause error
}

func (e *causeError) Error() string   { return e.pg.Error() }
func (e *causeError) Unwrap() []error { return []error{e.pg, e.cause} }

func isRetryable(err error) bool {
	return kvpb.IsRetryable(err) && pgerror.Code(err) != pgerrcode.QueryCanceled
}

// stmtGroup is one statement as the user typed it with the statements the
// dialect rewriter derived from it (run as one, with one tag).
type stmtGroup struct {
	main    *parser.Statement
	derived []*parser.Statement
	// scanned: main is a statement of the query's shape, not the query
	// itself, which was not parsed (plancache.go).
	scanned *scannedQuery
}

func groupStatements(stmts []parser.Statement) []stmtGroup {
	return appendGroups(nil, stmts)
}

// appendGroups is groupStatements appending to out.
func appendGroups(out []stmtGroup, stmts []parser.Statement) []stmtGroup {
	for i := range stmts {
		if stmts[i].Derived && len(out) > 0 {
			g := &out[len(out)-1]
			g.derived = append(g.derived, &stmts[i])
			continue
		}
		out = append(out, stmtGroup{main: &stmts[i]})
	}
	return out
}

// node returns the statement's AST node.
func node(st *parser.Statement) any {
	if st.AST == nil || st.AST.Stmt == nil {
		return nil
	}
	return st.AST.Stmt.Node
}

// endsTxn reports whether st may run in an aborted block: COMMIT,
// ROLLBACK, ROLLBACK TO SAVEPOINT.
func endsTxn(st *parser.Statement) bool {
	n, ok := node(st).(*pg_query.Node_TransactionStmt)
	if !ok {
		return false
	}
	switch n.TransactionStmt.Kind {
	case pg_query.TransactionStmtKind_TRANS_STMT_COMMIT, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK,
		pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO, pg_query.TransactionStmtKind_TRANS_STMT_PREPARE,
		pg_query.TransactionStmtKind_TRANS_STMT_COMMIT_PREPARED, pg_query.TransactionStmtKind_TRANS_STMT_ROLLBACK_PREPARED:
		return true
	}
	return false
}

var errInFailedTxn = pgerror.New(pgerrcode.InFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")

// SimpleQuery implements pgwire.Session.
func (s *Session) SimpleQuery(ctx context.Context, sql string, w pgwire.ResultWriter) error {
	start := time.Now()
	s.msgTime = start
	// The session's own: one allocation fewer per Query (SimpleQuery
	// does not run inside another).
	s.simpleSW = statsWriter{ResultWriter: w}
	sw := &s.simpleSW
	s.curShape = nil
	err := s.simpleQuery(ctx, sql, sw)
	s.msgTime = time.Time{}
	if err == nil && !sw.empty {
		s.recordStatement(sql, s.curShape, time.Since(start), sw.rows)
	}
	s.simpleSW = statsWriter{}
	return err
}

func (s *Session) simpleQuery(ctx context.Context, sql string, w pgwire.ResultWriter) error {
	s.statementStarts(sql)
	if err := s.flushReports(w); err != nil {
		return err
	}
	sh := shapeOf(sql, &s.shapeBuf)
	s.curShape = sh
	if done, err := s.queryFast(ctx, sql, sh, w); done {
		return err
	}
	if g, ok := s.shapeGroup(sql, sh); ok {
		// A single SELECT of a known shape, not parsed (plancache.go).
		if s.inTxn {
			return s.inBlock(ctx, g, w)
		}
		return s.autocommit(ctx, []stmtGroup{g}, w)
	}
	stmts, err := s.parseQuery(sql, sh)
	if err != nil {
		if s.block {
			s.abortBlock(ctx)
		}
		return err
	}
	if len(stmts) == 0 {
		return w.EmptyQuery()
	}
	s.noteShape(sql, sh, stmts)
	var one [1]stmtGroup // a query of one statement: no allocation
	groups := appendGroups(one[:0], stmts)
	txnControl := false
	for i := range stmts {
		if stmts[i].IsTransactionControl() {
			txnControl = true
		}
	}
	if len(groups) > 1 && !txnControl && !s.inTxn {
		return s.autocommit(ctx, groups, w)
	}
	for _, g := range groups {
		if s.inTxn || isTxnControl(g.main) {
			if err := s.inBlock(ctx, g, w); err != nil {
				return err
			}
			continue
		}
		if err := s.autocommit(ctx, []stmtGroup{g}, w); err != nil {
			return err
		}
	}
	return nil
}

func isTxnControl(st *parser.Statement) bool {
	_, ok := node(st).(*pg_query.Node_TransactionStmt)
	return ok
}

// inBlock runs one statement in the open transaction (or a transaction
// control statement in any state).
func (s *Session) inBlock(ctx context.Context, g stmtGroup, w pgwire.ResultWriter) error {
	if s.aborted && !endsTxn(g.main) {
		return errInFailedTxn
	}
	if err := s.execGroup(ctx, g, w); err != nil {
		s.failStatement(ctx)
		return err
	}
	return s.flushReports(w)
}

// autocommit runs groups in one implicit transaction and commits it,
// retrying the whole transaction on a retryable error while nothing has
// been sent to the client.
func (s *Session) autocommit(ctx context.Context, groups []stmtGroup, w pgwire.ResultWriter) error {
	if len(groups) == 1 {
		// One statement: statement_timeout bounds it with its commit
		// (where a buffered write first meets another's lock) and its
		// automatic retries, as PostgreSQL's bounds everything from the
		// Query message to the end of its implicit commit.
		var cancel context.CancelFunc
		ctx, cancel = s.stmtContext(ctx)
		defer cancel()
	}
	for attempt := 0; ; attempt++ {
		tw := &trackingWriter{ResultWriter: w, hold: true}
		err := s.autocommitOnce(ctx, groups, tw)
		if err == nil {
			if tw.heldCols != nil {
				if err := w.BeginRows(tw.heldCols); err != nil {
					return err
				}
				for _, r := range tw.heldRows {
					if err := w.WriteRow(r); err != nil {
						return err
					}
				}
			}
			if tw.held != "" {
				if err := w.Complete(tw.held); err != nil {
					return err
				}
			}
			return s.flushReports(w)
		}
		if !isRetryable(err) || tw.sent || attempt >= maxAutoRetries || ctx.Err() != nil || !autoRetryBackoff(ctx, attempt) {
			return sqlError(ctx, err)
		}
		s.log.Debug("session: retrying implicit transaction", "attempt", attempt+1, "err", err)
	}
}

func (s *Session) autocommitOnce(ctx context.Context, groups []stmtGroup, tw *trackingWriter) error {
	s.beginTxn(false)
	s.multiImplicit = len(groups) > 1
	defer func() { s.multiImplicit = false }()
	if len(groups) == 1 {
		// autocommit bounded ctx already, commit included.
		if err := s.execGroupIn(ctx, groups[0], tw); err != nil {
			s.failStatement(ctx)
			return err
		}
		if !s.inTxn || s.block {
			// The statement ended or converted the implicit transaction
			// (only transaction control does; SimpleQuery keeps those
			// out of implicit groups, Execute does not).
			return nil
		}
		return s.endTxn(ctx, true)
	}
	// Several statements: statement_timeout bounds each one (PostgreSQL
	// 13 and later), and the commit counts with the last.
	for i, g := range groups {
		// Only the last statement's tag waits for the commit; the others
		// go out in order between their rows.
		tw.hold = i == len(groups)-1
		gctx, cancel := s.stmtContext(ctx)
		err := s.execGroupIn(gctx, g, tw)
		if err == nil && tw.hold && s.inTxn && !s.block {
			err = sqlError(gctx, s.endTxn(gctx, true))
		}
		cancel()
		if err != nil {
			s.failStatement(ctx)
			return err
		}
		if !s.inTxn || s.block {
			return nil
		}
	}
	return nil
}

// trackingWriter records whether anything reached the client (which
// forbids an automatic retry) and can hold back the final command tag
// until the transaction commits.
type trackingWriter struct {
	pgwire.ResultWriter
	sent bool
	hold bool
	held string
	// heldCols and heldRows are a small result kept until the implicit
	// transaction commits (holdRows), so that a retry is still possible.
	heldCols []pgwire.Column
	heldRows [][][]byte
}

// holdRows keeps a result to send once the transaction has committed
// (the Citus functions' one void row: their DDL commits with the
// implicit transaction, whose retryable failure must not reach the
// client when a rerun can succeed). It reports false when the writer
// does not hold (not an implicit transaction's): send it now.
func (t *trackingWriter) holdRows(cols []pgwire.Column, rows [][][]byte) bool {
	if !t.hold {
		return false
	}
	t.heldCols, t.heldRows = cols, rows
	return true
}

// rowHolder is implemented by trackingWriter.
type rowHolder interface {
	holdRows(cols []pgwire.Column, rows [][][]byte) bool
}

func (t *trackingWriter) BeginRows(cols []pgwire.Column) error {
	t.sent = true
	return t.ResultWriter.BeginRows(cols)
}

func (t *trackingWriter) WriteRow(vals [][]byte) error {
	t.sent = true
	return t.ResultWriter.WriteRow(vals)
}

func (t *trackingWriter) Complete(tag string) error {
	if t.hold {
		t.held = tag
		return nil
	}
	t.sent = true
	return t.ResultWriter.Complete(tag)
}

func (t *trackingWriter) CopyIn(ctx context.Context, f pgwire.CopyFormat) (pgwire.CopyInReader, error) {
	t.sent = true
	return t.ResultWriter.CopyIn(ctx, f)
}

func (t *trackingWriter) CopyOut(f pgwire.CopyFormat) (pgwire.CopyOutWriter, error) {
	t.sent = true
	return t.ResultWriter.CopyOut(f)
}

// notice sends a notice if client_min_messages lets it through.
func (s *Session) notice(w pgwire.ResultWriter, severity, code, msg string) {
	levels := map[string]int{"debug5": 0, "debug4": 0, "debug3": 0, "debug2": 0, "debug1": 0, "log": 1, "notice": 2, "warning": 3, "error": 4}
	sev := map[string]int{"NOTICE": 2, "WARNING": 3, "INFO": 5}[severity]
	if sev < levels[s.vars["client_min_messages"]] {
		return
	}
	_ = w.Notice(pgwire.Notice{Severity: severity, Code: code, Message: msg})
}

// newSequences builds the session's sequence access: descriptors are read
// in the running statement's transaction (a sequence created earlier in the
// same transaction is visible), names resolve as regclass input does.
func (s *Session) newSequences() *sequence.Session {
	seqs := sequence.NewSession(s.b.db, func(ctx context.Context, oid uint32) (*catalog.Sequence, error) {
		d, err := s.catalogReader(s.kvTxn()).ByID(ctx, catalog.ID(oid))
		if err != nil {
			if pgerror.Code(err) == pgerrcode.UndefinedObject {
				return nil, pgerror.New(pgerrcode.UndefinedTable, "could not open relation with OID %d", oid)
			}
			return nil, err
		}
		seq, ok := d.(*catalog.Sequence)
		if !ok {
			return nil, pgerror.New(pgerrcode.WrongObjectType, "%q is not a sequence", d.DescName())
		}
		return seq, s.checkSequence(ctx, seq)
	})
	seqs.Ctx = func() context.Context {
		if s.cur != nil {
			return s.cur.ctx
		}
		return nil
	}
	seqs.Resolve = func(ctx context.Context, name string) (uint32, error) {
		if s.cur == nil {
			return 0, pgerror.New(pgerrcode.UndefinedTable, "relation %q does not exist", name)
		}
		return s.cur.types().Reg.ResolveReg(types.RegClass, name)
	}
	return seqs
}

// parse parses a query string; a syntax error carries its position to
// the client (psql draws its caret from it).
func parse(sql string) ([]parser.Statement, error) {
	stmts, err := parser.Parse(sql)
	if err != nil {
		var se *parser.SyntaxError
		if errors.As(err, &se) && se.Position > 0 {
			return nil, pgwire.WithPosition(err, se.Position)
		}
		return nil, err
	}
	return stmts, nil
}
