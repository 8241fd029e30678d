package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/bench/internal/procstat"

	"github.com/cairn-db/cairn/test/proc"
	"github.com/cairn-db/cairn/workload"
)

// -reads: where a point read's time goes, sharded against unsharded
// (issue 16's goal: reads with the shard derived from `k = ?` as fast as
// on the unsharded table). Per run and schema: the table made afresh
// and filled by an unthrottled sequential kv0 run of -duration, then a
// --read-percent 90 run (the goal's figure) and a --read-percent 100
// run, each of -duration. For each it prints the reads' rate and
// latency beside what the nodes' /metrics say: the gateways' mean SELECT
// time (cairn_sql_statement_duration_seconds, type select), the mean
// time of the KV read batches those SELECTs sent
// (cairn_kv_request_duration_seconds, kind read), so SQL's part is the
// difference, each node's share of the read batches its replicas
// evaluated (cairn_tablet_read_batches_total: the leaseholders), and the
// nodes' CPU per operation (/proc/<pid>/stat). With -diagnose DIR it
// also writes a CPU profile of every node over each kv100 run. The schemas alternate
// within a run, so a pair meets the same machine.

// readRow is one read run's figures.
type readRow struct {
	res                  workload.KVResult
	selectMs, kvReadMs   float64 // gateways' means over the run
	kvPerSelect, hitRate float64 // KV read batches per SELECT; plan cache hits per SELECT
	readShares           []float64
	cpuMsPerOp, cpuCores float64
}

func readsMode(ctx context.Context, nodes []*proc.Node) error {
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.URL())
	}
	if *flagGateways != "all" {
		urls = nil
	}
	type key struct{ schema, pct int }
	rows := map[key][]readRow{}
	var order []schema
	for r := 1; r <= *flagRuns; r++ {
		for _, s := range schemas {
			if !onlySchema(s) {
				continue
			}
			if r == 1 {
				order = append(order, s)
			}
			cfg := workload.KVConfig{URL: nodes[0].URL(), URLs: urls, Sequential: true, Concurrency: *flagConcurrency, Duration: *flagDuration,
				Batch: 1, HashSharded: s.sharded, SecondaryIndex: s.index, Drop: true, Out: os.Stdout, Quiet: true}
			if s.sharded {
				cfg.Buckets = *flagBuckets
			}
			if err := workload.InitKV(ctx, cfg); err != nil {
				return err
			}
			fill, err := workload.RunKVResult(ctx, cfg)
			if err != nil {
				return err
			}
			fmt.Printf("== run %d, %s: filled %d rows (%.0f writes/s)\n", r, s.name, fill.Ops, fill.Rate())
			for _, pct := range []int{90, 100} {
				cfg.ReadPercent = pct
				prof := ""
				if *flagDiagnose != "" && pct == 100 {
					prof = filepath.Join(*flagDiagnose, fmt.Sprintf("reads-s%d-r%d", s.n, r))
				}
				row, err := readRun(ctx, nodes, cfg, prof)
				if err != nil {
					return err
				}
				fmt.Printf("  kv%d: %.0f reads/s, p50 %.2f ms, p99 %.2f ms; SELECT %.2f ms at the gateways, of which KV reads %.2f ms; read batches per node %s; node CPU %.3f ms per op (%.2f cores); %.2f KV reads and %.2f plan cache hits per SELECT\n",
					pct, row.res.Reads.Rate, msOf(row.res.Reads.P50), msOf(row.res.Reads.P99), row.selectMs, row.kvReadMs, percents(row.readShares), row.cpuMsPerOp, row.cpuCores, row.kvPerSelect, row.hitRate)
				rows[key{s.n, pct}] = append(rows[key{s.n, pct}], row)
			}
		}
	}
	fmt.Printf("\nmedians of %d runs, %d nodes, %d workers, gateways %s\n\n", *flagRuns, len(nodes), *flagConcurrency, *flagGateways)
	fmt.Println("| schema | mix | reads/s | p50 / p99 ms | SELECT ms at the gateway | of which KV read ms | SQL ms (the rest) | node CPU ms per op | read batches per node |")
	fmt.Println("|---|---|---:|---|---:|---:|---:|---:|---|")
	for _, pct := range []int{90, 100} {
		for _, s := range order {
			rs := rows[key{s.n, pct}]
			pick := func(f func(readRow) float64) float64 {
				var xs []float64
				for _, r := range rs {
					xs = append(xs, f(r))
				}
				return median(xs)
			}
			shares := make([]float64, len(nodes))
			for i := range shares {
				shares[i] = pick(func(r readRow) float64 { return r.readShares[i] })
			}
			sel := pick(func(r readRow) float64 { return r.selectMs })
			kvr := pick(func(r readRow) float64 { return r.kvReadMs })
			fmt.Printf("| %s | kv%d | %.0f | %.2f / %.2f | %.2f | %.2f | %.2f | %.3f | %s |\n", s.name, pct,
				pick(func(r readRow) float64 { return r.res.Reads.Rate }),
				pick(func(r readRow) float64 { return msOf(r.res.Reads.P50) }),
				pick(func(r readRow) float64 { return msOf(r.res.Reads.P99) }),
				sel, kvr, pick(func(r readRow) float64 { return r.selectMs - r.kvReadMs }),
				pick(func(r readRow) float64 { return r.cpuMsPerOp }), percents(shares))
		}
	}
	// The goal's ratio, per run then the median, as report does.
	for _, pct := range []int{90, 100} {
		a, b := rows[key{1, pct}], rows[key{2, pct}]
		if len(a) == 0 || len(b) == 0 {
			continue
		}
		var xs []string
		var rs []float64
		for i := range min(len(a), len(b)) {
			x := a[i].res.Reads.Rate / b[i].res.Reads.Rate
			rs = append(rs, x)
			xs = append(xs, fmt.Sprintf("%.2f", x))
		}
		fmt.Printf("kv%d reads/s sharded over unsharded: %.2fx (per run %s)\n", pct, median(rs), strings.Join(xs, ", "))
	}
	return nil
}

