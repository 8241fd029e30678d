package tablet

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

func rowReadSpan(k string) kvpb.Span {
	return kvpb.Span{Key: []byte(k), EndKey: keys.PrefixEnd([]byte(k))}
}

// TestReadTableRowReads: a non-transactional row read at a timestamp with
// no logical part goes to the node's ReadTable, and every lookup that
// must see it does: a key of the row, the row's prefix, a span over it,
// the right side of a split; a key whose slot no read hashed to sees
// nothing. A transaction's row read, or one with a logical part, stays
// exact, with its owner.
func TestReadTableRowReads(t *testing.T) {
	const row, other = "\x03t/accounts/\x07", "\x03t/accounts/\x09"
	c := newTSCache(hlc.Timestamp{}, 100)
	c.reads = NewReadTable(1 << 12)
	if c.reads.slot([]byte(row)) == c.reads.slot([]byte(other)) || c.reads.slot([]byte(row)) == c.reads.slot([]byte(other+"\x01")) {
		t.Fatal("the test's rows share a slot")
	}
	c.add(rowReadSpan(row), hlc.Timestamp{WallTime: 10}, uuid.Nil)
	if n := len(c.shortRows) + len(c.rows); n != 0 {
		t.Fatalf("the cache's maps of row reads hold %d after a row read the table took, want 0", n)
	}
	txn := uuid.New()
	c.add(rowReadSpan("\x03t/b/\x01"), hlc.Timestamp{WallTime: 12}, txn)
	c.add(rowReadSpan("\x03t/c/\x01"), hlc.Timestamp{WallTime: 13, Logical: 1}, uuid.Nil)
	if n := len(c.shortRows) + len(c.rows); n != 2 {
		t.Fatalf("the cache's maps of row reads hold %d, want 2 (the transaction's read, the logical one)", n)
	}
	right := c.splitOff([]byte("\x03t/accounts/\x05"))
	for _, tc := range []struct {
		c    *tsCache
		span kvpb.Span
		ts   hlc.Timestamp
		txn  uuid.UUID
	}{
		{c, sp(row+"\x01", ""), hlc.Timestamp{WallTime: 10}, uuid.Nil},
		{c, sp(row, ""), hlc.Timestamp{WallTime: 10}, uuid.Nil},
		{c, sp("\x03t/accounts/", "\x03t/accounts/\xff"), hlc.Timestamp{WallTime: 10}, uuid.Nil},
		{c, sp(other+"\x01", ""), hlc.Timestamp{}, uuid.Nil},
		// Exact for spans: the log, not the table, answers which reads
		// lie in one.
		{c, sp(other, other+"\xff"), hlc.Timestamp{}, uuid.Nil},
		{c, sp("\x03t/accounts/\x08", "\x03t/c/"), hlc.Timestamp{WallTime: 12}, txn},
		{c, sp("\x03t/b/\x01\x01", ""), hlc.Timestamp{WallTime: 12}, txn},
		{c, sp("\x03t/c/\x01\x01", ""), hlc.Timestamp{WallTime: 13, Logical: 1}, uuid.Nil},
		{right, sp(row+"\x01", ""), hlc.Timestamp{WallTime: 10}, uuid.Nil},
		{right, sp(row, "\x03t/accounts/\x08"), hlc.Timestamp{WallTime: 10}, uuid.Nil},
		{right, sp(other, ""), hlc.Timestamp{}, uuid.Nil},
		{right, sp(other, other+"\xff"), hlc.Timestamp{}, uuid.Nil},
	} {
		if ts, txn := tc.c.getMax(tc.span); ts != tc.ts || txn != tc.txn {
			t.Errorf("getMax(%s) = %s by %s, want %s by %s", tc.span, ts, txn, tc.ts, tc.txn)
		}
	}
}

