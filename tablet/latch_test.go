package tablet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"pgregory.net/rapid"
)

func sp(k, end string) kvpb.Span {
	s := kvpb.Span{Key: []byte(k)}
	if end != "" {
		s.EndKey = []byte(end)
	}
	return s
}

func TestLatchConflicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a, b     latchSpan
		conflict bool
	}{
		{"read-read same key", latchSpan{sp("a", ""), false}, latchSpan{sp("a", ""), false}, false},
		{"read-write same key", latchSpan{sp("a", ""), false}, latchSpan{sp("a", ""), true}, true},
		{"write-write same key", latchSpan{sp("a", ""), true}, latchSpan{sp("a", ""), true}, true},
		{"write-write disjoint keys", latchSpan{sp("a", ""), true}, latchSpan{sp("b", ""), true}, false},
		{"point inside range", latchSpan{sp("b", ""), true}, latchSpan{sp("a", "c"), false}, true},
		{"point at range end", latchSpan{sp("c", ""), true}, latchSpan{sp("a", "c"), true}, false},
		{"point at range start", latchSpan{sp("a", ""), true}, latchSpan{sp("a", "c"), true}, true},
		{"adjacent ranges", latchSpan{sp("a", "b"), true}, latchSpan{sp("b", "c"), true}, false},
		{"overlapping ranges", latchSpan{sp("a", "c"), true}, latchSpan{sp("b", "d"), true}, true},
		{"key and its successor", latchSpan{sp("a", ""), true}, latchSpan{sp("a\x00", ""), true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ga := &latchGuard{spans: []latchSpan{tc.a}}
			gb := &latchGuard{spans: []latchSpan{tc.b}}
			if got := ga.conflicts(gb); got != tc.conflict {
				t.Fatalf("conflicts = %v, want %v", got, tc.conflict)
			}
			if got := gb.conflicts(ga); got != tc.conflict {
				t.Fatalf("conflicts is not symmetric")
			}
		})
	}
}

// A conflicting acquisition waits exactly until the holder releases; a
// non-conflicting one does not wait at all.
func TestLatchManagerWaits(t *testing.T) {
	m := newLatchManager()
	ctx := context.Background()
	g1, err := m.acquire(ctx, []latchSpan{{sp("a", "c"), true}})
	if err != nil {
		t.Fatal(err)
	}
	// Disjoint: acquires at once even though g1 is held.
	g2, err := m.acquire(ctx, []latchSpan{{sp("c", "d"), true}})
	if err != nil {
		t.Fatal(err)
	}
	m.release(g2)

	acquired := make(chan *latchGuard)
	go func() {
		g, err := m.acquire(ctx, []latchSpan{{sp("b", ""), false}})
		if err != nil {
			t.Error(err)
		}
		acquired <- g
	}()
	// The reader is registered (2 guards) but cannot have acquired: g1
	// is still held.
	for m.numHeld() != 2 {
		waitABit()
	}
	select {
	case <-acquired:
		t.Fatal("conflicting latch acquired while the holder still held it")
	default:
	}
	m.release(g1)
	g3 := <-acquired
	m.release(g3)
	if n := m.numHeld(); n != 0 {
		t.Fatalf("%d guards left", n)
	}
}

