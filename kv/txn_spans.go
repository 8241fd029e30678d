package kv

import (
	"bytes"
	"sort"

	"github.com/cairn-db/cairn/kvpb"
)

// spanSet is a set of key spans a transaction has locked or read. It keeps
// at most max spans: beyond that it condenses, merging neighbours into wider
// spans. A wider span is always safe (invariant 3 needs lock spans to cover
// every intent; a refresh over a wider span can only fail more often), so
// condensing trades precision for bounded memory and request size.
type spanSet struct {
	spans []kvpb.Span
	max   int
	// sorted is true while spans is sorted, merged and free of points
	// shadowed by ranges.
	sorted bool
}

func (s *spanSet) add(sp ...kvpb.Span) {
	for _, x := range sp {
		s.spans = append(s.spans, kvpb.Span{Key: x.Key, EndKey: x.EndKey})
	}
	s.sorted = false
	if s.max > 0 && len(s.spans) > s.max {
		s.condense()
	}
}

func (s *spanSet) len() int { return len(s.spans) }

func (s *spanSet) reset() { s.spans, s.sorted = nil, true }

// list returns the spans, merged where they overlap. The caller must not
// modify the slice.
func (s *spanSet) list() []kvpb.Span {
	s.merge()
	return s.spans
}

// merge sorts the spans and merges overlapping or touching ones. Points stay
// points unless a range covers them.
func (s *spanSet) merge() {
	if s.sorted {
		return
	}
	sort.Slice(s.spans, func(i, j int) bool { return bytes.Compare(s.spans[i].Key, s.spans[j].Key) < 0 })
	out := s.spans[:0]
	for _, x := range s.spans {
		if n := len(out); n > 0 {
			last := &out[n-1]
			lastEnd := spanEnd(*last)
			if bytes.Compare(x.Key, lastEnd) < 0 || (len(last.EndKey) > 0 && bytes.Equal(x.Key, lastEnd)) {
				// x starts inside last (or right where a range ends).
				if xe := spanEnd(x); bytes.Compare(xe, lastEnd) > 0 {
					last.EndKey = xe
				} else if len(last.EndKey) == 0 && len(x.EndKey) > 0 {
					last.EndKey = lastEnd
				}
				continue
			}
		}
		out = append(out, x)
	}
	s.spans = out
	s.sorted = true
}

// condense merges, then, while there are still too many spans, joins each
// pair of neighbours into one span covering both.
func (s *spanSet) condense() {
	s.merge()
	for len(s.spans) > s.max {
		out := s.spans[:0]
		for i := 0; i < len(s.spans); i += 2 {
			if i+1 == len(s.spans) {
				out = append(out, s.spans[i])
				break
			}
			out = append(out, kvpb.Span{Key: s.spans[i].Key, EndKey: spanEnd(s.spans[i+1])})
		}
		s.spans = out
	}
}
