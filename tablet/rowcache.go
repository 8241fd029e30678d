package tablet

import (
	"sync/atomic"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// The row cache: the rows of a row span [k, PrefixEnd(k)) (a SQL row by
// its primary key) as a read of the engine found them, with the newest
// version of any key of the span, so that a later read of the span at or
// above that version answers without a seek (invariant 15).
//
// A point read by primary key (pgbench's SELECT) spent about 30% of the
// node's CPU in the scan's Pebble seek (the memtable's skiplist and every
// level holding the key), mostly for rows nothing wrote since the last
// read. PostgreSQL answers such a read from a buffer page it has pinned;
// this is the same idea at the row's grain, kept true exactly as the
// validation cache's row-span entries are (validcache.go): an entry goes
// in only from a read of the engine after the generation it captured with
// no write of the span applied in between, and every applied write removes
// the entries of the row spans holding its keys (an SST, a range write, a
// snapshot, a new lease and a split empty the cache). An entry therefore
// says what the engine holds for the span, and a read at a timestamp at or
// above the entry's newest version, finding no lock in the lock table
// (invariant 11), would have read exactly the entry's rows: each key's
// newest version is visible, nothing lies above the read to be uncertain
// about, and there is no intent to meet.
//
// Only a batch of that one scan, forward and without a byte limit, reads
// or fills the cache (a batch that also writes reads through its own
// writes; a follower's lock table is not the leaseholder's). The node
// bounds the bytes every replica's entries hold together (RowCache). An
// install that finds the budget spent is refused, except one in
// rowEvictEvery, which evicts entries of its own replica at random to
// make room (and is refused when the replica has none).

// RowCache is the node's budget for the row caches of its replicas. The
// store makes one and shares it; a nil *RowCache turns the cache off.
type RowCache struct {
	limit int64
	used  atomic.Int64
	hits  atomic.Uint64
	// full counts installs that found the budget spent; one in
	// rowEvictEvery goes on to evict (installRows).
	full atomic.Uint64
}

// DefaultRowCacheBytes is the store's row cache when its config names
// none (in-process nodes, tests): 64 MiB holds some 300,000 rows of
// pgbench's accounts table. cairn start sizes its own from the node's
// memory limit (cmd/cairn, defaultRowCache).
const DefaultRowCacheBytes = 64 << 20

// NewRowCache returns a budget of limit bytes (nil when limit <= 0: no
// row cache).
func NewRowCache(limit int64) *RowCache {
	if limit <= 0 {
		return nil
	}
	return &RowCache{limit: limit}
}

// Used reports the bytes the node's row caches hold.
func (b *RowCache) Used() int64 { return b.used.Load() }

// Hits reports how many reads the node's row caches answered.
func (b *RowCache) Hits() uint64 { return b.hits.Load() }

// take reserves n bytes, or reports false and reserves nothing.
func (b *RowCache) take(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *RowCache) give(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// rowEntry is a row span's rows and the newest version of its keys, held
// in the map by value: a look-up that misses the CPU caches (a large
// table's entries) then pays no further miss to compare the timestamp.
type rowEntry struct {
	newest hlc.Timestamp
	rows   []kvpb.KeyValue
	size   int64
}

// Sizes that bound what one entry may hold and what it is charged: a
// row span is a row (one key packed, a few with column families), and
// the charge counts the map's and the slices' overhead.
const (
	maxRowEntryBytes = 4 << 10
	rowEntryOverhead = 128
	rowKVOverhead    = 56
	// rowEvictTries is how many entries an install over the budget may
	// evict before it gives up.
	rowEvictTries = 4
	// rowEvictEvery: of the installs that find the budget spent, one in
	// this many evicts to make room and the rest are refused before they
	// copy anything. A working set larger than the budget (pgbench's
	// scale 10 under 64 MiB) then keeps most of what it cached instead of
	// paying an eviction and an install on every miss (at scale 10 that
	// churn cost what the hits saved), while a working set that moved
	// still replaces the old entries, more slowly.
	rowEvictEvery = 16
)

// rowsAt returns the cached rows of the row span [start, end) when a read
// at ts would read exactly them (the entry's newest version at or below
// ts). The rows are the entry's: the caller copies them.
func (c *validCache) rowsAt(start []byte, ts hlc.Timestamp) ([]kvpb.KeyValue, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.rows[string(start)]
	if !ok || !e.newest.LessEq(ts) {
		return nil, false
	}
	c.rowHits++
	c.budget.hits.Add(1)
	return e.rows, true
}

// installRows records rows as the contents of the row span starting at
// start, newest the newest version of its keys, read at generation gen.
func (c *validCache) installRows(start []byte, newest hlc.Timestamp, rows []kvpb.KeyValue, gen uint64) {
	if c.budget == nil {
		return
	}
	size := int64(rowEntryOverhead + len(start))
	for _, kv := range rows {
		size += int64(rowKVOverhead + len(kv.Key) + len(kv.Value))
	}
	if size > maxRowEntryBytes {
		return
	}
	if c.budget.used.Load()+size > c.budget.limit && c.budget.full.Add(1)%rowEvictEvery != 0 {
		return
	}
	e := rowEntry{newest: newest, rows: copyRows(rows, nil), size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mayInstallLocked(string(start), gen) {
		return
	}
	if old, ok := c.rows[string(start)]; ok {
		c.dropRowLocked(string(start), old)
	}
	ok := c.budget.take(size)
	for evicted := 0; !ok && evicted < rowEvictTries && len(c.rows) > 0; evicted++ {
		for k, old := range c.rows { // a random entry: map order
			c.dropRowLocked(k, old)
			break
		}
		ok = c.budget.take(size)
	}
	if !ok {
		return
	}
	if c.rows == nil {
		c.rows = make(map[string]rowEntry)
		c.rowLens = make(map[int]int)
	}
	c.rows[string(start)] = e
	c.rowLens[len(start)]++
	c.rowBytes += size
}

// dropRowLocked removes the entry of start and gives back its bytes.
func (c *validCache) dropRowLocked(start string, e rowEntry) {
	delete(c.rows, start)
	if c.rowLens[len(start)]--; c.rowLens[len(start)] == 0 {
		delete(c.rowLens, len(start))
	}
	c.rowBytes -= e.size
	c.budget.give(e.size)
}

// removeRowsLocked drops the entries of the row spans holding key.
func (c *validCache) removeRowsLocked(key []byte) {
	for n := range c.rowLens {
		if n > len(key) {
			continue
		}
		if e, ok := c.rows[string(key[:n])]; ok {
			c.dropRowLocked(string(key[:n]), e)
		}
	}
}

// clearRowsLocked drops every entry.
func (c *validCache) clearRowsLocked() {
	if len(c.rows) == 0 {
		return
	}
	clear(c.rows)
	clear(c.rowLens)
	c.budget.give(c.rowBytes)
	c.rowBytes = 0
}

// copyRows appends copies of rows to dst, their keys and values in one
// allocation: the cache's entries and the answers it gives share no
// memory with anything else.
func copyRows(rows, dst []kvpb.KeyValue) []kvpb.KeyValue {
	n := 0
	for _, kv := range rows {
		n += len(kv.Key) + len(kv.Value)
	}
	buf := make([]byte, 0, n)
	for _, kv := range rows {
		k := len(buf)
		buf = append(buf, kv.Key...)
		v := len(buf)
		buf = append(buf, kv.Value...)
		dst = append(dst, kvpb.KeyValue{Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)], Timestamp: kv.Timestamp})
	}
	return dst
}
