package tablet

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// TestClearRangeFewEntries: a ClearRange of a span holding few entries
// (an empty or small table's, as pgbench -i's TRUNCATE clears) deletes
// each, leaving no range deletion in the memtable, over which Pebble
// would build a range-deletion iterator for every later read of any key
// (a Get allocates one object more); a span of more than clearPointMax
// entries is one range deletion. Either way every version in the span
// goes and nothing outside it.
func TestClearRangeFewEntries(t *testing.T) {
	h := newHarness(t, Config{})
	put := func(ts int64, key string) {
		t.Helper()
		if _, err := h.sendAt(wallTS(ts), &kvpb.PutRequest{Key: []byte(key), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	// entries counts the engine's entries with a user key in [start, end).
	entries := func(start, end string) int {
		t.Helper()
		it, err := h.eng.NewIter(storage.IterOptions{LowerBound: []byte(start), UpperBound: []byte(end)})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		n := 0
		for ok := it.SeekGE(storage.MVCCKey{Key: []byte(start)}); ok; ok = it.Next() {
			n++
		}
		return n
	}
	probe := storage.MVCCKey{Key: []byte("\x03zz")}
	getAllocs := func() float64 {
		return testing.AllocsPerRun(50, func() {
			if _, _, err := h.eng.Get(probe); err != nil {
				t.Fatal(err)
			}
		})
	}
	clear := func(ts int64, start, end string) {
		t.Helper()
		if _, err := h.sendAt(wallTS(ts), &kvpb.ClearRangeRequest{Key: []byte(start), EndKey: []byte(end)}); err != nil {
			t.Fatal(err)
		}
	}

	put(10, "\x03a")
	put(20, "\x03a") // two versions
	put(10, "\x03b")
	put(10, "\x03c") // outside the span cleared
	before := getAllocs()
	clear(30, "\x03a", "\x03c")
	clear(30, "\x03m", "\x03n") // empty
	if n := entries("\x03a", "\x03c"); n != 0 {
		t.Fatalf("%d entries left in the cleared span", n)
	}
	if n := entries("\x03c", "\x03d"); n != 1 {
		t.Fatalf("%d entries of the key after the span, want 1", n)
	}
	if after := getAllocs(); after != before {
		t.Fatalf("a Get allocates %.0f objects after the small clears, %.0f before: a range deletion is in the memtable", after, before)
	}

	// More than clearPointMax entries: one range deletion, all gone.
	for i := 0; i <= clearPointMax; i++ {
		put(40, fmt.Sprintf("\x03k%03d", i))
	}
	clear(50, "\x03k", "\x03l")
	if n := entries("\x03k", "\x03l"); n != 0 {
		t.Fatalf("%d entries left in the large cleared span", n)
	}
	if after := getAllocs(); after != before+1 {
		t.Fatalf("a Get allocates %.0f objects after the large clear, %.0f before; want the range deletion's iterator", after, before)
	}
	if got := h.getAt(t, "\x03c", wallTS(60)); got != "v" {
		t.Fatalf("key after the spans reads %q", got)
	}
}
