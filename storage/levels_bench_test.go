package storage

import (
	"context"
	"math/rand"
	"testing"
)

// BenchmarkPointSeekCompacted reads one row drawn anew per read, by First
// on an iterator bounded to the row as mvcc's scan of a row does, from
// an engine whose rows a compaction put in SSTs of the bottom level.
func BenchmarkPointSeekCompacted(b *testing.B) {
	const rows = 400000
	e := loadStackIn(b, rows, Options{})
	if err := e.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := e.Compact(context.Background(), []byte("/"), []byte("/u")); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = rowKey(rng.Intn(rows))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		it, err := e.NewIter(IterOptions{LowerBound: k, UpperBound: append(k[:len(k):len(k)], 0)})
		if err != nil {
			b.Fatal(err)
		}
		if !it.First() {
			b.Fatalf("row %q not found", k)
		}
		it.Close()
	}
	b.StopTimer()
	m := e.Metrics()
	b.Logf("cache %+v hits %d misses %d", m.BlockCache.Size, m.BlockCache.Hits, m.BlockCache.Misses)
}

// loadStackIn is loadStack into an engine on disk (in a test directory)
// opened with opts: Pebble caches no blocks of an in-memory filesystem's
// files, and a read of a compacted store is a read of cached blocks.
func loadStackIn(tb testing.TB, rows int, opts Options) *Engine {
	tb.Helper()
	e, err := Open(tb.TempDir(), opts)
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
