package tablet

import (
	"bytes"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/RaduBerinde/btreemap"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
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
// Row reads, the span [k, PrefixEnd(k)) of every key with prefix k (how a
// point SELECT reads a row and its column entries), go to a third hash map
// keyed by k (two: short prefixes, a table row's, are held in the map's
// slots with their reads, see shortRows), also indexed on demand: a point lookup of a key w checks
// w's prefixes of the few lengths the map holds (rowLens), a span lookup
// the index and the prefixes of its start. They were span reads before,
// and the B-tree's search, delete and insert per read were a tenth of the
// CPU of pgbench's select-only. Past maxRowLens distinct prefix lengths,
// further row reads of new lengths take the span path, so a point lookup
// never checks more than maxRowLens prefixes; rowLens is kept sorted, so a
// lookup of a key checks only the lengths up to its own. The bound was 8:
// on a plain `cairn start` the catalog's own row reads (descriptors,
// namespace entries of names of every length) used all eight before
// pgbench's first SELECT, and every read of pgbench_accounts' rows took
// the span path (bench/README.md, "Issue 22, 2026-11-30").
// A key's answer is the maximum of the three and the low-water mark. Memory is
// bounded: past maxEntries (all kinds together) the oldest half of the
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
	// reads never pays for the ordering unless something asks for it; the
	// trees hold keys, whose reads are in the maps. The maps hold the
	// reads themselves, not pointers: no allocation per new key, and a
	// shrink walks them without a cache miss per entry.
	byKey     map[string]tsRead
	points    *btreemap.BTreeMap[[]byte, struct{}]
	unindexed []string
	entries   *btreemap.BTreeMap[[]byte, *tsEntry]
	// rows, rowTree and rowsUnindexed are byKey, points and unindexed for
	// row reads, keyed by the prefix; rowLens are the lengths of rows'
	// keys (a shrink recomputes them). rows maps a prefix to its read's
	// index in rowReads, not to the read: a read of a row already there
	// (every repeated point SELECT) is one map lookup, which does not
	// allocate, and a write into the slice, where an assignment to a
	// map[string]tsRead hashed the key a second time and allocated it as
	// a string. rowReads holds exactly the reads rows indexes (a shrink
	// compacts it).
	rows     map[string]int
	rowReads []tsRead
	// shortRows holds the row reads of prefixes of at most
	// shortRowKeyLen bytes (a table row's key of a few integer columns),
	// keyed by the prefix's bytes in the map's own slot and with the read
	// beside them: a read of a row already there touches the map's
	// group and slot, where rows touched them, the key's bytes elsewhere
	// and rowReads' element (the largest part of the timestamp cache's
	// cost under pgbench -S). rows and rowReads hold the longer prefixes.
	shortRows     map[shortRowKey]shortRowRead
	rowTree       *btreemap.BTreeMap[[]byte, struct{}]
	rowsUnindexed []string
	rowLens       []int // ascending
	// rowLenTop is, per prefix length below rowLenTopLen, a timestamp at
	// or above every row read of that length: a point lookup, which
	// checks the longest prefixes first, skips a length whose reads all
	// lie below what it already found (the key's own row, read by the
	// writer's locking read, is usually the newest). It cost a map probe
	// per length and key, most of a one-phase commit's timestamp-cache
	// look-ups (bench/README.md, twenty-sixth session). rowProbes
	// counts the probes, for tests.
	rowLenTop [rowLenTopLen]hlc.Timestamp
	rowProbes int
	// spanTop is a timestamp at or above every entry of entries: a
	// lookup from a floor above it (getMaxFrom) skips the span tree,
	// whose search for a point was a third of a write's look-up.
	// spanProbes counts the searches, for tests.
	spanTop    hlc.Timestamp
	spanProbes int
	// rowLensCap is maxRowLens; tests lower it to exercise the span path.
	rowLensCap int
	maxEntries int
	// reads is the node's table of non-transactional row reads
	// (readtable.go; nil: none, every read is exact), which answers point
	// lookups; readLens has bit n set once this cache put a row read of
	// an n-byte prefix there. The table cannot say which of its reads lie
	// in a span, so each is also logged, in arrival order and with
	// repeats, in readLog (its prefix copied into readArena, no
	// allocation per read), which readTree indexes on demand like
	// points (readIndexed: how much of the log it holds) for span
	// lookups and splits: appending to the log touches no cold memory,
	// where the map of row reads it replaces missed the cache twice per
	// lookup. The log counts against maxEntries.
	reads    *ReadTable
	readLens uint64
	// readLenMax is, per prefix length, the highest wall time this cache
	// put in the table: a lookup skips the lengths whose reads are all at
	// or below the low-water mark (a tablet's catalog reads long past),
	// so a write does not pay a cold slot per length for them.
	readLenMax  [maxReadTableLen + 1]int64
	readLog     []loggedRead
	readIndexed int
	readTree    *btreemap.BTreeMap[[]byte, int64]
	readArena   []byte
}

