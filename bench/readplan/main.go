// Command readplan measures reads in storage order (issue 19) on a disk
// that plays an HDD (storage/simfs: 0.2 ms per read and 150 MiB/s, 10 ms
// more per seek, short forward gaps passed at 150 MiB/s):
//
//   - count: SELECT count(*) over -rows rows, on the hdd disk and on the
//     ssd one (0.1 ms per read), with the disk's seeks and reads. Goal:
//     hdd within 1.5× of ssd.
//   - lookups: a lookup join of -lookups rows into the -rows table (keys in
//     random order), batches of 10,000 (hdd's), on the hdd disk: seeks
//     against block reads. Goal: at most one seek per block read in order.
//   - sorted vs input order: the same join over the first
//     -baseline-lookups rows, keys sorted per batch (now) and in input order
//     (sql.testing.lookup_input_order: Cairn before this change), on the
//     hdd disk: the baseline, in the same run.
//
// Every timed query runs on a freshly restarted node (a cold block cache
// of -cache-mib, smaller than the table), -runs times, alternating
// variants; the median run of each is printed with the disk's counters
// for that run. The wall time includes the simulated latency (slept) and
// the CPU; "disk" is the latency the profile charged alone.
//
// The lookup join is forced with enable_hashjoin and enable_mergejoin off
// (the benchmark measures how lookups read the disk, whatever plan the
// costs would choose) and batched as hdd batches
// (sql.testing.lookup_batch = 10000).
//
// Usage: go run ./bench/readplan [-rows 1000000] [-lookups 100000]
// [-baseline-lookups 5000] [-runs 3] [-cache-mib 64] [-force]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/bench/internal/diskbench"
	"github.com/cairn-db/cairn/storage/simfs"
)

var (
	flagRows     = flag.Int("rows", 1_000_000, "rows in the table read")
	flagLookups  = flag.Int("lookups", 100_000, "rows of the lookup join's input")
	flagBaseline = flag.Int("baseline-lookups", 5_000, "input rows of the sorted-vs-input-order comparison (input order seeks per key: 10 ms each)")
	flagRuns     = flag.Int("runs", 3, "timed runs of each variant; the median is printed")
	flagCache    = flag.Int64("cache-mib", 64, "block cache of the node in MiB (smaller than the table's decompressed blocks)")
	flagDir      = flag.String("dir", "", "store directory (default: a temporary one, removed after)")
	flagMaxLoad  = flag.Float64("max-load", 4, "refuse to run at or above this 1-minute load average")
	flagForce    = flag.Bool("force", false, "run whatever the load")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	startLoad := diskbench.Load()
	loadStart := time.Now()
	n, done, err := diskbench.Setup(ctx, "readplan", *flagDir, *flagCache, *flagRows, *flagLookups, *flagMaxLoad, *flagForce)
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	fmt.Printf("loaded %d + %d rows in %s; load average %.1f\n", *flagRows, *flagLookups, time.Since(loadStart).Round(time.Second), startLoad)

	lookupSetup := []string{"SET enable_hashjoin = off", "SET enable_mergejoin = off", "SET sql.testing.lookup_batch = 10000"}
	join := "SELECT count(*), sum(t.v) FROM p JOIN t ON t.k = p.k"
	if err := n.Exec(ctx, lookupSetup...); err != nil {
		log.Fatal(err)
	}
	if plan, err := n.Explain(ctx, join); err != nil || !strings.Contains(plan, "Lookup Join") {
		log.Fatalf("the join is not a lookup join (%v):\n%s", err, plan)
	}

	type variant struct {
		group, name string
		profile     simfs.Profile
		setup       []string
		q           string
	}
	base := fmt.Sprintf("%s WHERE p.id <= %d", join, *flagBaseline)
	variants := []variant{
		{"count", "ssd", simfs.SSD, nil, "SELECT count(*) FROM t"},
		{"count", "hdd", simfs.HDD, nil, "SELECT count(*) FROM t"},
		{"lookups", "hdd, sorted", simfs.HDD, lookupSetup, join},
		{"sorted vs input order", "hdd, input order", simfs.HDD, append(lookupSetup, "SET sql.testing.lookup_input_order = on"), base},
		{"sorted vs input order", "hdd, sorted", simfs.HDD, lookupSetup, base},
	}
	results := make([][]diskbench.Result, len(variants))
	for r := 0; r < *flagRuns; r++ {
		for i, v := range variants {
			res, err := n.Time(ctx, v.profile, v.setup, v.q)
			if err != nil {
				log.Fatal(err)
			}
			if r > 0 && res.Answer != results[i][0].Answer {
				log.Fatalf("%s %s: answer %s, then %s", v.group, v.name, results[i][0].Answer, res.Answer)
			}
			results[i] = append(results[i], res)
		}
	}
	if results[3][0].Answer != results[4][0].Answer {
		log.Fatalf("sorted and input-order lookups disagree: %s vs %s", results[4][0].Answer, results[3][0].Answer)
	}

	tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "group\tvariant\twall\tdisk\treads\tMiB read\tseeks\tskips\tseeks/read\t")
	med := make([]diskbench.Result, len(variants))
	for i, v := range variants {
		m := diskbench.Median(results[i])
		med[i] = m
		perRead := 0.0
		if m.Disk.Reads > 0 {
			perRead = float64(m.Disk.Seeks) / float64(m.Disk.Reads)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%d\t%d\t%.3f\t\n", v.group, v.name, m.Wall.Round(time.Millisecond),
			m.Disk.Charged.Round(time.Millisecond), m.Disk.Reads, float64(m.Disk.ReadBytes)/(1<<20), m.Disk.Seeks, m.Disk.Skips, perRead)
	}
	tw.Flush()
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	fmt.Printf("count(*): hdd/ssd = %.2f× wall, %.2f× disk (goal: at most 1.5×)\n", ratio(med[1].Wall, med[0].Wall), ratio(med[1].Disk.Charged, med[0].Disk.Charged))
	fmt.Printf("lookup join of %d rows on hdd: %d seeks for %d reads of %.1f MiB (a read is a block or a read-ahead window) (goal: at most one seek per block read)\n",
		*flagLookups, med[2].Disk.Seeks, med[2].Disk.Reads, float64(med[2].Disk.ReadBytes)/(1<<20))
	fmt.Printf("%d lookups on hdd: input order / sorted = %.1f× wall, %.1f× disk\n", *flagBaseline, ratio(med[3].Wall, med[4].Wall), ratio(med[3].Disk.Charged, med[4].Disk.Charged))
	fmt.Printf("median of %d runs; load average %.1f at the start, %.1f at the end\n", *flagRuns, startLoad, diskbench.Load())
}
