package catalog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
)

// The node-local generation: the catalog generation kept in memory, so
// that a statement needs no KV read at all to resolve names (the KV read
// of the generation key was half of what binding a point SELECT cost).
//
// It is only correct when every catalog write of the cluster goes through
// this node's Cache (UseLocalGeneration's condition): then the node sees
// every DDL begin and end, and answers a statement reading at timestamp R
// with generation G only if
//
//   - no catalog-writing transaction is in flight on the node (pending),
//   - G is known valid at R: a KV read at a timestamp from <= R returned
//     G, and no DDL has begun since that read (epoch), so no DDL can have
//     committed at a timestamp in (from, R].
//
// The remaining hazard is a DDL that began before R was served but
// commits at a timestamp <= R: its transaction's timestamp comes from
// when it started, and nothing pushed it above R, since R was never read
// from the generation key in KV (that read is what pushes a later writer
// of the key above it, through the tablet's timestamp cache). So a DDL,
// when it registers (BeginDDL, before its first write of the generation
// key), fences: if statements were answered from memory at timestamps
// above the last fence, it reads the generation key in a fresh
// transaction, whose read timestamp (the clock's now) is at least every
// timestamp served, and the timestamp cache then pushes the DDL's own
// write, hence its commit, above all of them. While the DDL is pending no
// statement is answered from memory, so the fence stays good until it
// ends; then the generation is unknown again until a statement primes it
// with a KV read at or above the DDL's end (floor).
//
// A statement answered from memory still records the generation key in
// its transaction's read spans (kv.Txn.RecordRead), so a transaction
// pushed past a later DDL's commit refreshes and restarts exactly as it
// did when it read the key.
//
// A fence read never waits on a lock for long: the only writers of the
// generation key are registered DDLs, and if one is pending when another
// registers, nothing was served since the first one fenced, so the second
// needs no fence.
//
// Several SQL gateways (issue #4) break the condition: a DDL through
// another node neither marks itself pending here nor fences what this
// node served. A node of such a cluster answers from memory only under
// a generation lease (genlease.go), which every DDL revokes first. A cluster of one that another node
// may join later uses the local generation until then, and calls
// StopLocalGeneration before it admits the second node (the server does,
// from membership's join handler): that stops answering from memory for
// good and fences every timestamp served, so a DDL through the new node,
// which can only begin after the join, commits above all of them.
// docs/architecture.md ("Catalog generation", "Generation leases")
// records the decisions.
type localGen struct {
	db *kv.DB
	// npending mirrors len(pending), read without the lock by EndDDL's
	// fast path (every transaction end calls it).
	npending atomic.Int32

	mu sync.Mutex
	// known: gen is valid for read timestamps >= from.
	known bool
	gen   []byte
	from  hlc.Timestamp
	// floor: a priming read below it may predate a DDL that ended.
	floor hlc.Timestamp
	// served is the highest read timestamp answered from memory; fenced
	// the highest timestamp a fence read recorded in the generation key's
	// timestamp cache.
	served, fenced hlc.Timestamp
	// epoch counts DDL registrations and ends; a priming read is kept
	// only if it did not change during the read.
	epoch uint64
	// stopped: StopLocalGeneration was called; nothing is answered from
	// memory again.
	stopped bool
	// sole: UseLocalGeneration's condition holds (until stopped).
	sole bool
	// pending are the catalog-writing transactions in flight, each with
	// 1 + the epoch of the transaction whose reads revoked the other
	// nodes' leases (genlease.go; 0: not yet). A restarted transaction
	// lost its scan of the lease records, so it revokes again.
	pending map[*kv.Txn]int32
	// fencing is closed when the fence read in progress ends.
	fencing chan struct{}
	stats   LocalGenStats

	// Generation leases (genlease.go): lease is their configuration
	// (nil: none); under a lease gen is valid for read timestamps in
	// [from, exp). held: a revocation holds acquisitions off until a
	// statement reads a generation other than holdGen or the clock passes
	// holdUntil; acquiring: an acquisition is on its way.
	lease     *LeaseConfig
	exp       hlc.Timestamp
	held      bool
	holdGen   []byte
	holdUntil hlc.Timestamp
	acquiring bool
}

