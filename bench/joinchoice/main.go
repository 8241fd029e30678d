// Command joinchoice measures the planner's storage-aware join choice
// (issue 19): the same join of -lookups rows (keys in random order) into
// a -rows table on a disk that plays an SSD (storage/simfs: 0.1 ms per
// read) and one that plays an object store (1 MiB chunks, 20 ms per
// request, 100 MiB/s). On each it prints the plan the planner chooses
// with storage.profile set to that profile, and times both plans, forced
// through the profile that chooses each (ssd: lookup join, object-store:
// hash join) and batched as the disk's profile batches
// (sql.testing.lookup_batch). The goal: the plan flips, and on each
// profile the chosen plan is at least as fast as the other.
//
// Every timed query runs on a freshly restarted node (a cold block cache
// of -cache-mib), -runs times, alternating; medians are printed.
//
// Usage: go run ./bench/joinchoice [-rows 200000] [-lookups 20000] [-runs 3] [-cache-mib 64] [-force]
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
	flagRows    = flag.Int("rows", 200_000, "rows in the table looked up")
	flagLookups = flag.Int("lookups", 20_000, "rows of the join's input")
	flagRuns    = flag.Int("runs", 3, "timed runs of each plan on each profile; the median is printed")
	flagCache   = flag.Int64("cache-mib", 64, "block cache of the node in MiB")
	flagDir     = flag.String("dir", "", "store directory (default: a temporary one, removed after)")
	flagMaxLoad = flag.Float64("max-load", 4, "refuse to run at or above this 1-minute load average")
	flagForce   = flag.Bool("force", false, "run whatever the load")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	if err := diskbench.CheckLoad(*flagMaxLoad, *flagForce); err != nil {
		log.Fatal(err)
	}
	startLoad := diskbench.Load()
	dir := *flagDir
	if dir == "" {
		d, err := os.MkdirTemp("", "joinchoice")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	n, err := diskbench.Start(ctx, dir, *flagCache)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = n.Stop(ctx) }()
	if err := n.Exec(ctx,
		"BEGIN", "CREATE TABLE t (k INT8 PRIMARY KEY, v INT8, pad TEXT)",
		fmt.Sprintf("INSERT INTO t SELECT g, g %% 1000, repeat('x', 40) FROM generate_series(1, %d) g", *flagRows), "COMMIT",
		"BEGIN", "CREATE TABLE p (id INT8 PRIMARY KEY, k INT8)",
		fmt.Sprintf("INSERT INTO p SELECT g, (g * %d) %% %d + 1 FROM generate_series(1, %d) g", diskbench.Spread(*flagRows), *flagRows, *flagLookups), "COMMIT",
		"ANALYZE t", "ANALYZE p"); err != nil {
		log.Fatal(err)
	}
	if err := n.Compact(ctx); err != nil {
		log.Fatal(err)
	}
	join := "SELECT count(*), sum(t.v) FROM p JOIN t ON t.k = p.k"
	method := func(profile string) string {
		if err := n.Exec(ctx, "SET storage.profile = '"+profile+"'"); err != nil {
			log.Fatal(err)
		}
		plan, err := n.Explain(ctx, join)
		if err != nil {
			log.Fatal(err)
		}
		switch {
		case strings.Contains(plan, "Lookup Join"):
			return "lookup"
		case strings.Contains(plan, "Hash Join"):
			return "hash"
		}
		log.Fatalf("profile %s: neither a lookup nor a hash join:\n%s", profile, plan)
		return ""
	}
	// The profile whose costs choose each plan, checked.
	forcing := map[string]string{"lookup": "ssd", "hash": "object-store"}
	for m, p := range forcing {
		if got := method(p); got != m {
			log.Fatalf("storage.profile %s plans a %s join, not the %s join it is meant to force", p, got, m)
		}
	}
	profiles := []struct {
		name  string
		disk  simfs.Profile
		batch int
	}{{"ssd", simfs.SSD, 1000}, {"object-store", simfs.ObjectStore, 10000}}
	chosen := map[string]string{}
	for _, p := range profiles {
		chosen[p.name] = method(p.name)
	}
	type key struct{ profile, plan string }
	results := map[key][]diskbench.Result{}
	answer := ""
	for r := 0; r < *flagRuns; r++ {
		for _, p := range profiles {
			for _, plan := range []string{"lookup", "hash"} {
				setup := []string{"SET storage.profile = '" + forcing[plan] + "'", fmt.Sprintf("SET sql.testing.lookup_batch = %d", p.batch)}
				res, err := n.Time(ctx, p.disk, setup, join)
				if err != nil {
					log.Fatal(err)
				}
				if answer == "" {
					answer = res.Answer
				} else if res.Answer != answer {
					log.Fatalf("%s plan on %s: answer %s, not %s", plan, p.name, res.Answer, answer)
				}
				k := key{p.name, plan}
				results[k] = append(results[k], res)
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "disk\tplanner chooses\tlookup join\thash join\tdisk requests (lookup / hash)\tchosen/other\t")
	for _, p := range profiles {
		l, h := diskbench.Median(results[key{p.name, "lookup"}]), diskbench.Median(results[key{p.name, "hash"}])
		ratio := float64(l.Wall) / float64(h.Wall)
		if chosen[p.name] == "hash" {
			ratio = 1 / ratio
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d / %d\t%.2f×\t\n", p.name, chosen[p.name], l.Wall.Round(time.Millisecond), h.Wall.Round(time.Millisecond),
			l.Disk.Requests, h.Disk.Requests, ratio)
	}
	tw.Flush()
	fmt.Printf("plan flips: %v; chosen/other below 1 means the chosen plan was faster\n", chosen["ssd"] != chosen["object-store"])
	fmt.Printf("%d lookups into %d rows, median of %d runs; load average %.1f at the start, %.1f at the end\n", *flagLookups, *flagRows, *flagRuns, startLoad, diskbench.Load())
}
