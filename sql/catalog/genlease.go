package catalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
)

// Generation leases: the node-local generation (localgen.go) for a
// cluster of several SQL gateways, as CockroachDB's descriptor leases do
// it for descriptors. A node answers a statement's name and descriptor
// lookups from memory only while it holds a time-bounded lease on the
// catalog generation; a DDL, before it writes a new generation, takes
// every other node's lease away (or waits until it has expired), so no
// node ever plans with a generation older than its statement's snapshot.
//
// A lease is a record gl/<node> in the catalog's system span: the
// holder's RPC address, the generation it leased, and its expiration E
// (an HLC timestamp). A node acquires one in a transaction of its own
// that reads the generation key and writes its record; committed at C,
// it may answer a statement whose read timestamp R is in [C, E) with
// that generation, without any KV read. A lease is renewed the same way
// when a statement finds less than half of it left, so an idle node's
// lease simply runs out and no DDL has to wait for it.
//
// A DDL, the first time its transaction writes the catalog (Writer.bump,
// before it writes the generation key):
//
//  1. registers as pending here (localgen.go), so this node answers
//     nothing from memory until it ends;
//  2. scans the lease records inside its own transaction, and for every
//     other node's unexpired record asks the holder to revoke (Revoke: a
//     node-service call); the holder stops answering from memory, holds
//     off acquiring again until it reads another generation (or a lease
//     duration has passed), and answers a timestamp at or above every
//     read timestamp it answered from memory. A holder that cannot be
//     reached is waited out: it answers nothing at or above E;
//  3. fences: reads the generation key in a transaction of its own at a
//     timestamp above all those bounds (the clock is moved past them
//     first), so the tablet's timestamp cache pushes the DDL's write of
//     the key, hence its commit, above every statement any node answered
//     from memory with the old generation.
//
// Invariants:
//
//  1. A node answers a statement at read timestamp R from memory with
//     generation G only if it holds a lease on G committed at C <= R
//     with R < E, no local DDL is pending, and the lease was not revoked
//     since it was granted (epoch).
//  2. A DDL commits its generation above every R any node answered from
//     memory with the generation it replaces: a lease whose record its
//     scan saw is revoked or expired and fenced (steps 2-3); a lease
//     whose record it did not see was acquired at a timestamp its
//     serializable transaction must order after its own commit (the
//     acquisition read the generation key, which the DDL writes, and
//     wrote into the span the DDL read), so that lease is on the new
//     generation, or one of the two transactions restarts.
//  3. Hence every statement sees exactly the catalog its snapshot holds,
//     as when it read the generation key itself: no node plans with a
//     version older than the newest one committed at or below its read
//     timestamp, which is stronger than CockroachDB's two versions.
//
// The price: a DDL waits for a partitioned node's lease to expire
// (LeaseConfig.Duration), and a node that acquired a lease between a
// DDL's scan and its commit restarts that DDL's transaction.

// leasePrefix is the span of the lease records, under the catalog's
// system keys.
var leasePrefix = keys.System([]byte("gl/"))

func leaseKey(node uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), leasePrefix...), node)
}

// DefaultLeaseDuration is how long a generation lease lasts: how long a
// DDL may wait for a node it cannot reach, and (halved) how often an
// active node rewrites its lease record.
const DefaultLeaseDuration = 10 * time.Second

// LeaseConfig configures generation leases (UseGenerationLeases).
type LeaseConfig struct {
	// Node and Addr name the holder in its records: a DDL calls Revoke
	// with Addr.
	Node uint64
	Addr string
	// Duration of a lease (0: DefaultLeaseDuration).
	Duration time.Duration
	// Revoke asks the node at addr to give up its lease (its
	// Cache.RevokeGenerationLease, with gen) and returns the timestamp it
	// answered. An error means the node could not be reached: the DDL
	// waits for the lease to expire.
	Revoke func(ctx context.Context, addr string, gen []byte) (hlc.Timestamp, error)
}

// leaseRecord is one gl/<node> record.
type leaseRecord struct {
	node uint64
	addr string
	gen  []byte
	exp  hlc.Timestamp
}

