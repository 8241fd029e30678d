package tablet

import (
	"bytes"
	"context"
	"fmt"
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
// guard is released, which is what later conflicting guards wait on.
type latchGuard struct {
	seq   uint64
	spans []latchSpan
	done  chan struct{}
}

// latchManager serializes batches whose spans conflict (two spans overlap
// and at least one is a write) and lets others run in parallel.
//
// Acquisition is FIFO per conflict: a new guard is registered at once and
// waits only for the conflicting guards registered before it, so a writer
// is never starved by a stream of readers and no lock is held while
// waiting. The mutex covers only the registry; it is never held across a
// wait, so non-conflicting batches never queue behind each other.
type latchManager struct {
	mu      sync.Mutex
	nextSeq uint64
	held    map[uint64]*latchGuard
}

func newLatchManager() *latchManager {
	return &latchManager{held: make(map[uint64]*latchGuard)}
}

// acquire registers spans and waits until every earlier conflicting guard
// is released. On ctx cancellation it unregisters and returns ctx's error.
func (m *latchManager) acquire(ctx context.Context, spans []latchSpan) (*latchGuard, error) {
	g := &latchGuard{spans: spans, done: make(chan struct{})}
	m.mu.Lock()
	m.nextSeq++
	g.seq = m.nextSeq
	var waitFor []*latchGuard
	for _, h := range m.held {
		if h.conflicts(g) {
			waitFor = append(waitFor, h)
		}
	}
	m.held[g.seq] = g
	m.mu.Unlock()

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

// release frees the guard's latches and wakes the guards waiting on it.
// Releasing twice is a bug in the caller and panics.
func (m *latchManager) release(g *latchGuard) {
	m.mu.Lock()
	delete(m.held, g.seq)
	m.mu.Unlock()
	close(g.done)
}

// numHeld reports how many guards are registered (held or waiting), for
// tests.
func (m *latchManager) numHeld() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

func (g *latchGuard) conflicts(o *latchGuard) bool {
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
