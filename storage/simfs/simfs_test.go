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
	fs := New(vfs.NewMem(), Options{Profile: HDD, Sleep: rec.sleep})
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

	want := Stats{Reads: 2, Syncs: 2, WALSyncs: 1, Writes: 1}
	if got := fs.Stats(); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	// HDD sync, HDD read, SSD read; the Memory-profile dir sync sleeps not.
	wantSlept := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 100 * time.Microsecond}
	if !slices.Equal(rec.slept, wantSlept) {
		t.Fatalf("slept %v, want %v", rec.slept, wantSlept)
	}
	if fs.Profile().Name != "memory" {
		t.Fatalf("profile = %+v", fs.Profile())
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