func (r leaseRecord) encode() []byte {
	b := binary.AppendVarint(nil, r.exp.WallTime)
	b = binary.AppendVarint(b, int64(r.exp.Logical))
	b = binary.AppendUvarint(b, uint64(len(r.addr)))
	b = append(b, r.addr...)
	return append(b, r.gen...)
}

func decodeLeaseRecord(key, v []byte) (leaseRecord, error) {
	var r leaseRecord
	if len(key) != len(leasePrefix)+8 {
		return r, fmt.Errorf("%w: lease record key %x", ErrBadDescriptor, key)
	}
	r.node = binary.BigEndian.Uint64(key[len(leasePrefix):])
	wall, n := binary.Varint(v)
	if n <= 0 {
		return r, fmt.Errorf("%w: lease record %x", ErrBadDescriptor, v)
	}
	v = v[n:]
	logical, n := binary.Varint(v)
	if n <= 0 {
		return r, fmt.Errorf("%w: lease record %x", ErrBadDescriptor, v)
	}
	v = v[n:]
	l, n := binary.Uvarint(v)
	if n <= 0 || uint64(len(v)-n) < l {
		return r, fmt.Errorf("%w: lease record %x", ErrBadDescriptor, v)
	}
	r.exp = hlc.Timestamp{WallTime: wall, Logical: int32(logical)}
	r.addr = string(v[n : n+int(l)])
	r.gen = bytes.Clone(v[n+int(l):])
	return r, nil
}

// UseGenerationLeases makes the cache answer statements from memory under
// generation leases (see above): from the start, or, with
// UseLocalGeneration, once StopLocalGeneration was called. The caller
// promises that every transaction that wrote the catalog through a Writer
// over this cache is ended with EndDDL, and that every node's Revoke
// reaches RevokeGenerationLease of that node's cache.
func (c *Cache) UseGenerationLeases(db *kv.DB, cfg LeaseConfig) {
	if cfg.Duration <= 0 {
		cfg.Duration = DefaultLeaseDuration
	}
	if c.local == nil {
		c.local = newLocalGen(db)
	}
	c.local.lease = &cfg
}

// HoldsGenerationLease reports whether the cache holds an unexpired
// generation lease now.
func (c *Cache) HoldsGenerationLease() bool {
	lg := c.local
	if lg == nil || lg.lease == nil {
		return false
	}
	now := lg.db.Clock().Now()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.leasedLocked() && lg.known && now.Less(lg.exp)
}

// RevokeGenerationLease gives up the cache's generation lease for a DDL
// about to replace generation gen (step 2 above): nothing is answered
// from memory until a new lease is granted, none is acquired until a
// statement reads a generation other than gen or a lease duration has
// passed, and the timestamp returned is at or above every read timestamp
// answered from memory. Safe on a cache without leases.
func (c *Cache) RevokeGenerationLease(gen []byte) hlc.Timestamp {
	lg := c.local
	if lg == nil {
		return hlc.Timestamp{}
	}
	now := lg.db.Clock().Now()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.known = false
	lg.epoch++
	lg.stats.Revoked++
	if lg.lease != nil {
		lg.held, lg.holdGen = true, bytes.Clone(gen)
		lg.holdUntil = now
		lg.holdUntil.WallTime += lg.lease.Duration.Nanoseconds()
	}
	// Every timestamp served came from this clock (or was fed to it), so
	// now bounds them even if served was lost by a restart.
	return lg.served.Forward(now)
}

// leasedLocked reports whether memory answers only under a lease: the
// node is not the cluster's sole catalog writer, or no longer.
func (lg *localGen) leasedLocked() bool { return !lg.sole || lg.stopped }

// kickLocked starts acquiring (or renewing) a lease in the background
// unless one is on its way or a revocation holds it off.
func (lg *localGen) kickLocked() {
	if lg.lease == nil || lg.acquiring {
		return
	}
	if lg.held {
		if lg.db.Clock().Now().Less(lg.holdUntil) {
			return
		}
		lg.held = false
	}
	lg.acquiring = true
	go lg.acquire()
}

// seenLocked notes a generation a statement read from KV: a revocation
// for another generation no longer holds acquisitions off.
func (lg *localGen) seenLocked(gen []byte) {
	if lg.held && !bytes.Equal(gen, lg.holdGen) {
		lg.held = false
	}
}

