package tablet

import (
	"bytes"
	"sync"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

// The validation cache: the newest version of keys a transaction's
// commit checks, so that the check need not seek the engine again while
// nothing wrote the key (invariant 12).
//
// Two kinds of commit-time check are point refreshes of keys the
// transaction saw a moment before. A strict refresh
// (kvpb.RefreshRequest{Strict: true}) validates a key its writes depend
// on: a table descriptor's writer key, which only a schema change writes
// (kv/txn_validate.go); every write of a table validates the table's key,
// so a simple-update checks two and a tpcb-like transaction four. And a
// buffered write is checked from the snapshot of the statement that
// buffered it (kv's checkBuffered): under READ COMMITTED, pgbench's
// default, every statement has its own, so every written row is checked;
// an UPDATE's row was read and locked (an unreplicated lock, mvcc.
// CheckLockNewest) by the same statement, which read its newest version
// to do so. Each check was a seek of the engine (the memtable's skiplist
// and every level). A check fails if the key has a version above the
// refresh's From or another transaction's intent on it; the lock table
// answers the second in memory (invariant 11), and this cache the first:
// a key whose newest version lies at or below From passes without a read.
// Entries come from a strict refresh that read the engine and from an
// unreplicated lock's check; a cache full of rows locked and never written
// is emptied. An UPDATE's lock is of its row's span [k, PrefixEnd(k)),
// and its commit checks that span (kv's writeBuffer.lockChecks): the
// lock's check also leaves the newest version of the whole span, which a
// write of any key prefixed by k removes.
//
// What makes an entry true: it is installed by an evaluation that read the
// key's versions from the engine (not through its own batch's writes),
// and removed whenever a write of the key is applied. Latches play no
// part (a write above a read's timestamp does not wait for its latch),
// nor does the lock (best effort: a lease change, a split or a reset
// loses it). Every applied write names its keys in its batch
// (storage.VisitReprKeys); one that cannot (an SST, a range deletion)
// empties the cache. The removal happens twice, before the batch commits
// (RaftStateMachine.apply, Replica.Apply) and after (applyEffects), and
// between the two no entry may be installed (pending): a refresh that
// read the engine before the write committed can only have read before
// the first removal's generation or install after the second's, and the
// generation it captured before reading refuses both. A snapshot, a new
// lease and a split empty the cache (rebuildFromEngine, applySplit).
// Only answers that pass use it: an entry above From, or any doubt, reads
// the engine as before, so a wrong entry could only ever be too new.
//
// Under load some write of the tablet is almost always between its two
// removals, which refused every install. So removals are also marked
// per bucket of key hashes (validMarks): an install is also let in when
// no removal since its generation and no write between its removals
// names a key hashing to its key's bucket (a span's entry: its start's),
// and no write without named keys came since. A write marks the bucket
// of every prefix of each key it names, which holds the start of any row
// span holding the key.
type validCache struct {
	mu sync.Mutex
	// gen counts removals; an install is refused unless gen is what its
	// refresh captured before reading, or the marks let it in.
	gen uint64
	// pending counts applied writes between their two removals.
	pending int
	// marks (nil until an install found no write pending) are the
	// removals per bucket.
	marks *validMarks
	// wide counts writes between their two removals that name no keys
	// (an SST, a range write); lastWide is the generation of the last
	// removal of one, or of a reset.
	wide     int
	lastWide uint64
	// observe, when set, is told of each install whether it went in
	// (Observers.ValidInstall); called under mu.
	observe func(installed bool)
	newest  map[string]hlc.Timestamp
	// spans holds, by start key, the newest version of every key of a
	// row span [start, keys.PrefixEnd(start)) (an UPDATE's row lock), as
	// the lock's check read it; startLens counts the entries by the
	// length of their start. A key lies in such a span exactly when the
	// span's start is a prefix of it, so a written key finds the entries
	// it falls in by one look-up per distinct length (pgbench's tables:
	// one or two), not by an interval search.
	spans     map[string]hlc.Timestamp
	startLens map[int]int
	// rows is the row cache (rowcache.go): by start, a row span's rows;
	// rowLens counts them by the length of their start, as startLens,
	// and rowBytes is what they are charged against budget (the node's;
	// nil: no row cache). rowHits counts the reads they answered.
	rows     map[string]rowEntry
	rowLens  map[int]int
	rowBytes int64
	budget   *RowCache
	rowHits  uint64
}

// validBuckets is the number of buckets of key hashes validMarks keeps.
const validBuckets = 1024

// validMarks marks removals by bucket of key hashes.
type validMarks struct {
	// since is the generation the marks began at: older captures are
	// refused.
	since uint64
	// last is the generation of the bucket's last removal; pend counts
	// the writes between their two removals that hold a key hashing
	// there (once per key and prefix).
	last [validBuckets]uint64
	pend [validBuckets]int32
}

// validHashPrime and validHashOffset are FNV-1a's (64-bit).
const (
	validHashOffset = 14695981039346656037
	validHashPrime  = 1099511628211
)

// validBucket is key's bucket.
func validBucket(key string) int {
	h := uint64(validHashOffset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= validHashPrime
	}
	return int(h % validBuckets)
}

// mark marks the buckets of every non-empty prefix of key (so of
// key and of every row span's start that holds it) with the current
// generation, and adds delta to their pending counts.
func (m *validMarks) mark(key []byte, gen uint64, delta int32) {
	h := uint64(validHashOffset)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= validHashPrime
		b := h % validBuckets
		m.last[b] = gen
		m.pend[b] += delta
	}
}

