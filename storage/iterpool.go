package storage

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"
)

// iterPool keeps the engine's closed iterators for the next read while no
// write has reached the engine since they were opened (invariant 7).
//
// A Pebble iterator over the DB reads the state at its creation and cannot
// be moved to a later one (SetOptions refreshes only an indexed batch's
// view). Opening one per read (Pebble's NewIter: the read state, a merging
// iterator over every memtable and level) and closing it was 16% of the KV
// read of a point SELECT (bench/README.md, "Issue 22, KV read path"). But
// an iterator opened when no write was in flight sees exactly what a new
// one would for as long as no write begins: every committed write is in
// its view, and none has been committed since. So writes count themselves
// twice, begun before their commit and done after it; an iterator opened
// while begun == done is tagged with begun, goes back to the pool on
// Close, and is handed out again, its bounds reset (SetBounds), only while
// begun still equals its tag. The first write after it drains the pool.
//
// A pooled iterator pins the memtables and files of its view, which a
// flush or a compaction (neither is a write: no key changes) replaces. So
// the end of either invalidates the pool as a write does, and closes what
// it holds: a pooled iterator never keeps a flushed memtable or a
// compacted file past the event, and at most maxPooledIters are kept.
type iterPool struct {
	begun, done atomic.Uint64
	// n is len(free), read without mu by the write path to skip the lock
	// when there is nothing to drain.
	n    atomic.Int32
	mu   sync.Mutex
	free []*Iterator
	// servedGen, served and grown (under mu) count the reads take
	// served in the write generation servedGen, and those it sent to
	// build an iterator to grow the pool (growAfter).
	servedGen     uint64
	served, grown int
	// closed (under mu) is set by close: nothing is pooled after it, and
	// no drain starts on a goroutine of its own.
	closed bool
	// drains counts the drains running on goroutines of their own
	// (invalidate); close waits for them, so no pooled iterator is
	// closed after the DB is (Pebble panics on that).
	drains sync.WaitGroup
	// testingDrainHook, if set, is called by a drain on a goroutine of
	// its own once it has taken the iterators, before it closes them.
	testingDrainHook func()
}

// maxPooledIters bounds the pool: the reads of a node in flight at once
// are about GOMAXPROCS, plus those waiting on latches.
const maxPooledIters = 16

// growAfter is how many reads the pool serves in one write generation
// before it grows: from then on, while it holds fewer than
// maxPooledIters, take hands out none and the read builds an iterator
// that joins the pool on Close. A pool holds only as many iterators as
// reads were ever in flight at once (on two cores, two to four under 16
// pgbench clients), too few for take to find one whose files are the
// read's. A generation of more than growAfter reads pays at most
// maxPooledIters builds more, a few µs each, for a choice of up to that
// many; a shorter one (a load that writes) builds nothing more than
// before.
const growAfter = 1024

// beginWrite is called before a commit or ingestion makes anything
// visible: from here on no pooled iterator is handed out.
func (p *iterPool) beginWrite() { p.begun.Add(1) }

// endWrite is called once the write returned (visible, or failed): the
// iterators pooled before it are stale, and are closed.
func (p *iterPool) endWrite() {
	p.done.Add(1)
	if p.n.Load() > 0 {
		p.drain()
	}
}

// stable returns the write generation a new iterator may be tagged with:
// ok is false while a write is in flight (its effect may or may not be in
// the iterator's view).
func (p *iterPool) stable() (gen uint64, ok bool) {
	gen = p.begun.Load()
	return gen, p.done.Load() == gen
}