// acquire writes this node's lease record on the current generation and,
// if nothing revoked it meanwhile, grants the lease.
func (lg *localGen) acquire() {
	cfg := lg.lease
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	epoch := lg.currentEpoch()
	var gen []byte
	var exp hlc.Timestamp
	var last *kv.Txn
	err := lg.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		last, gen = txn, nil
		txn.ExemptFromDrain()
		v, ok, err := txn.Get(ctx, genKey())
		if err != nil || !ok {
			return err
		}
		if _, err := genCounter(v); err != nil {
			return err
		}
		exp = txn.ReadTimestamp()
		exp.WallTime += cfg.Duration.Nanoseconds()
		gen = v
		return txn.Put(ctx, leaseKey(cfg.Node), leaseRecord{addr: cfg.Addr, gen: v, exp: exp}.encode())
	})
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.acquiring = false
	if err != nil || gen == nil {
		lg.stats.LeaseErrors++
		return
	}
	from := last.CommitTimestamp()
	if lg.epoch != epoch || len(lg.pending) > 0 || lg.held || !lg.leasedLocked() || !from.Less(exp) {
		return
	}
	lg.known, lg.gen, lg.from, lg.exp = true, gen, from, exp
	lg.stats.Leases++
}

// revokeOthers is step 2 for txn, a DDL's transaction: it revokes or
// waits out every other node's lease whose record txn sees, and raises
// served to a bound of what those nodes answered from memory, for
// awaitFence to fence.
func (lg *localGen) revokeOthers(ctx context.Context, txn *kv.Txn) error {
	cfg := lg.lease
	// Every record but this node's own: this node renews its lease in the
	// background while it runs statements, and a renewal committed after
	// this scan would fail the DDL's refresh of it (a pg_dump restore's
	// statements met 40001 that way). Its own lease needs no revoking:
	// pending covers it (step 1).
	own := leaseKey(cfg.Node)
	var rows []kvpb.KeyValue
	for _, sp := range [][2][]byte{{leasePrefix, own}, {keys.Next(own), keys.PrefixEnd(leasePrefix)}} {
		part, err := txn.Scan(ctx, sp[0], sp[1], 0)
		if err != nil {
			return fmt.Errorf("catalog: reading generation leases: %w", err)
		}
		rows = append(rows, part...)
	}
	clock := lg.db.Clock()
	var (
		mu     sync.Mutex
		target hlc.Timestamp
		errs   []error
		wg     sync.WaitGroup
	)
	for _, row := range rows {
		rec, err := decodeLeaseRecord(row.Key, row.Value)
		if err != nil {
			return err
		}
		if rec.node == cfg.Node || !clock.Now().Less(rec.exp) {
			// Our own lease is covered by pending; an expired one
			// answered nothing at or above its expiration, which is
			// below the clock, hence below the fence.
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			bound := rec.exp
			rctx, cancel := context.WithTimeout(ctx, revokeTimeout)
			ts, err := cfg.Revoke(rctx, rec.addr, rec.gen)
			cancel()
			if err == nil {
				err = clock.Update(ts)
			}
			if err == nil {
				bound = ts
			} else if err = waitPast(ctx, clock, rec.exp); err != nil {
				// An unreachable holder answers nothing at or above its
				// expiration: wait it out.
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			mu.Lock()
			target = target.Forward(bound)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("catalog: waiting for a generation lease to expire: %w", errs[0])
	}
	lg.mu.Lock()
	lg.served = lg.served.Forward(target)
	lg.mu.Unlock()
	return nil
}

// revokeTimeout bounds a revocation call: past it the holder is treated
// as unreachable and its lease waited out.
const revokeTimeout = 2 * time.Second

// waitPast returns once clock reads above ts.
func waitPast(ctx context.Context, clock *hlc.Clock, ts hlc.Timestamp) error {
	for {
		if ts.Less(clock.Now()) {
			return nil
		}
		d := time.Duration(ts.WallTime-clock.PhysicalNow()) + time.Millisecond
		t := time.NewTimer(max(d, time.Millisecond))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