// loggedRead is a row read the node's table holds: its prefix, and the
// wall time read at (the logical part is zero).
type loggedRead struct {
	key  []byte
	wall int64
}

// readArenaChunk is the size of readArena's chunks.
const readArenaChunk = 64 << 10

// maxRowLens bounds the distinct prefix lengths of row reads (see
// tsCache.rowLensCap).
const maxRowLens = 32

// rowLenTopLen bounds the prefix lengths tsCache.rowLenTop covers; a
// longer prefix's reads are always looked up.
const rowLenTopLen = 64

// shortRowKeyLen is the longest prefix tsCache.shortRows holds.
const shortRowKeyLen = 31

// shortRowKey is a prefix of at most shortRowKeyLen bytes, comparable by
// value: b[:n] is the prefix, the rest zero.
type shortRowKey struct {
	n uint8
	b [shortRowKeyLen]byte
}

// makeShortRowKey returns key as a shortRowKey, and false when it is too
// long for one.
func makeShortRowKey(key []byte) (shortRowKey, bool) {
	var k shortRowKey
	if len(key) > shortRowKeyLen {
		return k, false
	}
	k.n = uint8(len(key))
	copy(k.b[:], key)
	return k, true
}

// shortRowRead is a row read in shortRows: the read, and the prefix as a
// string, the copy that rowsUnindexed and rowTree refer to (the map's
// key is no string), made once when the row is first read.
type shortRowRead struct {
	read tsRead
	key  string
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
	return &tsCache{lowWater: lowWater, maxEntries: maxEntries, byKey: make(map[string]tsRead), points: newPointTree(), entries: newSpanTree(),
		rows: make(map[string]int), shortRows: make(map[shortRowKey]shortRowRead), rowTree: newPointTree(), rowLensCap: maxRowLens}
}

// isPrefixEnd reports whether end is PrefixEnd(key): the span [key, end)
// holds exactly the keys with prefix key. It does not allocate.
func isPrefixEnd(key, end []byte) bool {
	n := len(end)
	if n == 0 || n > len(key) || end[n-1] != key[n-1]+1 || key[n-1] == 0xff || !bytes.Equal(end[:n-1], key[:n-1]) {
		return false
	}
	for _, b := range key[n:] {
		if b != 0xff {
			return false
		}
	}
	return true
}

// addRowLocked records a row read of prefix key, and false when it must
// take the span path (a new prefix length past maxRowLens).
func (c *tsCache) addRowLocked(key []byte, ts hlc.Timestamp, txn uuid.UUID) bool {
	if n := len(key); n < rowLenTopLen {
		// Raised even if the read takes the span path: only ever high.
		c.rowLenTop[n] = c.rowLenTop[n].Forward(ts)
	}
	sk, short := makeShortRowKey(key)
	if short {
		if r, ok := c.shortRows[sk]; ok {
			r.read = r.read.merge(ts, txn)
			c.shortRows[sk] = r
			return true
		}
	} else if i, ok := c.rows[string(key)]; ok {
		c.rowReads[i] = c.rowReads[i].merge(ts, txn)
		return true
	}
	if i, found := slices.BinarySearch(c.rowLens, len(key)); !found {
		if len(c.rowLens) >= c.rowLensCap {
			return false
		}
		c.rowLens = slices.Insert(c.rowLens, i, len(key))
	}
	k := string(key)
	if short {
		c.shortRows[sk] = shortRowRead{read: tsRead{ts: ts, txn: txn}, key: k}
	} else {
		c.rows[k] = len(c.rowReads)
		c.rowReads = append(c.rowReads, tsRead{ts: ts, txn: txn})
	}
	c.rowsUnindexed = append(c.rowsUnindexed, k)
	return true
}

