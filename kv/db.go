package kv

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// Every transaction takes a random (version 4) ID, and uuid.New read 16
// bytes of the system's randomness per ID: a getrandom call, 2% of the CPU
// of a point read's KV path (kv.BenchmarkPointRead). The pool reads the
// same randomness in batches. Transaction IDs are no secret, and nothing
// in Cairn draws a UUID it must keep secret (uuid.New's other callers are
// catalog nonces and distributed fragments' IDs; gen_random_uuid() reads
// crypto/rand itself), so the pool costs nothing in what the IDs promise.
func init() { uuid.EnableRandPool() }

const (
	defaultHeartbeatInterval  = time.Second
	defaultMaxRetries         = 30
	defaultMaxRoutingRetries  = 10
	defaultMaxLockSpans       = 1024
	defaultMaxReadSpans       = 1024
	defaultResolveConcurrency = 8
	defaultRetryBackoff       = time.Millisecond
	defaultMaxRetryBackoff    = 100 * time.Millisecond
)

// Options tune a DB. Zero values take the defaults.
type Options struct {
	// HeartbeatInterval is how often a writing transaction proves its
	// coordinator alive. It must be well under the tablets' liveness
	// threshold. Default 1s.
	HeartbeatInterval time.Duration
	// MaxRetries bounds how many times DB.Txn reruns its closure on
	// retryable errors. Default 30.
	MaxRetries int
	// MaxRoutingRetries bounds re-routing after stale cache entries.
	// Default 10.
	MaxRoutingRetries int
	// MaxLockSpans and MaxReadSpans bound a transaction's tracked spans;
	// beyond them spans are condensed into wider ones. Default 1024 each.
	MaxLockSpans int
	MaxReadSpans int
	// NoUnreplicatedLocks stops buffered writes from taking unreplicated
	// locks at their statements (txn_buffer.go): a second writer of a row
	// then no longer waits but fails at commit. For comparisons.
	NoUnreplicatedLocks bool
	// ResolveConcurrency bounds the asynchronous intent-resolution batches
	// in flight across the DB. Default 8.
	ResolveConcurrency int
	// RetryBackoff and MaxRetryBackoff shape DB.Txn's jittered exponential
	// backoff between attempts. Defaults 1ms and 100ms.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// NodeID is the node this DB's transactions start on (0: not a
	// replicated node). A transaction records this node's clock as its
	// observed timestamp of it at each new snapshot (txn_observed.go).
	NodeID uint64
	// Leaseholder, when set, names the node believed to hold a tablet's
	// lease (0: unknown; kv.LeaseholderSender.Leaseholder). A scan walked
	// over tablets then reads the next tablet ahead when its lease is on
	// a node other than NodeID (dist_sender_prefetch.go).
	Leaseholder func(kvpb.TabletID) uint64
	// Servable, when set, is the newest timestamp the replica a read of
	// a tablet goes to first serves without waiting, given the clock's
	// reading now: now for a leaseholder, the applied closed timestamp
	// for this node's follower (bounded.go). Unset: every tablet is
	// read at its leaseholder, which serves the present.
	Servable func(id kvpb.TabletID, now hlc.Timestamp) hlc.Timestamp
}

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur(&o.HeartbeatInterval, defaultHeartbeatInterval)
	def(&o.MaxRetries, defaultMaxRetries)
	def(&o.MaxRoutingRetries, defaultMaxRoutingRetries)
	def(&o.MaxLockSpans, defaultMaxLockSpans)
	def(&o.MaxReadSpans, defaultMaxReadSpans)
	def(&o.ResolveConcurrency, defaultResolveConcurrency)
	defDur(&o.RetryBackoff, defaultRetryBackoff)
	defDur(&o.MaxRetryBackoff, defaultMaxRetryBackoff)
}

// DB is the entry point of the kv client: non-transactional operations,
// transactions, and the router they share. Safe for concurrent use.
type DB struct {
	ds    *DistSender
	cache *TabletCache
	clock *hlc.Clock
	opts  Options

	// stopCtx ends heartbeats and background resolution on Close.
	stopCtx context.Context
	stop    context.CancelFunc
	// bg tracks background goroutines (heartbeats, intent resolution);
	// bgMu orders their start against Close.
	bgMu       sync.Mutex
	closed     bool
	bg         sync.WaitGroup
	resolveSem chan struct{}
	// active are the open transactions (protected.go).
	active activeTxns
	// beats are the running heartbeats (txn_heartbeat.go).
	beats heartbeats
	// incarnation: see Incarnation.
	incarnation uuid.UUID
	// belowIntents counts ScanCommitted's reads that met intents and
	// stepped below them instead of pushing (BelowIntentScans).
	belowIntents atomic.Int64
	// pushedCommits counts committing EndTxns refused because the
	// record had been pushed (PushedCommits).
	pushedCommits atomic.Int64
	// clearRetries counts ClearRanges' batches sent again (ClearRetries).
	clearRetries atomic.Int64
}

