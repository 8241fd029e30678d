package tablet

import (
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/cairn-db/cairn/kvpb"
)

// latchSpan is one span a batch latches, for reading or for writing. Spans
// may be user keys or local keys (lock-table and record keys): they are
// compared as plain bytes, and local keys never overlap user keys because
// they carry a different first byte.
type latchSpan struct {
	span  kvpb.Span
	write bool
}

// latchGuard is the set of latches one batch holds. done is closed when the
// guard is released, which is what later conflicting guards wait on. It is
// made (under the manager's mutex) by the first guard that has to wait on
// this one: most guards, a point read's among them, conflict with nothing
// and are never waited on, so they make no channel.
type latchGuard struct {
	seq   uint64
	spans []latchSpan
	done  chan struct{}
	// released is set (under the manager's mutex) by release.
	released bool
	// one holds the span of a guard of one span (a point read's, a
	// point write's), so that the guard and its spans are one object.
	one [1]latchSpan
	// idx, for a guard of many spans (a bulk load's batch), lets
	// conflicts look spans up instead of comparing every pair: two
	// batches of 10,000 keys each were 10^8 comparisons.
	idx *latchIndex
	// prev and next link the registered guards in registration order
	// (latchManager.oldest), under the manager's mutex.
	prev, next *latchGuard
}

// indexedLatchSpans is how many spans make a guard worth indexing.
const indexedLatchSpans = 64

// latchIndex is a guard's spans sorted by start key, with each span's
// exclusive end and, for every prefix of the sorted spans, the largest
// end among them and among their writes (nil when none).
type latchIndex struct {
	sorted       []latchSpan
	maxEnd       [][]byte
	maxWriteEnd  [][]byte
	first, limit []byte // the smallest start and the largest end
}

func newLatchIndex(spans []latchSpan) *latchIndex {
	x := &latchIndex{sorted: slices.Clone(spans)}
	slices.SortFunc(x.sorted, func(a, b latchSpan) int { return bytes.Compare(a.span.Key, b.span.Key) })
	x.maxEnd = make([][]byte, len(x.sorted))
	x.maxWriteEnd = make([][]byte, len(x.sorted))
	// The exclusive ends of point spans (a bulk load's batch is all
	// points: thousands of them) in one array, sized exactly, instead
	// of one allocation each.
	n := 0
	for _, s := range x.sorted {
		if len(s.span.EndKey) == 0 {
			n += len(s.span.Key) + 1
		}
	}
	ends := make([]byte, 0, n)
	var all, wr []byte
	for i, s := range x.sorted {
		end := s.span.EndKey
		if len(end) == 0 {
			start := len(ends)
			ends = append(append(ends, s.span.Key...), 0)
			end = ends[start:len(ends):len(ends)]
		}
		if all == nil || bytes.Compare(end, all) > 0 {
			all = end
		}
		if s.write && (wr == nil || bytes.Compare(end, wr) > 0) {
			wr = end
		}
		x.maxEnd[i], x.maxWriteEnd[i] = all, wr
	}
	if len(x.sorted) > 0 {
		x.first, x.limit = x.sorted[0].span.Key, all
	}
	return x
}

// conflictsWith reports whether some span of x overlaps a (with a write
// on either side).
func (x *latchIndex) conflictsWith(a latchSpan) bool {
	end := spanEnd(a.span)
	// The spans starting before a ends: sorted[:n].
	n, _ := slices.BinarySearchFunc(x.sorted, end, func(s latchSpan, k []byte) int { return bytes.Compare(s.span.Key, k) })
	if n == 0 {
		return false
	}
	// One of them overlaps a iff one ends after a starts.
	m := x.maxEnd[n-1]
	if !a.write {
		m = x.maxWriteEnd[n-1]
	}
	return m != nil && bytes.Compare(a.span.Key, m) < 0
}

// conflictsWithIndex reports whether a span of x and one of y overlap,
// one of them a write, in one merge of the two sorted lists: two bulk
// batches' parts on one tablet (thousands of spans each) took a binary
// search per span of the smaller (latch acquisition's conflict checks
// were 0.57 s of 12.2 s sampled in bench/parallelindex's distributed COPY
// with GIN, 219k rows). Of two overlapping spans, the one starting
// later (or, starting together, the one of y) is visited after the
// other, and there it meets it among the spans of the other list
// visited so far, which start at or before it: one of those overlaps it
// iff the largest end among them (of writes only, for a read) lies
// after its start.
func (x *latchIndex) conflictsWithIndex(y *latchIndex) bool {
	if bytes.Compare(x.first, y.limit) >= 0 || bytes.Compare(y.first, x.limit) >= 0 {
		return false
	}
	i, j := 0, 0
	for i < len(x.sorted) && j < len(y.sorted) {
		if a, b := x.sorted[i], y.sorted[j]; bytes.Compare(a.span.Key, b.span.Key) <= 0 {
			if j > 0 && y.endsAfter(j-1, a) {
				return true
			}
			i++
		} else {
			if i > 0 && x.endsAfter(i-1, b) {
				return true
			}
			j++
		}
	}
	for ; i < len(x.sorted); i++ {
		if y.endsAfter(len(y.sorted)-1, x.sorted[i]) {
			return true
		}
	}
	for ; j < len(y.sorted); j++ {
		if x.endsAfter(len(x.sorted)-1, y.sorted[j]) {
			return true
		}
	}
	return false
}

