package tablet

import (
	"bytes"
	"sync"

	"github.com/cairn-db/cairn/kvpb"
)

// Load samples for load-based splits (store's split queue). One batch in
// loadSampleEvery has its first key copied into a small ring under a
// mutex; the rest pay only the mask test on the batch counter they
// already increment, so a point read costs what it did. The ring keeps
// the most recent samples, which is what the split queue wants: it only
// looks at them while the tablet's rate is over the threshold, when the
// ring turns over every second or so.
const (
	loadSampleEvery = 16 // a power of two: the test is a mask
	loadSampleKeys  = 256
)

type loadSampler struct {
	mu   sync.Mutex
	keys [loadSampleKeys][]byte
	next int
	n    int
}

// maybeSample records ba's first key if count (the batch counter after
// this batch) is a multiple of loadSampleEvery.
func (r *Replica) maybeSample(count int64, ba *kvpb.BatchRequest) {
	if count&(loadSampleEvery-1) != 0 || len(ba.Requests) == 0 {
		return
	}
	key := ba.Requests[0].Span().Key
	s := &r.samples
	s.mu.Lock()
	// Reuse the slot's buffer: sampling allocates only while keys grow.
	s.keys[s.next] = append(s.keys[s.next][:0], key...)
	s.next = (s.next + 1) % loadSampleKeys
	s.n = min(s.n+1, loadSampleKeys)
	s.mu.Unlock()
}

// LoadSamples returns copies of the recently sampled request keys that
// lie in the replica's current span (a split leaves the other side's
// keys behind in the left's ring), in no particular order.
func (r *Replica) LoadSamples() [][]byte {
	d := r.Desc()
	s := &r.samples
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, 0, s.n)
	for i := range s.n {
		k := s.keys[i]
		if bytes.Compare(k, d.StartKey) >= 0 && bytes.Compare(k, d.EndKey) < 0 {
			out = append(out, bytes.Clone(k))
		}
	}
	return out
}

// ResetLoadSamples forgets the samples (after a split, so the next
// decision sees only load sampled since).
func (r *Replica) ResetLoadSamples() {
	s := &r.samples
	s.mu.Lock()
	s.n, s.next = 0, 0
	s.mu.Unlock()
}
