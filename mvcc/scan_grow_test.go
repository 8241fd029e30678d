package mvcc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestScanRowsRoom: a scan's rows slice has room for what the scan can
// return without append's 1.25× steps (growRows): a page of a long scan
// (MaxKeys 2,000, an index backfill's) is allocated once past its first
// rowsGrowFrom rows, with room for exactly its MaxKeys; a short read
// keeps append's small capacities; an unlimited scan at most doubles.
// Every scan still returns its rows in order.
func TestScanRowsRoom(t *testing.T) {
	const rows = 3000
	eng, _, key := engineWithRows(t, rows)
	for _, tc := range []struct {
		maxKeys        int64
		want           int // rows returned
		minCap, maxCap int
	}{
		{maxKeys: 1, want: 1, minCap: 1, maxCap: 8},
		{maxKeys: 10, want: 10, minCap: 10, maxCap: 32},
		{maxKeys: 64, want: 64, minCap: 64, maxCap: 128},
		{maxKeys: 2000, want: 2000, minCap: 2000, maxCap: 2000},
		{maxKeys: 100000, want: rows, minCap: rows, maxCap: 128 + rowsGrowTo},
		{maxKeys: 0, want: rows, minCap: rows, maxCap: 2 * rows},
	} {
		res, err := Scan(eng, []byte("/Table/104/1/"), []byte("/Table/104/10"), hlc.Timestamp{WallTime: 20}, ScanOptions{MaxKeys: tc.maxKeys})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) != tc.want {
			t.Fatalf("MaxKeys %d: %d rows, want %d", tc.maxKeys, len(res.Rows), tc.want)
		}
		for i, kv := range res.Rows {
			if !bytes.Equal(kv.Key, key(i)) || !bytes.Equal(kv.Value, []byte{0x0a, byte(i)}) {
				t.Fatalf("MaxKeys %d: row %d is %q=%x, want %q", tc.maxKeys, i, kv.Key, kv.Value, key(i))
			}
		}
		if c := cap(res.Rows); c < tc.minCap || c > tc.maxCap {
			t.Fatalf("MaxKeys %d: rows' capacity %d, want %d to %d", tc.maxKeys, c, tc.minCap, tc.maxCap)
		}
	}
}

// TestScanCallerRows: ScanOptions.Rows takes the rows while they fit its
// capacity, whatever its length; more rows than that go to a slice of the
// scan's own, all of them in order, and the caller's rows past the first
// are left as they were. A one-row buffer makes a point read's scan
// allocate only its arena.
func TestScanCallerRows(t *testing.T) {
	const rows = 10
	eng, _, key := engineWithRows(t, rows)
	for _, tc := range []struct {
		name    string
		room    int // the caller's capacity
		len     int // and length
		maxKeys int64
		want    int
		inRoom  bool // the rows returned are the caller's
	}{
		{"one row, room for one", 1, 0, 1, 1, true},
		{"one row, room for one, length set", 1, 1, 1, 1, true},
		{"no room", 0, 0, 1, 1, false},
		{"three rows, room for one", 1, 0, 3, 3, false},
		{"all rows, room for all", rows, 0, 0, rows, true},
		{"all rows, room for more", 2 * rows, 0, 0, rows, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf []kvpb.KeyValue
			if tc.room > 0 {
				buf = make([]kvpb.KeyValue, tc.len, tc.room)
			}
			res, err := Scan(eng, []byte("/Table/104/1/"), []byte("/Table/104/10"), hlc.Timestamp{WallTime: 20}, ScanOptions{MaxKeys: tc.maxKeys, Rows: buf})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != tc.want {
				t.Fatalf("%d rows, want %d", len(res.Rows), tc.want)
			}
			for i, kv := range res.Rows {
				if !bytes.Equal(kv.Key, key(i)) || !bytes.Equal(kv.Value, []byte{0x0a, byte(i)}) {
					t.Fatalf("row %d is %q=%x, want %q", i, kv.Key, kv.Value, key(i))
				}
			}
			if inRoom := cap(buf) > 0 && &res.Rows[0] == &buf[:1][0]; inRoom != tc.inRoom {
				t.Fatalf("rows in the caller's room: %v, want %v", inRoom, tc.inRoom)
			}
		})
	}
	// A point read's scan with room for its row allocates one object
	// fewer than without.
	read := func(rows []kvpb.KeyValue) float64 {
		return testing.AllocsPerRun(100, func() {
			if _, err := Scan(eng, key(3), []byte("/Table/104/10"), hlc.Timestamp{WallTime: 20}, ScanOptions{ReadOptions: ReadOptions{NoLocksInSpan: true}, MaxKeys: 1, Rows: rows}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if without, with := read(nil), read(make([]kvpb.KeyValue, 0, 1)); with != without-1 && !raceEnabled {
		t.Fatalf("a one-row scan allocates %.0f objects with room for its row, %.0f without; want one fewer", with, without)
	}
}

// engineWithRows returns an in-memory engine holding rows one-version
// rows at ts, the i-th at key(i), in key order; the test's cleanup
// closes it.
func engineWithRows(t *testing.T, rows int) (eng *storage.Engine, ts hlc.Timestamp, key func(int) []byte) {
	t.Helper()
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ts = hlc.Timestamp{WallTime: 10}
	key = func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("/Table/104/1/"), uint64(i)) }
	bt := eng.NewBatch()
	for i := range rows {
		if err := Put(bt, key(i), ts, []byte{0x0a, byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := bt.CommitNoSync(); err != nil {
		t.Fatal(err)
	}
	bt.Close()
	return eng, ts, key
}
