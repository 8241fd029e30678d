package storage

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// loadStack writes rows keys in batches of 100 into a new engine, as a
// bulk load does, and returns the engine holding the memtables Pebble's
// ramp left.
func loadStack(tb testing.TB, rows int) *Engine {
	tb.Helper()
	e, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := e.Close(); err != nil {
			tb.Error(err)
		}
	})
	value := make([]byte, 100)
	for i := 0; i < rows; i += 100 {
		b := e.NewWriteOnlyBatch()
		for j := i; j < i+100 && j < rows; j++ {
			if err := b.Put(MVCCKey{Key: rowKey(j)}, value); err != nil {
				tb.Fatal(err)
			}
		}
		if err := b.CommitNoSync(); err != nil {
			tb.Fatal(err)
		}
		b.Close()
	}
	return e
}

func rowKey(i int) []byte { return []byte(fmt.Sprintf("/t/accounts/%08d", i)) }

// BenchmarkPointSeekMemtables reads one row of a bulk load's rows in two
// engines loaded alike: one holds the stack of memtables Pebble's ramp
// leaves ("stack": Pebble ramps a new DB's memtables from 256 KiB up to
// Options.MemTableSize and flushes immutable ones only once they hold
// half of it together, so after a bulk load on a fresh node they stay),
// the other was flushed after the load ("flushed", the rows in SSTs
// under one empty memtable). Each reads by a prefix seek
// (bloom filters apply; mvcc.Get) and, as mvcc's scan of a row does, by
// First on an iterator bounded to the row ("bounded"); the two engines
// alternate, so neither runs only first. The rows read are 1,024 drawn
// once and read again and again ("keys=1024", whose blocks and skiplist
// nodes stay in the CPU's caches), or a row drawn anew from all of them
// per read ("keys=all"), as pgbench -S draws its rows.
func BenchmarkPointSeekMemtables(b *testing.B) {
	const rows = 200000
	stack := loadStack(b, rows)
	flushed := loadStack(b, rows)
	if err := flushed.Flush(); err != nil {
		b.Fatal(err)
	}
	read := func(e *Engine, prefix bool, nkeys int) func(b *testing.B) {
		return func(b *testing.B) {
			memtables := e.Metrics().MemTable.Count
			rng := rand.New(rand.NewSource(1))
			keys := make([][]byte, nkeys)
			for i := range keys {
				keys[i] = rowKey(rng.Intn(rows))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := keys[i%len(keys)]
				var it *Iterator
				var err error
				var found bool
				if prefix {
					it, err = e.NewIter(IterOptions{Prefix: true, LowerBound: k})
					if err == nil {
						found = it.SeekGE(MVCCKey{Key: k})
					}
				} else {
					it, err = e.NewIter(IterOptions{LowerBound: k, UpperBound: append(k[:len(k):len(k)], 0)})
					if err == nil {
						found = it.First()
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				if !found {
					b.Fatalf("row %q not found", k)
				}
				it.Close()
			}
			b.ReportMetric(float64(memtables), "memtables")
		}
	}
	for _, nkeys := range []struct {
		name string
		n    int
	}{{"keys=1024", 1024}, {"keys=all", rows}} {
		for _, mode := range []struct {
			name   string
			prefix bool
		}{{"bounded", false}, {"prefix", true}} {
			b.Run(nkeys.name+"/stack/"+mode.name, read(stack, mode.prefix, nkeys.n))
			b.Run(nkeys.name+"/flushed/"+mode.name, read(flushed, mode.prefix, nkeys.n))
		}
	}
}
