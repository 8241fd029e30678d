package mvcc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cairn-db/cairn/hlc"
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
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const rows = 3000
	ts := hlc.Timestamp{WallTime: 10}
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("/Table/104/1/"), uint64(i)) }
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
