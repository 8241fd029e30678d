package kv

import (
	"bytes"
	"slices"

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
	// inline holds the first spans: a transaction's few (a pgbench -N
	// block has about five of each kind) then take no allocation to grow
	// spans from nil. Nothing keeps spans across a change of the set
	// (merge and condense rewrite it in place already), so reset reuses
	// it.
	inline [inlineSpans]kvpb.Span
}

// inlineSpans is the size of spanSet.inline.
const inlineSpans = 6

func (s *spanSet) add(sp ...kvpb.Span) {
	if s.spans == nil {
		s.spans = s.inline[:0]
	}
	for _, x := range sp {
		s.spans = append(s.spans, kvpb.Span{Key: x.Key, EndKey: x.EndKey})
	}
	s.sorted = false
	if s.max > 0 && len(s.spans) > s.max {
		s.condense()
	}
}

func (s *spanSet) len() int { return len(s.spans) }

func (s *spanSet) reset() {
	clear(s.inline[:])
	s.spans, s.sorted = nil, true
}

// list returns the spans, merged where they overlap. The caller must not
// modify the slice.
func (s *spanSet) list() []kvpb.Span {
	s.merge()
	return s.spans
}

// merge sorts the spans and merges overlapping or touching ones. Points stay
// points unless a range covers them. It compares a point's end (its
// successor) without building it (compareEnds): keys.Next of every point
// it looked at was most of a transaction's allocations here.
func (s *spanSet) merge() {
	if s.sorted {
		return
	}
	slices.SortFunc(s.spans, func(a, b kvpb.Span) int { return bytes.Compare(a.Key, b.Key) })
	out := s.spans[:0]
	for _, x := range s.spans {
		if n := len(out); n > 0 {
			last := &out[n-1]
			le, lZero := endParts(*last)
			// x.Key against last's end: x.Key is a span's start, a key
			// of its own (no successor's zero byte after it).
			c := compareEnds(x.Key, false, le, lZero)
			if c < 0 || (len(last.EndKey) > 0 && c == 0) {
				// x starts inside last (or right where a range ends).
				if xe, xZero := endParts(x); compareEnds(xe, xZero, le, lZero) > 0 {
					last.EndKey = spanEnd(x)
				} else if len(last.EndKey) == 0 && len(x.EndKey) > 0 {
					last.EndKey = spanEnd(*last)
				}
				continue
			}
		}
		out = append(out, x)
	}
	s.spans = out
	s.sorted = true
}

// endParts returns s's exclusive end as a key and whether a zero byte
// follows it: a range's EndKey, or a point's key and its successor's
// zero byte (spanEnd without building it).
func endParts(s kvpb.Span) ([]byte, bool) {
	if len(s.EndKey) == 0 {
		return s.Key, true
	}
	return s.EndKey, false
}

// compareEnds compares a (followed by a zero byte when aZero) with b
// (likewise), as bytes.Compare of the built keys would.
func compareEnds(a []byte, aZero bool, b []byte, bZero bool) int {
	n := min(len(a), len(b))
	if c := bytes.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	// One is a prefix of the other: compare what follows, the zero
	// bytes included.
	at := func(k []byte, zero bool, i int) (byte, bool) {
		if i < len(k) {
			return k[i], true
		}
		return 0, zero && i == len(k)
	}
	for i := n; ; i++ {
		ab, aok := at(a, aZero, i)
		bb, bok := at(b, bZero, i)
		switch {
		case !aok && !bok:
			return 0
		case !aok:
			return -1
		case !bok:
			return 1
		case ab != bb:
			if ab < bb {
				return -1
			}
			return 1
		}
	}
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