func newLocalGen(db *kv.DB) *localGen {
	return &localGen{db: db, pending: map[*kv.Txn]int32{}}
}

// LocalGenStats counts statements answered from the node-local
// generation (Hits) and those that read the generation key (Reads), fence
// reads, and generation leases granted, revoked and failed to acquire.
type LocalGenStats struct{ Hits, Reads, Fences, Leases, Revoked, LeaseErrors uint64 }

// UseLocalGeneration makes the cache keep the catalog generation in
// memory (see localGen). The caller promises that every catalog write of
// the cluster goes through Writers over this cache, and that every
// transaction that made one is ended with EndDDL; db runs the fence
// reads.
func (c *Cache) UseLocalGeneration(db *kv.DB) {
	if c.local == nil {
		c.local = newLocalGen(db)
	}
	c.local.sole = true
}

// LocalGenStats returns the node-local generation's counters (zero if
// it is not used).
func (c *Cache) LocalGenStats() LocalGenStats {
	lg := c.local
	if lg == nil {
		return LocalGenStats{}
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.stats
}

// lookup returns the generation to use at read timestamp ts, if memory
// can answer for it.
func (lg *localGen) lookup(ts hlc.Timestamp) ([]byte, bool) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	leased := lg.leasedLocked()
	if leased && lg.lease == nil || !lg.known || len(lg.pending) > 0 || ts.Less(lg.from) || leased && !ts.Less(lg.exp) {
		lg.stats.Reads++
		if leased && len(lg.pending) == 0 {
			lg.kickLocked()
		}
		return nil, false
	}
	lg.served = lg.served.Forward(ts)
	lg.stats.Hits++
	if leased && time.Duration(lg.exp.WallTime-ts.WallTime) < lg.lease.Duration/2 {
		// Renew before it runs out, while statements still use it.
		lg.kickLocked()
	}
	return lg.gen, true
}

// currentEpoch returns the epoch before a priming read.
func (lg *localGen) currentEpoch() uint64 {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.epoch
}

// prime records gen, read from KV at ts, if no DDL began or ended since
// epoch was taken and none is pending.
func (lg *localGen) prime(gen []byte, ts hlc.Timestamp, epoch uint64) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.leasedLocked() {
		// Under leases only an acquisition grants memory (genlease.go).
		lg.seenLocked(gen)
		return
	}
	if lg.known || lg.stopped || lg.epoch != epoch || len(lg.pending) > 0 || ts.Less(lg.floor) {
		return
	}
	lg.known, lg.gen, lg.from = true, slices.Clone(gen), ts
}

// beginDDL registers txn as a catalog writer, fencing first if needed.
// An error leaves txn registered: EndDDL must still be called.
func (lg *localGen) beginDDL(ctx context.Context, txn *kv.Txn) error {
	lg.mu.Lock()
	revoked, ok := lg.pending[txn]
	if !ok {
		lg.pending[txn] = 0
		lg.npending.Add(1)
		lg.epoch++
		lg.known = false
	}
	epoch := txn.Epoch() + 1
	revoke := lg.lease != nil && lg.leasedLocked() && revoked != epoch
	lg.mu.Unlock()
	if revoke {
		if err := lg.revokeOthers(ctx, txn); err != nil {
			return err
		}
		lg.mu.Lock()
		if _, ok := lg.pending[txn]; ok {
			lg.pending[txn] = epoch
		}
		lg.mu.Unlock()
	}
	return lg.awaitFence(ctx)
}

// StopLocalGeneration makes the cache read the generation key per
// statement from now on, as a node of a cluster of several SQL gateways
// must, and returns once every read timestamp it answered from memory is
// fenced: at or below a read of the generation key in KV, so that any
// later write of the key, through any node, commits above all of them.
// It is for a cluster of one about to admit a second node, and must
// return before that node is admitted; an error (the fence read failed)
// leaves memory off but the fence owed, and a retry fences again.
// Without UseLocalGeneration it does nothing.
func (c *Cache) StopLocalGeneration(ctx context.Context) error {
	lg := c.local
	if lg == nil {
		return nil
	}
	lg.mu.Lock()
	if !lg.stopped {
		lg.stopped = true
		lg.known = false
		lg.epoch++
	}
	lg.mu.Unlock()
	return lg.awaitFence(ctx)
}

