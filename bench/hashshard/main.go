// Command hashshard runs the hash-sharded-indexes seed's benchmarks (issue
// 16) on a cluster of `cairn start --join` processes on loopback (3 nodes
// unless -nodes), built from this tree, each store adding -sync-latency to
// every sync (`--debug-sync-latency`, storage/simfs) so that a write pays a
// disk's latency and the result is not only two cores' CPU.
//
// For each of the seed's four schemas (kv with a primary key on k, sharded
// into -buckets buckets or not, with or without an index on v) and each of
// -runs runs it measures:
//
//   - sequential kv0 (writes only, --sequential): the highest throughput
//     whose mean latency stays under -max-latency (the seed's kv0bench;
//     the unthrottled round when no rate stays under it), and each node's
//     share of the write batches its leaseholders evaluated meanwhile
//     (from /metrics, cairn_tablet_write_batches_total);
//   - --read-percent 90 --sequential: reads/s with p50/p99;
//   - for the sharded schemas, EXPLAIN ANALYZE of SELECT * FROM kv ORDER BY
//     k LIMIT 5 (rows read per bucket; first run only).
//
// It then prints the median of the runs per schema and each goal of issue
// 16 against its figure: sharded ≥ 2.5× unsharded on sequential writes;
// each node's share of the writes within 20% of the mean; reads of the
// sharded table as fast as of the unsharded one.
//
// -scaling 1,3,5 runs the seed's scaling comparison instead: sequential
// kv0 (the same search) on schemas 1 and 2 on clusters of each size,
// printed beside the seed's claim of linear scaling.
//
// By default the workers connect to every node round-robin, as the seed's
// workload did (-gateways first: all to node 1). With -node-cpu F each
// node process gets a CPU quota of F cores (a cgroup, cpulimit.go): on a
// machine of two cores, nodes otherwise share the same CPUs, so moving
// work from one node to three adds no capacity, which is the whole of what
// hash sharding buys a cluster of separate machines; the quota makes each
// node a small machine of its own, as -sync-latency makes its store a disk.
//
// -reads (reads.go) and -reads-paired (paired.go) look at the read goal
// alone: the first times kv90 and kv100 per schema and splits each
// SELECT's time into its KV read and the rest; the second reads a sharded
// and an unsharded table in the same moments, each worker alternating,
// so the two meet the same machine. CAIRN_BIN names a cairn binary built
// beforehand (so that a run under a benchmark lock does not compile).
//
// The baseline of each sharded figure is the unsharded schema in the same
// run. The load average is printed at the start and the end; the project
// runs benchmarks only under 4. Usage: go run ./bench/hashshard [-buckets
// 10] [-duration 10s] [-concurrency 16] [-sync-latency 2ms] [-max-latency
// 10ms] [-runs 3] [-nodes 3] [-only 1,2,3,4] [-scaling 1,3,5] [-gateways all|first]
// [-node-cpu F] [-diagnose DIR] [-reads] [-reads-paired [-paired-rows N]]
// [-port 30400]
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
	"github.com/cairn-db/cairn/test/proc"
	"github.com/cairn-db/cairn/workload"
)

