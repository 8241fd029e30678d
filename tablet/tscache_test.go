package tablet

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

func TestTSCacheBasics(t *testing.T) {
	c := newTSCache(hlc.Timestamp{WallTime: 5}, 100)
	a, b := uuid.New(), uuid.New()
	c.add(sp("b", "d"), hlc.Timestamp{WallTime: 10}, a)
	c.add(sp("c", ""), hlc.Timestamp{WallTime: 20}, b)
	c.add(sp("a", "z"), hlc.Timestamp{WallTime: 7}, uuid.Nil)
	for _, tc := range []struct {
		span kvpb.Span
		ts   int64
		txn  uuid.UUID
	}{
		{sp("a", ""), 7, uuid.Nil},
		{sp("b", ""), 10, a},
		{sp("c", ""), 20, b},
		{sp("c\x00", ""), 10, a},
		{sp("a", "c"), 10, a},
		{sp("a", "z"), 20, b},
		{sp("d", ""), 7, uuid.Nil},
		{sp("z", ""), 5, uuid.Nil}, // the low-water mark
	} {
		ts, txn := c.getMax(tc.span)
		if ts.WallTime != tc.ts || txn != tc.txn {
			t.Errorf("getMax(%s) = %s %s, want %d %s", tc.span, ts, txn, tc.ts, tc.txn)
		}
	}
	// Two transactions at the same timestamp: nobody owns it.
	c.add(sp("b", ""), hlc.Timestamp{WallTime: 10}, b)
	if _, txn := c.getMax(sp("b", "")); txn != uuid.Nil {
		t.Errorf("shared timestamp attributed to %s", txn)
	}
}

// TestTSCacheModel checks the cache against a list of every read: it must
// never answer lower than the highest read over a span (the safety
// property), and while it has not shrunk it answers exactly that, owned by
// the one transaction that made every read at that timestamp over the span
// (uuid.Nil if several did, or a non-transactional read). Point and span
// reads, which the cache keeps in different structures, overlap freely.
func TestTSCacheModel(t *testing.T) {
	// Keys with shared prefixes, so row reads ([k, PrefixEnd(k)), kept
	// apart from spans) cover other keys; "\xff" has no prefix end. The
	// long ones are past shortRowKeyLen (the row reads of long prefixes
	// are kept apart from the short ones'), one of them under "ab", one
	// under the other.
	long := "ab" + strings.Repeat("z", shortRowKeyLen)
	keyGen := rapid.SampledFrom([]string{"a", "ab", "ab\x00", "abc", "ab\xff", "ab\xff\xff", "b", "b\xff", "ba", "c", "\xff", long, long + "q"})
	txnGen := rapid.SampledFrom([]uuid.UUID{uuid.Nil, uuid.New(), uuid.New()})
	rapid.Check(t, func(t *rapid.T) {
		maxEntries := rapid.IntRange(2, 12).Draw(t, "max")
		c := newTSCache(hlc.Timestamp{}, maxEntries)
		// The keys have four lengths: a lower bound on row lengths sends
		// some row reads down the span path.
		c.rowLensCap = rapid.IntRange(1, 5).Draw(t, "rowLensCap")
		type read struct {
			span kvpb.Span
			ts   hlc.Timestamp
			txn  uuid.UUID
		}
		var reads []read
		shrunk := false
		genSpan := func(label string) kvpb.Span {
			k := keyGen.Draw(t, label+"k")
			switch rapid.IntRange(0, 2).Draw(t, label+"kind") {
			case 0:
				return sp(k, "")
			case 1:
				return kvpb.Span{Key: []byte(k), EndKey: keys.PrefixEnd([]byte(k))}
			}
			e := keyGen.Draw(t, label+"e")
			if e <= k {
				return sp(k, "")
			}
			return sp(k, e)
		}
		for i := range rapid.IntRange(1, 40).Draw(t, "n") {
			_ = i
			if rapid.Bool().Draw(t, "isAdd") {
				s := genSpan("add")
				// Few timestamps, so reads often tie and ownership is tested.
				ts := hlc.Timestamp{WallTime: rapid.Int64Range(1, 8).Draw(t, "ts")}
				txn := txnGen.Draw(t, "txn")
				c.add(s, ts, txn)
				reads = append(reads, read{s, ts, txn})
				if !c.lowWater.IsEmpty() {
					shrunk = true
				}
				continue
			}
			q := genSpan("get")
			var want hlc.Timestamp
			wantTxn := uuid.Nil
			for _, r := range reads {
				if !spansOverlap(r.span, q) {
					continue
				}
				switch {
				case want.Less(r.ts):
					want, wantTxn = r.ts, r.txn
				case want == r.ts && wantTxn != r.txn:
					wantTxn = uuid.Nil
				}
			}
			got, gotTxn := c.getMax(q)
			// From a floor, the same answer when it reaches the floor,
			// else one below it.
			floor := hlc.Timestamp{WallTime: rapid.Int64Range(0, 9).Draw(t, "floor")}
			if fts, ftxn := c.getMaxFrom(q, floor); floor.LessEq(got) && (fts != got || ftxn != gotTxn) {
				t.Fatalf("getMaxFrom(%s, %s) = %s by %s, getMax %s by %s", q, floor, fts, ftxn, got, gotTxn)
			} else if got.Less(floor) && !fts.Less(floor) {
				t.Fatalf("getMaxFrom(%s, %s) = %s, getMax %s is below the floor", q, floor, fts, got)
			}
			if got.Less(want) {
				t.Fatalf("getMax(%s) = %s, below a served read at %s", q, got, want)
			}
			if !shrunk && (got != want || gotTxn != wantTxn) {
				t.Fatalf("getMax(%s) = %s by %s, want %s by %s", q, got, gotTxn, want, wantTxn)
			}
			if shrunk && got == want && want.LessEq(c.lowWater) && gotTxn != uuid.Nil {
				// Forgotten reads fall back to the low-water mark, which
				// belongs to nobody.
				t.Fatalf("getMax(%s) = %s at the low-water mark owned by %s", q, got, gotTxn)
			}
		}
		if n := c.len(); n > maxEntries {
			t.Fatalf("%d entries, limit %d", n, maxEntries)
		}
	})
}

