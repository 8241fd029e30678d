package mvcc

import (
	"context"
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkCountWalk puts the count walk (a Scan with CountTags, as
// count(*) at the tablets runs it) beside raw Pebble iterations over the
// same engine keys, in ns per row: 1M single-version rows of bench/pgbench's
// accounts shape (a ~100-byte value) compacted into SSTs, as a bulk load
// leaves them. The raw walks are the floor the count walk is measured
// against (bench/README.md, "count(*)'s per-row walk"):
//
//	pebble-next:      First/Next, the key looked at
//	pebble-next-value: and the value's first byte read
//	pebble-nextprefix: First/NextPrefix, the value's first byte read
//	count:            mvcc.Scan with CountTags and NoLocksInSpan (the tablet's call)
//	count-lockstream: the same with the lock keyspace merged in
func BenchmarkCountWalk(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int64
	}{{"cache=64MiB", 0}, {"cache=256MiB", 256 << 20}} {
		b.Run(c.name, func(b *testing.B) { benchCountWalk(b, c.cache) })
	}
}

func benchCountWalk(b *testing.B, cache int64) {
	const rows = 1_000_000
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), CacheSize: cache})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	ts := hlc.Timestamp{WallTime: 10}
	key := func(i int) []byte {
		k := []byte("/Table/104/1/")
		return append(binary.BigEndian.AppendUint64(k, uint64(i)), 0)
	}
	// bench/pgbench's bulk rows: (id int8, a int8, b text(24), c float8).
	val := make([]byte, 48)
	val[0] = 0x0a
	for lo := 0; lo < rows; lo += 50_000 {
		bt := eng.NewBatch()
		for i := lo; i < lo+50_000; i++ {
			if err := PutOpts(bt, key(i), ts, val, nil, WriteOptions{NoLock: true}); err != nil {
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
	lo := storage.MVCCKey{Key: start}.Encode(nil)
	hi := storage.MVCCKey{Key: end}.Encode(nil)
	raw := func(b *testing.B, step func(*pebble.Iterator) bool, value bool) {
		cpu := processCPU()
		for b.Loop() {
			it, err := eng.DB().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
			if err != nil {
				b.Fatal(err)
			}
			n, tagged := 0, 0
			for ok := it.First(); ok; ok = step(it) {
				if len(it.Key()) > 0 {
					n++
				}
				if value {
					if v, err := it.ValueAndErr(); err != nil {
						b.Fatal(err)
					} else if len(v) > 1 && v[1] == 0x0a {
						tagged++
					}
				}
			}
			if err := it.Close(); err != nil {
				b.Fatal(err)
			}
			if n != rows || (value && tagged != rows) {
				b.Fatalf("walked %d keys, %d tagged, want %d", n, tagged, rows)
			}
		}
		perRow(b, cpu, rows)
	}
	b.Run("pebble-next", func(b *testing.B) { raw(b, (*pebble.Iterator).Next, false) })
	b.Run("pebble-next-value", func(b *testing.B) { raw(b, (*pebble.Iterator).Next, true) })
	b.Run("pebble-nextprefix", func(b *testing.B) { raw(b, (*pebble.Iterator).NextPrefix, true) })
	for _, c := range []struct {
		name    string
		noLocks bool
	}{{"count", true}, {"count-lockstream", false}} {
		b.Run(c.name, func(b *testing.B) {
			cpu := processCPU()
			for b.Loop() {
				res, err := Scan(eng, start, end, hlc.Timestamp{WallTime: 20}, ScanOptions{CountTags: []byte{0x0a}, ReadOptions: ReadOptions{NoLocksInSpan: c.noLocks}})
				if err != nil {
					b.Fatal(err)
				}
				if res.Count != rows {
					b.Fatalf("counted %d, want %d", res.Count, rows)
				}
			}
			perRow(b, cpu, rows)
		})
	}
}

// perRow reports the wall time and the process's CPU time (getrusage,
// which the machine's load moves much less) per row walked since cpu.
func perRow(b *testing.B, cpu time.Duration, rows int) {
	n := float64(b.N) * float64(rows)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/row")
	b.ReportMetric(float64(processCPU()-cpu)/n, "cpu-ns/row")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
