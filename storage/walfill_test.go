package storage

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walSizes returns the size of each WAL file in dir.
func walSizes(t *testing.T, fs vfs.FS, dir string) map[string]int64 {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, n := range names {
		if !strings.HasSuffix(n, ".log") {
			continue
		}
		st, err := fs.Stat(fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = st.Size()
	}
	if len(out) == 0 {
		t.Fatalf("no WAL file in %s (%v)", dir, names)
	}
	return out
}

// TestWALFilledBeforeWrites: with Options.WALFill every WAL file is
// written to its fill size before Pebble's commits, so the synced
// commits that follow overwrite it and do not grow it (walfill.go); the
// WAL a flush rotates to is the spare filled meanwhile; a crash then
// leaves a log with a zeroed tail, from which every synced commit is
// recovered.
func TestWALFilledBeforeWrites(t *testing.T) {
	const fill = 256 << 10
	mem := vfs.NewCrashableMem()
	e, err := Open("db", Options{FS: mem, WALFill: fill})
	if err != nil {
		t.Fatal(err)
	}
	// The spare for the next WAL is written off the commit path; the
	// rotation below takes it once it is there.
	e.walFill.waitIdle()
	if _, err := mem.Stat(mem.PathJoin("db", spareName)); err != nil {
		t.Fatalf("no spare WAL file after the engine opened: %v", err)
	}
	val := []byte(strings.Repeat("v", 100))
	put := func(from, to int) {
		for i := from; i < to; i++ {
			b := e.NewWriteOnlyBatch()
			if err := b.Put(MVCCKey{Key: []byte(fmt.Sprintf("k%05d", i))}, val); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
	}
	// About 70 KB of log: well inside the fill.
	put(0, 500)
	for n, size := range walSizes(t, mem, "db") {
		if size != fill {
			t.Errorf("WAL %s is %d bytes after 500 synced commits, want the fill's %d (written before the commits, not grown by them)", n, size, fill)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	put(500, 600)
	sizes := walSizes(t, mem, "db")
	for n, size := range sizes {
		if size < fill {
			t.Errorf("WAL %s is %d bytes after a flush rotated the log, want at least %d", n, size, fill)
		}
	}
	if len(sizes) < 2 {
		t.Fatalf("WAL files after a flush: %v, want the old and the new", sizes)
	}
	e.walFill.waitIdle()

	// A power cut, with half of what was not synced kept: every commit
	// was synced, so all of them must be read back through the zeroed
	// tail of the newest log.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(3, 4))})
	_ = e.Close()
	e2, err := Open("db", Options{FS: crashed, WALFill: fill})
	if err != nil {
		t.Fatalf("reopening after the crash: %v", err)
	}
	defer e2.Close()
	for i := range 600 {
		k := fmt.Sprintf("k%05d", i)
		if _, ok, err := e2.Get(MVCCKey{Key: []byte(k)}); err != nil || !ok {
			t.Fatalf("synced commit %s lost after the crash (ok=%v err=%v)", k, ok, err)
		}
	}
}

// TestWALFillSwapsShortRecycledFile: a recycled WAL file shorter than the
// fill is replaced by the spare, which Pebble then writes from its start
// and whose fill is all zeros; without a spare the recycled file is
// reused as Pebble asked; files other than WALs are not touched.
func TestWALFillSwapsShortRecycledFile(t *testing.T) {
	mem := vfs.NewMem()
	short := func(name string) {
		t.Helper()
		f, err := mem.Create(name, walCategory)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) []byte {
		t.Helper()
		r, err := mem.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fs := newWALFillFS(mem, 4096, "")
	fs.open()
	fs.waitIdle()
	short("000001.log")
	f, err := fs.ReuseForWrite("000001.log", "000002.log", walCategory)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read("000002.log"); len(got) != 4096 || string(got[:2]) != "ab" || strings.Trim(string(got[2:]), "\x00") != "" {
		t.Fatalf("the short recycled WAL became %d bytes starting %q, want the 4096-byte spare of zeros written from its start", len(got), got[:min(len(got), 12)])
	}
	if _, err := mem.Stat("000001.log"); err == nil {
		t.Fatal("the short recycled WAL is still there")
	}
	// No spare ready (the next is being written): reused as asked.
	fs.mu.Lock()
	fs.closed = true
	fs.mu.Unlock()
	fs.waitIdle()
	_ = mem.Remove(spareName)
	fs.spare = ""
	short("000003.log")
	f, err = fs.ReuseForWrite("000003.log", "000004.log", walCategory)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if got := read("000004.log"); string(got) != "0123456789" {
		t.Fatalf("without a spare the recycled WAL holds %q", got)
	}
	sst, err := fs.Create("000005.sst", "pebble-compaction")
	if err != nil {
		t.Fatal(err)
	}
	st, err := sst.Stat()
	_ = sst.Close()
	if err != nil || st.Size() != 0 {
		t.Fatalf("an SST was created with %d bytes (err %v), want an empty file", st.Size(), err)
	}
}