// TestTSCacheRowLengths: row reads of many prefix lengths (a tablet
// holding the catalog and user tables sees a dozen) stay row entries up to
// maxRowLens lengths, a longer key's lookup sees the prefixes of every
// shorter length, and a length past the bound is still answered, from the
// span tree.
func TestTSCacheRowLengths(t *testing.T) {
	c := newTSCache(hlc.Timestamp{WallTime: 1}, 1000)
	key := func(n int) []byte {
		k := make([]byte, n)
		for i := range k {
			k[i] = 'a'
		}
		return k
	}
	for n := maxRowLens; n >= 1; n-- { // longest first: the lengths arrive out of order
		k := key(n)
		c.add(kvpb.Span{Key: k, EndKey: keys.PrefixEnd(k)}, hlc.Timestamp{WallTime: int64(10 + n)}, uuid.Nil)
	}
	if n := c.entries.Len(); n != 0 {
		t.Fatalf("%d span entries after row reads of %d lengths, want 0", n, maxRowLens)
	}
	long := key(maxRowLens + 1)
	c.add(kvpb.Span{Key: long, EndKey: keys.PrefixEnd(long)}, hlc.Timestamp{WallTime: 5}, uuid.Nil)
	if n := c.entries.Len(); n != 1 {
		t.Fatalf("%d span entries after a row read of a length past the bound, want 1", n)
	}
	for _, tc := range []struct {
		key  []byte
		want int64
	}{
		{key(1), 11},
		{key(3), 13},
		{append(key(3), 'b'), 13},                         // under the prefixes of lengths 1 to 3
		{key(maxRowLens), 10 + maxRowLens},                // the longest row prefix
		{key(maxRowLens + 1), 10 + maxRowLens},            // also under every row prefix
		{append(key(maxRowLens+1), 'x'), 10 + maxRowLens}, // and under the span entry's
		{[]byte("b"), 1},                                  // the low-water mark
	} {
		if ts, _ := c.getMax(kvpb.Span{Key: tc.key}); ts.WallTime != tc.want {
			t.Errorf("getMax(%q) = %s, want %d", tc.key, ts, tc.want)
		}
	}
}