// LocalGenerationStopped reports whether StopLocalGeneration was called.
func (c *Cache) LocalGenerationStopped() bool {
	lg := c.local
	if lg == nil {
		return false
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.stopped
}

// awaitFence returns once every timestamp served from memory is at or
// below a fence read's, running one if none in progress covers them. The
// caller must already have made lookup refuse (a pending DDL, or
// stopped), so that served no longer moves.
func (lg *localGen) awaitFence(ctx context.Context) error {
	lg.mu.Lock()
	for {
		if lg.served.LessEq(lg.fenced) {
			lg.mu.Unlock()
			return nil
		}
		if ch := lg.fencing; ch != nil {
			lg.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			lg.mu.Lock()
			continue
		}
		target := lg.served
		ch := make(chan struct{})
		lg.fencing = ch
		lg.stats.Fences++
		lg.mu.Unlock()
		ts, err := lg.fence(ctx)
		lg.mu.Lock()
		lg.fencing = nil
		close(ch)
		if err == nil && ts.Less(target) {
			err = fmt.Errorf("catalog: fence read at %s is below the served timestamp %s", ts, target)
		}
		if err != nil {
			lg.mu.Unlock()
			return err
		}
		lg.fenced = lg.fenced.Forward(ts)
	}
}

// fence reads the generation key in a transaction of its own and returns
// the timestamp it read at.
func (lg *localGen) fence(ctx context.Context) (hlc.Timestamp, error) {
	var ts hlc.Timestamp
	err := lg.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		if _, _, err := txn.Get(ctx, genKey()); err != nil {
			return err
		}
		ts = txn.ReadTimestamp()
		return nil
	})
	if err != nil {
		return hlc.Timestamp{}, fmt.Errorf("catalog: fencing the generation: %w", err)
	}
	return ts, nil
}

// EndDDL tells the cache that txn ended (committed, rolled back, or with
// an unknown outcome): if it wrote the catalog, the generation is unknown
// until a read at or above now primes it again. Cheap for a transaction
// that wrote nothing; callers may call it at every transaction end.
func (c *Cache) EndDDL(txn *kv.Txn) {
	lg := c.local
	if lg == nil || lg.npending.Load() == 0 {
		return
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if _, ok := lg.pending[txn]; !ok {
		return
	}
	delete(lg.pending, txn)
	lg.npending.Add(-1)
	lg.epoch++
	lg.known = false
	// The clock is past the transaction's commit timestamp, if it
	// committed (every timestamp of this node's transactions came from
	// it); an outcome still unknown is settled by whatever a later read
	// finds at or above now.
	lg.floor = lg.floor.Forward(lg.db.Clock().Now()).Forward(txn.CommitTimestamp())
}

// GenerationAt returns the catalog generation valid at read timestamp ts
// when the node-local generation (or a generation lease) can answer for
// it without a KV read, and false otherwise. It is for a read that has no
// transaction (an implicit point SELECT, issue 22: sql/session's implicit
// read) and so no catalog Reader: the caller takes ts from the node's
// clock. As for a Reader's lookup, ts counts as served, so a DDL that
// begins later fences above it and commits above ts. Nothing records the
// generation key in a transaction's read spans: a read at one timestamp
// has no refresh to fail.
//
// A read at a timestamp the caller does not know exactly (a leaseholder
// stamps it) is checked with two calls: one at a clock reading taken
// before the read was sent (the read's timestamp is at or above it: the
// leaseholder's clock is moved up to the sender's) and one at the Now
// the leaseholder's answer carries (kvpb.BatchResponse.Now: at or above
// the read's timestamp, which it is for a read the tablet timestamped;
// this clock has been moved up to it). The generation only grows
// with the timestamp, so when both return the same generation it is the
// one valid at the read.
func (c *Cache) GenerationAt(ts hlc.Timestamp) ([]byte, bool) {
	lg := c.local
	if lg == nil {
		return nil, false
	}
	return lg.lookup(ts)
}