// rowRead returns the row read of prefix key, if there is one.
func (c *tsCache) rowRead(key []byte) (tsRead, bool) {
	if sk, short := makeShortRowKey(key); short {
		r, ok := c.shortRows[sk]
		return r.read, ok
	}
	i, ok := c.rows[string(key)]
	if !ok {
		return tsRead{}, false
	}
	return c.rowReads[i], true
}

// rowPrefixesLocked merges into best the row reads whose prefix is a
// prefix of key (key itself included when self). It looks the longest
// first and skips the lengths whose reads all lie below best: merging a
// read below best changes nothing (a tie still merges, since it drops
// the transaction).
//
// Reads below floor are skipped too (getMaxFrom): they cannot lift the
// answer to floor, nor change it once it is there.
func (c *tsCache) rowPrefixesLocked(best tsRead, key []byte, self bool, floor hlc.Timestamp) tsRead {
	end := len(key)
	if self {
		end++
	}
	hi, _ := slices.BinarySearch(c.rowLens, end) // rowLens ascends
	for i := hi - 1; i >= 0; i-- {
		n := c.rowLens[i]
		if n < rowLenTopLen && (c.rowLenTop[n].Less(best.ts) || c.rowLenTop[n].Less(floor)) {
			continue
		}
		c.rowProbes++
		if r, ok := c.rowRead(key[:n]); ok {
			best = best.merge(r.ts, r.txn)
		}
	}
	return best
}

// tablePrefixesLocked merges into best the node's table's reads of the
// prefixes of key (key itself included) of the lengths this cache put
// there.
func (c *tsCache) tablePrefixesLocked(best tsRead, key []byte, floor hlc.Timestamp) tsRead {
	lens := c.readLens
	if len(key) < 63 {
		lens &= 1<<(len(key)+1) - 1
	}
	for lens != 0 {
		n := bits.TrailingZeros64(lens)
		lens &= lens - 1
		if top := (hlc.Timestamp{WallTime: c.readLenMax[n]}); top.LessEq(c.lowWater) || top.Less(floor) {
			// The low-water mark already answers for them, or they lie
			// below the caller's floor (getMaxFrom).
			continue
		}
		if r := c.reads.get(key[:n]); !r.IsEmpty() {
			best = best.merge(r, uuid.Nil)
		}
	}
	return best
}

func newPointTree() *btreemap.BTreeMap[[]byte, struct{}] {
	return btreemap.New[[]byte, struct{}](tsCacheDegree, bytes.Compare)
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
	c.byKey[k] = r
	c.unindexed = append(c.unindexed, k)
}

// indexLocked brings points up to date with byKey.
func (c *tsCache) indexLocked() {
	for _, k := range c.unindexed {
		c.points.ReplaceOrInsert(unsafeBytes(k), struct{}{})
	}
	c.unindexed = c.unindexed[:0]
	for _, k := range c.rowsUnindexed {
		c.rowTree.ReplaceOrInsert(unsafeBytes(k), struct{}{})
	}
	c.rowsUnindexed = c.rowsUnindexed[:0]
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
			c.byKey[string(span.Key)] = r.merge(ts, txn)
		} else {
			c.addPointLocked(span.Key, tsRead{ts: ts, txn: txn})
		}
		if c.lenLocked() > c.maxEntries {
			c.shrinkLocked()
		}
		return
	}
	if isPrefixEnd(span.Key, span.EndKey) && c.reads != nil && txn == uuid.Nil && ts.Logical == 0 && len(span.Key) <= maxReadTableLen {
		// A non-transactional row read (an implicit point SELECT's): its
		// slot in the node's table, no entry here.
		c.readLens |= 1 << len(span.Key)
		c.readLenMax[len(span.Key)] = max(c.readLenMax[len(span.Key)], ts.WallTime)
		c.reads.record(span.Key, ts.WallTime)
		c.readLog = append(c.readLog, loggedRead{key: c.arenaCopy(span.Key), wall: ts.WallTime})
		if c.lenLocked() > c.maxEntries {
			c.shrinkLocked()
		}
		return
	}
	if isPrefixEnd(span.Key, span.EndKey) && c.addRowLocked(span.Key, ts, txn) {
		if c.lenLocked() > c.maxEntries {
			c.shrinkLocked()
		}
		return
	}
	c.addSpanLocked(span.Key, spanEnd(span), ts, txn)
	if c.lenLocked() > c.maxEntries {
		c.shrinkLocked()
	}
}

