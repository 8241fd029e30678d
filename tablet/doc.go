// Package tablet implements a tablet replica (tablet.Replica): a key span
// [StartKey, EndKey) of the one keyspace, with the in-memory concurrency
// state that lets many batches run against it at once, and the evaluation
// of every kvpb request against the store's engine.
//
// Callers: the store routes a kvpb.BatchRequest to a replica's Send and
// creates, splits and closes replicas. The replica calls mvcc (every data
// and record operation), storage (batches), hlc (the clock) and, through an
// injected kvpb.Sender, other tablets: pushes go to the tablet holding the
// pushee's record, resolutions to the tablets holding the intents. It must
// not know about SQL, routing caches or the network; it never imports the
// store or kv packages.
//
// # The path of a request
//
//	Send(ba)
//	  │ validate: keys in span, non-empty, value size, clock offset, txn shape
//	  ▼
//	┌─► latches.acquire(spans of ba)           latch.go
//	│     │ checkKeys again (a split may have shrunk the span)
//	│     ▼
//	│   Evaluate(ba) ──► Proposal + BatchResponse   evaluate*.go (reads the
//	│     │   engine through an indexed batch, or directly when ba only
//	│     │   reads; skips the lock keyspace where the lock table shows no
//	│     │   lock (invariant 11); consults the timestamp cache)
//	│     ├─ ok: Apply(Proposal)                 apply.go (commit, then lock
//	│     │      record reads in tscache         table, txn wait queue, metrics)
//	│     │      release latches, return         tscache.go
//	│     ├─ WriteIntentError: enqueue on each lock (under latches),
//	│     │      release latches, wait (a writer: LockPushDelay first)
//	│     │      + push holder                  locktable.go, lockwait.go
//	│     ├─ TransactionPushError (a PushTxn): enqueue in the txn wait
//	│     │      queue, release latches, wait; query own record for the
//	│     │      wait-for graph                  txnwait.go, pushwait.go
//	│     └─ other error: release latches, return it (nothing written)
//	└────────── retry after waiting
//
// Evaluate and Apply are separate steps so that a Raft log can go between
// them: Evaluate reads only, and everything that committing implies is in
// the Proposal, a plain value. A replica given a raft group (SetRaft,
// raft.go) does exactly that: it evaluates only as leaseholder, proposes
// the encoded Proposal, and every replica applies it from the log. A one-phase commit (evaluate_onepc.go) is the
// same path with a different evaluation. Split (split.go) takes latches over
// the whole tablet and hands the store a new right-hand replica.
//
// # Invariants
//
//  1. Batches whose latch spans conflict (overlap, one writes) run one after
//     the other, in arrival order; others run in parallel. No global lock
//     is held while waiting.
//  2. Bad input (keys outside the span, empty keys, values over the limit,
//     timestamps beyond the clock's maximum offset, transactional requests
//     without a transaction) is refused with a typed kvpb error before any
//     latch or write: nothing changes.
//  3. A batch is atomic: its writes are one engine batch, committed whole by
//     Apply or dropped.
//  4. No write lands at or below a read already served on its key (the
//     timestamp cache), except over the writer's own reads. A
//     non-transactional write moves up; a transaction's write timestamp is
//     pushed and the response says so. A lock is no write here: it lands
//     no version, so it neither consults the cache nor is moved by it, in
//     two phases (evalCtx.lock) and in one (evaluateOnePC). The cache may
//     answer higher than the reads of a key, never lower: a write may also
//     move over a read of another row whose prefix shares its slot in the
//     node's ReadTable (readtable.go), which holds non-transactional row
//     reads.
//  5. Evaluate changes no shared state; Apply performs exactly what the
//     Proposal lists.
//  6. A lock that blocks a request is in the lock table, with the request
//     registered as its waiter, before the request releases its latches, so
//     a release cannot be missed. Waiting respects ctx (over RPC it is the
//     remote caller's: its deadline and cancellation end the wait here), and
//     no single lock is waited for longer than the batch's
//     Header.LockTimeout (lockwait.go).
//  7. Deadlocks are found through the wait-for graph that waiting pushes
//     build with QueryTxn (never a timeout), and broken by aborting the
//     lowest-priority transaction of the pusher/pushee pair (ties: larger
//     ID). Every waiter applies the same rule, so for a cycle of two exactly
//     one transaction is aborted; a longer cycle aborts at least one.
//  8. A final transaction record (committed or aborted) is never rewritten;
//     it is deleted only once no intent it names can remain (EndTxn resolved
//     them all in its own batch, or a GC request's sender resolved them
//     first), and then every replica keeps a tombstone (txntombstone.go):
//     no record is ever created for a transaction whose record was, or may
//     have been, deleted, so a late HeartbeatTxn or EndTxn cannot revive
//     it, and a pusher that finds no record of a transaction that cannot
//     create one aborts it (TestTxnRecordCleanupGuard).
//  9. A one-phase commit writes committed values and nothing else (no
//     intents, no record), at exactly the transaction's write timestamp; if
//     that would have to move, the batch fails with a retryable error.
//     Likewise a two-phase commit happens only at the write timestamp the
//     coordinator sent.
//  10. No read is served below the tablet's GC threshold, and no write
//     lands at or below it (gcthreshold.go).
//  11. The lock table is authoritative for absence: whenever a request holds
//     a latch on a key of the replica's span, an intent on that key in the
//     engine is in the lock table. It holds at open (rebuilt with
//     mvcc.ScanIntents), after every Apply (intents are only written by
//     proposals, whose LocksAcquired Apply adds right after the commit,
//     before the writer's latches go) and across a split (locks move with
//     their keys, under latches over the whole tablet). Reads use it to skip
//     the lock keyspace when the table shows no lock in their span;
//     Config.VerifyLockTable checks every such skip against the engine.
//  12. The validation cache never passes a strict point refresh the engine
//     would fail: an entry (a key's newest version) is installed only by a
//     refresh that read the engine after the generation it captured, with
//     no applied write between its two removals, and every applied write
//     removes its keys before its batch commits and again after (an SST or
//     a range write empties the cache, as do a snapshot, a new lease and a
//     split); only an entry at or below the refresh's From, with no lock
//     in the lock table, passes without a read (validcache.go,
//     TestValidationCacheSeesEveryWrite, TestValidationCacheAroundApply).
//     The same holds for a refresh of a row span [k, PrefixEnd(k)), whose
//     entry (the newest version of all its keys, from an unreplicated
//     lock's check of the span) every applied write of a key prefixed by
//     k removes; a lock outside a transaction (a one-phase commit's row
//     lock) whose span has no lock in the lock table passes from an entry
//     below its timestamp (TestValidationCacheRowSpan), and a Put of a key
//     with no lock record, which no other write of its batch names, skips
//     reading the key's versions when the key's or its row's entry lies below the
//     write's timestamp and not above the transaction's read timestamp
//     (TestLockedRowPutReadsNoVersions). An install read at an older
//     generation, or while a write is between its removals, still goes in
//     when no removal since that generation, and no write between its
//     removals, named a key whose hash bucket is the entry's key's (a
//     write marks the bucket of every prefix of each key it names, so a
//     row span's start's among them), and no write naming no keys or
//     reset came since (TestValidationCacheMarks).
//  13. A batch reads the replica's descriptor and GC threshold without
//     the replica's mutex: each is a copy that every change, made under
//     the mutex's write lock, replaces whole (Replica.descView, gcView),
//     so a batch sees the value as of the last change before it, as under
//     a read lock. A point read takes no lock of the replica's
//     (TestPointReadTakesNoReplicaLock).
//  14. A one-phase commit reads its transaction's record whenever one may
//     exist: every record the replica writes is written through
//     evalCtx.putTxnRecord, which marks its transaction first (an effect
//     of evaluation, the one exception to invariant 5: a mark only makes
//     a later commit read), and every way a record can arrive unmarked (a
//     restart, a split, a snapshot, another node's lease) raises the
//     marks' low-water mark to the clock plus the maximum offset, above
//     every transaction begun by then; a transaction with no mark that
//     began above it has no record (txnrecordmarks.go,
//     TestOnePCAfterRecordWrites, TestOnePCAfterLeaseChange).
//  15. The row cache answers a read only with what the engine would have
//     answered: an entry (a row span's rows and the newest version of its
//     keys) is installed only by a read of the leaseholder's engine alone in
//     its batch, under the validation cache's generation rule (invariant
//     12), from a forward scan that met no lock and no version above its
//     timestamp and read the whole span; every applied write removes the
//     entries of the row spans holding its keys (an SST, a range write, a
//     snapshot, a new lease, a split and the replica's Close empty the
//     cache); and an entry answers only a read of its span alone in its
//     batch, at or above its newest version, with no lock in the lock
//     table (rowcache.go, TestRowCacheSeesEveryWrite,
//     TestRowCacheReadTimestamps, TestRowCacheAroundApply,
//     TestRowCacheAgainstEngine). The node's entries together stay within
//     the store's budget (store.Config.RowCacheBytes).
package tablet