func TestLatchManagerCancel(t *testing.T) {
	m := newLatchManager()
	g1, err := m.acquire(context.Background(), []latchSpan{{sp("a", ""), true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.acquire(ctx, []latchSpan{{sp("a", ""), true}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	m.release(g1)
	if n := m.numHeld(); n != 0 {
		t.Fatalf("cancelled waiter left %d guards registered", n)
	}
}

// spansOverlap avoids building a point span's successor; it must agree
// with the definition it shortcuts: a.Key < end(b) && b.Key < end(a).
func TestSpansOverlapMatchesDefinition(t *testing.T) {
	keyGen := rapid.SampledFrom([]string{"a", "a\x00", "a\x00\x00", "b", "b\x00", "c"})
	spanGen := rapid.Custom(func(t *rapid.T) kvpb.Span {
		k := keyGen.Draw(t, "key")
		if rapid.Bool().Draw(t, "point") {
			return kvpb.Span{Key: []byte(k)}
		}
		e := keyGen.Draw(t, "end")
		if e <= k {
			return kvpb.Span{Key: []byte(k)}
		}
		return kvpb.Span{Key: []byte(k), EndKey: []byte(e)}
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := spanGen.Draw(t, "a"), spanGen.Draw(t, "b")
		want := bytes.Compare(a.Key, spanEnd(b)) < 0 && bytes.Compare(b.Key, spanEnd(a)) < 0
		if got := spansOverlap(a, b); got != want {
			t.Fatalf("spansOverlap(%s, %s) = %v, want %v", a, b, got, want)
		}
	})
}

// TestLatchIndexMatchesPairwise: a guard of many spans (indexed) conflicts
// with another exactly when some pair of their spans does, whichever of
// the two is indexed.
func TestLatchIndexMatchesPairwise(t *testing.T) {
	keyGen := rapid.SampledFrom([]string{"a", "a\x00", "ab", "b", "b\x00", "ba", "c", "cc", "d"})
	spanGen := rapid.Custom(func(t *rapid.T) latchSpan {
		k := keyGen.Draw(t, "key")
		w := rapid.Bool().Draw(t, "write")
		if rapid.IntRange(0, 3).Draw(t, "kind") > 0 {
			return latchSpan{span: kvpb.Span{Key: []byte(k)}, write: w}
		}
		e := keyGen.Draw(t, "end")
		if e <= k {
			return latchSpan{span: kvpb.Span{Key: []byte(k)}, write: w}
		}
		return latchSpan{span: kvpb.Span{Key: []byte(k), EndKey: []byte(e)}, write: w}
	})
	pairwise := func(a, b []latchSpan) bool {
		for _, x := range a {
			for _, y := range b {
				if (x.write || y.write) && spansOverlap(x.span, y.span) {
					return true
				}
			}
		}
		return false
	}
	conflicts, checks := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.SliceOfN(spanGen, 1, 6).Draw(t, "a")
		b := rapid.SliceOfN(spanGen, 1, 6).Draw(t, "b")
		want := pairwise(a, b)
		for _, ix := range [][2]bool{{true, false}, {false, true}, {true, true}} {
			ga, gb := &latchGuard{spans: a}, &latchGuard{spans: b}
			if ix[0] {
				ga.idx = newLatchIndex(a)
			}
			if ix[1] {
				gb.idx = newLatchIndex(b)
			}
			if got := ga.conflicts(gb); got != want {
				t.Fatalf("indexed %v: conflicts(%v, %v) = %v, want %v", ix, a, b, got, want)
			}
			if got := gb.conflicts(ga); got != want {
				t.Fatalf("indexed %v: conflicts(%v, %v) = %v, want %v", ix, b, a, got, want)
			}
		}
		checks++
		if want {
			conflicts++
		}
	})
	if conflicts == 0 || conflicts == checks {
		t.Fatalf("%d of %d cases conflict: the generator tests one side only", conflicts, checks)
	}
}

// TestLatchManagerLargeGuards: guards of a bulk load's size are indexed
// at acquisition; two that share one key of their thousands still wait
// for each other, and two that share none do not.
func TestLatchManagerLargeGuards(t *testing.T) {
	m := newLatchManager()
	ctx := context.Background()
	keys := func(from, n int) []latchSpan {
		out := make([]latchSpan, n)
		for i := range out {
			out[i] = latchSpan{span: kvpb.Span{Key: []byte(fmt.Sprintf("k%06d", from+(i*7919)%n))}, write: true}
		}
		return out
	}
	g1, err := m.acquire(ctx, keys(0, 5000))
	if err != nil {
		t.Fatal(err)
	}
	if g1.idx == nil {
		t.Fatal("a guard of 5000 spans was not indexed")
	}
	g2, err := m.acquire(ctx, keys(5000, 5000)) // disjoint: at once
	if err != nil {
		t.Fatal(err)
	}
	m.release(g2)
	acquired := make(chan *latchGuard)
	go func() {
		g, err := m.acquire(ctx, keys(4999, 5000)) // shares k004999
		if err != nil {
			t.Error(err)
		}
		acquired <- g
	}()
	for m.numHeld() != 2 {
		waitABit()
	}
	select {
	case <-acquired:
		t.Fatal("a guard sharing a key acquired while the holder held it")
	default:
	}
	m.release(g1)
	m.release(<-acquired)
}

// TestLatchBatchAllocs: the latches of a one-request batch (a point read's
// Scan of its row) are one object, the guard with its span inside; a
// guard makes its done channel only when a later guard waits on it.
func TestLatchBatchAllocs(t *testing.T) {
	m := newLatchManager()
	ctx := context.Background()
	desc := kvpb.TabletDescriptor{TabletID: 1, StartKey: []byte("a"), EndKey: []byte("z")}
	for _, tc := range []struct {
		name string
		req  kvpb.Request
	}{
		{"scan of a row", &kvpb.ScanRequest{Key: []byte("k"), EndKey: []byte("k\xff")}},
		{"get", &kvpb.GetRequest{Key: []byte("k")}},
		{"put", &kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ba := &kvpb.BatchRequest{Requests: []kvpb.Request{tc.req}}
			if n := testing.AllocsPerRun(100, func() {
				g, err := m.acquireBatch(ctx, ba, desc)
				if err != nil {
					t.Fatal(err)
				}
				m.release(g)
			}); n != 1 {
				t.Fatalf("latching a batch of one request allocates %.0f objects, want 1", n)
			}
		})
	}
}

// TestLatchBatchWaits: a guard of a one-request batch is waited on like
// any other (its done channel made by its first waiter), and a guard of
// several requests holds every one of their spans.
func TestLatchBatchWaits(t *testing.T) {
	m := newLatchManager()
	ctx := context.Background()
	desc := kvpb.TabletDescriptor{TabletID: 1, StartKey: []byte("a"), EndKey: []byte("z")}
	read := &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.ScanRequest{Key: []byte("k"), EndKey: []byte("l")}}}
	writes := &kvpb.BatchRequest{Requests: []kvpb.Request{
		&kvpb.PutRequest{Key: []byte("c"), Value: []byte("v")},
		&kvpb.PutRequest{Key: []byte("k"), Value: []byte("v")},
	}}
	g1, err := m.acquireBatch(ctx, read, desc)
	if err != nil {
		t.Fatal(err)
	}
	if len(g1.spans) != 1 || &g1.spans[0] != &g1.one[0] {
		t.Fatalf("a one-request guard's spans %v are not its own array", g1.spans)
	}
	acquired := make(chan *latchGuard)
	// Two waiters on g1: the second finds the channel the first made.
	for range 2 {
		go func() {
			g, err := m.acquireBatch(ctx, writes, desc)
			if err != nil {
				t.Error(err)
			}
			acquired <- g
		}()
	}
	for m.numHeld() != 3 {
		waitABit()
	}
	select {
	case <-acquired:
		t.Fatal("a write latched the row while its read held it")
	default:
	}
	m.release(g1)
	// The two writes conflict with each other: one at a time.
	g2 := <-acquired
	if len(g2.spans) != 2 {
		t.Fatalf("a two-request guard holds %d spans, want 2", len(g2.spans))
	}
	select {
	case <-acquired:
		t.Fatal("two conflicting writes latched at once")
	default:
	}
	m.release(g2)
	m.release(<-acquired)
	if n := m.numHeld(); n != 0 {
		t.Fatalf("%d guards left", n)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a second release of a guard did not panic")
			}
		}()
		m.release(g2)
	}()
}
