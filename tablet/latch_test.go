package tablet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
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
	conflicts, checks := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.SliceOfN(spanGen, 1, 6).Draw(t, "a")
		b := rapid.SliceOfN(spanGen, 1, 6).Draw(t, "b")
		want := pairwiseConflict(a, b)
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

// TestLatchRegistryMatchesPairwise: the guards a registration waits for
// are exactly the registered guards one of whose spans overlaps one of its
// own, one of the two a write, over random registrations and releases of
// guards of points, prefix spans (a row's [p, p.PrefixEnd())), other
// spans, and a few bulk-sized guards.
func TestLatchRegistryMatchesPairwise(t *testing.T) {
	keyGen := rapid.SampledFrom([]string{"", "a", "a\x00", "a\x00\x01", "ab", "ab\xff", "ab\xff\x00", "abc", "b", "b\x00", "ba", "bb", "c", "cc", "d", "\xff", "\xff\xff"})
	prefixEnd := func(k string) string {
		b := []byte(k)
		for len(b) > 0 && b[len(b)-1] == 0xff {
			b = b[:len(b)-1]
		}
		if len(b) == 0 {
			return ""
		}
		b[len(b)-1]++
		return string(b)
	}
	spanGen := rapid.Custom(func(t *rapid.T) latchSpan {
		k := keyGen.Draw(t, "key")
		w := rapid.Bool().Draw(t, "write")
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 0: // a point
			return latchSpan{span: kvpb.Span{Key: []byte(k)}, write: w}
		case 1: // a row's span
			if e := prefixEnd(k); e != "" {
				return latchSpan{span: kvpb.Span{Key: []byte(k), EndKey: []byte(e)}, write: w}
			}
		}
		e := keyGen.Draw(t, "end")
		if e <= k {
			return latchSpan{span: kvpb.Span{Key: []byte(k)}, write: w}
		}
		return latchSpan{span: kvpb.Span{Key: []byte(k), EndKey: []byte(e)}, write: w}
	})
	waited, registered := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		m := newLatchManager()
		var live []*latchGuard
		for range rapid.IntRange(1, 30).Draw(t, "ops") {
			if len(live) > 0 && rapid.IntRange(0, 2).Draw(t, "release") == 0 {
				i := rapid.IntRange(0, len(live)-1).Draw(t, "which")
				m.release(live[i])
				live = slices.Delete(live, i, i+1)
				continue
			}
			spans := rapid.SliceOfN(spanGen, 1, 6).Draw(t, "spans")
			if rapid.IntRange(0, 9).Draw(t, "big") == 0 {
				for len(spans) < indexedLatchSpans {
					spans = append(spans, latchSpan{span: kvpb.Span{Key: []byte(fmt.Sprintf("z%03d", len(spans)))}})
				}
			}
			g := &latchGuard{spans: spans, done: make(chan struct{})}
			if len(spans) >= indexedLatchSpans {
				g.idx = newLatchIndex(spans)
			}
			var want []uint64
			for _, h := range live {
				if pairwiseConflict(spans, h.spans) {
					want = append(want, h.seq)
				}
			}
			var got []uint64
			for _, h := range m.register(g) {
				got = append(got, h.seq)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("registering %v waits for %v, want %v", spans, got, want)
			}
			live = append(live, g)
			registered++
			if len(want) > 0 {
				waited++
			}
			checkRegistry(t, m, live)
		}
		for i, g := range live {
			m.release(g)
			checkRegistry(t, m, live[i+1:])
		}
		if n := m.numHeld(); n != 0 || len(m.prefix) != 0 || len(m.wide) != 0 || len(m.big) != 0 {
			t.Fatalf("after every release: %d held, %d prefix spans, %d wide, %d big", n, len(m.prefix), len(m.wide), len(m.big))
		}
	})
	if waited == 0 || waited == registered {
		t.Fatalf("%d of %d registrations waited: the generator tests one side only", waited, registered)
	}
}

// checkRegistry checks the manager's count of registered guards and its
// answer to registeredAtOrBelow, for every sequence number handed out so
// far, against live, the guards registered and not released.
func checkRegistry(t *rapid.T, m *latchManager, live []*latchGuard) {
	if n := m.numHeld(); n != len(live) {
		t.Fatalf("%d guards registered, the manager counts %d", len(live), n)
	}
	for seq := range m.lastSeq() + 1 {
		want := slices.ContainsFunc(live, func(g *latchGuard) bool { return g.seq <= seq })
		if got := m.registeredAtOrBelow(seq); got != want {
			t.Fatalf("registeredAtOrBelow(%d) = %t, want %t (live: %d guards)", seq, got, want, len(live))
		}
	}
}

// TestLatchAcquireComparesFewSpans: with 16 one-phase commits of
// simple-update's shape registered (each: its record, the reads of two
// writer keys every commit checks, its row's lock span and Put, a
// history row), registering a 17th compares its spans with the held
// spans that can overlap them: the 16 reads of each shared writer key,
// 32 comparisons, where every pair of spans was 16 × 6 × 6 = 576.
func TestLatchAcquireComparesFewSpans(t *testing.T) {
	commit := func(i int) []latchSpan {
		row := fmt.Sprintf("/t/accounts/%06d", i)
		return []latchSpan{
			{span: sp(fmt.Sprintf("\x01rec/%06d", i), ""), write: true},
			{span: sp("/t/catalog/writer/1", ""), write: false},
			{span: sp("/t/catalog/writer/2", ""), write: false},
			{span: sp(row, row[:len(row)-1]+string(row[len(row)-1]+1)), write: true},
			{span: sp(row+"/0", ""), write: true},
			{span: sp(fmt.Sprintf("/t/history/%06d", i), ""), write: true},
		}
	}
	for _, tc := range []struct {
		name     string
		held     int
		compared uint64
	}{
		{"none held", 0, 0},
		{"one held", 1, 2},
		{"16 held", 16, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newLatchManager()
			ctx := context.Background()
			for i := range tc.held {
				if _, err := m.acquire(ctx, commit(i)); err != nil {
					t.Fatal(err)
				}
			}
			before := m.compared
			g, err := m.acquire(ctx, commit(tc.held))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.compared - before; got != tc.compared {
				t.Fatalf("registering a commit among %d compared %d held spans, want %d", tc.held, got, tc.compared)
			}
			m.release(g)
		})
	}
}

// pairwiseConflict is the latch rule by definition: some span of a and
// some span of b overlap, and one of the two writes.
func pairwiseConflict(a, b []latchSpan) bool {
	for _, x := range a {
		for _, y := range b {
			if (x.write || y.write) && spansOverlap(x.span, y.span) {
				return true
			}
		}
	}
	return false
}
