package simfs

import (
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type recorder struct{ slept []time.Duration }

func (r *recorder) sleep(d time.Duration) { r.slept = append(r.slept, d) }

// TestLatencyAndCounts checks invariant 1: each read and sync is counted and
// delayed by the current profile, and switching profiles takes effect at once.
func TestLatencyAndCounts(t *testing.T) {
	rec := &recorder{}
	var seen []Read
	fs := New(vfs.NewMem(), Options{Profile: HDD, Sleep: rec.sleep, OnRead: func(r Read) { seen = append(seen, r) }})
	f, err := fs.Create("000001.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := fs.Open("000001.log")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := r.ReadAt(buf, 0); err != nil || string(buf) != "hello" {
		t.Fatalf("ReadAt = %q, %v", buf, err)
	}
	fs.SetProfile(SSD)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()

	d, err := fs.OpenDir("")
	if err != nil {
		t.Fatal(err)
	}
	fs.SetProfile(Memory)
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()

	// Both reads are seeks: the first of the handle, and a Read from
	// position 0 after a ReadAt that ended at 5.
	hddRead := 10*time.Millisecond + 200*time.Microsecond + HDD.transfer(5)
	want := Stats{Reads: 2, ReadBytes: 10, Seeks: 2, Requests: 2, Charged: hddRead + 100*time.Microsecond, Syncs: 2, WALSyncs: 1, Writes: 1}
	if got := fs.Stats(); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	// HDD sync, HDD read with a seek, SSD read; the Memory-profile dir
	// sync sleeps not.
	wantSlept := []time.Duration{10 * time.Millisecond, hddRead, 100 * time.Microsecond}
	if !slices.Equal(rec.slept, wantSlept) {
		t.Fatalf("slept %v, want %v", rec.slept, wantSlept)
	}
	if fs.Profile().Name != "memory" {
		t.Fatalf("profile = %+v", fs.Profile())
	}
	// OnRead saw both reads, where they were and how they were priced.
	wantSeen := []Read{{Name: "000001.log", Off: 0, Len: 5, Seek: true}, {Name: "000001.log", Off: 0, Len: 5, Seek: true}}
	if !slices.Equal(seen, wantSeen) {
		t.Fatalf("OnRead saw %+v, want %+v", seen, wantSeen)
	}
}

// TestInjectedWriteErrors checks invariant 2: a failing disk refuses every
// write path and nothing reaches the wrapped filesystem until it heals.
func TestInjectedWriteErrors(t *testing.T) {
	mem := vfs.NewMem()
	fs := New(mem, Options{})
	f, err := fs.Create("data", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	errFull := errors.New("no space left on device")
	fs.InjectWriteError(errFull)

	ops := map[string]func() error{
		"Write":       func() error { _, err := f.Write([]byte("x")); return err },
		"WriteAt":     func() error { _, err := f.WriteAt([]byte("x"), 0); return err },
		"Sync":        f.Sync,
		"SyncData":    f.SyncData,
		"SyncTo":      func() error { _, err := f.SyncTo(1); return err },
		"Preallocate": func() error { return f.Preallocate(0, 100) },
		"Create": func() error {
			_, err := fs.Create("other", vfs.WriteCategoryUnspecified)
			return err
		},
		"ReuseForWrite": func() error {
			_, err := fs.ReuseForWrite("data", "data2", vfs.WriteCategoryUnspecified)
			return err
		},
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, errFull) {
			t.Errorf("%s with a full disk returned %v", name, err)
		}
	}
	if st, err := mem.Stat("data"); err != nil || st.Size() != 0 {
		t.Fatalf("a refused write reached the disk: %v, %v", st, err)
	}
	if _, err := mem.Stat("other"); err == nil {
		t.Fatal("a refused Create made a file")
	}
	if got := fs.Stats(); got.FailedOps != int64(len(ops)) || got.Writes != 0 || got.Syncs != 0 {
		t.Fatalf("stats = %+v", got)
	}

	fs.InjectWriteError(nil)
	if _, err := f.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if st, _ := mem.Stat("data"); st.Size() != 2 {
		t.Fatalf("size after healing = %d, want 2", st.Size())
	}
}

// TestStall checks invariant 4: a write on a stalled disk does not reach
// the wrapped file until Unstall, and then it does.
func TestStall(t *testing.T) {
	mem := vfs.NewMem()
	fs := New(mem, Options{})
	f, err := fs.Create("000002.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	fs.Stall()
	if !fs.Stalled() {
		t.Fatal("Stalled() is false after Stall")
	}
	done := make(chan error)
	go func() {
		_, err := f.Write([]byte("late"))
		if err == nil {
			err = f.Sync()
		}
		done <- err
	}()
	// The write cannot have reached the wrapped file: nothing lets it
	// past the stall but Unstall.
	if st, err := mem.Stat("000002.log"); err != nil || st.Size() != 0 {
		t.Fatalf("during the stall: %v, %v", st, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the write returned (%v) while the disk was stalled", err)
	default:
	}
	fs.Unstall()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st, err := mem.Stat("000002.log"); err != nil || st.Size() != 4 || fs.Stalled() {
		t.Fatalf("after the stall: %v, %v, stalled %v", st, err, fs.Stalled())
	}
}

// TestReadCharges checks the pricing of invariant 1 read by read: what is
// a seek and what a skip (per handle, Read and ReadAt alike), what each
// profile charges, and the counters of seeks, skips, bytes and time.
func TestReadCharges(t *testing.T) {
	mem := vfs.NewMem()
	w, err := mem.Create("000001.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	type read struct {
		off  int64 // -1: Read
		n    int
		gap  int64 // from the previous read's end
		seek bool  // on a disk: a jump back, a long jump ahead, a first read
		miss bool  // in 1 MiB chunks: a chunk the handle has not fetched
	}
	// The reads of one handle: in order, a short jump ahead, a step back,
	// in order again, a long jump ahead, then Read from the handle's
	// position 0 (the last read ended elsewhere) and a second Read that
	// continues it.
	reads := []read{
		{0, 4096, 0, true, true}, {4096, 4096, 0, false, false}, {8192, 1000, 0, false, false},
		{65536, 4096, 65536 - 9192, false, false}, {4096, 4096, 0, true, false}, {8192, 4096, 0, false, false},
		{3 << 20, 4096, 3<<20 - 12288, true, true},
		{-1, 100, 0, true, false}, {-1, 100, 0, false, false},
	}
	bw := func(n int64, perSec int64) time.Duration { return time.Duration(n * int64(time.Second) / perSec) }
	for _, c := range []struct {
		profile Profile
		// cost is what a read costs; seeks and skips are what the
		// profile counts (a profile without seek latency never skips).
		cost        func(r read) time.Duration
		seeks, skip func(r read) bool
		chunked     bool
	}{
		{HDD, func(r read) time.Duration {
			d := 200*time.Microsecond + bw(int64(r.n), 150<<20)
			switch {
			case r.seek:
				d += 10 * time.Millisecond
			case r.gap > 0:
				d += bw(r.gap, 150<<20) // 55 kB: 0.35 ms under the head
			}
			return d
		}, func(r read) bool { return r.seek }, func(r read) bool { return !r.seek && r.gap > 0 }, false},
		{ObjectStore, func(r read) time.Duration {
			// A chunk missed is a request: 20 ms, and 1 MiB at 100 MiB/s.
			if r.miss {
				return 30 * time.Millisecond
			}
			return 0
		}, func(read) bool { return false }, func(read) bool { return false }, true},
		{Memory, func(read) time.Duration { return 0 }, func(r read) bool { return r.seek || r.gap > 0 }, func(read) bool { return false }, false},
	} {
		t.Run(c.profile.Name, func(t *testing.T) {
			rec := &recorder{}
			fs := New(mem, Options{Profile: c.profile, Sleep: rec.sleep})
			f, err := fs.Open("000001.sst")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var want Stats
			var wantSlept []time.Duration
			for i, r := range reads {
				buf := make([]byte, r.n)
				if r.off < 0 {
					_, err = f.Read(buf)
				} else {
					_, err = f.ReadAt(buf, r.off)
				}
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				want.Reads++
				want.ReadBytes += int64(r.n)
				if c.seeks(r) {
					want.Seeks++
				}
				if c.skip(r) {
					want.Skips++
				}
				if !c.chunked || r.miss {
					want.Requests++
				}
				if d := c.cost(r); d > 0 {
					want.Charged += d
					wantSlept = append(wantSlept, d)
				}
				if got := fs.Stats(); got != want {
					t.Fatalf("after read %d %+v: stats %+v, want %+v", i, r, got, want)
				}
			}
			if !slices.Equal(rec.slept, wantSlept) {
				t.Fatalf("slept %v, want %v", rec.slept, wantSlept)
			}
			// A second handle of the same file starts with a seek, or
			// fetches its chunk again.
			g, err := fs.Open("000001.sst")
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if _, err := g.ReadAt(make([]byte, 10), 12288); err != nil {
				t.Fatal(err)
			}
			if got := fs.Stats(); c.chunked && got.Requests != want.Requests+1 || !c.chunked && got.Seeks != want.Seeks+1 {
				t.Fatalf("a new handle's first read: %+v, want one more seek or request than %+v", got, want)
			}
		})
	}
}

func TestNamed(t *testing.T) {
	for _, name := range []string{"memory", "ssd", "hdd", "object-store"} {
		if p, err := Named(name); err != nil || p.Name != name {
			t.Errorf("Named(%q) = %+v, %v", name, p, err)
		}
	}
	if _, err := Named("tape"); err == nil {
		t.Error("Named(tape) succeeded")
	}
}

// TestChunkMemory: a handle remembers the last chunkMemory chunks it
// fetched; a read spanning two chunks fetches both; the one read longest
// ago is forgotten first, and reading one again makes it the newest.
func TestChunkMemory(t *testing.T) {
	p := Profile{Name: "chunks", ReadLatency: time.Millisecond, Chunk: 100}
	fs := New(vfs.NewMem(), Options{Profile: p, Sleep: func(time.Duration) {}})
	w, err := fs.Create("f", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 100*(chunkMemory+2))); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	f, err := fs.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	requests := func(off int64, n int) int64 {
		t.Helper()
		before := fs.Stats().Requests
		if _, err := f.ReadAt(make([]byte, n), off); err != nil {
			t.Fatal(err)
		}
		return fs.Stats().Requests - before
	}
	for _, c := range []struct {
		off  int64
		n    int
		want int64
	}{
		{0, 10, 1},   // chunk 0
		{50, 100, 1}, // chunks 0 and 1: 1 is new
		{120, 10, 0},
	} {
		if got := requests(c.off, c.n); got != c.want {
			t.Fatalf("read [%d, %d): %d requests, want %d", c.off, c.off+int64(c.n), got, c.want)
		}
	}
	// Chunks 2 .. 15 fill the memory (16 chunks: 0 .. 15); reading 0
	// again makes 1 the oldest; chunk 16 then pushes 1 out, not 0.
	for c := int64(2); c < chunkMemory; c++ {
		if got := requests(c*100, 1); got != 1 {
			t.Fatalf("chunk %d: %d requests", c, got)
		}
	}
	if got := requests(0, 1); got != 0 {
		t.Fatalf("chunk 0 again: %d requests", got)
	}
	if got := requests(chunkMemory*100, 1); got != 1 {
		t.Fatalf("chunk %d: %d requests", chunkMemory, got)
	}
	if got := requests(0, 1); got != 0 {
		t.Fatalf("chunk 0, recently read: %d requests, want 0", got)
	}
	if got := requests(100, 1); got != 1 {
		t.Fatalf("chunk 1, the oldest when chunk %d came: %d requests, want 1", chunkMemory, got)
	}
	if got := fs.Stats().Charged; got != time.Duration(fs.Stats().Requests)*time.Millisecond {
		t.Fatalf("charged %v for %d requests of 1 ms", got, fs.Stats().Requests)
	}
}

// TestSleepOnAverage: what a real sleep overshot is taken off the next
// waits, which then do not sleep at all while the credit lasts.
func TestSleepOnAverage(t *testing.T) {
	fs := New(vfs.NewMem(), Options{})
	fs.overslept.Store(int64(250 * time.Microsecond))
	fs.sleepOnAverage(100 * time.Microsecond)
	fs.sleepOnAverage(100 * time.Microsecond)
	if left := time.Duration(fs.overslept.Load()); left != 50*time.Microsecond {
		t.Fatalf("after two waits of 100 µs on 250 µs of credit: %v left, want 50 µs", left)
	}
	// The third wait uses the rest and sleeps 50 µs: whatever that
	// overshoots is the new credit, never negative.
	fs.sleepOnAverage(100 * time.Microsecond)
	if left := fs.overslept.Load(); left < 0 {
		t.Fatalf("credit %v after a real sleep", time.Duration(left))
	}
}