// mayInstallLocked reports whether an entry for key (a point key, or a
// row span's start), read after generation gen, may go in.
func (c *validCache) mayInstallLocked(key string, gen uint64) bool {
	if c.gen == gen && c.pending == 0 {
		return true
	}
	if c.marks == nil {
		if c.pending == 0 {
			// No write is between its removals: marks from here on
			// are whole.
			c.marks = &validMarks{since: c.gen}
		}
		return false
	}
	m := c.marks
	if gen < m.since || c.wide > 0 || gen < c.lastWide {
		return false
	}
	b := validBucket(key)
	return m.last[b] <= gen && m.pend[b] == 0
}

// maxValidEntries bounds the cache: a committed row's entry goes with
// its write, so what stays is the validated writer keys, a few per table,
// and rows locked and then not written.
const maxValidEntries = 4096

// generation returns the generation a refresh captures before it reads.
func (c *validCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// passes reports whether the cache proves key has no version above from.
func (c *validCache) passes(key []byte, from hlc.Timestamp) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, ok := c.newest[string(key)]
	return ok && ts.LessEq(from)
}

// passesSpan reports whether the cache proves that no key of the span
// [start, end) has a version above from.
func (c *validCache) passesSpan(start, end []byte, from hlc.Timestamp) bool {
	ts, ok := c.spanNewest(start, end)
	return ok && ts.LessEq(from)
}

