package mvcc

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkScanCount counts the rows of a span of single-version keys in
// SSTs (a freshly loaded table), as count(*) does at the tablets.
func BenchmarkScanCount(b *testing.B) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	const rows = 200_000
	ts := hlc.Timestamp{WallTime: 10}
	key := func(i int) []byte {
		k := []byte("/Table/104/1/")
		return binary.BigEndian.AppendUint64(k, uint64(i))
	}
	for lo := 0; lo < rows; lo += 10_000 {
		bt := eng.NewBatch()
		for i := lo; i < lo+10_000; i++ {
			if err := Put(bt, key(i), ts, []byte{0x0a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := bt.CommitNoSync(); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if err := eng.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := eng.Compact(context.Background(), []byte("/Table/"), []byte("/Table0")); err != nil {
		b.Fatal(err)
	}
	start, end := []byte("/Table/104/1/"), []byte("/Table/104/10")
	for _, locks := range []bool{false, true} {
		name := "lockstream"
		if locks {
			name = "nolocks"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				res, err := Scan(eng, start, end, hlc.Timestamp{WallTime: 20}, ScanOptions{CountTags: []byte{0x0a}, ReadOptions: ReadOptions{NoLocksInSpan: locks}})
				if err != nil {
					b.Fatal(err)
				}
				if res.Count != rows {
					b.Fatalf("counted %d, want %d", res.Count, rows)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rows, "ns/row")
		})
	}
}
