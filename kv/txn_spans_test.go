package kv

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// TestCompareEnds: compareEnds orders a key followed or not by a zero
// byte exactly as bytes.Compare orders the built keys, over keys that are
// prefixes of one another and end in zero bytes.
func TestCompareEnds(t *testing.T) {
	ks := [][]byte{{}, {0}, {0, 0}, {1}, {1, 0}, {1, 0, 0}, {1, 1}, {2}, {1, 0, 1}}
	for _, a := range ks {
		for _, az := range []bool{false, true} {
			for _, b := range ks {
				for _, bz := range []bool{false, true} {
					ab, bb := a, b
					if az {
						ab = keys.Next(a)
					}
					if bz {
						bb = keys.Next(b)
					}
					if got, want := compareEnds(a, az, b, bz), bytes.Compare(ab, bb); got != want {
						t.Errorf("compareEnds(%q, %v, %q, %v) = %d, want %d", a, az, b, bz, got, want)
					}
				}
			}
		}
	}
}

// refMerge is spanSet.merge as it was, building each point's end.
func refMerge(in []kvpb.Span) []kvpb.Span {
	sorted := append([]kvpb.Span(nil), in...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && bytes.Compare(sorted[j].Key, sorted[j-1].Key) < 0; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	var out []kvpb.Span
	for _, x := range sorted {
		if n := len(out); n > 0 {
			last := &out[n-1]
			lastEnd := spanEnd(*last)
			if bytes.Compare(x.Key, lastEnd) < 0 || (len(last.EndKey) > 0 && bytes.Equal(x.Key, lastEnd)) {
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
	return out
}

// TestSpanSetMergeModel: merge gives the spans the merge that built each
// point's end gave, for random sets of points and ranges over keys that
// are successors and prefixes of one another.
func TestSpanSetMergeModel(t *testing.T) {
	ks := [][]byte{{1}, {1, 0}, {1, 0, 0}, {1, 1}, {2}, {2, 0}, {3}}
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 5000; iter++ {
		var in []kvpb.Span
		for n := rng.Intn(6); n >= 0; n-- {
			a, b := ks[rng.Intn(len(ks))], ks[rng.Intn(len(ks))]
			switch c := bytes.Compare(a, b); {
			case c == 0 || rng.Intn(3) == 0:
				in = append(in, kvpb.Span{Key: a})
			case c < 0:
				in = append(in, kvpb.Span{Key: a, EndKey: b})
			default:
				in = append(in, kvpb.Span{Key: b, EndKey: a})
			}
		}
		want := refMerge(in)
		s := spanSet{}
		s.add(in...)
		got := s.list()
		same := len(got) == len(want)
		for i := 0; same && i < len(got); i++ {
			same = bytes.Equal(got[i].Key, want[i].Key) && bytes.Equal(got[i].EndKey, want[i].EndKey)
		}
		if !same {
			t.Fatalf("merge(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSpanSetMergeAllocs: merging a transaction's read spans (points, a
// point read twice, a row's span) allocates nothing (each comparison with
// a point built keys.Next of it: ~25 objects per pgbench -N
// transaction).
func TestSpanSetMergeAllocs(t *testing.T) {
	in := []kvpb.Span{
		{Key: []byte("r5")}, {Key: []byte("r5")}, {Key: []byte("h9")},
		{Key: []byte("r5"), EndKey: []byte("r6")}, {Key: []byte("w1")}, {Key: []byte("a3")},
	}
	s := spanSet{spans: make([]kvpb.Span, 0, len(in))}
	if n := testing.AllocsPerRun(100, func() {
		s.spans = append(s.spans[:0], in...)
		s.sorted = false
		s.merge()
	}); n != 0 {
		t.Errorf("merge: %.0f allocations, want 0", n)
	}
	if got := len(s.spans); got != 4 {
		t.Errorf("merged into %d spans, want 4", got)
	}
}

// TestSpanSetAddAllocs: a transaction's first few spans (a pgbench -N
// block's read and lock spans) take no allocation (growing the slice from
// nil took four per set), after a reset too.
func TestSpanSetAddAllocs(t *testing.T) {
	in := []kvpb.Span{{Key: []byte("r5")}, {Key: []byte("h9")}, {Key: []byte("r5"), EndKey: []byte("r6")}, {Key: []byte("w1")}, {Key: []byte("a3")}}
	var s spanSet
	if n := testing.AllocsPerRun(100, func() {
		s.reset()
		for _, sp := range in {
			s.add(sp)
		}
		s.merge()
	}); n != 0 {
		t.Errorf("add: %.0f allocations, want 0", n)
	}
	if got := len(s.list()); got != 4 {
		t.Errorf("%d spans, want 4", got)
	}
}