// endsAfter reports whether a span among x.sorted[:n+1] (a write, unless
// a is one) ends after a starts.
func (x *latchIndex) endsAfter(n int, a latchSpan) bool {
	m := x.maxEnd[n]
	if !a.write {
		m = x.maxWriteEnd[n]
	}
	return m != nil && bytes.Compare(a.span.Key, m) < 0
}

// latchManager serializes batches whose spans conflict (two spans overlap
// and at least one is a write) and lets others run in parallel.
//
// Acquisition is FIFO per conflict: a new guard is registered at once and
// waits only for the conflicting guards registered before it, so a writer
// is never starved by a stream of readers and no lock is held while
// waiting. The mutex covers only the registry; it is never held across a
// wait, so non-conflicting batches never queue behind each other.
//
// The registry indexes the spans of every guard of fewer than
// indexedLatchSpans spans, so that an acquisition compares its spans with
// the held spans that can overlap them, not with every span of every
// guard: with 16 clients' batches registered (each through its raft
// round's sync), comparing every pair was 4-5% of the node's CPU under
// pgbench's simple-update at scale 10 (bench/README.md, "Issue 22,
// seventeenth session: latches at 16 clients"). Most spans are prefix
// spans (see isPrefixSpan): a point, or a row's span [p, p.PrefixEnd()).
// Such a span lies within the keys prefixed by its start, and two such
// key sets are nested or disjoint, so a held prefix span that overlaps a
// span a starts either inside a or at a proper prefix of a's start.
// prefix holds them sorted by start, lens counts them by the length of
// their start (the prefixes of a's start worth looking up), and wide
// holds the other spans, compared with every acquisition's spans. Guards of many spans (bulk
// loads) are not indexed: big holds them, compared guard to guard as
// before (latchGuard.conflicts, through their latchIndex).
type latchManager struct {
	mu      sync.Mutex
	nextSeq uint64
	// oldest and newest are the ends of the list of registered guards
	// (held or waiting), in registration order, so in ascending seq;
	// numHeld counts them. A list, not a map by seq: registering and
	// releasing a guard is two pointer writes each, where the map's insert
	// and delete were a quarter of a point read's latching.
	oldest, newest *latchGuard
	held           int
	big            map[uint64]*latchGuard
	prefix         []heldSpan
	lens           []int
	wide           []heldSpan
	// compared counts the held spans an acquisition of a guard of
	// few spans compared with one of its spans, for tests.
	compared uint64
}

// heldSpan is one span of a registered guard, in the registry's index.
type heldSpan struct {
	latchSpan
	g *latchGuard
}

func newLatchManager() *latchManager {
	return &latchManager{big: make(map[uint64]*latchGuard)}
}

// acquire registers spans and waits until every earlier conflicting guard
// is released. On ctx cancellation it unregisters and returns ctx's error.
func (m *latchManager) acquire(ctx context.Context, spans []latchSpan) (*latchGuard, error) {
	return m.acquireGuard(ctx, &latchGuard{spans: spans})
}

// acquireBatch is acquire for the latches ba needs on desc (appendLatchSpans): a
// batch of one span (a point read's) allocates the guard alone.
func (m *latchManager) acquireBatch(ctx context.Context, ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor) (*latchGuard, error) {
	return m.acquireBatchInto(ctx, &latchGuard{}, ba, desc)
}

// acquireBatchInto is acquireBatch into g, a zero guard never acquired
// (Replica.send's, allocated with the request's copy).
func (m *latchManager) acquireBatchInto(ctx context.Context, g *latchGuard, ba *kvpb.BatchRequest, desc kvpb.TabletDescriptor) (*latchGuard, error) {
	var dst []latchSpan
	if len(ba.Requests) <= 1 {
		dst = g.one[:0]
	}
	g.spans = appendLatchSpans(dst, ba, desc)
	return m.acquireGuard(ctx, g)
}

