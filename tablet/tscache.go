package tablet

import (
	"bytes"
	"slices"
	"sync"
	"unsafe"

	"github.com/RaduBerinde/btreemap"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// tsCache remembers, per key span, the highest timestamp at which a read
// was served, so no write can later land at or below it (invariant 4 of the
// package). It is leaseholder state: it is not replicated, and a new
// leaseholder starts with a low-water mark at its lease start.
//
// Point reads, by far the most common, go to a hash map (O(1) to record and
// to look up), indexed on demand by a B-tree keyed by the key (O(log n) per
// key, paid when a span lookup or a split first needs the order); neither
// splices. Span reads go to non-overlapping intervals in a B-tree keyed by
// start key (a sorted slice before: each span read then moved half of up to
// maxEntries entries, 20% of the CPU of pgbench's select-only, whose point
// SELECTs read a row's span).
// A key's answer is the maximum of the two and the low-water mark. Memory is
// bounded: past maxEntries (both kinds together) the oldest half of the
// entries (by timestamp) are folded into the low-water mark, which only
// ever makes the cache answer higher, never lower, so forgetting is safe.
//
// Each entry also remembers the transaction that read at its timestamp (or
// uuid.Nil when several did or the read was not transactional), so a
// transaction is not pushed by its own reads.
type tsCache struct {
	mu       sync.Mutex
	lowWater hlc.Timestamp
	// byKey holds every point entry and answers a point lookup or update
	// in O(1). points orders them for span lookups and splits; keys added
	// since the last such use wait in unindexed, so a stream of point
	// reads never pays for the ordering unless something asks for it. The
	// shared *tsRead is updated in place.
	byKey      map[string]*tsRead
	points     *btreemap.BTreeMap[[]byte, *tsRead]
	unindexed  []string
	entries    *btreemap.BTreeMap[[]byte, *tsEntry]
	maxEntries int
}

// tsRead is the highest read of a key or interval and who made it.
type tsRead struct {
	ts  hlc.Timestamp
	txn uuid.UUID
}

// merge folds a read at ts by txn into r: the higher timestamp wins, and a
// timestamp shared by two transactions belongs to neither.
func (r tsRead) merge(ts hlc.Timestamp, txn uuid.UUID) tsRead {
	switch {
	case r.ts.Less(ts):
		return tsRead{ts: ts, txn: txn}
	case r.ts == ts && r.txn != txn:
		return tsRead{ts: ts, txn: uuid.Nil}
	}
	return r
}

type tsEntry struct {
	start, end []byte
	ts         hlc.Timestamp
	txn        uuid.UUID
}

// tsCacheDegree is the B-tree's degree: wide nodes keep lookups shallow.
const tsCacheDegree = 16

func newTSCache(lowWater hlc.Timestamp, maxEntries int) *tsCache {
	if maxEntries < 2 {
		maxEntries = 2
	}
	return &tsCache{lowWater: lowWater, maxEntries: maxEntries, byKey: make(map[string]*tsRead), points: newPointTree(), entries: newSpanTree()}
}

func newPointTree() *btreemap.BTreeMap[[]byte, *tsRead] {
	return btreemap.New[[]byte, *tsRead](tsCacheDegree, bytes.Compare)
}

func newSpanTree() *btreemap.BTreeMap[[]byte, *tsEntry] {
	return btreemap.New[[]byte, *tsEntry](tsCacheDegree, bytes.Compare)
}

// overlapsLocked returns, in start-key order, the span entries whose
// interval meets the span [start, end) (end nil: the point start).
func (c *tsCache) overlapsLocked(start, end []byte) []*tsEntry {
	var out []*tsEntry
	// At most one entry starting before start reaches into the span: the
	// last one (entries do not overlap).
	for _, e := range c.entries.Descend(btreemap.LT(start), btreemap.Min[[]byte]()) {
		if bytes.Compare(e.end, start) > 0 {
			out = append(out, e)
		}
		break
	}
	hi := btreemap.LT(end)
	if end == nil {
		hi = btreemap.LE(start)
	}
	for _, e := range c.entries.Ascend(btreemap.GE(start), hi) {
		out = append(out, e)
	}
	return out
}

// addPointLocked inserts a point entry the cache does not have yet.
func (c *tsCache) addPointLocked(key []byte, r tsRead) {
	k := string(key)
	p := &r
	c.byKey[k] = p
	c.unindexed = append(c.unindexed, k)
}

// indexLocked brings points up to date with byKey.
func (c *tsCache) indexLocked() {
	for _, k := range c.unindexed {
		c.points.ReplaceOrInsert(unsafeBytes(k), c.byKey[k])
	}
	c.unindexed = c.unindexed[:0]
}

// add records that span was read at ts by txn (uuid.Nil for none).
func (c *tsCache) add(span kvpb.Span, ts hlc.Timestamp, txn uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts.LessEq(c.lowWater) {
		return
	}
	if len(span.EndKey) == 0 {
		if r, ok := c.byKey[string(span.Key)]; ok {
			*r = r.merge(ts, txn)
		} else {
			c.addPointLocked(span.Key, tsRead{ts: ts, txn: txn})
		}
		if c.lenLocked() > c.maxEntries {
			c.shrinkLocked()
		}
		return
	}
	start, end := span.Key, spanEnd(span)
	// Rebuild the overlapped region: pieces of old entries outside [start,
	// end) survive as they were, pieces inside are merged with the new read.
	var out []tsEntry
	cur := start
	for _, e := range c.overlapsLocked(start, end) {
		c.entries.Delete(e.start)
		if bytes.Compare(e.start, cur) < 0 {
			// Left remainder of e before the new span.
			out = append(out, tsEntry{start: e.start, end: cur, ts: e.ts, txn: e.txn})
		} else if bytes.Compare(cur, e.start) < 0 {
			out = append(out, tsEntry{start: cur, end: e.start, ts: ts, txn: txn})
		}
		ovStart := maxKey(e.start, start)
		ovEnd := minKey(e.end, end)
		m := tsEntry{start: ovStart, end: ovEnd, ts: e.ts, txn: e.txn}
		switch {
		case e.ts.Less(ts):
			m.ts, m.txn = ts, txn
		case e.ts == ts && e.txn != txn:
			m.txn = uuid.Nil
		}
		out = append(out, m)
		cur = ovEnd
		if bytes.Compare(end, e.end) < 0 {
			out = append(out, tsEntry{start: end, end: e.end, ts: e.ts, txn: e.txn})
		}
	}
	if bytes.Compare(cur, end) < 0 {
		out = append(out, tsEntry{start: cur, end: end, ts: ts, txn: txn})
	}
	for k := range out {
		c.entries.ReplaceOrInsert(out[k].start, &out[k])
	}
	if c.lenLocked() > c.maxEntries {
		c.shrinkLocked()
	}
}

// shrinkLocked raises the low-water mark to the median entry timestamp and
// drops every entry at or below it.
func (c *tsCache) shrinkLocked() {
	tss := make([]hlc.Timestamp, 0, c.lenLocked())
	for _, e := range c.entries.Ascend(btreemap.Min[[]byte](), btreemap.Max[[]byte]()) {
		tss = append(tss, e.ts)
	}
	for _, r := range c.byKey {
		tss = append(tss, r.ts)
	}
	slices.SortFunc(tss, hlc.Timestamp.Compare)
	c.lowWater = c.lowWater.Forward(tss[len(tss)/2])
	oldEntries := c.entries
	c.entries = newSpanTree()
	for k, e := range oldEntries.Ascend(btreemap.Min[[]byte](), btreemap.Max[[]byte]()) {
		if c.lowWater.Less(e.ts) {
			c.entries.ReplaceOrInsert(k, e)
		}
	}
	// Rebuilding is O(n log n), like the sort above, and happens once per
	// maxEntries/2 additions.
	old := c.byKey
	c.byKey, c.points, c.unindexed = make(map[string]*tsRead, len(old)/2), newPointTree(), c.unindexed[:0]
	for k, r := range old {
		if c.lowWater.Less(r.ts) {
			c.byKey[k] = r
			c.unindexed = append(c.unindexed, k)
		}
	}
}

func (c *tsCache) lenLocked() int { return c.entries.Len() + len(c.byKey) }

// unsafeBytes views an immutable string as a key for the tree, so the tree
// and the map share one copy of each key. Nothing writes through it.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// getMax returns the highest read timestamp over span and the transaction
// that read there (uuid.Nil if unknown, several, or the low-water mark).
func (c *tsCache) getMax(span kvpb.Span) (hlc.Timestamp, uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := tsRead{ts: c.lowWater}
	point := len(span.EndKey) == 0
	if point {
		if r, ok := c.byKey[string(span.Key)]; ok {
			best = best.merge(r.ts, r.txn)
		}
	} else {
		c.indexLocked()
		for _, r := range c.points.Ascend(btreemap.GE(span.Key), btreemap.LT(span.EndKey)) {
			best = best.merge(r.ts, r.txn)
		}
	}
	var end []byte
	if !point {
		end = span.EndKey
	}
	for _, e := range c.overlapsLocked(span.Key, end) {
		best = best.merge(e.ts, e.txn)
	}
	ts, txn := best.ts, best.txn
	return ts, txn
}

// splitOff returns a new cache holding the part of c at or after key, with
// c's low-water mark, for the right-hand side of a split. c keeps its
// entries: the left tablet never sees keys past key again, so they are only
// wasted memory until the next shrink.
func (c *tsCache) splitOff(key []byte) *tsCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := newTSCache(c.lowWater, c.maxEntries)
	c.indexLocked()
	for k, v := range c.points.Ascend(btreemap.GE(key), btreemap.Max[[]byte]()) {
		r.addPointLocked(k, *v)
	}
	for _, e := range c.entries.Ascend(btreemap.Min[[]byte](), btreemap.Max[[]byte]()) {
		if bytes.Compare(e.end, key) <= 0 {
			continue
		}
		ne := *e
		ne.start = maxKey(e.start, key)
		r.entries.ReplaceOrInsert(ne.start, &ne)
	}
	return r
}

func (c *tsCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lenLocked()
}

func maxKey(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

func minKey(a, b []byte) []byte {
	if bytes.Compare(a, b) <= 0 {
		return a
	}
	return b
}
