package tablet

import (
	"bytes"
	"slices"
	"sync"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// tsCache remembers, per key span, the highest timestamp at which a read
// was served, so no write can later land at or below it (invariant 4 of the
// package). It is leaseholder state: it is not replicated, and a new
// leaseholder starts with a low-water mark at its lease start.
//
// Entries are non-overlapping intervals kept sorted by start key. Memory is
// bounded: past maxEntries the oldest half of the entries (by timestamp) are
// folded into the low-water mark, which only ever makes the cache answer
// higher, never lower, so forgetting is safe.
//
// Each entry also remembers the transaction that read at its timestamp (or
// uuid.Nil when several did or the read was not transactional), so a
// transaction is not pushed by its own reads.
type tsCache struct {
	mu         sync.Mutex
	lowWater   hlc.Timestamp
	entries    []tsEntry
	maxEntries int
}

type tsEntry struct {
	start, end []byte
	ts         hlc.Timestamp
	txn        uuid.UUID
}

func newTSCache(lowWater hlc.Timestamp, maxEntries int) *tsCache {
	if maxEntries < 2 {
		maxEntries = 2
	}
	return &tsCache{lowWater: lowWater, maxEntries: maxEntries}
}

// add records that span was read at ts by txn (uuid.Nil for none).
func (c *tsCache) add(span kvpb.Span, ts hlc.Timestamp, txn uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts.LessEq(c.lowWater) {
		return
	}
	start, end := span.Key, spanEnd(span)
	// Rebuild the overlapped region: pieces of old entries outside [start,
	// end) survive as they were, pieces inside are merged with the new read.
	i, _ := slices.BinarySearchFunc(c.entries, start, func(e tsEntry, k []byte) int {
		return bytes.Compare(e.end, k)
	})
	// entries[i] is the first entry whose end > start (ends are sorted
	// because entries do not overlap).
	if i < len(c.entries) && bytes.Equal(c.entries[i].end, start) {
		i++
	}
	j := i
	for j < len(c.entries) && bytes.Compare(c.entries[j].start, end) < 0 {
		j++
	}
	var out []tsEntry
	cur := start
	for _, e := range c.entries[i:j] {
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
	c.entries = slices.Replace(c.entries, i, j, out...)
	if len(c.entries) > c.maxEntries {
		c.shrinkLocked()
	}
}

// shrinkLocked raises the low-water mark to the median entry timestamp and
// drops every entry at or below it.
func (c *tsCache) shrinkLocked() {
	tss := make([]hlc.Timestamp, len(c.entries))
	for i, e := range c.entries {
		tss[i] = e.ts
	}
	slices.SortFunc(tss, hlc.Timestamp.Compare)
	c.lowWater = c.lowWater.Forward(tss[len(tss)/2])
	c.entries = slices.DeleteFunc(c.entries, func(e tsEntry) bool { return e.ts.LessEq(c.lowWater) })
}

// getMax returns the highest read timestamp over span and the transaction
// that read there (uuid.Nil if unknown, several, or the low-water mark).
func (c *tsCache) getMax(span kvpb.Span) (hlc.Timestamp, uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, txn := c.lowWater, uuid.Nil
	end := spanEnd(span)
	i, _ := slices.BinarySearchFunc(c.entries, span.Key, func(e tsEntry, k []byte) int {
		return bytes.Compare(e.end, k)
	})
	for ; i < len(c.entries) && bytes.Compare(c.entries[i].start, end) < 0; i++ {
		e := c.entries[i]
		if bytes.Compare(e.end, span.Key) <= 0 {
			continue
		}
		switch {
		case ts.Less(e.ts):
			ts, txn = e.ts, e.txn
		case ts == e.ts && txn != e.txn:
			txn = uuid.Nil
		}
	}
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
	for _, e := range c.entries {
		if bytes.Compare(e.end, key) <= 0 {
			continue
		}
		e.start = maxKey(e.start, key)
		r.entries = append(r.entries, e)
	}
	return r
}

func (c *tsCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
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
