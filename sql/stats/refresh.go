package stats

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
)

// Automatic statistics, as CockroachDB collects them: sessions report how
// many rows their committed statements inserted, updated or deleted per
// table, and once a table has changed by more than StaleFraction of its
// rows plus StaleRows since its last collection, the node collects its
// statistics again in the background, in a transaction of its own
// (invariant 3), never in the user's.
const (
	StaleFraction = 0.2
	StaleRows     = 500
)

// DefaultDelay is how long a table that went stale waits for its
// collection: PostgreSQL's autovacuum_naptime (its autovacuum looks at
// each database's tables once a minute), and CockroachDB's refresher
// likewise looks at its counts once a minute. A collection reads the
// whole table; started at the commit of the load that made the table
// stale, it ran beside what came right after (a CREATE INDEX read the
// same 1M rows at the same moment: half of the node's CPU during the
// build went to the collection, bench/README.md "Issue 18"). Waiting lets
// loads in quick succession share one collection, counted when it
// starts, and lets the statements after a load run alone.
const DefaultDelay = time.Minute

// Refresher collects statistics in the background when tables go stale.
// Safe for concurrent use.
type Refresher struct {
	// Delay is how long a stale table waits for its collection
	// (DefaultDelay; tests shorten it). Set before the first
	// NotifyMutations.
	Delay time.Duration

	db    *kv.DB
	cache *Cache
	descs *catalog.Cache
	log   *slog.Logger
	// ctx bounds the background collections (Stop cancels it).
	ctx    context.Context
	cancel context.CancelFunc

	// after starts the wait for a collection: a channel that fires after
	// d, and a stop function (a timer; tests fire it by hand).
	after func(d time.Duration) (<-chan time.Time, func())

	mu      sync.Mutex
	changed map[catalog.ID]int64
	running map[catalog.ID]bool
	wg      sync.WaitGroup
}

// NewRefresher returns a refresher collecting through db, updating cache;
// descs caches the descriptors it reads (may be nil).
func NewRefresher(db *kv.DB, cache *Cache, descs *catalog.Cache, log *slog.Logger) *Refresher {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Refresher{Delay: DefaultDelay, db: db, cache: cache, descs: descs, log: log, ctx: ctx, cancel: cancel,
		after: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTimer(d)
			return t.C, func() { t.Stop() }
		},
		changed: map[catalog.ID]int64{}, running: map[catalog.ID]bool{}}
}

// NotifyMutations records that a committed transaction changed rows rows
// of table t, and schedules a collection when t may be stale. It is
// called on the session's commit path, so it reads nothing itself: a
// goroutine waits Delay, then compares the changes counted by then with
// the table's row count. Changes reported while it waits join its count.
func (r *Refresher) NotifyMutations(t *catalog.Table, rows int64) {
	if r == nil || t == nil || rows <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed[t.ID] += rows
	n := r.changed[t.ID]
	// Below StaleRows no table is stale, whatever its size.
	if n <= StaleRows || r.running[t.ID] || r.ctx.Err() != nil {
		return
	}
	r.running[t.ID] = true
	r.wg.Add(1)
	go r.maybeRefresh(t)
}

// Changed is the count of changes reported for table id since its last
// collection: what an ANALYZE of the whole table reads past, and hands to
// Analyzed once it commits.
func (r *Refresher) Changed(id catalog.ID) int64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed[id]
}

// Analyzed takes n changes (Changed when the ANALYZE started) off table
// id's count: an ANALYZE of the whole table that read them committed.
// PostgreSQL's ANALYZE resets the table's changes since the last analyze
// the same way, so the automatic collection a load started finds the
// table fresh and reads nothing: pgbench -i loads, then runs VACUUM
// ANALYZE, and without this the node read all of pgbench_accounts (1M
// rows at scale 10, 1.7 s of CPU) a second time a minute later, beside
// whatever ran then. Changes reported since the ANALYZE started stay.
func (r *Refresher) Analyzed(id catalog.ID, n int64) {
	if r == nil || n <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if left := r.changed[id] - n; left > 0 {
		r.changed[id] = left
	} else {
		delete(r.changed, id)
	}
}

// maybeRefresh waits Delay, then collects t's statistics when the changes
// counted by then make it stale (more than StaleFraction of its rows plus
// StaleRows).
func (r *Refresher) maybeRefresh(t *catalog.Table) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.running, t.ID)
		r.mu.Unlock()
	}()
	if r.Delay > 0 {
		wait, stop := r.after(r.Delay)
		select {
		case <-r.ctx.Done():
			stop()
			return
		case <-wait:
		}
	}
	r.mu.Lock()
	n := r.changed[t.ID]
	r.mu.Unlock()
	count := 0.0
	if ts := r.cache.Get(r.ctx, t); ts != nil {
		count = ts.RowCount
	}
	if float64(n) <= StaleFraction*count+StaleRows {
		return
	}
	r.mu.Lock()
	r.changed[t.ID] -= n // changes counted since stay for the next time
	r.mu.Unlock()
	r.refresh(t.ID)
}

// refresh collects and saves table id's statistics in a transaction of
// its own.
func (r *Refresher) refresh(id catalog.ID) {
	start := time.Now()
	var ts *Table
	// Read in one transaction and save in another: a transaction that
	// read a busy table whole and then wrote would have to prove its reads
	// still valid at the write's timestamp, and retry the whole read when
	// a writer got in between. Statistics are estimates; a snapshot a few
	// milliseconds older than the save is as good.
	err := r.db.Txn(r.ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		// It writes nothing: an online schema change need not wait
		// for it (kv.Txn.ExemptFromDrain). A collection over a table
		// just loaded reads it whole, and a CREATE INDEX right after
		// the load waited seconds for it between its first two steps.
		txn.ExemptFromDrain()
		if h := refreshTestingHook; h != nil {
			h(txn)
		}
		t, err := catalog.NewReader(txn, r.descs).TableByID(ctx, id)
		if err != nil {
			return err
		}
		ts, err = Collect(ctx, txn, t, nil, Options{})
		return err
	})
	if err == nil {
		err = r.db.Txn(r.ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			return Save(ctx, txn, ts)
		})
	}
	r.cache.Invalidate(id)
	if err != nil {
		// A dropped table, a shutdown or a conflict: the next mutations
		// try again.
		r.log.Debug("stats: automatic collection failed", "table", id, "err", err)
		return
	}
	r.log.Debug("stats: automatic collection", "table", id, "rows", ts.RowCount, "took", time.Since(start))
}

// refreshTestingHook, when set, runs at the start of each automatic
// collection's read transaction (tests).
var refreshTestingHook func(txn *kv.Txn)

// Stop cancels the running collections and waits for them.
func (r *Refresher) Stop() {
	if r != nil {
		// Under mu: NotifyMutations starts no collection after this.
		r.mu.Lock()
		r.cancel()
		r.mu.Unlock()
		r.wg.Wait()
	}
}
