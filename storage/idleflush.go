package storage

import (
	"sync"
	"time"
)

// The memtable stack a quiet engine keeps (invariant 9).
//
// Pebble ramps a new DB's memtables up in size: the first is 256 KiB and
// each next one twice the last, up to Options.MemTableSize (64 MiB here).
// A full memtable becomes immutable, but Pebble flushes the immutable
// ones only once together they hold half a MemTableSize
// (pebble.DB.passedFlushThreshold), so while the ramp lasts they queue:
// after `pgbench -i -s 1` on a new node, six memtables (62 MB) stay in
// memory, and every later point read seeks the skiplist of each of them
// (storage.BenchmarkPointSeekMemtables: a seek over the stack against
// one over the same rows in one memtable). Under a load that writes they
// are flushed soon enough; under one that only reads (or after a restart
// and a bulk load) they stay until 32 MB more have been written, which
// may be never.
//
// So a watcher looks every idleFlushInterval: when more than one memtable
// is held, no flush is running and the WAL took less than idleFlushQuiet
// bytes since its last look, it flushes them. Each flush also moves the
// ramp on (a memtable is rotated), so past the ramp's eight steps the
// stack does not form again; a busy engine is left to Pebble.

const (
	// idleFlushInterval is how often the watcher looks.
	idleFlushInterval = time.Second
	// idleFlushQuiet is the most WAL bytes an interval may take for the
	// engine to count as quiet: at that rate the stack would take half a
	// minute or more to drain by itself.
	idleFlushQuiet = memTableSize / 64
)

// idleFlushDue is the watcher's rule: memtables is the count Pebble holds
// (the mutable one included), flushing the flushes running, walIn the WAL
// bytes since the last look.
func idleFlushDue(memtables, flushing int64, walIn uint64) bool {
	return memtables > 1 && flushing == 0 && walIn < idleFlushQuiet
}

// idleFlusher is one engine's watcher.
type idleFlusher struct {
	// stop is closed to stop the watcher (nil: none was started).
	stop chan struct{}
	done sync.WaitGroup
	// lastWAL is the WAL's BytesIn at the last look (the watcher's own).
	lastWAL uint64
}

// startIdleFlush sets e's watcher up and, for a positive every, starts
// it, to look that often.
func (e *Engine) startIdleFlush(every time.Duration) {
	f := &idleFlusher{lastWAL: e.db.Metrics().WAL.BytesIn}
	e.idle = f
	if every <= 0 {
		return
	}
	f.stop = make(chan struct{})
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				e.flushIfIdle()
			}
		}
	}()
}

// stopIdleFlush stops the watcher and waits for it (before Pebble closes:
// a flush of a closed DB panics).
func (e *Engine) stopIdleFlush() {
	if e.idle.stop == nil {
		return
	}
	close(e.idle.stop)
	e.idle.done.Wait()
}

// flushIfIdle is one look of the watcher: it starts a flush when
// idleFlushDue says so and returns the channel that closes when that
// flush is done (nil: none was started). Only the watcher calls it;
// tests call it in its place on an engine opened without one.
func (e *Engine) flushIfIdle() <-chan struct{} {
	if e.failure() != nil {
		return nil
	}
	m := e.db.Metrics()
	walIn := m.WAL.BytesIn - e.idle.lastWAL
	e.idle.lastWAL = m.WAL.BytesIn
	if !idleFlushDue(m.MemTable.Count, m.Flush.NumInProgress, walIn) {
		return nil
	}
	done, err := e.db.AsyncFlush()
	if err != nil {
		return nil
	}
	return done
}