func TestTSCacheSplitOff(t *testing.T) {
	c := newTSCache(hlc.Timestamp{WallTime: 1}, 100)
	c.add(sp("a", "m"), hlc.Timestamp{WallTime: 10}, uuid.Nil)
	c.add(sp("n", ""), hlc.Timestamp{WallTime: 30}, uuid.Nil)
	r := c.splitOff([]byte("c"))
	if ts, _ := r.getMax(sp("c", "")); ts.WallTime != 10 {
		t.Fatalf("right side lost a read: %s", ts)
	}
	if ts, _ := r.getMax(sp("n", "")); ts.WallTime != 30 {
		t.Fatalf("right side lost a read: %s", ts)
	}
	if ts, _ := r.getMax(sp("a", "")); ts.WallTime != 1 {
		t.Fatalf("right side kept a left read: %s", ts)
	}
}

// TestTSCacheSplitOffModel: after any reads, the right side of a split
// answers at least the highest read over every span right of the split
// key, row reads ([k, PrefixEnd(k)) with k left of it) included.
func TestTSCacheSplitOffModel(t *testing.T) {
	keyGen := rapid.SampledFrom([]string{"a", "ab", "ab\x00", "abc", "abd", "ab\xff", "b", "b\xff", "ba", "c"})
	rapid.Check(t, func(t *rapid.T) {
		c := newTSCache(hlc.Timestamp{}, 100)
		type read struct {
			span kvpb.Span
			ts   hlc.Timestamp
		}
		var reads []read
		for range rapid.IntRange(1, 20).Draw(t, "n") {
			k := keyGen.Draw(t, "k")
			s := sp(k, "")
			switch rapid.IntRange(0, 2).Draw(t, "kind") {
			case 1:
				s.EndKey = keys.PrefixEnd([]byte(k))
			case 2:
				if e := keyGen.Draw(t, "e"); e > k {
					s.EndKey = []byte(e)
				}
			}
			ts := hlc.Timestamp{WallTime: rapid.Int64Range(1, 50).Draw(t, "ts")}
			c.add(s, ts, uuid.Nil)
			reads = append(reads, read{s, ts})
		}
		split := keyGen.Draw(t, "split")
		r := c.splitOff([]byte(split))
		for _, q := range []string{"a", "ab", "ab\x00", "abc", "abc\x00", "abd", "ab\xff", "ab\xff\x00", "b", "b\xff", "ba", "c", "d"} {
			if q < split {
				continue
			}
			var want hlc.Timestamp
			for _, rd := range reads {
				if spansOverlap(rd.span, sp(q, "")) {
					want = want.Forward(rd.ts)
				}
			}
			if got, _ := r.getMax(sp(q, "")); got.Less(want) {
				t.Fatalf("split at %q: right side getMax(%q) = %s, below a read at %s", split, q, got, want)
			}
			// A write at the highest read still sees it (the right
			// side's span entries and row lengths keep their tops).
			if got, _ := r.getMaxFrom(sp(q, ""), want); got.Less(want) {
				t.Fatalf("split at %q: right side getMaxFrom(%q, %s) = %s, below a read at %s", split, q, want, got, want)
			}
		}
	})
}

// TestNthTimestamp checks the quickselect of a shrink's median (and of the
// transaction tombstones' cut) against a sort, on slices with many equal
// timestamps (reads share them).
func TestNthTimestamp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tss := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) hlc.Timestamp {
			return hlc.Timestamp{WallTime: rapid.Int64Range(0, 6).Draw(t, "wall"), Logical: rapid.Int32Range(0, 2).Draw(t, "logical")}
		}), 1, 64).Draw(t, "tss")
		n := rapid.IntRange(0, len(tss)-1).Draw(t, "n")
		sorted := slices.Clone(tss)
		slices.SortFunc(sorted, hlc.Timestamp.Compare)
		if got := nthTimestamp(tss, n); got != sorted[n] {
			t.Fatalf("nthTimestamp(%v, %d) = %s, want %s", sorted, n, got, sorted[n])
		}
	})
}

