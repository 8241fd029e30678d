// Package mvcc owns the multi-version layout of user data in the storage
// engine: committed versions, intents (one provisional write per key, kept
// in the lock keyspace), transaction records, intent resolution, read
// refresh checks and garbage collection of old versions.
//
// Callers: the tablet package evaluates every data request of a batch with
// these functions against a storage.Batch (writes) or a storage.Reader
// (reads), then proposes the batch. mvcc calls only storage, keys, hlc and
// kvpb. It must not touch tablet-local or store-local keys, know about
// leases, raft or the timestamp cache, or wait: a conflict is returned as a
// typed kvpb error and the tablet decides whether to wait, push or fail.
//
// Every operation is a plain function over storage.Reader or
// storage.ReadWriter; there is no engine type and no state between calls.
//
// # Layout
//
//	userKey @ ts            committed version: encoded value (see below)
//	keys.Lock(userKey)      bare key: lock record {TxnMeta, provisional value or tombstone, history}
//	keys.TxnRecord(a, id)   bare key: transaction record (kvpb.Transaction)
//
// A row lock (AcquireLock, kvpb.LockRequest) is a lock record with no value
// at all (lock.go): writers meet it like an intent, reads ignore it, and
// resolving it writes nothing.
//
// The provisional value of an intent lives in its lock record, not among the
// versions. Committing an intent writes it as a version at the commit
// timestamp and deletes the lock; aborting deletes the lock. A consistent
// read therefore merges two sorted streams: versions (skipping old ones with
// NextKey) and locks, both in key order.
//
// # Value encodings
//
// A committed version's engine value is one tag byte followed by the user
// bytes:
//
//	0x00            tombstone (a deletion); nothing follows
//	0x01 <bytes>    a value; <bytes> may be empty, so an empty value and a
//	                deletion are different things
//	0x02 <ts> <bytes>  a value with a local timestamp (below)
//	0x03 <ts>          a tombstone with a local timestamp
//
// # Local timestamps
//
// A version's local timestamp bounds when, by its leaseholder's clock, it
// was written: every reading of that clock taken after the write is at or
// above it. For a version written directly it is the version's own
// timestamp, and is not stored. An intent resolved at a commit timestamp
// above its own keeps the intent's timestamp as its local one (<ts>: wall
// and logical as varints): the leaseholder's clock had reached that when
// the intent was written, not the commit timestamp. A reader with a local
// uncertainty limit (ReadOptions.LocalUncertaintyLimit, from the
// transaction's observation of this node's clock) finds a version in its
// uncertainty window uncertain only if the local timestamp is at or below
// that limit (docs/architecture.md, "Observed timestamps").
//
// Lock and transaction records are compact binary records whose first byte
// is a format version (encoding.go). Values handed to callers are the user
// bytes only, always copied out of iterator memory.
//
// # Reads
//
// Get looks up the lock by key and seeks a prefix iterator (bloom filters
// apply) to the newest version at or below the reader's uncertainty limit.
// Scan keeps two iterators, one over versions and one over the lock span,
// and merges them by user key: forward it skips old versions with NextKey,
// stepping over a few too-new versions with Next before it seeks; reverse
// it walks each key's versions with Prev (oldest first, keeping the newest
// visible one), which costs no seek per row but reads every version of the
// key, so GC bounds its cost.
//
// A caller that knows no lock exists in the read's span (the tablet's
// exact in-memory lock table) says so with ReadOptions.NoLocksInSpan, and
// the read skips the lock keyspace: one engine lookup per Get instead of
// two, one iterator per Scan instead of two.
//
// Outcomes, in order of precedence: a committed value in the uncertainty
// window fails the read at once with ReadWithinUncertaintyIntervalError (the
// reader must restart higher anyway); otherwise every conflicting intent
// met is collected and returned together as one WriteIntentError. A limit
// stops the scan with a resume span starting at the next key in scan order
// present in either stream, which may turn out to hold no visible value.
//
// Spans are user keys. Local keys (keys.IsLocal) hold only bare entries and
// are never returned as rows; writes refuse them.
//
// # Writes
//
// A write checks, in order: the lock on its key (another transaction's is a
// WriteIntentError; its own from a newer epoch is a stale request; its own
// at a higher sequence makes this write a replay that does nothing), then
// the newest committed version (invariants 3 and 4). Only then does it
// write: a version for a non-transactional write, a lock record for a
// transactional one, at the transaction's WriteTimestamp or the pushed
// timestamp of its existing intent, whichever is higher.
//
// # Savepoints
//
// A transaction numbers its writes (TxnMeta.Sequence, increasing within an
// epoch) and may roll back to a savepoint, which adds the sequence numbers
// written since to Transaction.IgnoredSeqNums (inclusive ranges, only ever
// growing within an epoch). mvcc keeps what that needs, as CockroachDB's
// intent history does:
//
//   - A lock record holds its current value at Txn.Sequence and a history:
//     the transaction's earlier values of the key in the lock's epoch,
//     oldest first, at increasing sequence numbers below Txn.Sequence. A
//     write over its own intent at a higher sequence pushes the old value
//     onto the history; at the same sequence it rewrites the value in
//     place; in either case it drops the history entries its transaction
//     ignores (no read or resolution of the epoch can see them again). A
//     write over an intent of an older epoch starts with no history.
//   - The value of an intent for its own transaction is the newest of these
//     values whose sequence is not ignored; when every one is, the key
//     reads, and conditional writes compare, as if the transaction had not
//     written it (the committed versions below).
//   - Resolving a committed intent writes that value as the version, or
//     writes no version when every value is ignored; the ignored ranges
//     come with the resolution (the committed record stores them, so a
//     later resolver has them). Pending and aborted resolutions need none.
//   - The lock itself stays however its values are ignored: to other
//     transactions it is the same intent, and it is released only when
//     the transaction ends.
//
// Records without history (or, for transaction records, without ignored
// ranges) keep their earlier encoding byte for byte (encoding.go).
//
// # Invariants
//
//  1. At most one lock per user key, and it belongs to one transaction at
//     one epoch. A write by anyone else meets it as a *kvpb.WriteIntentError.
//  2. No committed version of a key is written while a lock on that key
//     exists, except by resolving that lock; so every committed version of a
//     locked key is at or below the lock's transaction's read timestamp.
//  3. A write never lands at or below an existing committed version of its
//     key: it fails with *kvpb.WriteTooOldError and writes nothing.
//  4. A transactional write also fails with *kvpb.WriteTooOldError when a
//     version newer than the transaction's ReadTimestamp exists (snapshot
//     isolation: first committer wins).
//  5. A read at ts returns, per key, the newest committed version at or
//     below ts unless it is a tombstone; the reader's own intent (same epoch)
//     wins over committed versions unless all its values are at ignored
//     sequence numbers; another transaction's intent at or below the
//     reader's uncertainty limit (or ts for non-transactional reads) is a
//     conflict, reported with every other conflict met in the span.
//  6. Resolution is idempotent: resolving a lock that is gone, or owned by
//     another transaction, changes nothing.
//  7. GC never changes the result of a read at or above its threshold.
//  8. Every function either returns an error or leaves the writer in a state
//     satisfying 1-7 and 9; on error the caller discards the batch (a failed
//     request may have written part of its effect).
//  9. A lock record's history holds only values of the lock's epoch, at
//     strictly increasing sequence numbers all below the lock's own; a
//     value at a sequence number its transaction ignores is never read by
//     that transaction nor committed (decoding checks the first part;
//     testdata/savepoints and TestTxnModel the second).
//  10. GC with a Repacker (gc.go) may also replace the versions at or
//     below the threshold of one row's keys (a row key and the column
//     entries that extend it, which mvcc knows only through the Repacker)
//     by one version of the row key at the newest of their timestamps,
//     holding what they merged to (also a row key kept alone, rewritten
//     in place, when the Repacker moves it to a newer row format), and
//     drop column entries older than the
//     row-key version they would merge with; it still changes no read at
//     or above the threshold (7). It leaves alone any row one of whose
//     keys is locked, and a GC request never stops inside a row
//     (sql/rowenc TestRepackModel, store TestGCCrash).
//  11. A census (census.go) sees every value a read at any timestamp
//     could return from its span, now or once an intent is settled:
//     every committed version and every value an intent's lock record
//     holds (TestCensus).
package mvcc
