package catalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/cairn-db/cairn/kv"
)

// Cache is a node's descriptor cache, keyed by ID. Every descriptor write
// also writes the descriptor's stamp, a small key holding its version and
// a random nonce. Get reads the stamp inside the caller's transaction and
// returns the cached descriptor only if its stamp matches, so a
// transaction sees exactly the descriptor its snapshot holds (invariant 2)
// while the decoding of a possibly large descriptor is skipped. The nonce
// makes (id, stamp) name one content forever, even for a version written
// by a transaction that rolled back and whose ID was then reused.
//
// Cluster: a stamp read is one cheap KV read per descriptor per
// transaction. With many nodes it becomes a lease: a node holding a lease
// on (id, version) serves that version without a read; a schema change
// writes version v+1 and waits until no lease on v-1 remains, so at most
// two versions are in use at once (what the online states of §8 need),
// and the stamp read disappears from the read path.
//
// Descriptors in the cache are shared and immutable. Safe for concurrent
// use.
type Cache struct {
	mu      sync.Mutex
	entries map[ID]cacheEntry
	stats   CacheStats
	// gen holds the lookups of the newest catalog generation a Reader
	// asked for (generation.go).
	gen *genMaps
	// local is the node-local generation (localgen.go); nil: every
	// statement reads the generation key.
	local *localGen
}

type cacheEntry struct {
	stamp []byte
	desc  Descriptor
}

// CacheStats counts lookups answered from the cache and those that read
// and decoded the descriptor.
type CacheStats struct{ Hits, Misses uint64 }

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{entries: map[ID]cacheEntry{}} }

// Stats returns the counters so far.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Get returns descriptor id as txn sees it (42704 if it does not exist).
func (c *Cache) Get(ctx context.Context, txn *kv.Txn, id ID) (Descriptor, error) {
	d, ok, err := c.get(ctx, txn, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, undefinedObject(fmt.Sprintf("descriptor %d", id))
	}
	return d, nil
}

func (c *Cache) get(ctx context.Context, txn *kv.Txn, id ID) (Descriptor, bool, error) {
	stamp, ok, err := txn.Get(ctx, stampKey(id))
	if err != nil || !ok {
		return nil, false, err
	}
	c.mu.Lock()
	e, hit := c.entries[id]
	if hit && bytes.Equal(e.stamp, stamp) {
		c.stats.Hits++
		c.mu.Unlock()
		return e.desc, true, nil
	}
	c.stats.Misses++
	c.mu.Unlock()
	d, ok, err := readDescriptor(ctx, txn, id)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, fmt.Errorf("%w: descriptor %d has a stamp but no descriptor", ErrBadDescriptor, id)
	}
	v, err := stampVersion(stamp)
	if err != nil {
		return nil, false, err
	}
	if v != d.DescVersion() {
		return nil, false, fmt.Errorf("%w: descriptor %d is version %d, its stamp %d", ErrBadDescriptor, id, d.DescVersion(), v)
	}
	c.mu.Lock()
	// Keep the newest version: an old transaction must not evict what
	// newer ones use.
	if cur, ok := c.entries[id]; !ok || cur.desc.DescVersion() <= v {
		c.entries[id] = cacheEntry{stamp: stamp, desc: d}
	}
	c.mu.Unlock()
	return d, true, nil
}

// newStamp returns a stamp for version v of a descriptor.
func newStamp(v uint64) []byte {
	n := uuid.New()
	return append(binary.AppendUvarint(nil, v), n[:]...)
}

func stampVersion(b []byte) (uint64, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || len(b) != n+16 {
		return 0, fmt.Errorf("%w: stamp %x", ErrBadDescriptor, b)
	}
	return v, nil
}