// TestTSCacheShortRows: the row reads of prefixes of at most
// shortRowKeyLen bytes (every pgbench row's) are kept in shortRows, the
// prefix's bytes and the read in the map's own slot; longer ones in rows
// and rowReads, where a read of a row there meets the key's bytes and its
// read elsewhere in memory. Both answer lookups of keys under them.
func TestTSCacheShortRows(t *testing.T) {
	c := newTSCache(hlc.Timestamp{}, 1<<10)
	short := []byte("\x03t/accounts/\x00\x00\x00\x00\x00\x00\x00\x07\x00")
	long := []byte(strings.Repeat("k", shortRowKeyLen+1))
	for i, k := range [][]byte{short, long} {
		c.add(kvpb.Span{Key: k, EndKey: keys.PrefixEnd(k)}, hlc.Timestamp{WallTime: int64(10 + i)}, uuid.Nil)
	}
	if len(c.shortRows) != 1 || len(c.rows) != 1 || len(c.rowReads) != 1 {
		t.Fatalf("%d short row reads, %d long (%d in rowReads), want 1 and 1", len(c.shortRows), len(c.rows), len(c.rowReads))
	}
	for i, k := range [][]byte{short, long} {
		if ts, _ := c.getMax(sp(string(k)+"\x01", "")); ts.WallTime != int64(10+i) {
			t.Errorf("getMax of a key under row %d = %s, want %d", i, ts, 10+i)
		}
	}
}

// TestTSCacheRowReadAllocs: recording a read of a row the cache already
// holds (a point SELECT of a row read before, pgbench -S's usual case)
// allocates nothing; the map of row reads used to hash and allocate the
// key a second time to store the merged read.
func TestTSCacheRowReadAllocs(t *testing.T) {
	c := newTSCache(hlc.Timestamp{}, 1<<10)
	key := []byte("\x03t/accounts/\x00\x00\x00\x00\x00\x00\x00\x07\x00")
	row := kvpb.Span{Key: key, EndKey: keys.PrefixEnd(key)}
	wall := int64(1)
	c.add(row, hlc.Timestamp{WallTime: wall}, uuid.Nil)
	if n := testing.AllocsPerRun(100, func() {
		wall++
		c.add(row, hlc.Timestamp{WallTime: wall}, uuid.Nil)
	}); n != 0 {
		t.Errorf("a repeated row read allocates %.1f times, want 0", n)
	}
	if ts, _ := c.getMax(sp(string(key)+"\x01", "")); ts.WallTime != wall {
		t.Errorf("getMax of a key in the row = %s, want %d", ts, wall)
	}
}

// TestTSCacheRowProbes: a point lookup of a written row's key, whose row
// its writer's locking read just read, probes that row's prefix only, not
// one prefix per length of the catalog's older row reads (eight here, a
// map probe each; a one-phase commit looks up each key it writes), and
// still answers the newest read covering the key, ties included.
func TestTSCacheRowProbes(t *testing.T) {
	c := newTSCache(hlc.Timestamp{WallTime: 1}, 1000)
	row := []byte("\x89\x8a\x8b\x8c\x8d\x8e\x8f\x90\x91")
	for n := 1; n <= 8; n++ {
		other := append([]byte("\x03catalog"), byte(n))[:n]
		c.add(kvpb.Span{Key: other, EndKey: keys.PrefixEnd(other)}, hlc.Timestamp{WallTime: 10}, uuid.Nil)
	}
	self, other := uuid.New(), uuid.New()
	c.add(kvpb.Span{Key: row, EndKey: keys.PrefixEnd(row)}, hlc.Timestamp{WallTime: 100}, self)
	key := append(append([]byte(nil), row...), 0x88)
	before := c.rowProbes
	ts, txn := c.getMax(kvpb.Span{Key: key})
	if ts.WallTime != 100 || txn != self {
		t.Fatalf("getMax = %s by %s, want 100 by the row's reader", ts, txn)
	}
	if n := c.rowProbes - before; n != 1 {
		t.Errorf("the lookup probed %d row prefixes, want 1", n)
	}
	// A read of a shorter prefix at the same timestamp by another
	// transaction ties: the key belongs to neither.
	c.add(kvpb.Span{Key: row[:2], EndKey: keys.PrefixEnd(row[:2])}, hlc.Timestamp{WallTime: 100}, other)
	if ts, txn := c.getMax(kvpb.Span{Key: key}); ts.WallTime != 100 || txn != uuid.Nil {
		t.Fatalf("getMax after a tie = %s by %s, want 100 by no transaction", ts, txn)
	}
	// And a newer one wins.
	c.add(kvpb.Span{Key: row[:1], EndKey: keys.PrefixEnd(row[:1])}, hlc.Timestamp{WallTime: 200}, other)
	if ts, txn := c.getMax(kvpb.Span{Key: key}); ts.WallTime != 200 || txn != other {
		t.Fatalf("getMax after a newer read of a prefix = %s by %s, want 200 by it", ts, txn)
	}
}