var (
	flagBuckets     = flag.Int("buckets", 10, "bucket count of the sharded schemas (the seed's 10)")
	flagDuration    = flag.Duration("duration", 10*time.Second, "length of each run (each search round too)")
	flagConcurrency = flag.Int("concurrency", 16, "workers")
	flagSyncLatency = flag.Duration("sync-latency", 2*time.Millisecond, "simulated latency of every sync on each node")
	flagMaxLatency  = flag.Duration("max-latency", 10*time.Millisecond, "mean latency bound of the kv0 search")
	flagRounds      = flag.Int("search-rounds", 4, "bisection rounds of the kv0 search")
	flagOnly        = flag.String("only", "1,2,3,4", "schemas to run (the seed's numbering)")
	flagRuns        = flag.Int("runs", 3, "runs of every measurement; the medians are reported")
	flagNodes       = flag.Int("nodes", 3, "cluster size of the schema runs")
	flagScaling     = flag.String("scaling", "", "cluster sizes of a scaling run (e.g. 1,3,5) instead of the schema runs")
	flagGateways    = flag.String("gateways", "all", "nodes the workers connect to: all (round-robin, as the seed's workload did) or first")
	flagNodeCPU     = flag.Float64("node-cpu", 0, "CPUs each node process may use (a cgroup CPU quota, so that nodes on one machine play separate machines; 0: no limit)")
	flagDiagnose    = flag.String("diagnose", "", "directory: after each schema's runs, one more unthrottled kv0 run printing each node's and the clients' CPU per write and the nodes' throttling, with a CPU profile of every node written there (diagnose.go)")
	flagSettle      = flag.Duration("settle", 0, "wait this long after creating each schema's table before measuring (the CREATE places the buckets' replicas and leases itself, best effort within 20 s; this leaves the queues time for whatever it did not finish)")
	flagReads       = flag.Bool("reads", false, "instead of the schema runs, time point reads per schema and split each SELECT's time into KV and SQL (reads.go)")
	flagPaired      = flag.Bool("reads-paired", false, "instead of the schema runs, read a sharded and an unsharded table in the same moments, each worker alternating between them (paired.go)")
	flagPairedRows  = flag.Int("paired-rows", 10000, "rows of each table of -reads-paired")
	flagPort        = flag.Int("port", 30400, "first of the loopback ports: RPC, SQL and HTTP of each node (3 per node; a scaling run uses 3 per node of each size, consecutively)")
)

type schema struct {
	n       int
	name    string
	sharded bool
	index   bool
}

var schemas = []schema{
	{1, "(1) sharded k", true, false},
	{2, "(2) unsharded k", false, false},
	{3, "(3) sharded k, index on v", true, true},
	{4, "(4) unsharded k, index on v", false, true},
}