// acquireGuard registers g (its spans set, nothing else) and waits until
// every earlier conflicting guard is released.
func (m *latchManager) acquireGuard(ctx context.Context, g *latchGuard) (*latchGuard, error) {
	if len(g.spans) >= indexedLatchSpans {
		g.idx = newLatchIndex(g.spans)
	}
	// register made the done channel of every guard it returns, under
	// the manager's mutex, before any of them could be released.
	waitFor := m.register(g)
	for _, h := range waitFor {
		select {
		case <-h.done:
		case <-ctx.Done():
			m.release(g)
			return nil, fmt.Errorf("tablet: waiting for latches: %w", ctx.Err())
		}
	}
	return g, nil
}

// register gives g its sequence number, registers it, and returns the
// registered guards it conflicts with, each with its done channel made
// (a registered guard is not yet released, so the channel is still open).
func (m *latchManager) register(g *latchGuard) []*latchGuard {
	spans := g.spans
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextSeq++
	g.seq = m.nextSeq
	var waitFor []*latchGuard
	if g.idx != nil {
		for h := m.oldest; h != nil; h = h.next {
			if h.conflicts(g) {
				waitFor = append(waitFor, h)
			}
		}
		m.big[g.seq] = g
	} else {
		if len(m.big) > 0 {
			for _, h := range m.big {
				if h.conflicts(g) {
					waitFor = append(waitFor, h)
				}
			}
		}
		for _, a := range spans {
			waitFor = m.conflictingLocked(a, waitFor)
		}
		for _, a := range spans {
			m.indexLocked(heldSpan{a, g})
		}
	}
	m.linkLocked(g)
	for _, h := range waitFor {
		if h.done == nil {
			h.done = make(chan struct{})
		}
	}
	return waitFor
}

