package storage

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/storage/simfs"
)

// raKey is the i-th key of the read-ahead tests' table.
func raKey(i int) []byte { return fmt.Appendf(nil, "row%07d", i) }

// raValue is its value: 100 bytes that differ per key, so a block served
// from the wrong place of a window shows.
func raValue(i int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "%09d|", i), 10)
}

// loadRA writes rows keys into a store in dir on mem, compacted into
// sorted files, and closes it.
func loadRA(t *testing.T, mem vfs.FS, rows int) {
	t.Helper()
	e, err := Open("db", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < rows; lo += 10000 {
		b := e.NewWriteOnlyBatch()
		for i := lo; i < min(lo+10000, rows); i++ {
			if err := b.Put(MVCCKey{Key: raKey(i), Timestamp: ts(1, 0)}, raValue(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.Compact(t.Context(), []byte{0}, []byte{0xff}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// scanRA scans every key of e in order and checks each value, in pieces
// iterators, each over its share of the keys: the pages of a scan, or
// the tablets of a table, each read by its own iterator.
func scanRA(e *Engine, rows, pieces int) error {
	i := 0
	for p := range pieces {
		lo, hi := raKey(p*rows/pieces), raKey((p+1)*rows/pieces)
		if p == 0 {
			lo = []byte("row")
		}
		if p == pieces-1 {
			hi = []byte("rox")
		}
		it, err := e.NewIter(IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.UnsafeValue()
			if err != nil {
				it.Close()
				return err
			}
			if !bytes.Equal(it.UnsafeKey().Key, raKey(i)) || !bytes.Equal(v, raValue(i)) {
				it.Close()
				return fmt.Errorf("row %d: read %q = %q", i, it.UnsafeKey().Key, v)
			}
			i++
		}
		if err := it.Err(); err != nil {
			it.Close()
			return err
		}
		it.Close()
	}
	if i != rows {
		return fmt.Errorf("scanned %d rows, want %d", i, rows)
	}
	return nil
}

// TestReadAheadScan scans a table of about 13 MB on a disk playing an
// HDD, its block cache cold and smaller than the table, with Pebble's
// block-at-a-time reads and with read-ahead sized for each profile, and
// counts the disk's reads and seeks (simfs; nothing is timed). Read in
// order, the table costs one read per block without read-ahead and one
// per window with it, and seeks about once per file either way.
func TestReadAheadScan(t *testing.T) {
	const rows = 100000
	mem := vfs.NewMem()
	loadRA(t, mem, rows)
	type result struct {
		disk simfs.Stats
		ra   ReadAheadStats
	}
	scan := func(readAhead int64, pieces int) result {
		fs := simfs.New(mem, simfs.Options{Profile: simfs.HDD, Sleep: func(time.Duration) {}})
		e, err := Open("db", Options{FS: fs, CacheSize: 1 << 20, ReadAhead: readAhead})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		// Pebble loads its tables' statistics in the background after
		// Open, reading their property blocks: those reads are not the
		// scan's, and under the race detector on a loaded machine they
		// overlapped it and added seeks. Count from when they are done.
		for !e.Metrics().Table.InitialStatsCollectionComplete {
			runtime.Gosched()
		}
		before := fs.Stats()
		if err := scanRA(e, rows, pieces); err != nil {
			t.Fatal(err)
		}
		after := fs.Stats()
		return result{disk: simfs.Stats{Reads: after.Reads - before.Reads, Seeks: after.Seeks - before.Seeks,
			ReadBytes: after.ReadBytes - before.ReadBytes}, ra: e.ReadAheadStats()}
	}
	off := scan(0, 1)
	files := 0
	{
		ls, err := mem.List("db")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ls {
			if len(n) > 4 && n[len(n)-4:] == ".sst" {
				files++
			}
		}
	}
	t.Logf("read-ahead off: %+v (%d files)", off.disk, files)
	if off.disk.Reads < 1000 {
		t.Fatalf("without read-ahead the scan made %d reads: the table is not on disk as the test thinks", off.disk.Reads)
	}
	// Ten iterators one after the other (a scan's pages, a table's
	// tablets) each start with a seek to their first key, into the
	// window the previous one's reads had read ahead.
	for _, pieces := range []int{1, 10} {
		for _, profile := range []string{ProfileSSD, ProfileHDD, ProfileObjectStore} {
			t.Run(fmt.Sprintf("%s/pieces=%d", profile, pieces), func(t *testing.T) {
				max := ReadAheadFor(profile)
				on := scan(max, pieces)
				t.Logf("read-ahead %d KiB: %+v, %+v", max>>10, on.disk, on.ra)
				// Windows grow from 64 KiB to max: at most log2(max/64K)+1
				// small ones per file, the rest full, plus a few direct
				// reads per file (footer, index, the run's first blocks).
				windows := off.disk.ReadBytes/max + int64(files)*(7+24) + int64(4*pieces)
				if on.disk.Reads > windows {
					t.Fatalf("with %d KiB read-ahead the scan made %d reads, want at most %d (%d without)", max>>10, on.disk.Reads, windows, off.disk.Reads)
				}
				if on.ra.Windows == 0 || on.ra.Served < off.disk.Reads/2 {
					t.Fatalf("read-ahead served %d reads in %d windows, want most of the %d blocks", on.ra.Served, on.ra.Windows, off.disk.Reads)
				}
				if on.disk.Seeks > off.disk.Seeks+int64(files+2*pieces) {
					t.Fatalf("read-ahead seeked %d times, %d without", on.disk.Seeks, off.disk.Seeks)
				}
			})
		}
	}
}

// TestReadAheadConcurrent runs scans and point reads of the same files at
// once through read-ahead (under the race detector in make testrace) and
// checks every value read; a budget of one window's files makes them
// take windows from each other.
func TestReadAheadConcurrent(t *testing.T) {
	const rows = 30000
	mem := vfs.NewMem()
	loadRA(t, mem, rows)
	e, err := Open("db", Options{FS: mem, CacheSize: 256 << 10, ReadAhead: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.ra.budget = 2 * e.ra.max
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			if err := scanRA(e, rows, 1+g); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			for i := g; i < rows; i += 997 {
				v, ok, err := e.Get(MVCCKey{Key: raKey(i), Timestamp: ts(1, 0)})
				if err != nil || !ok || !bytes.Equal(v, raValue(i)) {
					t.Errorf("get %d: %q ok=%v err=%v", i, v, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if s := e.ReadAheadStats(); s.Windows == 0 {
		t.Fatalf("no window read: %+v", s)
	}
}
