package tablet

import (
	"context"
	"github.com/cairn-db/cairn/clusterversion"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
)

// Defaults for Config's zero fields.
const (
	DefaultTxnLivenessThreshold = 5 * time.Second
	DefaultMaxValueSize         = 64 << 20
	DefaultPushPollInterval     = 20 * time.Millisecond
	DefaultLockPushDelay        = 50 * time.Millisecond
	DefaultTSCacheMaxEntries    = 1 << 16
)

// Priority bounds. A push by a transaction at MaxPriority, or of one at
// MinPriority, wins at once; between the bounds pushers wait, so ordinary
// contention queues fairly and only the deadlock detector aborts.
const (
	MinPriority int32 = -1 << 31
	MaxPriority int32 = 1<<31 - 1
)

// LookupFunc finds the tablet holding key (the store's LookupTablet). The
// intent resolver uses it to batch resolution per tablet.
type LookupFunc func(ctx context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error)

// Config is what a replica needs from its store. Zero fields take the
// defaults above; Sender is required for pushes and intent resolution.
type Config struct {
	// TxnLivenessThreshold is how long a pending transaction may go without
	// a heartbeat (or, without a record, since it started) before a pusher
	// may abort it as abandoned.
	TxnLivenessThreshold time.Duration
	// MaxValueSize bounds the value of a Put or ConditionalPut.
	MaxValueSize int
	// PushPollInterval is how often a waiting push re-checks its pushee and
	// asks for its own pusher's dependents (deadlock detection).
	PushPollInterval time.Duration
	// LockPushDelay is how long a writer waiting for another
	// transaction's lock waits for it to be released before pushing its
	// holder (lockwait.go, "When a waiter pushes"); negative: at once.
	LockPushDelay time.Duration
	// TSCacheMaxEntries bounds the timestamp cache.
	TSCacheMaxEntries int
	// Reads is the node's table of non-transactional row reads, part of
	// every replica's timestamp cache (readtable.go); the store shares one
	// among its replicas. Nil: the replica makes a small one of its own.
	Reads *ReadTable
	// RowCache is the node's budget for its replicas' row caches
	// (rowcache.go); the store shares one among its replicas. Nil: no
	// row cache.
	RowCache *RowCache
	// Sender carries pushes, queries and resolutions to whichever tablet
	// holds the keys or records involved (the store, or later the kv
	// client). Batches it is given have TabletID zero unless stated.
	Sender kvpb.Sender
	// Lookup finds tablet boundaries for batched intent resolution.
	Lookup LookupFunc
	// VerifyLockTable makes every read that skips the lock keyspace because
	// the lock table shows no lock in its span (invariant 11) look in the
	// engine anyway and fail with ErrLockTableInexact if it finds one. Tests
	// set it; it costs the lookup the skip saves.
	VerifyLockTable bool
	// OnSplit receives the two replicas of a split applied from the raft
	// log, before the left one shrinks (as Split's register does): the
	// store wires the right one to its raft group and registers it.
	OnSplit func(left, right *Replica)
	// OnSplitBySnapshot receives the descriptors of the tablets a replica
	// learned of only through a snapshot of its left side (it missed the
	// splits, which the leader's log no longer holds): the snapshot
	// narrowed the replica to its own span, and the store opens a replica
	// of each of these waiting for its own group's snapshot (see
	// RaftStateMachine.ApplySnapshot). It runs before the replica narrows.
	OnSplitBySnapshot func(left *Replica, rights []kvpb.TabletDescriptor)
	// Repacker, when set, makes GC requests repack rows (mvcc invariant
	// 10). Only the leaseholder uses it, while evaluating: followers
	// apply the resulting batch, so they need no schema.
	Repacker mvcc.Repacker
	// Observe, when set, receives latencies for the node's histograms
	// (server's /metrics); the replica calls it from the request's own
	// goroutine and must not be slowed by it.
	Observe *Observers
	// Version is the node's view of the cluster version: the replica
	// writes a stored format only once every node's binary reads it
	// (stateformat.go). Nil: a replica of no cluster, which writes this
	// build's formats.
	Version *clusterversion.Handle
}