func main() {
	flag.Parse()
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// printTail prints the last n lines of the file at path.
func printTail(path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Printf("(%s: %v)\n", path, err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	fmt.Printf("--- the last %d lines of %s\n", min(n, len(lines)), path)
	for _, l := range lines[max(0, len(lines)-n):] {
		fmt.Println(l)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "bench-hashshard-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// CAIRN_BIN: a binary built beforehand, so that a run under the
	// bench lock does not compile.
	bin := os.Getenv("CAIRN_BIN")
	if bin == "" {
		if bin, err = proc.Build(dir); err != nil {
			return err
		}
	}
	fmt.Printf("load average at the start: %s\n", loadavg())
	defer func() { fmt.Printf("load average at the end: %s\n", loadavg()) }()
	if *flagScaling != "" {
		return scaling(ctx, bin, dir)
	}
	nodes, limits, stop, err := startCluster(ctx, bin, filepath.Join(dir, "c"), *flagNodes, *flagPort)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("%d nodes on loopback, --debug-sync-latency %v, %d workers, %v per run, %d buckets, %d runs, gateways %s, CPUs per node %s\n\n",
		len(nodes), *flagSyncLatency, *flagConcurrency, *flagDuration, *flagBuckets, *flagRuns, *flagGateways, cpuText())
	if *flagReads {
		return readsMode(ctx, nodes)
	}
	if *flagPaired {
		return pairedMode(ctx, nodes)
	}
	results := map[int][]result{}
	for r := 1; r <= *flagRuns; r++ {
		for _, s := range schemas {
			if !slices.Contains(strings.Split(*flagOnly, ","), strconv.Itoa(s.n)) {
				continue
			}
			fmt.Printf("== run %d, %s\n", r, s.name)
			res, err := measure(ctx, nodes, limits, s, r, r == 1, true)
			if err != nil {
				return err
			}
			results[s.n] = append(results[s.n], res)
			fmt.Println()
		}
	}
	report(results, len(nodes))
	return nil
}

// startCluster starts n nodes under dir on ports from port on and
// connects to the first (waiting for the cluster); stop kills them.
// limits are the nodes' CPU quotas (none without -node-cpu).
func startCluster(ctx context.Context, bin, dir string, n, port int) ([]*proc.Node, []*cpuLimit, func(), error) {
	var nodes []*proc.Node
	var limits []*cpuLimit
	stop := func() {
		for _, nd := range nodes {
			nd.Kill()
		}
		for _, l := range limits {
			l.remove()
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	var join []string
	for i := range n {
		join = append(join, fmt.Sprintf("127.0.0.1:%d", port+i))
	}
	for i := range n {
		nd := &proc.Node{Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), RPC: join[i],
			SQL: fmt.Sprintf("127.0.0.1:%d", port+n+i), HTTP: fmt.Sprintf("127.0.0.1:%d", port+2*n+i)}
		if err := nd.Start(bin, join, "--debug-sync-latency", flagSyncLatency.String()); err != nil {
			stop()
			return nil, nil, nil, err
		}
		nodes = append(nodes, nd)
		if *flagNodeCPU > 0 {
			l, err := limitCPU(fmt.Sprintf("cairn-bench-%d-n%d", port, i+1), nd.Pid(), *flagNodeCPU)
			if err != nil {
				stop()
				return nil, nil, nil, err
			}
			limits = append(limits, l)
		}
	}
	c, err := nodes[0].Connect(ctx, 2*time.Minute)
	if err != nil {
		// The cluster's directory goes with the run: show why first (a
		// five-node start has failed this way three times, unexplained).
		for _, nd := range nodes {
			printTail(nd.Dir+".log", 30)
		}
		stop()
		return nil, nil, nil, err
	}
	c.Close(ctx)
	return nodes, limits, stop, nil
}

// result is one run of one schema.
type result struct {
	kv0      float64 // ops/s: the search's best, else the unthrottled round's
	kv0Under bool    // the search found a rate under the bound
	kv0Mean  time.Duration
	// kv0Free is the search's unthrottled round, ops/s.
	kv0Free float64
	shares  []float64 // each node's share of the write batches
	kv90    workload.KVResult
}

// measure runs run number run of one schema's measurements on nodes
// (kv90 too when asked, and -diagnose's run); explain prints EXPLAIN
// ANALYZE of the ORDER BY k LIMIT 5 of a sharded schema.
func measure(ctx context.Context, nodes []*proc.Node, limits []*cpuLimit, s schema, run int, explain, kv90 bool) (result, error) {
	var res result
	var urls []string
	if *flagGateways == "all" {
		for _, nd := range nodes {
			urls = append(urls, nd.URL())
		}
	}
	cfg := workload.KVConfig{URL: nodes[0].URL(), URLs: urls, Sequential: true, Concurrency: *flagConcurrency, Duration: *flagDuration,
		Batch: 1, HashSharded: s.sharded, SecondaryIndex: s.index, Drop: true, Out: os.Stdout, Quiet: true}
	if s.sharded {
		cfg.Buckets = *flagBuckets
	}
	if err := workload.InitKV(ctx, cfg); err != nil {
		return res, err
	}
	fmt.Println(workload.KVSchema(cfg))
	if *flagSettle > 0 {
		// A fixed wait, not a condition: the program sees the nodes only
		// through SQL and /metrics, which tell neither where a table's
		// replicas are nor which node holds its leases.
		select {
		case <-time.After(*flagSettle):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	before, err := writeBatches(nodes)
	if err != nil {
		return res, err
	}
	best, first, err := workload.SearchKVDetail(ctx, cfg, *flagMaxLatency, *flagRounds)
	if err != nil {
		return res, err
	}
	after, err := writeBatches(nodes)
	if err != nil {
		return res, err
	}
	var total float64
	for i := range nodes {
		total += after[i] - before[i]
	}
	for i := range nodes {
		res.shares = append(res.shares, (after[i]-before[i])/total)
	}
	res.kv0Free = first.Rate()
	if best.Ops > 0 {
		res.kv0, res.kv0Under, res.kv0Mean = best.Rate(), true, best.Mean
	} else {
		res.kv0, res.kv0Mean = first.Rate(), first.Mean
	}
	if *flagDiagnose != "" {
		if err := diagnose(ctx, nodes, limits, cfg, s, run); err != nil {
			return res, err
		}
	}
	if !kv90 {
		return res, nil
	}
	cfg.ReadPercent = 90
	fmt.Println("kv90 sequential:")
	if res.kv90, err = workload.RunKVResult(ctx, cfg); err != nil {
		return res, err
	}
	if s.sharded && explain {
		c, err := nodes[0].Connect(ctx, time.Minute)
		if err != nil {
			return res, err
		}
		defer c.Close(ctx)
		rows, err := c.Query(ctx, "EXPLAIN ANALYZE SELECT * FROM kv ORDER BY k LIMIT 5")
		if err != nil {
			return res, err
		}
		fmt.Println("EXPLAIN ANALYZE SELECT * FROM kv ORDER BY k LIMIT 5:")
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return res, err
			}
			fmt.Println("  " + line)
		}
		if err := rows.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func pick(rs []result, f func(result) float64) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report prints the medians per schema and the goals.
func report(results map[int][]result, n int) {
	fmt.Printf("medians of %d runs\n\n", *flagRuns)
	fmt.Println("| schema | kv0 ops/s (mean ms) | under the bound in | write batches per node | kv90 reads/s (p50 / p99 ms) |")
	fmt.Println("|---|---:|---|---|---:|")
	for _, s := range schemas {
		rs := results[s.n]
		if len(rs) == 0 {
			continue
		}
		under := 0
		for _, r := range rs {
			if r.kv0Under {
				under++
			}
		}
		var shares []string
		for i := range n {
			shares = append(shares, fmt.Sprintf("%.0f%%", 100*median(pick(rs, func(r result) float64 { return r.shares[i] }))))
		}
		fmt.Printf("| %s | %.0f (%.1f) | %d of %d runs | %s | %.0f (%.1f / %.1f) |\n", s.name,
			median(pick(rs, func(r result) float64 { return r.kv0 })), median(pick(rs, func(r result) float64 { return msOf(r.kv0Mean) })),
			under, len(rs), strings.Join(shares, " / "),
			median(pick(rs, func(r result) float64 { return r.kv90.Reads.Rate })),
			median(pick(rs, func(r result) float64 { return msOf(r.kv90.Reads.P50) })),
			median(pick(rs, func(r result) float64 { return msOf(r.kv90.Reads.P99) })))
	}
	fmt.Println()
	// ratio is the median of the per-run ratios of pairs comparable
	// says are (each run's pair met the same machine), and how many.
	ratio := func(a, b int, f func(result) float64, comparable func(x, y result) bool) (float64, int) {
		ra, rb := results[a], results[b]
		var xs []float64
		for i := range min(len(ra), len(rb)) {
			if comparable(ra[i], rb[i]) {
				xs = append(xs, f(ra[i])/f(rb[i]))
			}
		}
		if len(xs) == 0 {
			return 0, 0
		}
		return median(xs), len(xs)
	}
	every := func(x, y result) bool { return true }
	kv0 := func(r result) float64 { return r.kv0 }
	free := func(r result) float64 { return r.kv0Free }
	reads := func(r result) float64 { return r.kv90.Reads.Rate }
	for _, p := range [][2]int{{1, 2}, {3, 4}} {
		if len(results[p[0]]) == 0 || len(results[p[1]]) == 0 {
			continue
		}
		// A rate under the bound and an unthrottled one measure different
		// things: a run's pair counts only when both searches found a
		// rate under the bound.
		if x, k := ratio(p[0], p[1], kv0, func(x, y result) bool { return x.kv0Under && y.kv0Under }); k > 0 {
			fmt.Printf("goal: sharded >= 2.5x unsharded on sequential writes, schema %d/%d: %.2fx (runs where both stayed under the bound: %d) -> %s\n", p[0], p[1], x, k, verdict(x >= 2.5))
		} else {
			fmt.Printf("goal: sharded >= 2.5x unsharded on sequential writes, schema %d/%d: no run where both stayed under the bound -> NOT shown\n", p[0], p[1])
		}
		if x, k := ratio(p[0], p[1], free, every); k > 0 {
			fmt.Printf("  unthrottled kv0, schema %d/%d: %.2fx\n", p[0], p[1], x)
		}
	}
	for _, sn := range []int{1, 3} {
		rs := results[sn]
		if len(rs) == 0 {
			continue
		}
		worst := 0.0
		mean := 1 / float64(n)
		for i := range n {
			sh := median(pick(rs, func(r result) float64 { return r.shares[i] }))
			worst = max(worst, math.Abs(sh-mean)/mean)
		}
		fmt.Printf("goal: each node's share of writes within 20%% of the mean, schema %d: furthest %.0f%% from it -> %s\n", sn, 100*worst, verdict(worst <= 0.2))
	}
	for _, p := range [][2]int{{1, 2}, {3, 4}} {
		if x, k := ratio(p[0], p[1], reads, every); k > 0 {
			fmt.Printf("goal: reads with k = ? as fast sharded as unsharded, schema %d/%d: %.2fx -> %s\n", p[0], p[1], x, verdict(x >= 0.95))
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// scaling runs sequential kv0 on schemas 1 and 2 on clusters of each
// size in -scaling, -runs times, and prints the medians beside the seed's
// claim (linear: n nodes give n times one node's throughput).
func scaling(ctx context.Context, bin, dir string) error {
	sizes, err := benchflag.Counts("scaling", *flagScaling, 1)
	if err != nil {
		return err
	}
	fmt.Printf("scaling: sequential kv0 at %v nodes, --debug-sync-latency %v, %d workers, %v per round, %d buckets, %d runs, gateways %s, CPUs per node %s\n\n",
		sizes, *flagSyncLatency, *flagConcurrency, *flagDuration, *flagBuckets, *flagRuns, *flagGateways, cpuText())
	type row struct {
		n                  int
		sharded, unsharded []float64
	}
	var rows []row
	port := *flagPort
	for _, n := range sizes {
		nodes, limits, stop, err := startCluster(ctx, bin, filepath.Join(dir, fmt.Sprintf("s%d", n)), n, port)
		if err != nil {
			return err
		}
		port += 3 * n
		rw := row{n: n}
		for r := 1; r <= *flagRuns; r++ {
			for _, s := range schemas[:2] {
				fmt.Printf("== %d nodes, run %d, %s\n", n, r, s.name)
				res, err := measure(ctx, nodes, limits, s, r, false, false)
				if err != nil {
					stop()
					return err
				}
				if s.sharded {
					rw.sharded = append(rw.sharded, res.kv0)
				} else {
					rw.unsharded = append(rw.unsharded, res.kv0)
				}
			}
		}
		stop()
		rows = append(rows, rw)
	}
	fmt.Printf("\nmedians of %d runs (kv0: highest rate under %v mean, else unthrottled)\n\n", *flagRuns, *flagMaxLatency)
	fmt.Println("| nodes | sharded ops/s | × its 1st size | unsharded ops/s | × its 1st size | sharded/unsharded | the seed's claim (linear) |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		sh, un := median(r.sharded), median(r.unsharded)
		sh0, un0 := median(rows[0].sharded), median(rows[0].unsharded)
		fmt.Printf("| %d | %.0f | %.2f | %.0f | %.2f | %.2f | %.2f |\n", r.n, sh, sh/sh0, un, un/un0, sh/un, float64(r.n)/float64(rows[0].n))
	}
	return nil
}

// writeBatches sums each node's cairn_tablet_write_batches_total over its
// tablets (only a leaseholder evaluates, so this is the node's share).
func writeBatches(nodes []*proc.Node) ([]float64, error) {
	return metricSums(nodes, "cairn_tablet_write_batches_total")
}

// metricSums reads each node's /metrics and sums the samples of metric
// (every label set).
func metricSums(nodes []*proc.Node, metric string) ([]float64, error) {
	return sampleSums(nodes, func(line string) bool {
		return strings.HasPrefix(line, metric+"{") || strings.HasPrefix(line, metric+" ")
	})
}

// sampleSums reads each node's /metrics and sums the values of the
// sample lines keep accepts.
func sampleSums(nodes []*proc.Node, keep func(line string) bool) ([]float64, error) {
	out := make([]float64, len(nodes))
	for i, n := range nodes {
		resp, err := http.Get("http://" + n.HTTP + "/metrics")
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(&buf)
		for sc.Scan() {
			line := sc.Text()
			if !keep(line) {
				continue
			}
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				out[i] += v
			}
		}
	}
	return out, nil
}
