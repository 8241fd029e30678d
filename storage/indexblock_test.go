package storage

import (
	"context"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCompactedSSTsHaveOneIndexBlock checks indexBlockSize: the SSTs a
// compaction writes, each of hundreds of data blocks, have one index
// block, not a two-level index, and a point read of a row (First on an
// iterator bounded to it, as mvcc's scan of a row reads) looks up two
// blocks in the block cache per file it seeks (the index block and the
// data block), not three (the top-level index, an index block and the
// data block).
func TestCompactedSSTsHaveOneIndexBlock(t *testing.T) {
	const rows = 100000
	e, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Values that do not compress, so that the rows fill SSTs of Pebble's
	// target size (several files, each a file a read opens).
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < rows; i += 100 {
		b := e.NewWriteOnlyBatch()
		for j := i; j < i+100; j++ {
			value := make([]byte, 100)
			rng.Read(value)
			if err := b.Put(MVCCKey{Key: rowKey(j), Timestamp: ts(1, 0)}, value); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.CommitNoSync(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.Compact(context.Background(), []byte("/"), []byte("/u")); err != nil {
		t.Fatal(err)
	}
	levels, err := e.DB().SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	files, large := 0, 0
	for level, tables := range levels {
		for _, sst := range tables {
			files++
			p := sst.Properties
			// Pebble's default index block (the 4 KiB data block size)
			// holds about 150 data blocks' entries.
			if p.NumDataBlocks >= 300 {
				large++
			}
			if p.IndexPartitions != 0 {
				t.Errorf("L%d %s: %d data blocks under a two-level index of %d partitions, want one index block", level, sst.FileNum, p.NumDataBlocks, p.IndexPartitions)
			}
		}
	}
	if files < 2 || large < files-1 {
		t.Fatalf("%d SSTs after the flush and the compaction, %d of 300 data blocks or more: want several, all but the last that large", files, large)
	}

	const reads = 2000
	before := e.Metrics().BlockCache
	for i := 0; i < reads; i++ {
		k := rowKey(rng.Intn(rows))
		it, err := e.NewIter(IterOptions{LowerBound: k, UpperBound: append(k[:len(k):len(k)], 0)})
		if err != nil {
			t.Fatal(err)
		}
		if !it.First() {
			t.Fatalf("row %q not found: %v", k, it.Err())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	after := e.Metrics().BlockCache
	lookups := (after.Hits + after.Misses) - (before.Hits + before.Misses)
	// Each read seeks one file (the rows' level holds them once): two
	// lookups, less when the pooled iterator it reuses stood in the same
	// file's block; a two-level index adds its top level's per file
	// opened.
	if perRead := float64(lookups) / reads; perRead > 2.05 {
		t.Errorf("%.2f block cache lookups per point read (%d in %d reads), want at most 2 (index and data block)", perRead, lookups, reads)
	}
	t.Logf("%d files; %.2f block cache lookups per point read", files, float64(lookups)/reads)
}