func onlySchema(s schema) bool {
	for _, o := range strings.Split(*flagOnly, ",") {
		if o == strconv.Itoa(s.n) {
			return true
		}
	}
	return false
}

// readRun runs cfg once and reads the nodes' counters around it.
// With prof set, it writes a CPU profile of each node over the run to
// prof-n<node>.pprof.
func readRun(ctx context.Context, nodes []*proc.Node, cfg workload.KVConfig, prof string) (readRow, error) {
	var row readRow
	type snap struct {
		cpu, selSum, selN, kvSum, kvN, batches, hits []float64
	}
	take := func() (snap, error) {
		var s snap
		var err error
		for _, nd := range nodes {
			c, err := procstat.CPUSeconds(nd.Pid())
			if err != nil {
				return s, err
			}
			s.cpu = append(s.cpu, c)
		}
		if s.selSum, err = labeledSums(nodes, "cairn_sql_statement_duration_seconds_sum", `type="select"`); err != nil {
			return s, err
		}
		if s.selN, err = labeledSums(nodes, "cairn_sql_statement_duration_seconds_count", `type="select"`); err != nil {
			return s, err
		}
		if s.kvSum, err = labeledSums(nodes, "cairn_kv_request_duration_seconds_sum", `kind="read"`); err != nil {
			return s, err
		}
		if s.kvN, err = labeledSums(nodes, "cairn_kv_request_duration_seconds_count", `kind="read"`); err != nil {
			return s, err
		}
		if s.hits, err = metricSums(nodes, "cairn_sql_plan_cache_hits_total"); err != nil {
			return s, err
		}
		s.batches, err = metricSums(nodes, "cairn_tablet_read_batches_total")
		return s, err
	}
	s0, err := take()
	if err != nil {
		return row, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	if prof != "" {
		if err := os.MkdirAll(filepath.Dir(prof), 0o755); err != nil {
			return row, err
		}
		for i, nd := range nodes {
			wg.Go(func() {
				if err := fetchProfile(nd, max(1, int(cfg.Duration.Seconds())-1), fmt.Sprintf("%s-n%d.pprof", prof, i+1)); err != nil {
					fmt.Printf("  (node %d's profile: %v)\n", i+1, err)
				}
			})
		}
	}
	row.res, err = workload.RunKVResult(ctx, cfg)
	wg.Wait()
	if err != nil {
		return row, err
	}
	wall := time.Since(start).Seconds()
	s1, err := take()
	if err != nil {
		return row, err
	}
	sum := func(a, b []float64) (t float64) {
		for i := range a {
			t += b[i] - a[i]
		}
		return t
	}
	row.selectMs = 1000 * sum(s0.selSum, s1.selSum) / max(sum(s0.selN, s1.selN), 1)
	row.kvReadMs = 1000 * sum(s0.kvSum, s1.kvSum) / max(sum(s0.kvN, s1.kvN), 1)
	row.kvPerSelect = sum(s0.kvN, s1.kvN) / max(sum(s0.selN, s1.selN), 1)
	row.hitRate = sum(s0.hits, s1.hits) / max(sum(s0.selN, s1.selN), 1)
	cpu := sum(s0.cpu, s1.cpu)
	row.cpuCores = cpu / wall
	row.cpuMsPerOp = 1000 * cpu / max(float64(row.res.Ops), 1)
	total := sum(s0.batches, s1.batches)
	for i := range nodes {
		row.readShares = append(row.readShares, (s1.batches[i]-s0.batches[i])/max(total, 1))
	}
	return row, nil
}

// labeledSums is metricSums over the samples of metric whose labels
// contain label.
func labeledSums(nodes []*proc.Node, metric, label string) ([]float64, error) {
	return sampleSums(nodes, func(line string) bool {
		return strings.HasPrefix(line, metric+"{") && strings.Contains(line, label)
	})
}

func percents(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.0f%%", 100*x))
	}
	return strings.Join(s, " / ")
}