// addSpanLocked records a read of [start, end) at ts by txn in the span
// tree.
//
// The tree is keyed by start key, so a piece of an overlapped entry that
// keeps the entry's start is the entry itself, changed in place (its end,
// or its timestamp merged with the read's); only pieces with new starts
// are inserted. It deleted every overlapped entry and inserted every
// piece before: a third of the CPU of a ten-row scan's KV path
// (kv.BenchmarkPointRead, rows=10), where the spans read cover the tree
// end to end and each read cuts two or three entries.
func (c *tsCache) addSpanLocked(start, end []byte, ts hlc.Timestamp, txn uuid.UUID) {
	var inserts []tsEntry
	cur := start
	for _, e := range c.overlapsLocked(start, end) {
		oldEnd, oldTS, oldTxn := e.end, e.ts, e.txn
		ovEnd := minKey(oldEnd, end)
		merged := tsRead{ts: oldTS, txn: oldTxn}.merge(ts, txn)
		switch {
		case bytes.Compare(e.start, cur) < 0:
			// e starts before the read: it keeps [e.start, cur) as it
			// was, and the overlap is a new piece.
			e.end = cur
			inserts = append(inserts, tsEntry{start: cur, end: ovEnd, ts: merged.ts, txn: merged.txn})
		default:
			if bytes.Compare(cur, e.start) < 0 {
				// A gap the read covers alone.
				inserts = append(inserts, tsEntry{start: cur, end: e.start, ts: ts, txn: txn})
			}
			// e is the overlap, from its own start.
			e.end, e.ts, e.txn = ovEnd, merged.ts, merged.txn
		}
		if bytes.Compare(end, oldEnd) < 0 {
			// e reached past the read: its rest keeps what it had.
			inserts = append(inserts, tsEntry{start: end, end: oldEnd, ts: oldTS, txn: oldTxn})
		}
		cur = ovEnd
	}
	if bytes.Compare(cur, end) < 0 {
		inserts = append(inserts, tsEntry{start: cur, end: end, ts: ts, txn: txn})
	}
	for k := range inserts {
		c.entries.ReplaceOrInsert(inserts[k].start, &inserts[k])
	}
	// Every entry changed or made here is at or below the merge of its
	// old timestamp (below spanTop) and ts.
	c.spanTop = c.spanTop.Forward(ts)
}

