package workload

import (
	"math"
	"time"
)

// histogram counts latencies in log-spaced buckets, 2% wide, from 1 µs
// up: small and mergeable, with percentiles within 2% of the truth (what
// CockroachDB's HdrHistogram gives its workload's output too).
type histogram struct {
	counts []uint64
	n      uint64
	sum    time.Duration
	max    time.Duration
}

// growth is the ratio between successive bucket bounds.
const growth = 1.02

var logGrowth = math.Log(growth)

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	return int(math.Log(us)/logGrowth) + 1
}

// upper is the upper bound of bucket b.
func upper(b int) time.Duration {
	return time.Duration(math.Pow(growth, float64(b)) * float64(time.Microsecond))
}

func (h *histogram) record(d time.Duration) {
	b := bucketOf(d)
	if b >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, b+1-len(h.counts))...)
	}
	h.counts[b]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func (h *histogram) merge(o *histogram) {
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the latency at or below which a fraction q of the
// samples fall (the bucket's upper bound, capped at the maximum seen).
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(h.n)))
	want = max(want, 1)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= want {
			return min(upper(b), h.max)
		}
	}
	return h.max
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}
