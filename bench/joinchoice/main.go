// Command joinchoice measures the planner's storage-aware join choice
// (issue 19): the same join of -lookups rows (keys in random order) into
// a -rows table on a disk that plays an SSD (storage/simfs: 0.1 ms per
// read) and one that plays an object store (1 MiB chunks, 20 ms per
// request, 100 MiB/s). On each disk it prints the plan the planner
// chooses with storage.profile set to that disk's profile and the costs
// EXPLAIN (VERBOSE) gives both methods, and times both plans under that
// profile, batched as it batches: the lookup join with enable_hashjoin
// off, the hash join with enable_nestloop off (the program checks that
// each setting gives its plan). The goal: on each profile the chosen plan
// is at least as fast as the other, and where the profiles' costs differ
// enough the plan flips.
//
// Every timed query runs on a freshly restarted node (a cold block cache
// of -cache-mib, which the planner is told: a table larger than it is
// read again by every lookup batch), -runs times, alternating; medians
// are printed, with each plan's disk counters (what sql/opt's storage
// costs are calibrated against).
//
// The defaults are the shape where the plan flips (sql/opt's
// TestJoinMethodByProfile): 10,000 keys are 5% of the table, ten ssd
// batches of 1,000 keys each read a block per key from a 1 MiB cache,
// while the object store's one batch of 10,000 fetches each chunk once.
//
// Usage: go run ./bench/joinchoice [-rows 200000] [-lookups 10000] [-runs 3] [-cache-mib 1] [-force]
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
	flagLookups = flag.Int("lookups", 10_000, "rows of the join's input")
	flagRuns    = flag.Int("runs", 3, "timed runs of each plan on each profile; the median is printed")
	flagCache   = flag.Int64("cache-mib", 1, "block cache of the node in MiB")
	flagDir     = flag.String("dir", "", "store directory (default: a temporary one, removed after)")
	flagMaxLoad = flag.Float64("max-load", 4, "refuse to run at or above this 1-minute load average")
	flagForce   = flag.Bool("force", false, "run whatever the load")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	startLoad := diskbench.Load()
	n, done, err := diskbench.Setup(ctx, "joinchoice", *flagDir, *flagCache, *flagRows, *flagLookups, *flagMaxLoad, *flagForce)
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	join := "SELECT count(*), sum(t.v) FROM p JOIN t ON t.k = p.k"
	// force is the setting that leaves each plan the only one.
	force := map[string]string{"lookup": "SET enable_hashjoin = off", "hash": "SET enable_nestloop = off"}
	explain := func(profile string, settings ...string) (method, costs string) {
		setup := append([]string{"RESET enable_hashjoin", "RESET enable_nestloop", "SET storage.profile = '" + profile + "'"}, settings...)
		if err := n.Exec(ctx, setup...); err != nil {
			log.Fatal(err)
		}
		plan, err := n.Explain(ctx, "(VERBOSE) "+join)
		if err != nil {
			log.Fatal(err)
		}
		for _, l := range strings.Split(plan, "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "Join Method Cost:") {
				costs = strings.TrimPrefix(l, "Join Method Cost: ")
			}
		}
		switch {
		case strings.Contains(plan, "Lookup Join"):
			return "lookup", costs
		case strings.Contains(plan, "Hash Join"):
			return "hash", costs
		}
		log.Fatalf("profile %s: neither a lookup nor a hash join:\n%s", profile, plan)
		return "", ""
	}
	profiles := []struct {
		name string
		disk simfs.Profile
	}{{"ssd", simfs.SSD}, {"object-store", simfs.ObjectStore}}
	chosen, estimates := map[string]string{}, map[string]string{}
	for _, p := range profiles {
		chosen[p.name], estimates[p.name] = explain(p.name)
		for m, set := range force {
			if got, _ := explain(p.name, set); got != m {
				log.Fatalf("storage.profile %s with %q plans a %s join, not the %s join it is meant to force", p.name, set, got, m)
			}
		}
	}
	if err := n.Exec(ctx, "RESET enable_hashjoin", "RESET enable_nestloop"); err != nil {
		log.Fatal(err)
	}
	type key struct{ profile, plan string }
	results := map[key][]diskbench.Result{}
	answer := ""
	for r := 0; r < *flagRuns; r++ {
		for _, p := range profiles {
			for _, plan := range []string{"lookup", "hash"} {
				setup := []string{"SET storage.profile = '" + p.name + "'", force[plan]}
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
	// Each plan's disk, from the median run: what the cost model's storage
	// terms are calibrated against (sql/opt/cost.go), next to the wall
	// time, whose rest is CPU or disk time the CPU hid.
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "disk\tplan\twall\tdisk charged\treads\tMiB read\trequests\t")
	for _, p := range profiles {
		for _, plan := range []string{"lookup", "hash"} {
			m := diskbench.Median(results[key{p.name, plan}])
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1f\t%d\t\n", p.name, plan, m.Wall.Round(time.Millisecond), m.Disk.Charged.Round(time.Millisecond),
				m.Disk.Reads, float64(m.Disk.ReadBytes)/(1<<20), m.Disk.Requests)
		}
	}
	tw.Flush()
	for _, p := range profiles {
		fmt.Printf("%s: the planner's estimates (EXPLAIN (VERBOSE)): %s\n", p.name, estimates[p.name])
	}
	fmt.Printf("plan flips: %v; chosen/other at most 1 means the chosen plan was at least as fast\n", chosen["ssd"] != chosen["object-store"])
	fmt.Printf("%d lookups into %d rows, median of %d runs; load average %.1f at the start, %.1f at the end\n", *flagLookups, *flagRows, *flagRuns, startLoad, diskbench.Load())
}
