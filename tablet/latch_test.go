package tablet

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
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