// TestReadTableNewRowAllocs counts what the table removed: recording
// reads of rows never read before (most of pgbench -S's at scale 10, half
// at scale 1) adds no entry to the cache's maps and allocates nothing
// (the log's arena and slice grow by chunks), where the exact map of row
// reads allocated each new prefix as a string and grew.
func TestReadTableNewRowAllocs(t *testing.T) {
	const n = 1000
	spans := make([]kvpb.Span, n+2) // AllocsPerRun runs the function once more
	for i := range spans {
		spans[i] = rowReadSpan(fmt.Sprintf("\x03t/accounts/%08d", i))
	}
	for _, tc := range []struct {
		reads      *ReadTable
		maxAllocs  float64
		maxEntries int
	}{
		{NewReadTable(1 << 12), 0, 0},
	} {
		c := newTSCache(hlc.Timestamp{}, 1<<16)
		c.reads = tc.reads
		i := 0
		allocs := testing.AllocsPerRun(n, func() {
			i++
			c.add(spans[i], hlc.Timestamp{WallTime: int64(i)}, uuid.Nil)
		})
		if allocs > tc.maxAllocs {
			t.Errorf("a read of a new row allocates %.2f times, want at most %.0f", allocs, tc.maxAllocs)
		}
		if l := len(c.shortRows) + len(c.rows); l > tc.maxEntries {
			t.Errorf("%d new row reads left %d entries in the cache's maps, want at most %d", n, l, tc.maxEntries)
		}
		for j := 1; j <= i; j++ {
			if ts, _ := c.getMax(sp(string(spans[j].Key)+"\x01", "")); ts.WallTime < int64(j) {
				t.Fatalf("getMax of a key of row %d = %s, below its read at %d", j, ts, j)
			}
		}
	}
}

// TestReadTableModel is TestTSCacheModel's safety half with a table of a
// few slots, so that row reads' prefixes share them: the cache never
// answers below the highest read over a span, and its entries stay
// within their bound.
func TestReadTableModel(t *testing.T) {
	keyGen := rapid.SampledFrom([]string{"a", "ab", "ab\x00", "abc", "ab\xff", "b", "b\xff", "ba", "c", "\xff"})
	txnGen := rapid.SampledFrom([]uuid.UUID{uuid.Nil, uuid.Nil, uuid.New()})
	rapid.Check(t, func(t *rapid.T) {
		maxEntries := rapid.IntRange(2, 12).Draw(t, "max")
		c := newTSCache(hlc.Timestamp{}, maxEntries)
		c.reads = NewReadTable(rapid.IntRange(1, 4).Draw(t, "slots"))
		type read struct {
			span kvpb.Span
			ts   hlc.Timestamp
		}
		var reads []read
		genSpan := func(label string) kvpb.Span {
			k := keyGen.Draw(t, label+"k")
			switch rapid.IntRange(0, 2).Draw(t, label+"kind") {
			case 0:
				return sp(k, "")
			case 1:
				return rowReadSpan(k)
			}
			e := keyGen.Draw(t, label+"e")
			if e <= k {
				return sp(k, "")
			}
			return sp(k, e)
		}
		for range rapid.IntRange(1, 40).Draw(t, "n") {
			if rapid.Bool().Draw(t, "isAdd") {
				s := genSpan("add")
				ts := hlc.Timestamp{WallTime: rapid.Int64Range(1, 8).Draw(t, "ts"), Logical: rapid.Int32Range(0, 1).Draw(t, "logical")}
				c.add(s, ts, txnGen.Draw(t, "txn"))
				reads = append(reads, read{s, ts})
			} else {
				q := genSpan("get")
				var want hlc.Timestamp
				for _, r := range reads {
					if spansOverlap(r.span, q) {
						want = want.Forward(r.ts)
					}
				}
				if got, _ := c.getMax(q); got.Less(want) {
					t.Fatalf("getMax(%s) = %s, below a served read at %s", q, got, want)
				}
			}
		}
		if n := c.len(); n > maxEntries {
			t.Fatalf("%d entries, limit %d", n, maxEntries)
		}
	})
}

