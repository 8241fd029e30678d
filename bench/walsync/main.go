// Command walsync times synced commits of Cairn's storage engine (Pebble)
// on this machine's disk: the floor under a replicated write, whose raft
// round commits the log entry with one sync (raftnode, invariant 1).
//
// It opens a fresh engine in -dir, then times -n commits of a batch the
// size of one raft entry and hard state (-size bytes), first one at a
// time, then from -c goroutines at once (Pebble groups concurrent synced
// commits into one WAL sync: the rate shows how many share one). It
// prints the mean, p50 and p90 of each, in microseconds, and the load.
//
// With -files K it also times K goroutines, each appending -size bytes to
// its own file and calling fdatasync, at once: whether this disk runs
// syncs side by side (K times the rate at one sync's latency) or one
// after another, which bounds what any pipelining of one log can buy
// (bench/README.md, "the replicated write path").
//
// With -fill K it times, instead of one engine, K pairs of fresh engines
// alternating: WAL files as Pebble makes them, and written with zeros
// first (storage.Options.WALFill, storage/walfill.go).
//
//	go run ./bench/walsync -dir /tmp/walsync -n 2000 -c 4 -files 2
//	go run ./bench/walsync -n 1000 -c 4 -fill 3
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

func main() {
	dir := flag.String("dir", "", "directory for the engine (made fresh; removed after; default: a temp dir under /tmp)")
	n := flag.Int("n", 2000, "synced commits per measurement")
	size := flag.Int("size", 300, "bytes of value per commit")
	c := flag.Int("c", 4, "concurrent committers in the second measurement")
	files := flag.Int("files", 0, "also time this many files appended and fdatasynced side by side (0: skip)")
	fill := flag.Int("fill", 0, "instead of one engine, time this many pairs of engines with WAL files as Pebble makes them and written with zeros first (storage.Options.WALFill), alternating")
	flag.Parse()
	d := *dir
	if d == "" {
		var err error
		if d, err = os.MkdirTemp("/tmp", "walsync"); err != nil {
			log.Fatal(err)
		}
	}
	defer os.RemoveAll(d)
	val := []byte(strings.Repeat("x", *size))
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		f := strings.Fields(string(b))
		if len(f) < 3 {
			return "?"
		}
		return strings.Join(f[:3], " ")
	}
	report := func(name string, ds []time.Duration, wall time.Duration) {
		slices.Sort(ds)
		var sum time.Duration
		for _, x := range ds {
			sum += x
		}
		us := func(x time.Duration) float64 { return float64(x) / 1e3 }
		fmt.Printf("%-16s commits %5d  mean %7.0f µs  p50 %7.0f µs  p90 %7.0f µs  %7.0f commits/s  load %s\n",
			name, len(ds), us(sum/time.Duration(len(ds))), us(ds[len(ds)/2]), us(ds[len(ds)*9/10]), float64(len(ds))/wall.Seconds(), load())
	}
	// engineRuns times synced commits of a fresh engine in its own
	// directory, serial and from -c goroutines; fill is its
	// Options.WALFill (0: WAL files as Pebble makes them).
	engineRuns := func(label string, fill int64) {
		dir, err := os.MkdirTemp(d, "engine")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		eng, err := storage.Open(dir, storage.Options{WALFill: fill})
		if err != nil {
			log.Fatal(err)
		}
		defer eng.Close()
		var mu sync.Mutex
		var seq uint64
		commit := func() time.Duration {
			mu.Lock()
			seq++
			k := keys.TabletLocal(1, fmt.Sprintf("walsync%016d", seq))
			mu.Unlock()
			b := eng.NewWriteOnlyBatch()
			defer b.Close()
			if err := b.Put(storage.MVCCKey{Key: k}, val); err != nil {
				log.Fatal(err)
			}
			start := time.Now()
			if err := b.Commit(); err != nil {
				log.Fatal(err)
			}
			return time.Since(start)
		}
		for range 50 { // warm the WAL file up
			commit()
		}
		ds := make([]time.Duration, *n)
		start := time.Now()
		for i := range ds {
			ds[i] = commit()
		}
		report(label+"serial", ds, time.Since(start))
		ds = make([]time.Duration, *n)
		var wg sync.WaitGroup
		start = time.Now()
		for w := range *c {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(ds); i += *c {
					ds[i] = commit()
				}
			}()
		}
		wg.Wait()
		report(fmt.Sprintf("%sconcurrent%d", label, *c), ds, time.Since(start))
	}
	if *fill > 0 {
		// Plain and filled WAL files (storage/walfill.go), alternating.
		for range *fill {
			engineRuns("plain  ", 0)
			engineRuns("filled ", storage.WALFillFor())
		}
	} else {
		engineRuns("", 0)
	}
	for k := 1; k <= *files; k *= 2 {
		ds := make([]time.Duration, *n)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range k {
			f, err := os.Create(filepath.Join(d, fmt.Sprintf("raw%d-%d", k, w)))
			if err != nil {
				log.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer f.Close()
				for i := w; i < len(ds); i += k {
					if _, err := f.Write(val); err != nil {
						log.Fatal(err)
					}
					t := time.Now()
					if err := unix.Fdatasync(int(f.Fd())); err != nil {
						log.Fatal(err)
					}
					ds[i] = time.Since(t)
				}
			}()
		}
		wg.Wait()
		report(fmt.Sprintf("fdatasync×%d", k), ds, time.Since(start))
	}
	// One writer, three kinds of file: a fresh file appended to (each
	// fdatasync also commits the size change to the journal), one
	// preallocated without its size (fallocate KEEP_SIZE, as Pebble's new
	// WAL files: the size still changes, and the written extents too),
	// and one written full and synced first, then overwritten from the
	// start (a recycled WAL, or PostgreSQL's pre-zeroed WAL segments:
	// only data to flush).
	if *files > 0 {
		for _, mode := range []string{"append", "prealloc", "overwrite"} {
			f, err := os.Create(filepath.Join(d, "mode-"+mode))
			if err != nil {
				log.Fatal(err)
			}
			span := int64(*n) * int64(len(val))
			switch mode {
			case "prealloc":
				if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, span); err != nil {
					log.Fatal(err)
				}
			case "overwrite":
				if _, err := f.Write(make([]byte, span)); err != nil {
					log.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					log.Fatal(err)
				}
			}
			ds := make([]time.Duration, *n)
			start := time.Now()
			for i := range ds {
				if _, err := f.WriteAt(val, int64(i)*int64(len(val))); err != nil {
					log.Fatal(err)
				}
				t := time.Now()
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					log.Fatal(err)
				}
				ds[i] = time.Since(t)
			}
			report(mode, ds, time.Since(start))
			f.Close()
		}
	}
	// The same, K goroutines writing their own regions of one file (as
	// one log whose syncs overlapped would): whether the kernel lets
	// fdatasyncs of one file run side by side.
	for k := 2; k <= *files; k *= 2 {
		f, err := os.Create(filepath.Join(d, fmt.Sprintf("one%d", k)))
		if err != nil {
			log.Fatal(err)
		}
		ds := make([]time.Duration, *n)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(ds); i += k {
					if _, err := f.WriteAt(val, int64(i)*4096); err != nil {
						log.Fatal(err)
					}
					t := time.Now()
					if err := unix.Fdatasync(int(f.Fd())); err != nil {
						log.Fatal(err)
					}
					ds[i] = time.Since(t)
				}
			}()
		}
		wg.Wait()
		f.Close()
		report(fmt.Sprintf("one file×%d", k), ds, time.Since(start))
	}
}
