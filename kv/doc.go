// Package kv is Cairn's transactional key-value client: the layer the SQL
// executor programs against (DESIGN §4, §6). It owns three things:
//
//   - routing (DistSender, TabletCache): which tablet holds a key, a cache of
//     tablet descriptors that recovers from stale entries, and the splitting
//     of one BatchRequest into per-tablet sub-batches that run in parallel and
//     are merged back in request order;
//   - the transaction coordinator (Txn): timestamps, isolation levels, read
//     refresh, restarts, heartbeats of the transaction record, and the commit
//     protocol (one-phase on a single tablet, otherwise a record flip followed
//     by asynchronous intent resolution);
//   - the retry loop (DB.Txn) that reruns a closure on retryable errors.
//
// It sees the layers below only through two small interfaces: kvpb.Sender
// (the transport to tablets; a store in one process, RPC in a cluster) and
// TabletLookup (the tablet directory). It never imports store or tablet, and
// it never evaluates requests itself: conflicts, waiting on locks, pushes,
// deadlock detection and the recovery of abandoned transactions happen in the
// tablets. The coordinator's part of recovery is to leave nothing a later
// reader cannot clean up (invariant 5).
//
// A request's path:
//
//	SQL ──> Txn.Get/Put/Scan/Run ──> Txn.send (timestamps, spans, refresh/restart)
//	                                     │
//	                                     v
//	                   DistSender.Send ──> TabletCache ──(miss)──> TabletLookup
//	                     │ divide by tablet, fan out in parallel, merge
//	                     v
//	                 kvpb.Sender (store / RPC) ──> tablet
//
// The public vocabulary: DB (NewDB, Get/Put/Delete/Scan/Run outside
// transactions, RunImplicitRead for an implicit transaction's one read
// batch, Send for raw batches, Txn for a retried closure), Txn (one
// transaction's coordinator: Get/Put/CPut/Delete/DelRange/Scan/ReverseScan,
// Run of a Batch, Step at statement boundaries, Savepoint,
// RollbackToSavepoint and ReleaseSavepoint, RetryStatement (READ
// COMMITTED statement retries, txn_statement.go), Commit, CommitInBatch,
// Rollback, PrepareForRetry), Batch (with Lock, a row lock, and its
// WaitPolicy) and its Results, and IsolationLevel.
// One concern per file: dist_sender*.go route, tablet_cache.go caches,
// txn.go sends, txn_refresh.go moves timestamps, txn_heartbeat.go keeps the
// record alive, txn_commit.go commits, txn_retry.go restarts and retries,
// txn_savepoint.go rolls back to savepoints, bounded.go negotiates a
// bounded-staleness read's timestamp, implicit_read.go reads an implicit
// transaction's one batch without a coordinator.
//
// Invariants:
//
//  1. DistSender returns one response per request, in request order, exactly
//     as a single tablet would (kvpb invariant 1), except that a batch split
//     over tablets is not atomic across them: each sub-batch is.
//  2. A stale routing entry costs a retry, never a wrong answer: tablets
//     reject keys outside their span, and the router then evicts and
//     re-resolves (bounded by Options.MaxRoutingRetries).
//  3. A transaction's intents all carry its anchor key (its first written
//     key) so any reader can find its record; the anchor is fixed before the
//     first write is sent and lock spans are recorded before the request that
//     creates them is sent, so a commit or rollback covers every intent,
//     including those of requests whose outcome is unknown.
//  4. A transaction's read timestamp moves forward only after every span it
//     has read is proven unchanged up to the new timestamp (a refresh), or by
//     a restart (new epoch), or, under READ COMMITTED, at a statement
//     boundary (Step), where the read spans of the statement are forgotten.
//  5. A coordinator that disappears (its context is cancelled or its process
//     dies) stops heartbeating; its record then expires and pushers abort it
//     and remove its intents. Nothing the coordinator writes depends on it
//     finishing.
//  6. Once a retryable error is returned, a Txn refuses further operations
//     with that error until PrepareForRetry is called, so a caller cannot
//     mix reads of two epochs. This includes RollbackToSavepoint: only a
//     non-retryable error (a condition failure, a NOWAIT conflict) can be
//     undone by rolling back to a savepoint.
//  7. Every batch that writes carries a sequence number higher than any
//     before it in the epoch, and every batch carries the transaction's
//     IgnoredSeqNums; after RollbackToSavepoint(sp) no read of the
//     transaction sees, and its commit does not write, a value written
//     after sp was taken (at the tablets it is the writes' sequence
//     numbers that are ignored, see mvcc's "Savepoints"). Locks taken
//     after sp are kept until the transaction ends, as in CockroachDB.
//
// Where they are tested: 1 and 2 in testdata/dist_sender,
// TestDistSenderMatchesOneTablet and TestRoutingRecoversFromSplitBehindCache;
// 3 and 5 in TestAbandonedTxnRecovery and TestLateFirstWriteIsNotAbandoned;
// 4 in TestSerializableRefresh, TestWriteWriteConflict and
// TestReadCommittedStep; 6 in TestWriteWriteConflict and
// TestSavepointRollbackRefusedAfterRetryableError; 7 in the TestSavepoint*
// tests (txn_savepoint_test.go); all but 7 together in TestBank.
package kv