// shrinkLocked raises the low-water mark to the median entry timestamp and
// drops every entry at or below it.
//
// It runs once per maxEntries/2 additions, and its cost per addition was
// half of the timestamp cache's under pgbench's select-only (5% of the KV
// read of a point SELECT: bench/README.md, "Issue 22, KV read path"): a
// sort of every entry's timestamp, then new maps refilled with the
// survivors. The median is now selected in linear time (nthTimestamp,
// txntombstone.go), and the point and row maps lose their dropped entries
// in place.
func (c *tsCache) shrinkLocked() {
	tss := make([]hlc.Timestamp, 0, c.lenLocked())
	for _, e := range c.entries.Ascend(btreemap.Min[[]byte](), btreemap.Max[[]byte]()) {
		tss = append(tss, e.ts)
	}
	for _, r := range c.byKey {
		tss = append(tss, r.ts)
	}
	for _, r := range c.rowReads {
		tss = append(tss, r.ts)
	}
	for _, r := range c.shortRows {
		tss = append(tss, r.read.ts)
	}
	for _, lr := range c.readLog {
		tss = append(tss, hlc.Timestamp{WallTime: lr.wall})
	}
	c.lowWater = c.lowWater.Forward(nthTimestamp(tss, len(tss)/2))
	// The log keeps its reads above the mark (the table keeps them all:
	// it only ever answers higher); the tree indexes them when next
	// needed.
	kept := c.readLog[:0]
	for _, lr := range c.readLog {
		if c.lowWater.Less(hlc.Timestamp{WallTime: lr.wall}) {
			kept = append(kept, lr)
		}
	}
	clear(c.readLog[len(kept):])
	c.readLog, c.readTree, c.readIndexed = kept, nil, 0
	oldEntries := c.entries
	c.entries, c.spanTop = newSpanTree(), hlc.Timestamp{}
	for k, e := range oldEntries.Ascend(btreemap.Min[[]byte](), btreemap.Max[[]byte]()) {
		if c.lowWater.Less(e.ts) {
			c.entries.ReplaceOrInsert(k, e)
			c.spanTop = c.spanTop.Forward(e.ts)
		}
	}
	// The trees index the survivors again when next needed.
	c.points, c.unindexed = newPointTree(), c.unindexed[:0]
	for k, r := range c.byKey {
		if c.lowWater.Less(r.ts) {
			c.unindexed = append(c.unindexed, k)
		} else {
			delete(c.byKey, k)
		}
	}
	// The row lengths are those of the survivors: a subset of the lengths
	// before, so within the bound.
	c.rowTree, c.rowsUnindexed, c.rowLens = newPointTree(), c.rowsUnindexed[:0], c.rowLens[:0]
	clear(c.rowLenTop[:])
	top := func(n int, ts hlc.Timestamp) {
		if n < rowLenTopLen {
			c.rowLenTop[n] = c.rowLenTop[n].Forward(ts)
		}
	}
	old := c.rowReads
	c.rowReads = make([]tsRead, 0, len(old)/2+1)
	for k, i := range c.rows {
		r := old[i]
		if !c.lowWater.Less(r.ts) {
			delete(c.rows, k)
			continue
		}
		c.rows[k] = len(c.rowReads)
		c.rowReads = append(c.rowReads, r)
		c.rowsUnindexed = append(c.rowsUnindexed, k)
		top(len(k), r.ts)
		if i, found := slices.BinarySearch(c.rowLens, len(k)); !found {
			c.rowLens = slices.Insert(c.rowLens, i, len(k))
		}
	}
	for sk, r := range c.shortRows {
		if !c.lowWater.Less(r.read.ts) {
			delete(c.shortRows, sk)
			continue
		}
		c.rowsUnindexed = append(c.rowsUnindexed, r.key)
		top(len(r.key), r.read.ts)
		if i, found := slices.BinarySearch(c.rowLens, len(r.key)); !found {
			c.rowLens = slices.Insert(c.rowLens, i, len(r.key))
		}
	}
}

func (c *tsCache) lenLocked() int {
	return c.entries.Len() + len(c.byKey) + len(c.rows) + len(c.shortRows) + len(c.readLog)
}

// arenaCopy copies key into readArena.
func (c *tsCache) arenaCopy(key []byte) []byte {
	if cap(c.readArena)-len(c.readArena) < len(key) {
		c.readArena = make([]byte, 0, max(readArenaChunk, len(key)))
	}
	n := len(c.readArena)
	c.readArena = append(c.readArena, key...)
	return c.readArena[n:len(c.readArena):len(c.readArena)]
}

// indexReadsLocked brings readTree up to date with readLog: each prefix
// once, at its highest read.
func (c *tsCache) indexReadsLocked() {
	if c.readTree == nil {
		c.readTree = btreemap.New[[]byte, int64](tsCacheDegree, bytes.Compare)
	}
	for _, lr := range c.readLog[c.readIndexed:] {
		if _, w, ok := c.readTree.Get(lr.key); !ok || w < lr.wall {
			c.readTree.ReplaceOrInsert(lr.key, lr.wall)
		}
	}
	c.readIndexed = len(c.readLog)
}

// unsafeBytes views an immutable string as a key for the tree, so the tree
// and the map share one copy of each key. Nothing writes through it.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// getMax returns the highest read timestamp over span and the transaction
// that read there (uuid.Nil if unknown, several, or the low-water mark).
func (c *tsCache) getMax(span kvpb.Span) (hlc.Timestamp, uuid.UUID) {
	return c.getMaxFrom(span, hlc.Timestamp{})
}

