package storage

import (
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

// take returns a pooled iterator still current, or nil.
func (p *iterPool) take() *Iterator {
	if p.n.Load() == 0 {
		return nil
	}
	gen := p.begun.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := len(p.free); n > 0; n-- {
		it := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.n.Store(int32(len(p.free)))
		if it.gen == gen {
			return it
		}
		_ = it.it.Close()
	}
	return nil
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