// goBackground runs fn on a tracked goroutine, unless the DB is closed.
func (db *DB) goBackground(fn func()) {
	db.bgMu.Lock()
	defer db.bgMu.Unlock()
	if db.closed {
		return
	}
	db.bg.Go(fn)
}

// NewDB returns a client sending through sender (a store, or an RPC
// transport) and routing with lookup (the tablet directory).
func NewDB(sender kvpb.Sender, lookup TabletLookup, clock *hlc.Clock, opts Options) *DB {
	opts.setDefaults()
	cache := NewTabletCache(lookup)
	ctx, cancel := context.WithCancel(context.Background())
	ds := NewDistSender(sender, cache, clock, opts.MaxRoutingRetries)
	if lh, self := opts.Leaseholder, opts.NodeID; lh != nil && self != 0 {
		ds.remote = func(t kvpb.TabletID) bool {
			n := lh(t)
			return n != 0 && n != self
		}
	}
	return &DB{
		ds:          ds,
		cache:       cache,
		clock:       clock,
		opts:        opts,
		stopCtx:     ctx,
		stop:        cancel,
		resolveSem:  make(chan struct{}, opts.ResolveConcurrency),
		incarnation: uuid.New(),
	}
}

// Incarnation names this DB for its life: a record that names another
// incarnation of the same node was left by a process that has ended, with
// all its transactions.
func (db *DB) Incarnation() uuid.UUID { return db.incarnation }

// ScanPrefetches reports how many times scans walked over tablets sent
// the next tablet's part ahead (its lease on another node), and how many
// of those answers they used (dist_sender_prefetch.go).
func (db *DB) ScanPrefetches() (sent, used int64) { return db.ds.ScanPrefetches() }

// NodeID is Options.NodeID.
func (db *DB) NodeID() uint64 { return db.opts.NodeID }

// Close stops heartbeats and waits for background intent resolution to end.
// Open transactions are abandoned (their tablets will abort them once their
// records expire). The sender is not closed.
func (db *DB) Close() {
	db.bgMu.Lock()
	db.closed = true
	db.bgMu.Unlock()
	db.stop()
	db.bg.Wait()
}

// Clock returns the DB's clock.
func (db *DB) Clock() *hlc.Clock { return db.clock }

// TabletCache returns the DB's routing cache.
func (db *DB) TabletCache() *TabletCache { return db.cache }

// Send sends a batch through the router (DistSender): it splits the batch by
// tablet, fans the parts out in parallel and merges the answers. Use it for
// requests the typed methods do not cover; it adds no transaction logic.
func (db *DB) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	return db.ds.Send(ctx, ba)
}

// Get reads key's newest committed value, outside any transaction.
func (db *DB) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	b := &Batch{}
	b.Get(key)
	if err := db.Run(ctx, b); err != nil {
		return nil, false, err
	}
	r := b.Results[0]
	if !r.Found {
		return nil, false, nil
	}
	return r.Rows[0].Value, true, nil
}

// Put writes key outside any transaction.
func (db *DB) Put(ctx context.Context, key, value []byte) error {
	b := &Batch{}
	b.Put(key, value)
	return db.Run(ctx, b)
}

// Inc atomically adds by to the int64 counter at key (a missing key is 0)
// and returns the new value. It commits at once and is never undone,
// whatever transaction the caller is in: sequences rely on that.
func (db *DB) Inc(ctx context.Context, key []byte, by int64) (int64, error) {
	b := &Batch{}
	b.Inc(key, by)
	if err := db.Run(ctx, b); err != nil {
		return 0, err
	}
	return kvpb.DecodeIncrementValue(b.Results[0].Rows[0].Value)
}

// Delete deletes key outside any transaction.
func (db *DB) Delete(ctx context.Context, key []byte) error {
	b := &Batch{}
	b.Del(key)
	return db.Run(ctx, b)
}

// Scan reads up to maxRows (0: all) rows of [start, end) at one timestamp,
// outside any transaction.
func (db *DB) Scan(ctx context.Context, start, end []byte, maxRows int64) ([]kvpb.KeyValue, error) {
	b := &Batch{}
	b.Scan(start, end, maxRows)
	if err := db.Run(ctx, b); err != nil {
		return nil, err
	}
	return b.Results[0].Rows, nil
}

// ScanAt reads up to maxRows (0: all) rows of [start, end) at exactly ts,
// outside any transaction: an online index build's backfill reads each
// tablet's part of a table this way, in parallel, at its one backfill
// timestamp (which a transaction it keeps open protects from GC).
func (db *DB) ScanAt(ctx context.Context, start, end []byte, maxRows int64, ts hlc.Timestamp) ([]kvpb.KeyValue, error) {
	b := &Batch{}
	b.Scan(start, end, maxRows)
	if err := db.RunAt(ctx, b, ts); err != nil {
		return nil, err
	}
	return b.Results[0].Rows, nil
}

