// Command kv measures Cairn's transactional KV layer against raw Pebble on
// the same machine, in one run: every Cairn figure is printed as a ratio to
// the same operation done directly on a Pebble instance with the same
// options, durability and data.
//
// Operations:
//
//	get        point read of an existing key (Cairn: non-transactional DB.Get)
//	put-1pc    durable single-key write (Cairn: a transaction committed in one phase)
//	txn-2tab   durable atomic write of two keys (Cairn: a transaction over two tablets)
//	scan       full scan of the loaded keys, rows per second
//
// Each write is synced in both systems. Writes are measured at concurrency 1
// and at -conc (where Pebble's group commit shares fsyncs). The whole
// comparison repeats -runs times and the median ratio is reported.
//
// Both engines are flushed after loading (-flush), so reads meet the same
// LSM shape on both sides, and scans are timed over -scans full scans.
//
// Usage: go run ./bench/kv [-keys 100000] [-ops 20000] [-runs 3] [-conc 16] [-only op]
// [-scans 5] [-flush=true] [-raft] [-cpuprofile f] [-blockprofile f] [-mutexprofile f]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
)

var (
	flagKeys    = flag.Int("keys", 100_000, "keys loaded before reads and scans")
	flagOps     = flag.Int("ops", 20_000, "operations per read measurement")
	flagWrites  = flag.Int("writes", 2_000, "synced writes per write measurement")
	flagRuns    = flag.Int("runs", 3, "repetitions; the median ratio is reported")
	flagConc    = flag.Int("conc", 16, "concurrency of the concurrent write measurements")
	flagValue   = flag.Int("value", 64, "value size in bytes")
	flagProfile = flag.String("cpuprofile", "", "write a CPU profile of the Cairn side to this file")
	flagDir     = flag.String("dir", "", "directory for the stores (default: a temporary directory)")
	flagOnly    = flag.String("only", "", "measure only operations whose name starts with this (e.g. get, put, txn, scan)")
	flagScans   = flag.Int("scans", 5, "full scans per scan measurement")
	flagFlush   = flag.Bool("flush", true, "flush both engines' memtables after loading")
	flagBlock   = flag.String("blockprofile", "", "write a goroutine blocking profile (both sides) to this file")
	flagMutex   = flag.String("mutexprofile", "", "write a mutex contention profile (both sides) to this file")
	flagRaft    = flag.Bool("raft", false, "make every tablet a raft group of one voter (RF 1): writes go through the raft log")
)

// result is ops/s of one operation in one run.
type result struct {
	op           string
	cairn, raw   float64
	cairnPerOpUs float64
}

func main() {
	flag.Parse()
	ctx := context.Background()
	stopProfile, err := benchflag.CPUProfile(*flagProfile)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()
	if *flagBlock != "" {
		runtime.SetBlockProfileRate(1)
		defer writeProfile("block", *flagBlock)
	}
	if *flagMutex != "" {
		runtime.SetMutexProfileFraction(1)
		defer writeProfile("mutex", *flagMutex)
	}
	var runs [][]result
	for i := 0; i < *flagRuns; i++ {
		rs, err := runOnce(ctx, i)
		if err != nil {
			log.Fatalf("run %d: %v", i+1, err)
		}
		runs = append(runs, rs)
		fmt.Fprintf(os.Stderr, "run %d/%d done\n", i+1, *flagRuns)
	}
	report(runs)
}

// writeProfile writes the named runtime profile (block, mutex) to path.
func writeProfile(name, path string) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		log.Fatal(err)
	}
}

func report(runs [][]result) {
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "operation\tcairn ops/s\tpebble ops/s\tratio (median of %d)\tcairn µs/op\t\n", len(runs))
	for i := range runs[0] {
		var ratios, c, r, us []float64
		for _, run := range runs {
			ratios = append(ratios, run[i].cairn/run[i].raw)
			c = append(c, run[i].cairn)
			r = append(r, run[i].raw)
			us = append(us, run[i].cairnPerOpUs)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2fx\t%.1f\t\n", runs[0][i].op, median(c), median(r), median(ratios), median(us))
	}
	tw.Flush()
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