// take returns a pooled iterator still current, or nil: of those, the
// one whose last use's lower bound lies nearest lower in key order (the
// lower bound of the read to come, a user key; the most recently pooled
// on a tie, and for a read without a lower bound).
//
// Why (bench/README.md, issue 22, twenty-first session): a Pebble
// iterator keeps, per level, the SST it last read open, and SetBounds
// keeps it while the new bounds overlap it; a read whose row lies in
// another file closes that one and opens the other (its reader from the
// file cache, a new SST iterator, its index block from the block cache).
// A point read takes the pooled iterator whose levels most likely stand
// in its row's files, so that it mostly opens none. Any current
// iterator reads the same view: which one a read gets changes nothing
// it sees.
func (p *iterPool) take(lower []byte) *Iterator {
	if p.n.Load() == 0 {
		return nil
	}
	gen := p.begun.Load()
	p.mu.Lock()
	if p.servedGen != gen {
		p.servedGen, p.served, p.grown = gen, 0, 0
	}
	p.served++
	if p.served > growAfter && p.grown < maxPooledIters && len(p.free) > 0 && len(p.free) < maxPooledIters && p.free[len(p.free)-1].gen == gen {
		p.grown++
		p.mu.Unlock()
		return nil
	}
	var stale []*Iterator
	best := -1
	if lower == nil {
		for i := len(p.free) - 1; i >= 0 && best < 0; i-- {
			if p.free[i].gen == gen {
				best = i
			}
		}
	} else {
		// Nearest: of the candidates just below (or at) lower and just
		// above it in key order, the one whose next eight bytes past
		// the prefix both share with lower lie nearer lower's as a
		// number (keyPos). The most recently pooled wins a tie.
		// A candidate's place is its common prefix with lower (l) and
		// the byte after it: below lower, the longer l and then the
		// larger byte is the nearer (a prefix of lower, rank 0, lies
		// below its extensions); above, the longer l and then the
		// smaller byte. Ties of both compare the keys.
		below, above := -1, -1
		var bl, brank, al, arank int
		for i := len(p.free) - 1; i >= 0; i-- {
			it := p.free[i]
			if it.gen != gen {
				continue
			}
			near := it.near
			l := commonPrefixLen(near, lower)
			if l == len(near) || l < len(lower) && near[l] < lower[l] {
				rank := 0
				if l < len(near) {
					rank = int(near[l]) + 1
				}
				if below < 0 || l > bl || l == bl && (rank > brank ||
					rank == brank && bytes.Compare(near, p.free[below].near) > 0) {
					below, bl, brank = i, l, rank
				}
				continue
			}
			rank := int(near[l])
			if above < 0 || l > al || l == al && (rank < arank ||
				rank == arank && bytes.Compare(near, p.free[above].near) < 0) {
				above, al, arank = i, l, rank
			}
		}
		switch {
		case below < 0:
			best = above
		case above < 0:
			best = below
		default:
			b, a := p.free[below].near, p.free[above].near
			shared := min(bl, al)
			at := keyPos(lower, shared)
			best = below
			if keyPos(a, shared)-at < at-keyPos(b, shared) ||
				keyPos(a, shared)-at == at-keyPos(b, shared) && above > below {
				best = above
			}
		}
	}
	var it *Iterator
	if best >= 0 {
		it = p.free[best]
	}
	// Keep the current ones but the one taken, in their order.
	kept := p.free[:0]
	for _, f := range p.free {
		switch {
		case f.gen != gen:
			stale = append(stale, f)
		case f != it:
			kept = append(kept, f)
		}
	}
	for i := len(kept); i < len(p.free); i++ {
		p.free[i] = nil
	}
	p.free = kept
	p.n.Store(int32(len(p.free)))
	p.mu.Unlock()
	for _, f := range stale {
		_ = f.it.Close()
	}
	return it
}

// keyPos is the eight bytes of k from offset at (zeros past its end) as a
// big-endian number: for keys that share their first at bytes, an order
// of them to the resolution of those eight bytes.
func keyPos(k []byte, at int) uint64 {
	var b [8]byte
	if at < len(k) {
		copy(b[:], k[at:])
	}
	return binary.BigEndian.Uint64(b[:])
}

// commonPrefixLen is the length of the longest common prefix of a and b,
// compared eight bytes at a time.
func commonPrefixLen(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// put takes back a closed iterator, or closes it when it is stale or the
// pool is full. It reports whether the iterator was kept.
func (p *iterPool) put(it *Iterator) bool {
	if it.it.Error() != nil || it.gen != p.begun.Load() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.free) >= maxPooledIters {
		return false
	}
	p.free = append(p.free, it)
	p.n.Store(int32(len(p.free)))
	return true
}

// invalidate is called when a flush or compaction ended (from Pebble's
// event listener): no iterator opened before goes back to the pool, and
// those in it are closed, on another goroutine since Pebble may hold its
// own locks while it calls the listener.
func (p *iterPool) invalidate() {
	p.begun.Add(1)
	p.done.Add(1)
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.free) == 0 {
		return
	}
	// Added under mu before close can set closed, so close's Wait
	// covers it.
	p.drains.Add(1)
	go func() {
		defer p.drains.Done()
		p.drainWith(p.testingDrainHook)
	}()
}

// drain closes every pooled iterator.
func (p *iterPool) drain() { p.drainWith(nil) }

func (p *iterPool) drainWith(hook func()) {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.n.Store(0)
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	for _, it := range free {
		_ = it.it.Close()
	}
}

// close closes the pooled iterators and waits for the drains running on
// their own goroutines, before the engine closes the DB: a drain that
// took the iterators just before closes them just after, and Pebble
// panics on an iterator closed after its DB ("evicting in-use file",
// seen once in the storage tests). Nothing is pooled after it.
func (p *iterPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.drain()
	p.drains.Wait()
}

// isClosed reports whether close has begun.
func (p *iterPool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}