// getMaxFrom is getMax for a caller that only acts on reads at or above
// floor (a write at floor: writeTS, a one-phase commit). When getMax's
// answer is at or above floor it returns that answer, transaction and
// all; otherwise some timestamp below floor (the reads it skipped all
// lie below floor, so none could lift the answer to it). A write looks
// up each key it writes, and the prefix lengths and span entries of
// reads older than the write (the catalog's, pgbench's -i) cost a map
// probe or a tree search each (bench/README.md, twenty-seventh session).
func (c *tsCache) getMaxFrom(span kvpb.Span, floor hlc.Timestamp) (hlc.Timestamp, uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := tsRead{ts: c.lowWater}
	point := len(span.EndKey) == 0
	if point {
		if r, ok := c.byKey[string(span.Key)]; ok {
			best = best.merge(r.ts, r.txn)
		}
		best = c.rowPrefixesLocked(best, span.Key, true, floor)
		if c.readLens != 0 {
			best = c.tablePrefixesLocked(best, span.Key, floor)
		}
	} else {
		c.indexLocked()
		for k := range c.points.Ascend(btreemap.GE(span.Key), btreemap.LT(span.EndKey)) {
			r := c.byKey[string(k)]
			best = best.merge(r.ts, r.txn)
		}
		// Row reads meeting the span: those whose prefix lies in it, and
		// those whose prefix is a proper prefix of its start (they cover it).
		for k := range c.rowTree.Ascend(btreemap.GE(span.Key), btreemap.LT(span.EndKey)) {
			r, _ := c.rowRead(k)
			best = best.merge(r.ts, r.txn)
		}
		best = c.rowPrefixesLocked(best, span.Key, false, floor)
		if c.readLens != 0 {
			// The table's reads covering the span's start, then those
			// whose prefix lies in it.
			best = c.tablePrefixesLocked(best, span.Key, floor)
			c.indexReadsLocked()
			for _, w := range c.readTree.Ascend(btreemap.GE(span.Key), btreemap.LT(span.EndKey)) {
				best = best.merge(hlc.Timestamp{WallTime: w}, uuid.Nil)
			}
		}
	}
	if c.spanTop.Less(best.ts) || c.spanTop.Less(floor) {
		// Every span entry lies below what was found or below floor.
		return best.ts, best.txn
	}
	var end []byte
	if !point {
		end = span.EndKey
	}
	c.spanProbes++
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
	r.rowLensCap = c.rowLensCap
	// The right side shares the node's table (reads of prefixes left of
	// key answer its lookups too, which only raises them) and logs the
	// table's reads of prefixes at or after key; the keys are immutable,
	// so the two logs share them.
	r.reads, r.readLens, r.readLenMax = c.reads, c.readLens, c.readLenMax
	for _, lr := range c.readLog {
		if bytes.Compare(lr.key, key) >= 0 {
			r.readLog = append(r.readLog, lr)
		}
	}
	c.indexLocked()
	for k := range c.points.Ascend(btreemap.GE(key), btreemap.Max[[]byte]()) {
		r.addPointLocked(k, c.byKey[string(k)])
	}
	for k := range c.rowTree.Ascend(btreemap.GE(key), btreemap.Max[[]byte]()) {
		v, _ := c.rowRead(k)
		r.addRowLocked(k, v.ts, v.txn) // r has c's lengths at most
	}
	for _, e := range c.entries.Ascend(btreemap.Min[[]byte](), btreemap.Max[[]byte]()) {
		if bytes.Compare(e.end, key) <= 0 {
			continue
		}
		ne := *e
		ne.start = maxKey(e.start, key)
		r.entries.ReplaceOrInsert(ne.start, &ne)
		r.spanTop = r.spanTop.Forward(ne.ts)
	}
	// A row read whose prefix is a proper prefix of key covers
	// [key, PrefixEnd(prefix)) on the right: a span entry there.
	for _, n := range c.rowLens {
		if n >= len(key) {
			break // rowLens ascends
		}
		if v, ok := c.rowRead(key[:n]); ok {
			r.addSpanLocked(append([]byte(nil), key...), keys.PrefixEnd(key[:n]), v.ts, v.txn)
		}
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
