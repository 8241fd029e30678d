package storage

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestIdleFlushDue is the watcher's rule (invariant 9): flush only a
// stack of memtables, only when no flush runs and the WAL was quiet.
func TestIdleFlushDue(t *testing.T) {
	for _, tc := range []struct {
		name                string
		memtables, flushing int64
		walIn               uint64
		want                bool
	}{
		{"a quiet stack", 6, 0, 0, true},
		{"a stack under a trickle of writes", 3, 0, idleFlushQuiet - 1, true},
		{"a stack under a load that writes", 3, 0, idleFlushQuiet, false},
		{"a stack being flushed", 2, 1, 0, false},
		{"the mutable memtable alone", 1, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := idleFlushDue(tc.memtables, tc.flushing, tc.walIn); got != tc.want {
				t.Errorf("idleFlushDue(%d, %d, %d) = %v, want %v", tc.memtables, tc.flushing, tc.walIn, got, tc.want)
			}
		})
	}
}

// loadStack writes rows keys in batches of 100 into a new engine, as a
// bulk load does, and returns the engine holding the memtables Pebble's
// ramp left.
func loadStack(tb testing.TB, opts Options, rows int) *Engine {
	tb.Helper()
	opts.FS = vfs.NewMem()
	e, err := Open("db", opts)
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

// TestIdleFlush: after a bulk load the engine holds a stack of
// memtables; the watcher's first look sees the load's WAL and leaves
// them, the next (nothing written since) flushes them all, and the rows
// are read from what the flush wrote.
func TestIdleFlush(t *testing.T) {
	const rows = 30000
	e := loadStack(t, Options{IdleFlush: -1}, rows)
	if n := e.Metrics().MemTable.Count; n < 3 {
		t.Fatalf("after the load the engine holds %d memtables, want a stack of 3 or more", n)
	}
	if done := e.flushIfIdle(); done != nil {
		t.Fatal("the look right after the load flushed, want it left to Pebble while the WAL grows")
	}
	done := e.flushIfIdle()
	if done == nil {
		t.Fatal("a quiet engine's stack was not flushed")
	}
	<-done
	if n := e.Metrics().MemTable.Count; n != 1 {
		t.Fatalf("after the idle flush the engine holds %d memtables, want 1", n)
	}
	if done := e.flushIfIdle(); done != nil {
		t.Fatal("a quiet engine with one memtable was flushed again")
	}
	for _, i := range []int{0, rows / 2, rows - 1} {
		if _, ok := readKey(t, e, string(rowKey(i))); !ok {
			t.Errorf("row %d not found after the flush", i)
		}
	}
}

// BenchmarkPointSeekMemtables reads one row of a bulk load's rows in two
// engines loaded alike: one holds the stack of memtables Pebble's ramp
// leaves ("stack"), the other was flushed after the load ("flushed", the
// rows in SSTs under one empty memtable). Each reads by a prefix seek
// (bloom filters apply; mvcc.Get) and, as mvcc's scan of a row does, by
// First on an iterator bounded to the row ("bounded"); the two engines
// alternate, so neither runs only first.
func BenchmarkPointSeekMemtables(b *testing.B) {
	const rows = 200000
	stack := loadStack(b, Options{IdleFlush: -1}, rows)
	flushed := loadStack(b, Options{IdleFlush: -1}, rows)
	if err := flushed.Flush(); err != nil {
		b.Fatal(err)
	}
	read := func(e *Engine, prefix bool) func(b *testing.B) {
		return func(b *testing.B) {
			memtables := e.Metrics().MemTable.Count
			rng := rand.New(rand.NewSource(1))
			keys := make([][]byte, 1024)
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
	for _, mode := range []struct {
		name   string
		prefix bool
	}{{"bounded", false}, {"prefix", true}} {
		b.Run("stack/"+mode.name, read(stack, mode.prefix))
		b.Run("flushed/"+mode.name, read(flushed, mode.prefix))
	}
}
