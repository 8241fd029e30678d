package storage

import (
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestDiskProbeReportsAStallWithoutWrites: a store that stalls while it
// only reads (a node just restarted, its SSTs cold) is reported to
// OnDiskStall through ProbeDisk, and was not before it: the watcher times
// writes alone. The probe writes nothing the engine reads, and a store
// without a watcher does not probe.
func TestDiskProbeReportsAStallWithoutWrites(t *testing.T) {
	fs := simfs.New(vfs.NewMem(), simfs.Options{})
	reports := make(chan vfs.DiskSlowInfo, 100)
	e, err := Open("db", Options{FS: fs, DiskStallThreshold: 20 * time.Millisecond, OnDiskStall: func(info vfs.DiskSlowInfo) {
		select {
		case reports <- info:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	putFlushed(t, e, []byte("v"), MVCCKey{Key: []byte("k")})
	if err := e.ProbeDisk(); err != nil {
		t.Fatal(err)
	}
	// The disk stops answering while the engine's only work is a read
	// (which blocks if it reaches the disk).
	drain(reports)
	fs.Stall()
	read := make(chan error, 1)
	go func() {
		_, _, err := e.Get(MVCCKey{Key: []byte("absent")})
		read <- err
	}()
	// Nothing writes: the watcher hears of nothing (the negative the
	// probe exists for), within many thresholds.
	select {
	case info := <-reports:
		t.Logf("reported without a probe: %s (a write of the engine's own in flight)", info)
	case <-time.After(200 * time.Millisecond):
	}
	probed := make(chan error, 1)
	go func() { probed <- e.ProbeDisk() }()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case info := <-reports:
			if info.Path != fs.PathJoin("db", probeFile) {
				continue
			}
			select {
			case err := <-probed:
				t.Fatalf("the probe returned (%v) on a stalled disk", err)
			default:
			}
			fs.Unstall()
			if err := <-probed; err != nil {
				t.Fatal(err)
			}
			if err := <-read; err != nil {
				t.Fatal(err)
			}
			return
		case <-deadline:
			fs.Unstall()
			t.Fatal("a stall with only a read and a probe in flight was never reported")
		}
	}
}

// TestDiskProbeUnwatched: a store without a stall watcher does not probe.
func TestDiskProbeUnwatched(t *testing.T) {
	fs := vfs.NewMem()
	e, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.ProbeDisk(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(fs.PathJoin("db", probeFile)); err == nil {
		t.Error("an unwatched store wrote a probe file")
	}
}

func drain(c chan vfs.DiskSlowInfo) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
