package kv

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/cairn-db/cairn/kvpb"
)

// TabletLookup is the tablet directory as the router sees it: a store in one
// process, a directory read over RPC in a cluster.
type TabletLookup interface {
	// LookupTablet returns the descriptor of the tablet holding key, or with
	// reverse the tablet holding the keys just below key (StartKey < key <=
	// EndKey), which is what a reverse scan ending at key needs.
	LookupTablet(ctx context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error)
}

// TabletCache remembers tablet descriptors, ordered by end key, so routing a
// request usually costs no directory lookup. Entries may be stale (a split
// happened behind the cache's back); the router evicts an entry when a
// tablet rejects a request sent by it (invariant 2). Safe for concurrent use.
type TabletCache struct {
	lookup TabletLookup

	mu sync.RWMutex
	// descs is sorted by EndKey and holds no two overlapping descriptors.
	descs []kvpb.TabletDescriptor
}

// NewTabletCache returns an empty cache that fills itself from lookup.
func NewTabletCache(lookup TabletLookup) *TabletCache {
	return &TabletCache{lookup: lookup}
}

// Lookup returns the descriptor of the tablet holding key (reverse: StartKey
// < key <= EndKey), from the cache or, on a miss, from the directory.
func (c *TabletCache) Lookup(ctx context.Context, key []byte, reverse bool) (kvpb.TabletDescriptor, error) {
	if d, ok := c.cached(key, reverse); ok {
		return d, nil
	}
	d, err := c.lookup.LookupTablet(ctx, key, reverse)
	if err != nil {
		return kvpb.TabletDescriptor{}, fmt.Errorf("kv: looking up tablet of %q: %w", key, err)
	}
	if !coversKey(d, key, reverse) {
		return kvpb.TabletDescriptor{}, fmt.Errorf("kv: directory answered %s for key %q (reverse=%t)", d.String(), key, reverse)
	}
	c.Insert(d)
	return d, nil
}

func coversKey(d kvpb.TabletDescriptor, key []byte, reverse bool) bool {
	if reverse {
		return bytes.Compare(d.StartKey, key) < 0 && bytes.Compare(key, d.EndKey) <= 0
	}
	return d.ContainsKey(key)
}

// cached looks key up in the cache only.
func (c *TabletCache) cached(key []byte, reverse bool) (kvpb.TabletDescriptor, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := sort.Search(len(c.descs), func(i int) bool {
		cmp := bytes.Compare(c.descs[i].EndKey, key)
		if reverse {
			return cmp >= 0
		}
		return cmp > 0
	})
	if i == len(c.descs) || !coversKey(c.descs[i], key, reverse) {
		return kvpb.TabletDescriptor{}, false
	}
	return c.descs[i], true
}

// Insert adds d, replacing every entry it overlaps, unless an overlapping
// entry for the same tablet has a newer generation (then d is stale and is
// dropped).
func (c *TabletCache) Insert(d kvpb.TabletDescriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.descs[:0:0]
	for _, e := range c.descs {
		if !overlaps(e, d) {
			kept = append(kept, e)
			continue
		}
		if e.TabletID == d.TabletID && e.Generation > d.Generation {
			return
		}
	}
	i := sort.Search(len(kept), func(i int) bool { return bytes.Compare(kept[i].EndKey, d.EndKey) > 0 })
	kept = append(kept, kvpb.TabletDescriptor{})
	copy(kept[i+1:], kept[i:])
	kept[i] = d
	c.descs = kept
}

func overlaps(a, b kvpb.TabletDescriptor) bool {
	return bytes.Compare(a.StartKey, b.EndKey) < 0 && bytes.Compare(b.StartKey, a.EndKey) < 0
}

// Evict removes d if the cache still holds exactly it (same tablet and
// generation), so a concurrent eviction cannot drop a fresher entry another
// request just inserted.
func (c *TabletCache) Evict(d kvpb.TabletDescriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.descs {
		if e.TabletID == d.TabletID && e.Generation == d.Generation && bytes.Equal(e.EndKey, d.EndKey) {
			c.descs = append(c.descs[:i:i], c.descs[i+1:]...)
			return
		}
	}
}

// Len returns the number of cached descriptors.
func (c *TabletCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.descs)
}