// Observers receive the latencies a replica measures. A nil func is not
// called.
type Observers struct {
	// RaftCommit is the time from proposing a command to this replica
	// applying it (the leaseholder's view of a replicated write).
	RaftCommit func(time.Duration)
	// LockWait is the time a batch waited for other transactions' locks
	// before it re-evaluated (or gave up).
	LockWait func(time.Duration)
	// LockHold is the time an unreplicated row lock (an UPDATE's, taken
	// by its locking read) that another request waited for was held,
	// from its acquisition to its release.
	LockHold func(time.Duration)
	// ValidInstall is told, for each newest version a check read and
	// offered to the validation cache, whether the cache took it
	// (validcache.go): the share taken is how often a commit's check of
	// the same key can pass without a read.
	ValidInstall func(installed bool)
}

func (c Config) withDefaults() Config {
	if c.TxnLivenessThreshold <= 0 {
		c.TxnLivenessThreshold = DefaultTxnLivenessThreshold
	}
	if c.MaxValueSize <= 0 {
		c.MaxValueSize = DefaultMaxValueSize
	}
	if c.PushPollInterval <= 0 {
		c.PushPollInterval = DefaultPushPollInterval
	}
	if c.LockPushDelay == 0 {
		c.LockPushDelay = DefaultLockPushDelay
	}
	if c.TSCacheMaxEntries <= 0 {
		c.TSCacheMaxEntries = DefaultTSCacheMaxEntries
	}
	if c.Reads == nil {
		c.Reads = NewReadTable(testReadTableSlots)
	}
	return c
}

// Metrics are a replica's exported counters. They are safe to read at any
// time.
type Metrics struct {
	// ReadBatches and WriteBatches count the batches the replica was
	// sent, by whether they write (the admin UI shows their rates). A
	// batch of unreplicated locks writes nothing and counts as a read.
	ReadBatches, WriteBatches atomic.Int64
	// CommitWaits counts answers held back by commitWait, and
	// CommitWaitNanos the time they waited.
	CommitWaits, CommitWaitNanos atomic.Int64
	// LongCommitWaits counts the commit waits of at least a quarter of
	// the maximum clock offset: an answer whose timestamp ran that far
	// ahead of this node's physical clock (a writer pushed to a global
	// uncertainty limit did, before observed timestamps).
	LongCommitWaits atomic.Int64
	// ObservedTimestampsStamped counts transactional batches this replica
	// stamped with its node's clock reading (uncertainty.go).
	ObservedTimestampsStamped atomic.Int64
	// TimestampsClosed counts the closed timestamps this replica proposed
	// as leaseholder; FollowerReads the reads it served as a follower
	// below an applied closed timestamp, FollowerReadsRefused those it
	// sent on to the leaseholder (an intent, or the closed timestamp did
	// not arrive in time); FutureWriteWaits the writes whose answer waited
	// for the physical clock to pass a timestamp a closed timestamp pushed
	// them to (closedts.go).
	TimestampsClosed, FollowerReads, FollowerReadsRefused, FutureWriteWaits atomic.Int64
	// OnePhaseCommits counts transactions committed without intents.
	OnePhaseCommits atomic.Int64
	// OnePCRecordReads counts one-phase commit evaluations that read
	// their transaction's record: those whose transaction may have one
	// (txnrecordmarks.go).
	OnePCRecordReads atomic.Int64
	// IntentsWritten counts intents laid down by applied proposals.
	IntentsWritten atomic.Int64
	// PushesWaited counts pushes that had to wait in the txn wait queue.
	PushesWaited atomic.Int64
	// DeadlocksBroken counts deadlock victims this replica's waiters chose.
	DeadlocksBroken atomic.Int64
	// LockTimeouts counts lock waits that ran past their batch's
	// LockTimeout (lock_timeout).
	LockTimeouts atomic.Int64
	// LockWaitsCanceled counts lock waits ended by their batch's context
	// (a statement timeout or cancel, over RPC when the waiter's gateway
	// is another node).
	LockWaitsCanceled atomic.Int64
	// LockWaiting is the number of batches waiting for locks right now.
	LockWaiting atomic.Int64
	// SSTsIngested and SSTBytesIngested count the SSTs of AddSSTable
	// proposals this replica ingested (once per application: an entry
	// applied again after a restart counts again).
	SSTsIngested, SSTBytesIngested atomic.Int64
}
