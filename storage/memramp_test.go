package storage

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSkipMemTableRamp: with a block cache of four memtables or more (cairn
// start's default) a store's memtables after its first are full size, so
// its first megabytes of writes sit in two memtables, not in Pebble's ramp
// of doubling ones (256 KiB, 512 KiB, 1 MiB, ...), each of which every
// read seeks until the first flush: 6 MiB of writes left 5 memtables
// without skipMemTableRamp. A smaller cache, from which a full memtable's
// reservation would take every block, keeps the ramp. The test also fails
// if a Pebble upgrade moved the field skipMemTableRamp sets.
func TestSkipMemTableRamp(t *testing.T) {
	for _, c := range []struct {
		name  string
		cache int64
		most  int64 // memtables after 6 MiB of writes, at most
		least int64 // and at least
	}{
		{"cairn start's cache", rampCacheMin, 2, 1},
		{"the default 64 MiB cache", 0, 100, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			eng, err := Open("", Options{FS: vfs.NewMem(), NoSync: true, CacheSize: c.cache})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			value := make([]byte, 1000)
			for i := range 6 << 10 { // 6 MiB of values
				b := eng.NewBatch()
				if err := b.Put(MVCCKey{Key: fmt.Appendf(nil, "k%08d", i), Timestamp: hlc.Timestamp{WallTime: 1}}, value); err != nil {
					t.Fatal(err)
				}
				if err := b.CommitNoSync(); err != nil {
					t.Fatal(err)
				}
				b.Close()
			}
			m := eng.Metrics()
			if m.Flush.Count != 0 {
				t.Fatalf("%d flushes of 6 MiB of writes, want none (the count below would mean nothing)", m.Flush.Count)
			}
			if got := m.MemTable.Count; got > c.most || got < c.least {
				t.Fatalf("6 MiB of writes sit in %d memtables, want %d to %d", got, c.least, c.most)
			}
			// Open ignores the report; a Pebble without the field would
			// show above as the ramp's memtables, and here by name.
			if !skipMemTableRamp(eng.db, memTableSize) {
				t.Fatal("skipMemTableRamp found no DB.mu.mem.nextSize in this Pebble")
			}
		})
	}
}