// spanNewest returns the newest version of any key of the row span
// [start, end), if the cache holds it.
func (c *validCache) spanNewest(start, end []byte) (hlc.Timestamp, bool) {
	if !rowSpan(start, end) {
		return hlc.Timestamp{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ts, ok := c.spans[string(start)]
	return ts, ok
}

// newestOf returns a timestamp at or above key's newest version, if the
// cache knows one: the key's own entry, or that of a row span holding it.
func (c *validCache) newestOf(key []byte) (hlc.Timestamp, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts, ok := c.newest[string(key)]; ok {
		return ts, true
	}
	for n := range c.startLens {
		if n > len(key) {
			continue
		}
		if ts, ok := c.spans[string(key[:n])]; ok {
			return ts, true
		}
	}
	return hlc.Timestamp{}, false
}

// rowSpan reports whether [start, end) is the span of the keys prefixed
// by start, the only spans the cache holds.
func rowSpan(start, end []byte) bool {
	if len(start) == 0 {
		return false
	}
	// keys.PrefixEnd(start) without its copy (every point read asks):
	// start's trailing 0xff bytes dropped and the last other byte plus
	// one; keys.Max when start is all 0xff.
	i := len(start) - 1
	for i >= 0 && start[i] == 0xff {
		i--
	}
	if i < 0 {
		return bytes.Equal(end, keys.Max)
	}
	return len(end) == i+1 && bytes.Equal(end[:i], start[:i]) && end[i] == start[i]+1
}

// installSpan records newest as the newest version of every key of the
// row span [start, end), read at generation gen.
func (c *validCache) installSpan(start, end []byte, newest hlc.Timestamp, gen uint64) {
	if !rowSpan(start, end) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.mayInstallLocked(string(start), gen)
	if c.observe != nil {
		c.observe(ok)
	}
	if !ok {
		return
	}
	if c.spans == nil {
		c.spans = make(map[string]hlc.Timestamp)
		c.startLens = make(map[int]int)
	}
	if len(c.spans) >= maxValidEntries {
		clear(c.spans)
		clear(c.startLens)
	}
	if _, ok := c.spans[string(start)]; !ok {
		c.startLens[len(start)]++
	}
	c.spans[string(start)] = newest
}

// removeSpansLocked drops the span entries holding key.
func (c *validCache) removeSpansLocked(key []byte) {
	for n := range c.startLens {
		if n > len(key) {
			continue
		}
		if _, ok := c.spans[string(key[:n])]; ok {
			delete(c.spans, string(key[:n]))
			if c.startLens[n]--; c.startLens[n] == 0 {
				delete(c.startLens, n)
			}
		}
	}
}

// validSeen is a key's newest version as an unreplicated lock's check
// read it.
type validSeen struct {
	key    string
	newest hlc.Timestamp
}

// maxSeenPerLock bounds what one lock's check installs: a row's keys,
// not a locked range's.
const maxSeenPerLock = 16

// install records newest as key's newest version, read at generation gen.
func (c *validCache) install(key string, newest hlc.Timestamp, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.mayInstallLocked(key, gen)
	if c.observe != nil {
		c.observe(ok)
	}
	if !ok {
		return
	}
	if c.newest == nil {
		c.newest = make(map[string]hlc.Timestamp)
	}
	if len(c.newest) >= maxValidEntries {
		// Rows locked and never written stay until this: start over.
		clear(c.newest)
	}
	c.newest[key] = newest
}

// writing removes the keys of a write about to commit (repr, its batch;
// sst, whether it ingests an SST) and holds installs off until written
// is called for it.
func (c *validCache) writing(repr []byte, sst bool) {
	if len(repr) == 0 && !sst {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending++
	c.removeLocked(repr, sst, 1)
}

// written removes the keys of a write whose batch committed (as writing
// did before) and lets installs resume once no other write is between
// its removals.
func (c *validCache) written(repr []byte, sst bool) {
	if len(repr) == 0 && !sst {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending > 0 {
		c.pending--
	}
	c.removeLocked(repr, sst, -1)
}

// removeLocked removes the keys of repr (all, for sst) and marks them,
// delta (1: writing, -1: written) counting the write as pending or done.
func (c *validCache) removeLocked(repr []byte, sst bool, delta int32) {
	c.gen++
	m := c.marks
	if m == nil && len(c.newest) == 0 && len(c.spans) == 0 && len(c.rows) == 0 && !sst {
		return
	}
	ranged, err := storage.VisitReprKeys(repr, func(key []byte) {
		delete(c.newest, string(key))
		if len(c.spans) > 0 {
			c.removeSpansLocked(key)
		}
		if len(c.rows) > 0 {
			c.removeRowsLocked(key)
		}
		if m != nil {
			m.mark(key, c.gen, delta)
		}
	})
	if sst || ranged || err != nil {
		clear(c.newest)
		clear(c.spans)
		clear(c.startLens)
		c.clearRowsLocked()
		c.lastWide = c.gen
		if delta > 0 {
			c.wide++
		} else if c.wide > 0 {
			c.wide--
		}
	}
}

// reset empties the cache: the replica's data changed without naming its
// keys (a snapshot), or its view of who wrote it did (a new lease, a
// split).
func (c *validCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.lastWide = c.gen
	clear(c.newest)
	clear(c.spans)
	clear(c.startLens)
	c.clearRowsLocked()
}
