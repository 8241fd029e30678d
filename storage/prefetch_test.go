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

// loadFiles ingests rows keys into a store in dir "db" on mem as SSTs of
// per rows each, as a bulk load does, so that a scan crosses rows/per
// files of the bottom level, and closes it.
func loadFiles(t *testing.T, mem vfs.FS, rows, per int) {
	t.Helper()
	e, err := Open("db", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < rows; lo += per {
		b := NewSSTBuilder()
		for i := lo; i < min(lo+per, rows); i++ {
			if err := b.Put(MVCCKey{Key: raKey(i), Timestamp: ts(1, 0)}, raValue(i)); err != nil {
				t.Fatal(err)
			}
		}
		data, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if err := e.IngestBytes(t.Context(), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// scanPages reads the keys [from, rows) in order, checking each value,
// as a paged scan does: each page a new iterator from where the last
// stopped to the same end, closed after at most page keys (0: one
// iterator to the end). settle, when set, waits until the reader of a
// new page's plan has read all it will.
func scanPages(e *Engine, from, rows, page int, scan, settle bool) error {
	i := from
	lo, hi := raKey(from), []byte("rox")
	for {
		it, err := e.NewIter(IterOptions{LowerBound: lo, UpperBound: hi, Scan: scan})
		if err != nil {
			return err
		}
		if settle && it.plan != nil {
			it.plan.wg.Wait()
		}
		n := 0
		ok := it.First()
		for ; ok && (page == 0 || n < page); ok = it.Next() {
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
			n++
		}
		if err := it.Err(); err != nil {
			it.Close()
			return err
		}
		if ok {
			lo = bytes.Clone(it.UnsafeKey().Key)
		}
		it.Close()
		if !ok {
			break
		}
	}
	if i != rows {
		return fmt.Errorf("scanned up to row %d, want %d", i, rows)
	}
	return nil
}

// scanTablets reads the keys in order as a scan the router cut at
// cuts (row numbers) does: each part an iterator of its own, read to its
// end; readsOn tells each where the whole scan ends (ScanEnd). With
// settle each new plan's reader is let finish first, as scanPages's.
func scanTablets(e *Engine, rows int, cuts []int, readsOn, settle bool) error {
	i := 0
	for p := 0; p+1 < len(cuts); p++ {
		lo, hi := raKey(cuts[p]), raKey(cuts[p+1])
		if p+1 == len(cuts)-1 {
			hi = []byte("rox")
		}
		o := IterOptions{LowerBound: lo, UpperBound: hi, Scan: true}
		if readsOn {
			o.ScanEnd = []byte("rox")
		}
		it, err := e.NewIter(o)
		if err != nil {
			return err
		}
		if settle && it.plan != nil {
			it.plan.wg.Wait()
		}
		for ok := it.First(); ok; ok = it.Next() {
			if !bytes.Equal(it.UnsafeKey().Key, raKey(i)) {
				it.Close()
				return fmt.Errorf("row %d: read %q", i, it.UnsafeKey().Key)
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

// TestScanPrefetch scans a table of eight files on a disk playing an HDD
// (counters, not timings), its block cache cold and smaller than the
// table: by read-ahead runs alone, each file costs several seeks (its
// index at the end, its data from the start, the two read ahead in
// turns); a scan that promises to read its whole span (IterOptions.Scan)
// reads the files wholly inside it front to back in key order, one seek
// each, and a paged scan keeps one plan across its pages (prefetch.go,
// invariants 1 and 4).
func TestScanPrefetch(t *testing.T) {
	const rows, per = 80000, 10000
	mem := vfs.NewMem()
	loadFiles(t, mem, rows, per)
	type result struct {
		disk  simfs.Stats
		files int
		plans int // left after the scan
		ra    ReadAheadStats
	}
	run := func(t *testing.T, f func(e *Engine) error) result {
		t.Helper()
		fs := simfs.New(mem, simfs.Options{Profile: simfs.HDD, Sleep: func(time.Duration) {}})
		e, err := Open("db", Options{FS: fs, CacheSize: 1 << 20, ReadAhead: ReadAheadFor(ProfileHDD)})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		// Pebble opens every file as it starts, to collect table
		// stats, in the background: those reads are not the scan's.
		for m := e.DB().Metrics(); !m.Table.InitialStatsCollectionComplete || m.Table.PendingStatsCollectionCount > 0; m = e.DB().Metrics() {
			runtime.Gosched()
		}
		levels, err := e.DB().SSTables()
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, l := range levels {
			files += len(l)
		}
		before := fs.Stats()
		if err := f(e); err != nil {
			t.Fatal(err)
		}
		after := fs.Stats()
		e.ra.mu.Lock()
		plans := len(e.ra.plans)
		e.ra.mu.Unlock()
		return result{disk: simfs.Stats{Reads: after.Reads - before.Reads, Seeks: after.Seeks - before.Seeks,
			ReadBytes: after.ReadBytes - before.ReadBytes}, files: files, plans: plans, ra: e.ReadAheadStats()}
	}
	runs := run(t, func(e *Engine) error { return scanPages(e, 0, rows, 0, false, false) })
	t.Logf("by runs: %+v", runs)
	if runs.files < rows/per {
		t.Fatalf("%d files, want at least %d: the table is not laid out as the test thinks", runs.files, rows/per)
	}
	for _, page := range []int{0, 5000} {
		t.Run(fmt.Sprintf("page=%d", page), func(t *testing.T) {
			plan := run(t, func(e *Engine) error { return scanPages(e, 0, rows, page, true, true) })
			t.Logf("planned: %+v", plan)
			// One seek per file the plan reads: the scan reads nothing
			// else from the disk. (settle lets the reader finish first,
			// so that the count does not depend on which goroutine runs
			// first; otherwise the first file's index and first blocks
			// are read before its first window arrives.)
			if plan.disk.Seeks > int64(plan.files) {
				t.Errorf("planned scan seeked %d times for %d files (by runs: %d)", plan.disk.Seeks, plan.files, runs.disk.Seeks)
			}
			if plan.disk.Seeks*2 > runs.disk.Seeks {
				t.Errorf("planned scan seeked %d times, by runs %d: want at most half", plan.disk.Seeks, runs.disk.Seeks)
			}
			// Every file read once: the pages share the plan, none
			// reads the table again.
			if plan.disk.ReadBytes > runs.disk.ReadBytes*5/4 {
				t.Errorf("planned scan read %d bytes, by runs %d", plan.disk.ReadBytes, runs.disk.ReadBytes)
			}
			if plan.ra.Served < runs.disk.Reads {
				t.Errorf("the plan served %d reads, fewer than the scan made by runs (%d)", plan.ra.Served, runs.disk.Reads)
			}
			if plan.plans != 0 {
				t.Errorf("%d plans left after the scan reached its end", plan.plans)
			}
		})
	}
	// A scan over three tablets cut inside files, each tablet's part an
	// iterator of its own, as the router sends them. Told where the scan
	// goes on to (ScanEnd), the first tablet's plan reads every file to
	// the table's end, the cut ones included, and the next tablets take
	// it over: the next tablet's files are read while the current one's
	// are consumed. Without it each tablet plans only the files wholly
	// inside its part.
	tablets := func(readsOn bool) result {
		return run(t, func(e *Engine) error { return scanTablets(e, rows, []int{0, 25000, 55000, rows}, readsOn, true) })
	}
	cut, on := tablets(false), tablets(true)
	t.Logf("tablets, each planned alone: %+v", cut)
	t.Logf("tablets, planned to the scan's end: %+v", on)
	if on.disk.Seeks > int64(on.files) {
		t.Errorf("a scan over three tablets planned to its end seeked %d times for %d files", on.disk.Seeks, on.files)
	}
	if on.disk.Seeks >= cut.disk.Seeks {
		t.Errorf("planned to the scan's end: %d seeks; each tablet alone: %d", on.disk.Seeks, cut.disk.Seeks)
	}
	if on.plans != 0 {
		t.Errorf("%d plans left after the last tablet reached the scan's end", on.plans)
	}
	if on.ra.Plans != 1 || on.ra.TakenOver != 2 || cut.ra.Plans != 3 || cut.ra.TakenOver != 0 {
		t.Errorf("plans made and taken over: %d and %d told the scan's end, %d and %d alone; want 1 and 2, 3 and 0",
			on.ra.Plans, on.ra.TakenOver, cut.ra.Plans, cut.ra.TakenOver)
	}

	// A short span inside one file: no file lies wholly in it, so no
	// plan reads one (invariant 1).
	short := run(t, func(e *Engine) error {
		it, err := e.NewIter(IterOptions{LowerBound: raKey(per + 10), UpperBound: raKey(per + 20), Scan: true})
		if err != nil {
			return err
		}
		defer it.Close()
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			n++
		}
		if n != 10 {
			return fmt.Errorf("read %d keys, want 10", n)
		}
		return it.Err()
	})
	t.Logf("short span: %+v", short)
	if short.disk.ReadBytes > runs.disk.ReadBytes/int64(runs.files) {
		t.Errorf("a 10-key scan read %d bytes, more than a file (%d)", short.disk.ReadBytes, runs.disk.ReadBytes/int64(runs.files))
	}
	// A scan closed before its end parks its plan for its next page.
	parked := run(t, func(e *Engine) error {
		it, err := e.NewIter(IterOptions{LowerBound: raKey(0), UpperBound: []byte("rox"), Scan: true})
		if err != nil {
			return err
		}
		it.First()
		return it.Close()
	})
	if parked.plans != 1 {
		t.Errorf("%d plans after a scan closed before its end, want 1 parked", parked.plans)
	}
}

// TestScanPrefetchConcurrent runs paged scans and scans cut at tablets
// with plans, more than maxPlans at once, beside point reads of the same files (under the race
// detector in make testrace), and checks every value read.
func TestScanPrefetchConcurrent(t *testing.T) {
	const rows, per = 30000, 5000
	mem := vfs.NewMem()
	loadFiles(t, mem, rows, per)
	e, err := Open("db", Options{FS: mem, CacheSize: 256 << 10, ReadAhead: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var wg sync.WaitGroup
	for g := range maxPlans + 2 {
		wg.Go(func() {
			if err := scanPages(e, g*1000, rows, 700*(g%3), true, false); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if err := scanTablets(e, rows, []int{0, 7000 + g*100, 19000, rows}, g%2 == 0, false); err != nil {
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
}
