package storage

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestEstimateDiskUsage(t *testing.T) {
	e := openMem(t)
	b := e.NewWriteOnlyBatch()
	value := []byte(strings.Repeat("v", 100))
	for _, prefix := range []string{"a", "b"} {
		for i := range 2000 {
			k := MVCCKey{Key: fmt.Appendf(nil, "%s/%05d", prefix, i), Timestamp: ts(int64(i+1), 0)}
			if err := b.Put(k, value); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if n, err := e.EstimateDiskUsage([]byte("a"), []byte("c")); err != nil || n != 0 {
		t.Fatalf("memtable-only data: usage = %d, %v; want 0 (only disk counts)", n, err)
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	usage := func(start, end string) uint64 {
		n, err := e.EstimateDiskUsage([]byte(start), []byte(end))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	all, a, none := usage("a", "c"), usage("a", "b"), usage("x", "y")
	t.Logf("usage: all=%d a=%d none=%d", all, a, none)
	if all < 2*2000*100/4 { // values compress, but not below a quarter
		t.Fatalf("usage of all data = %d, implausibly small", all)
	}
	if a == 0 || a >= all {
		t.Fatalf("usage of half the keys = %d, want in (0, %d)", a, all)
	}
	if none != 0 {
		t.Fatalf("usage of an empty span = %d", none)
	}
	if m := e.Metrics(); m.DiskSpaceUsage() == 0 {
		t.Fatal("metrics report no disk space used after a flush")
	}
}

// TestReadLatencyProfile checks that an engine on simfs pays the profile's
// latency on reads that miss the block cache, as the slow-disk demo needs.
func TestReadLatencyProfile(t *testing.T) {
	var mu sync.Mutex
	var slept []time.Duration
	slow := simfs.Profile{Name: "slow-reads", ReadLatency: 10 * time.Millisecond}
	fs := simfs.New(vfs.NewMem(), simfs.Options{Profile: slow, Sleep: func(d time.Duration) {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
	}})
	e, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	putFlushed(t, e, []byte("v"), MVCCKey{Key: []byte("k"), Timestamp: ts(1, 0)})
	before := fs.Stats().Reads
	if _, ok, err := e.Get(MVCCKey{Key: []byte("k"), Timestamp: ts(1, 0)}); err != nil || !ok {
		t.Fatalf("get: ok=%v err=%v", ok, err)
	}
	if fs.Stats().Reads == before {
		t.Fatal("a Get of a flushed key read nothing from the filesystem")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if int64(len(slept)) != fs.Stats().Reads {
		t.Fatalf("%d reads but %d latency waits", fs.Stats().Reads, len(slept))
	}
	for _, d := range slept {
		if d != slow.ReadLatency {
			t.Fatalf("waited %s, want %s", d, slow.ReadLatency)
		}
	}
}
