// Package session is Cairn's SQL session: it implements pgwire.Backend
// and pgwire.Session. It owns the session state machine (idle, open
// transaction block, failed block), session settings (SET/SHOW/RESET and
// the ParameterStatus reports), implicit transactions and their automatic
// retry, statement dispatch (queries and DML through plan.Build,
// opt.Optimize and exec.Start; DDL through ddl.Exec; transaction control,
// EXPLAIN, COPY, PREPARE/EXECUTE and the utility statements here), the
// encoding of results in text and binary formats, and the node's advisory
// lock table.
//
// It must not touch KV keys directly: descriptors go through sql/catalog,
// rows through sql/exec and sql/ddl; the session only begins, steps,
// commits and rolls back kv.Txns. One statement runs without a kv.Txn: an
// autocommitted point SELECT of a kept plan, which sql/exec reads through
// kv.DB.RunImplicitReadAt and the session checks against the catalog
// generation at the read (implicit.go); it never returns a row read under
// a schema other than its plan's.
//
// # Transactions
//
//	idle ──BEGIN──► open ──error──► aborted ──COMMIT/ROLLBACK──► idle
//	  │              └──COMMIT/ROLLBACK──► idle
//	  └─ statement outside a block: implicit transaction, committed at the
//	     end of the Query message (simple protocol) or at Sync (extended)
//
// Several statements in one Query message run in one implicit transaction,
// unless one of them is transaction control, in which case each statement
// outside a block commits on its own (PostgreSQL's rule, simplified).
// A retryable KV error (kvpb.IsRetryable) in an implicit transaction that
// has sent the client nothing yet reruns the statements in a fresh attempt;
// otherwise it is 40001 "restart transaction: ...", and inside a block it
// leaves the block aborted (25P02 until ROLLBACK), as a serialization
// failure does in PostgreSQL.
//
// The default isolation level is READ COMMITTED, PostgreSQL's default
// (default_transaction_isolation). Clients and the logic tests are written
// against PostgreSQL's behaviour, and kv.ReadCommitted gives each statement a
// fresh snapshot without lost updates, exactly what they expect; REPEATABLE
// READ maps to kv.Snapshot and SERIALIZABLE to kv.Serializable, which is
// true serializability (stronger than PostgreSQL's SSI only in that it may
// restart more often).
//
// Settings are transactional as in PostgreSQL: ROLLBACK undoes a SET made
// inside the block, and SET LOCAL lasts until the block ends.
//
// SAVEPOINT, RELEASE and ROLLBACK TO use kv.Txn savepoints: ROLLBACK TO
// leaves an aborted block usable again, except after a retryable error,
// which invalidates every read of the transaction (40001; only ROLLBACK
// helps). Locks taken after a savepoint are kept until the end, as in
// CockroachDB.
//
// # Statements the session runs itself
//
// BEGIN/START TRANSACTION, COMMIT/END, ROLLBACK/ABORT (AND CHAIN), SET
// TRANSACTION, AS OF SYSTEM TIME (asof.go), SAVEPOINT/RELEASE/ROLLBACK TO, SET/SET LOCAL/RESET/SHOW
// (and current_setting/set_config through builtins.SettingsAccess), EXPLAIN
// [ANALYZE], COPY FROM STDIN/TO STDOUT, PREPARE/EXECUTE/DEALLOCATE,
// DECLARE/FETCH/MOVE/CLOSE (forward-only cursors, closed with their
// transaction), DISCARD, LISTEN/UNLISTEN, VACUUM (checked, with nothing
// to do: KV GC removes old versions), ANALYZE and VACUUM (ANALYZE), which
// collect table statistics (analyze.go, sql/stats; committed DML and COPY
// also feed the background refresher). Everything else that is not a
// query or DML goes to ddl.Exec.
//
// # Prepared statements
//
// A statement of the extended protocol describes its result at Parse, and
// the client decodes every later Execute's rows by that description. A
// plan made after a DDL (the catalog generation changed) that returns
// other columns (number, names, types, type modifiers) fails the Execute
// with 0A000, PostgreSQL's "cached plan must not change result type";
// nothing of it reaches the client (extended.go, checkResult).
//
// An Execute of a kept plan that reads one row by its whole primary key
// without a kv.Txn, its key being the parameters themselves, runs without
// the executor (fastread.go): the key is encoded into the plan's kept
// prefix, the row is read by the same implicit read and catalog check and
// decoded by the same kept fetcher and projections
// (exec.PointCache.ReadPoint), and encoded by the same row encoder as a
// cursor's (encodeRow). Whatever it refuses, or a read that fails, runs
// on the general path before anything is sent, so the client sees what
// the general path sends (TestFastPointRead).
//
// A Query's UPDATE of one row by its whole primary key or INSERT ...
// VALUES, found by its shape with its executor shapes kept, runs in
// dispatch by exec.PointCache.UpdatePoint or InsertValues instead of
// startQuery (fastupdate.go): the
// statement state, its snapshot, timeouts, statement retry and the
// block's savepoints around it are the general path's; only the plan
// instance, the executor's runner and operators and the cursor are not
// made (TestFastPointUpdate). A point SELECT of a kept plan in a
// transaction block is read there too, by the kept read sent through the
// block's kv.Txn (selectKept).
//
// # Timeouts, cancellation and the session registry
//
// stmtContext bounds each statement by statement_timeout (57014) and
// gives its KV batches lock_timeout (kv.WithLockTimeout; the tablet fails
// one lock wait past it, reported as 55P03); an implicit transaction's
// commit runs under its statement's context. Idle implements pgwire.Idler:
// idle_in_transaction_session_timeout (FATAL 25P03) and
// idle_session_timeout (FATAL 57P05). Every session is in its Backend's
// registry (activity.go), which pg_stat_activity lists and
// pg_cancel_backend / pg_terminate_backend signal (signal.go), with
// PostgreSQL's privilege rules.
//
// # Not done here
//
//   - LISTEN/UNLISTEN/NOTIFY reach the sessions of one node only
//     (notify.go); sessions on other nodes do not hear them.
//   - Temporary tables live in a schema of the session's own, dropped
//     when it ends (temp.go).
//   - Advisory locks are node-local (see AdvisoryLocks).
//   - extra_float_digits is accepted (-15..3, as in Postgres) but floats
//     always print in the shortest exact form, which is what 1..3 mean in
//     PostgreSQL 12+; values of 0 and below do not round the output.
//   - SCROLL cursors and FETCH backward are 0A000; a cursor WITH HOLD
//     reads its rows to the end at DECLARE and keeps them in memory.
//   - Plans are custom: every Execute binds its statement again, with the
//     parameter values in the plan as constants (PostgreSQL's custom
//     plans, params.go), so $n in WHERE gives index spans. The one
//     exception is the point lookup by primary key, whose plan is kept
//     per prepared statement and per shape of query text
//     (plancache.go).
package session