// RunAt sends b, which must only read, outside any transaction at exactly
// ts, with b's WaitPolicy. Its reads go into the tablets' timestamp
// caches at ts, as a transaction's would, but into no transaction's read
// set: a transaction whose read at its own read timestamp no later
// commit can change (sql/exec's bulk load into an existing table, after
// its descriptor write) reads this way, so that its commit does not
// refresh that span.
func (db *DB) RunAt(ctx context.Context, b *Batch, ts hlc.Timestamp) error {
	ba := &kvpb.BatchRequest{Requests: b.reqs}
	if !ba.IsReadOnly() {
		return fmt.Errorf("kv: RunAt of a batch that writes")
	}
	ba.Timestamp = ts
	ba.WaitPolicy = b.WaitPolicy
	br, err := db.ds.Send(ctx, ba)
	if err != nil {
		return err
	}
	return b.fill(br)
}

// GetCommitted is ScanCommitted for one key: its newest committed value
// (as of just below any open transaction's intent on it), for background
// readers of one record.
func (db *DB) GetCommitted(ctx context.Context, key []byte, staleAfter time.Duration) ([]byte, bool, error) {
	end := make([]byte, len(key)+1)
	copy(end, key)
	rows, err := db.ScanCommitted(ctx, key, end, 1, staleAfter)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return rows[0].Value, true, nil
}

// ScanCommitted reads up to maxRows (0: all) rows of [start, end) at one
// timestamp, outside any transaction, without waiting for or pushing a
// transaction that holds an intent there: for a node's background
// readers (caches of the zone records and the like), which must never
// make a writer lose. An ordinary read that meets an intent pushes its
// transaction above the read's timestamp, and a serializable writer
// pushed while it commits fails with 40001 once its in-place retries
// (commitTwoPhase) run out; a DDL's intents on records every node
// rereads each second lost that way (create_reference_table's zone
// record, docs/architecture.md "Background readers never push").
//
// It reads at the present time; when that meets intents it reads again
// just below the earliest of them, where they are not yet visible: a
// consistent snapshot from before those transactions wrote, which is
// what their commit (if any) will replace. Only an intent whose
// transaction started more than staleAfter ago is pushed, by an ordinary
// Scan: its coordinator may be gone, and a reader's push is what clears
// an abandoned intent (or resolves a committed one whose resolution was
// lost); a live transaction that old is rare and can afford the push.
func (db *DB) ScanCommitted(ctx context.Context, start, end []byte, maxRows int64, staleAfter time.Duration) ([]kvpb.KeyValue, error) {
	var ts hlc.Timestamp // zero: now, at the leaseholder
	for range maxCommittedScanTries {
		b := &Batch{}
		b.Scan(start, end, maxRows)
		ba := &kvpb.BatchRequest{Requests: b.reqs}
		ba.WaitPolicy, ba.Timestamp = kvpb.WaitError, ts
		br, err := db.ds.Send(ctx, ba)
		if err == nil {
			if err := b.fill(br); err != nil {
				return nil, err
			}
			return b.Results[0].Rows, nil
		}
		wie, ok := errors.AsType[*kvpb.WriteIntentError](err)
		if !ok || len(wie.Intents) == 0 {
			return nil, err
		}
		below := wie.Intents[0].Txn.WriteTimestamp
		oldest := wie.Intents[0].Txn.MinTimestamp
		for _, in := range wie.Intents[1:] {
			below = below.Backward(in.Txn.WriteTimestamp)
			oldest = oldest.Backward(in.Txn.MinTimestamp)
		}
		if db.clock.Now().WallTime-oldest.WallTime > staleAfter.Nanoseconds() || below.IsEmpty() {
			break
		}
		ts = below.Prev()
		db.belowIntents.Add(1)
	}
	return db.Scan(ctx, start, end, maxRows)
}

// BelowIntentScans is how many times ScanCommitted met intents and read
// again below them rather than push their transactions.
func (db *DB) BelowIntentScans() int64 { return db.belowIntents.Load() }

// PushedCommits is how many times a transaction of this DB sent its
// commit (EndTxn) and the record had been pushed above the timestamp
// it asked for, by another transaction or a reader that met its
// intents: the commit then refreshes and tries again, and after
// maxInPlaceRetries fails retryably.
func (db *DB) PushedCommits() int64 { return db.pushedCommits.Load() }

// maxCommittedScanTries bounds ScanCommitted's reads below intents before
// it falls back to an ordinary (pushing) scan: each try steps below at
// least one more transaction's intents.
const maxCommittedScanTries = 4

// Run sends a batch outside any transaction. A read-only batch reads every
// tablet at one timestamp (a consistent snapshot); a batch with writes is
// atomic per tablet only.
func (db *DB) Run(ctx context.Context, b *Batch) error {
	// A read-only batch is stamped by the DistSender only if it spans
	// several tablets; on one tablet the leaseholder stamps it (see
	// DistSender.Send for why).
	ba := &kvpb.BatchRequest{Requests: b.reqs}
	ba.WaitPolicy = b.WaitPolicy
	br, err := db.ds.Send(ctx, ba)
	if err != nil {
		return err
	}
	return b.fill(br)
}