// TestTSCacheFloorProbes: a write's look-up of a key no recent read
// covers (an INSERT's fresh row) probes only the prefix lengths and span
// entries read at or above the write's timestamp, not one per length of
// the catalog's older row reads and the span tree besides; and a read at
// or above the floor, of a covering prefix or a span, still answers,
// ties included.
func TestTSCacheFloorProbes(t *testing.T) {
	c := newTSCache(hlc.Timestamp{WallTime: 1}, 1000)
	for n := 1; n <= 8; n++ {
		other := append([]byte("\x03catalog"), byte(n))[:n]
		c.add(kvpb.Span{Key: other, EndKey: keys.PrefixEnd(other)}, hlc.Timestamp{WallTime: 10}, uuid.Nil)
	}
	c.add(sp("\x05a", "\x05z"), hlc.Timestamp{WallTime: 10}, uuid.Nil)
	// Another row of the key's table, read after the write's timestamp.
	c.add(kvpb.Span{Key: []byte("\x89\x8a\x01"), EndKey: keys.PrefixEnd([]byte("\x89\x8a\x01"))}, hlc.Timestamp{WallTime: 200}, uuid.Nil)
	key := []byte("\x89\x8a\x8b\x8c\x8d\x8e\x8f\x90\x91")
	write := hlc.Timestamp{WallTime: 100}
	rows, spans := c.rowProbes, c.spanProbes
	if ts, _ := c.getMaxFrom(kvpb.Span{Key: key}, write); !ts.Less(write) {
		t.Fatalf("getMaxFrom = %s, want below the write at %s", ts, write)
	}
	if n := c.rowProbes - rows; n != 1 {
		t.Errorf("the lookup probed %d row prefixes, want 1 (the length read at 200)", n)
	}
	if n := c.spanProbes - spans; n != 0 {
		t.Errorf("the lookup searched the span tree %d times, want 0", n)
	}
	// Without a floor every length read since the low-water mark is
	// probed and the tree searched.
	rows, spans = c.rowProbes, c.spanProbes
	if ts, _ := c.getMax(kvpb.Span{Key: key}); ts.WallTime != 1 {
		t.Fatalf("getMax = %s, want the low-water mark", ts)
	}
	if n := c.rowProbes - rows; n != 8 {
		t.Errorf("getMax probed %d row prefixes, want 8", n)
	}
	if n := c.spanProbes - spans; n != 1 {
		t.Errorf("getMax searched the span tree %d times, want 1", n)
	}
	// Reads at the floor count: a covering prefix's by one transaction,
	// then a span's by another, which ties.
	self, other := uuid.New(), uuid.New()
	c.add(kvpb.Span{Key: key[:2], EndKey: keys.PrefixEnd(key[:2])}, write, self)
	if ts, txn := c.getMaxFrom(kvpb.Span{Key: key}, write); ts != write || txn != self {
		t.Fatalf("getMaxFrom after a prefix read = %s by %s, want %s by its reader", ts, txn, write)
	}
	c.add(kvpb.Span{Key: key[:4], EndKey: []byte("\x89\x8a\x8b\x8d")}, write, other)
	if ts, txn := c.getMaxFrom(kvpb.Span{Key: key}, write); ts != write || txn != uuid.Nil {
		t.Fatalf("getMaxFrom after a tying span read = %s by %s, want %s by no transaction", ts, txn, write)
	}
	c.add(kvpb.Span{Key: key[:4], EndKey: []byte("\x89\x8a\x8b\x8d")}, hlc.Timestamp{WallTime: 300}, other)
	if ts, txn := c.getMaxFrom(kvpb.Span{Key: key}, write); ts.WallTime != 300 || txn != other {
		t.Fatalf("getMaxFrom after a later span read = %s by %s, want 300 by its reader", ts, txn)
	}
}
