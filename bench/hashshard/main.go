// Command hashshard runs the hash-sharded-indexes seed's benchmarks (issue
// 16) on a 3-node cluster of `cairn start --join` processes on loopback,
// built from this tree, each store adding -sync-latency to every sync
// (`--debug-sync-latency`, storage/simfs) so that a write pays a disk's
// latency and the result is not only two cores' CPU.
//
// For each of the seed's four schemas (kv with a primary key on k, sharded
// into -buckets buckets or not, with or without an index on v) it prints:
//
//   - sequential kv0 (writes only, --sequential): the highest throughput
//     whose mean latency stays under -max-latency (the seed's kv0bench),
//     and each node's share of the write batches its leaseholders
//     evaluated meanwhile (from /metrics, cairn_tablet_write_batches_total);
//   - --read-percent 90 --sequential: reads/s and writes/s with p50/p99;
//   - for the sharded schemas, EXPLAIN ANALYZE of SELECT * FROM kv ORDER BY
//     k LIMIT 5 (rows read per bucket).
//
// The baseline of each sharded figure is the unsharded schema in the same
// run. Usage: go run ./bench/hashshard [-buckets 10] [-duration 10s]
// [-concurrency 16] [-sync-latency 2ms] [-max-latency 10ms] [-runs 1]
// [-only 1,2,3,4] [-port 48400]
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

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
	flagPort        = flag.Int("port", 48400, "first of nine consecutive loopback ports: RPC, SQL and HTTP of each node")
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

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "bench-hashshard-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := proc.Build(dir)
	if err != nil {
		return err
	}
	var addrs []string
	for i := range 9 {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", *flagPort+i))
	}
	var nodes []*proc.Node
	for i := range 3 {
		nodes = append(nodes, &proc.Node{Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), RPC: addrs[i], SQL: addrs[3+i], HTTP: addrs[6+i]})
	}
	join := []string{nodes[0].RPC, nodes[1].RPC, nodes[2].RPC}
	for _, n := range nodes {
		if err := n.Start(bin, join, "--debug-sync-latency", flagSyncLatency.String()); err != nil {
			return err
		}
		defer n.Kill()
	}
	c, err := nodes[0].Connect(ctx, 2*time.Minute)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	fmt.Printf("3 nodes on loopback, --debug-sync-latency %v, %d workers, %v per run, %d buckets\n\n", *flagSyncLatency, *flagConcurrency, *flagDuration, *flagBuckets)
	for _, s := range schemas {
		if !slices.Contains(strings.Split(*flagOnly, ","), strconv.Itoa(s.n)) {
			continue
		}
		cfg := workload.KVConfig{URL: nodes[0].URL(), Sequential: true, Concurrency: *flagConcurrency, Duration: *flagDuration,
			Batch: 1, HashSharded: s.sharded, SecondaryIndex: s.index, Drop: true, Out: os.Stdout, Quiet: true}
		if s.sharded {
			cfg.Buckets = *flagBuckets
		}
		if err := workload.InitKV(ctx, cfg); err != nil {
			return err
		}
		fmt.Printf("== %s: %s\n", s.name, workload.KVSchema(cfg))
		before, err := writeBatches(nodes)
		if err != nil {
			return err
		}
		best, err := workload.SearchKV(ctx, cfg, *flagMaxLatency, *flagRounds)
		if err != nil {
			return err
		}
		after, err := writeBatches(nodes)
		if err != nil {
			return err
		}
		var total float64
		for i := range nodes {
			total += after[i] - before[i]
		}
		if best.Ops > 0 {
			fmt.Printf("kv0 sequential: max %.1f ops/s under %v mean; write batches per node:", best.Rate(), *flagMaxLatency)
		} else {
			fmt.Printf("kv0 sequential: no rate tried stayed under %v mean; write batches per node:", *flagMaxLatency)
		}
		for i := range nodes {
			fmt.Printf(" n%d %.0f%%", i+1, 100*(after[i]-before[i])/total)
		}
		fmt.Println()
		cfg.ReadPercent = 90
		fmt.Println("kv90 sequential:")
		if err := workload.RunKV(ctx, cfg); err != nil {
			return err
		}
		if s.sharded {
			rows, err := c.Query(ctx, "EXPLAIN ANALYZE SELECT * FROM kv ORDER BY k LIMIT 5")
			if err != nil {
				return err
			}
			fmt.Println("EXPLAIN ANALYZE SELECT * FROM kv ORDER BY k LIMIT 5:")
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					return err
				}
				fmt.Println("  " + line)
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		fmt.Println()
	}
	return nil
}

// writeBatches sums each node's cairn_tablet_write_batches_total over its
// tablets (only a leaseholder evaluates, so this is the node's share).
func writeBatches(nodes []*proc.Node) ([]float64, error) {
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
			if !strings.HasPrefix(line, "cairn_tablet_write_batches_total{") {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				out[i] += v
			}
		}
	}
	return out, nil
}