// TestReadTableSkipsLengthsBelowLowWater: a lookup skips the prefix
// lengths whose table reads in this cache all lie at or below its
// low-water mark (which answers for them), so a write does not load a
// cold slot per length of reads long past. The slot here also holds a
// later read through another cache sharing the table, which a lookup
// that loaded it would answer.
func TestReadTableSkipsLengthsBelowLowWater(t *testing.T) {
	const row = "\x03t/accounts/\x07"
	table := NewReadTable(1 << 12)
	c, other := newTSCache(hlc.Timestamp{}, 100), newTSCache(hlc.Timestamp{}, 100)
	c.reads, other.reads = table, table
	c.add(rowReadSpan(row), hlc.Timestamp{WallTime: 10}, uuid.Nil)
	other.add(rowReadSpan(row), hlc.Timestamp{WallTime: 50}, uuid.Nil)
	for _, tc := range []struct {
		lowWater, want int64
	}{
		{5, 50},  // the reads of the length lie above the mark: the slot answers
		{10, 10}, // they lie at the mark: skipped
		{20, 20},
	} {
		c.raiseLowWater(hlc.Timestamp{WallTime: tc.lowWater})
		if ts, _ := c.getMax(sp(row+"\x01", "")); ts.WallTime != tc.want {
			t.Errorf("low-water mark %d: getMax = %s, want %d", tc.lowWater, ts, tc.want)
		}
	}
}

// TestImplicitRowReadPushesWriters: through the replica, a
// non-transactional read of a row (an implicit point SELECT's span) at 50
// goes to the table, and a transaction that then writes under the row at
// 40, by a point write or a span deletion, lands above 50; a write of
// another row (whose slot no read hashed to) is not moved.
func TestImplicitRowReadPushesWriters(t *testing.T) {
	const row, other = "\x03rows/\x07", "\x03rows/\x09"
	for i, tc := range []struct {
		name   string
		req    func() kvpb.Request
		pushed bool
	}{
		{"a point write under the row", func() kvpb.Request { return &kvpb.PutRequest{Key: []byte(row + "\x01"), Value: []byte("v")} }, true},
		{"the row's key", func() kvpb.Request { return &kvpb.PutRequest{Key: []byte(row), Value: []byte("v")} }, true},
		{"a deletion of the rest of the row", func() kvpb.Request {
			return &kvpb.DeleteRangeRequest{Key: []byte(row + "\x00"), EndKey: keys.PrefixEnd([]byte(row))}
		}, true},
		{"a deletion of a span holding the row", func() kvpb.Request {
			return &kvpb.DeleteRangeRequest{Key: []byte("\x03rows/"), EndKey: []byte("\x03rows/\x08")}
		}, true},
		{"another row", func() kvpb.Request { return &kvpb.PutRequest{Key: []byte(other + "\x01"), Value: []byte("v")} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			tc0 := h.r.tscache
			if tc0.reads.slot([]byte(row)) == tc0.reads.slot([]byte(other)) {
				t.Fatal("the test's rows share a slot")
			}
			if _, err := h.sendAt(wallTS(50), &kvpb.ScanRequest{Key: []byte(row), EndKey: keys.PrefixEnd([]byte(row))}); err != nil {
				t.Fatal(err)
			}
			if n := len(tc0.shortRows) + len(tc0.rows); n != 0 {
				t.Fatalf("the row read left %d entries in the cache's maps, want 0 (the table's)", n)
			}
			name := fmt.Sprintf("w%d", i)
			h.newTxn(name, wallTS(40), 0)
			ba := &kvpb.BatchRequest{}
			ba.Add(tc.req())
			br, err := h.send(context.Background(), ba, name)
			if err != nil {
				t.Fatal(err)
			}
			if got := wallTS(50).Less(br.Txn.WriteTimestamp); got != tc.pushed {
				t.Errorf("write timestamp %s after a read at 50: pushed %t, want %t", br.Txn.WriteTimestamp, got, tc.pushed)
			}
		})
	}
}