// release frees the guard's latches and wakes the guards waiting on it.
// Releasing twice is a bug in the caller and panics.
func (m *latchManager) release(g *latchGuard) {
	m.mu.Lock()
	if g.released {
		m.mu.Unlock()
		panic("tablet: latch guard released twice")
	}
	g.released = true
	m.unlinkLocked(g)
	if g.idx != nil {
		delete(m.big, g.seq)
	} else {
		for _, a := range g.spans {
			m.unindexLocked(heldSpan{a, g})
		}
	}
	// No guard registered from here on finds g, so none makes its
	// channel after this.
	done := g.done
	m.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// linkLocked appends g, just given the highest seq, to the registered
// guards.
func (m *latchManager) linkLocked(g *latchGuard) {
	g.prev, g.next = m.newest, nil
	if m.newest != nil {
		m.newest.next = g
	} else {
		m.oldest = g
	}
	m.newest = g
	m.held++
}

// unlinkLocked removes g from the registered guards.
func (m *latchManager) unlinkLocked(g *latchGuard) {
	if g.prev != nil {
		g.prev.next = g.next
	} else {
		m.oldest = g.next
	}
	if g.next != nil {
		g.next.prev = g.prev
	} else {
		m.newest = g.prev
	}
	g.prev, g.next = nil, nil
	m.held--
}

// conflictingLocked adds to out (once each) the guards of the indexed
// held spans that conflict with a.
func (m *latchManager) conflictingLocked(a latchSpan, out []*latchGuard) []*latchGuard {
	check := func(h heldSpan) {
		m.compared++
		if (a.write || h.write) && spansOverlap(a.span, h.span) && !slices.Contains(out, h.g) {
			out = append(out, h.g)
		}
	}
	for _, h := range m.wide {
		check(h)
	}
	// The prefix spans starting inside a.
	i0 := m.searchPrefix(a.span.Key)
	for i := i0; i < len(m.prefix) && beforeEnd(m.prefix[i].span.Key, a.span); i++ {
		check(m.prefix[i])
	}
	// Those starting at a proper prefix e of a's start k. They sort
	// before k, so there are none when nothing does; else let p be the
	// last start before k: e <= p < k, and the keys prefixed by e are an
	// interval holding e and k, so p too: e is a prefix of p, no longer
	// than the common prefix of p and k (for another row's key, the
	// table's prefix, where no span starts).
	if i0 == 0 {
		return out
	}
	k := a.span.Key
	limit := min(commonPrefixLen(m.prefix[i0-1].span.Key, k), len(k)-1, len(m.lens)-1)
	for n := 0; n <= limit; n++ {
		if m.lens[n] == 0 {
			continue
		}
		for i := m.searchPrefix(k[:n]); i < len(m.prefix) && bytes.Equal(m.prefix[i].span.Key, k[:n]); i++ {
			check(m.prefix[i])
		}
	}
	return out
}

// commonPrefixLen returns the length of the longest common prefix of a
// and b.
func commonPrefixLen(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// searchPrefix returns the index of the first prefix span starting at or
// after k.
func (m *latchManager) searchPrefix(k []byte) int {
	lo, hi := 0, len(m.prefix)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bytes.Compare(m.prefix[mid].span.Key, k) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (m *latchManager) indexLocked(h heldSpan) {
	if !isPrefixSpan(h.span) {
		m.wide = append(m.wide, h)
		return
	}
	i := m.searchPrefix(h.span.Key)
	m.prefix = slices.Insert(m.prefix, i, h)
	n := len(h.span.Key)
	for len(m.lens) <= n {
		m.lens = append(m.lens, 0)
	}
	m.lens[n]++
}

func (m *latchManager) unindexLocked(h heldSpan) {
	if !isPrefixSpan(h.span) {
		for i, w := range m.wide {
			if w.g == h.g {
				m.wide = slices.Delete(m.wide, i, i+1)
				return
			}
		}
		panic("tablet: releasing a latch span that is not registered")
	}
	for i := m.searchPrefix(h.span.Key); i < len(m.prefix) && bytes.Equal(m.prefix[i].span.Key, h.span.Key); i++ {
		if m.prefix[i].g == h.g {
			m.prefix = slices.Delete(m.prefix, i, i+1)
			m.lens[len(h.span.Key)]--
			return
		}
	}
	panic("tablet: releasing a latch span that is not registered")
}

// isPrefixSpan reports whether s lies within the keys prefixed by its
// start: a point, or a span whose end has its start as a prefix or is
// its start's PrefixEnd (a row's span).
func isPrefixSpan(s kvpb.Span) bool {
	k, e := s.Key, s.EndKey
	if len(e) == 0 || bytes.HasPrefix(e, k) {
		return true
	}
	// k's PrefixEnd: k without its trailing 0xff bytes, its last byte
	// incremented.
	n := len(k)
	for n > 0 && k[n-1] == 0xff {
		n--
	}
	return n > 0 && len(e) == n && bytes.Equal(e[:n-1], k[:n-1]) && e[n-1] == k[n-1]+1
}

// lastSeq is the sequence number of the last guard registered: a guard
// registered later has a greater one.
func (m *latchManager) lastSeq() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nextSeq
}

// registeredAtOrBelow reports whether a guard with a sequence number at
// most seq is still registered (held or waiting).
func (m *latchManager) registeredAtOrBelow(seq uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	// The oldest registered guard has the lowest seq.
	return m.oldest != nil && m.oldest.seq <= seq
}

// numHeld reports how many guards are registered (held or waiting), for
// tests.
func (m *latchManager) numHeld() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

func (g *latchGuard) conflicts(o *latchGuard) bool {
	if g.idx != nil && o.idx != nil {
		// A merge costs both lengths, the lookups below the smaller
		// length times the larger's depth.
		n, m := min(len(g.spans), len(o.spans)), max(len(g.spans), len(o.spans))
		if n*bits.Len(uint(m)) > n+m {
			return g.idx.conflictsWithIndex(o.idx)
		}
	}
	if g.idx != nil || o.idx != nil {
		// Look the smaller guard's spans up in the larger one's index.
		small, large := g, o
		if large.idx == nil || (small.idx != nil && len(small.spans) > len(large.spans)) {
			small, large = large, small
		}
		x := large.idx
		for _, a := range small.spans {
			if bytes.Compare(a.span.Key, x.limit) >= 0 || bytes.Compare(spanEnd(a.span), x.first) <= 0 {
				continue // outside every span of large
			}
			if x.conflictsWith(a) {
				return true
			}
		}
		return false
	}
	for _, a := range g.spans {
		for _, b := range o.spans {
			if (a.write || b.write) && spansOverlap(a.span, b.span) {
				return true
			}
		}
	}
	return false
}

// spanEnd returns the exclusive end of s: EndKey, or the key's immediate
// successor for a point span.
func spanEnd(s kvpb.Span) []byte {
	if len(s.EndKey) == 0 {
		return append(append(make([]byte, 0, len(s.Key)+1), s.Key...), 0)
	}
	return s.EndKey
}

func spansOverlap(a, b kvpb.Span) bool {
	return beforeEnd(a.Key, b) && beforeEnd(b.Key, a)
}

// beforeEnd reports whether k < spanEnd(s) without building a point span's
// successor: no key lies strictly between a key and its successor, so for
// a point span it is k <= s.Key. Every latch acquisition compares against
// every held guard, so this must not allocate.
func beforeEnd(k []byte, s kvpb.Span) bool {
	if len(s.EndKey) == 0 {
		return bytes.Compare(k, s.Key) <= 0
	}
	return bytes.Compare(k, s.EndKey) < 0
}
