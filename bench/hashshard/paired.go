package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/test/proc"
	"github.com/jackc/pgx/v5"
)

// -reads-paired: the read goal's A/B with both sides in the same moments.
// Separate runs of each schema (-reads, the schema runs) meet different
// machine states on a shared two-core VM: their ratios moved 0.7–1.5×
// between runs. Here both tables exist at once, `kvs` (the kv
// workload's sharded schema, -buckets buckets) and `kvu` (unsharded),
// filled with the same -paired-rows keys; each of -concurrency workers
// (connected round-robin to every node, as the kv workload's are) reads
// one random key from one table and the same key from the other, the
// order alternating, for -duration, with the kv workload's statement
// (`SELECT k, v FROM kv WHERE k IN ($1)`, prepared). Each table's reads
// thus meet the same load, gateways and connections; the ratio of mean
// latencies is the ratio of the throughputs the same workers would get
// from each table alone at equal concurrency. The tables are made afresh
// in every run.

func pairedMode(ctx context.Context, nodes []*proc.Node) error {
	c, err := nodes[0].Connect(ctx, time.Minute)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	type stats struct {
		lat [2][]time.Duration
		at  [2][]time.Duration // when each read began, from the run's start
	}
	var ratios []string
	var meanRatios, p50Ratios, p99Ratios []float64
	for r := 1; r <= *flagRuns; r++ {
		for _, stmt := range []string{
			"DROP TABLE IF EXISTS kvs", "DROP TABLE IF EXISTS kvu",
			fmt.Sprintf("CREATE TABLE kvs (k INT8 NOT NULL, v BYTEA NOT NULL, PRIMARY KEY (k) USING HASH WITH (bucket_count = %d))", *flagBuckets),
			"CREATE TABLE kvu (k INT8 NOT NULL, v BYTEA NOT NULL, PRIMARY KEY (k))",
			fmt.Sprintf("INSERT INTO kvs SELECT i, '\\x01'::BYTEA FROM generate_series(0, %d) AS g(i)", *flagPairedRows-1),
			fmt.Sprintf("INSERT INTO kvu SELECT i, '\\x01'::BYTEA FROM generate_series(0, %d) AS g(i)", *flagPairedRows-1),
		} {
			if _, err := c.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		before, err := placement(ctx, nodes)
		if err != nil {
			return err
		}
		t0 := time.Now()
		var mu sync.Mutex
		var all stats
		var wg sync.WaitGroup
		errs := make([]error, *flagConcurrency)
		deadline := time.Now().Add(*flagDuration)
		for w := range *flagConcurrency {
			wg.Go(func() {
				nd := nodes[w%len(nodes)]
				if *flagGateways != "all" {
					nd = nodes[0]
				}
				conn, err := pgx.Connect(ctx, nd.URL())
				if err != nil {
					errs[w] = err
					return
				}
				defer conn.Close(context.Background())
				rng := rand.New(rand.NewPCG(uint64(r), uint64(w)))
				var mine stats
				tables := [2]string{"kvs", "kvu"}
				for i := 0; time.Now().Before(deadline); i++ {
					k := rng.Int64N(int64(*flagPairedRows))
					for j := range 2 {
						t := (i + j) % 2 // alternate which table goes first
						start := time.Now()
						rows, err := conn.Query(ctx, "SELECT k, v FROM "+tables[t]+" WHERE k IN ($1)", k)
						if err != nil {
							errs[w] = err
							return
						}
						n := 0
						for rows.Next() {
							n++
						}
						rows.Close()
						if err := rows.Err(); err != nil {
							errs[w] = err
							return
						}
						if n != 1 {
							errs[w] = fmt.Errorf("%s: key %d: %d rows", tables[t], k, n)
							return
						}
						mine.lat[t] = append(mine.lat[t], time.Since(start))
						mine.at[t] = append(mine.at[t], start.Sub(t0))
					}
				}
				mu.Lock()
				for t := range 2 {
					all.lat[t] = append(all.lat[t], mine.lat[t]...)
					all.at[t] = append(all.at[t], mine.at[t]...)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		after, err := placement(ctx, nodes)
		if err != nil {
			return err
		}
		// The mean of each second, per table, before the sort below.
		var perSec [2][]string
		for t := range 2 {
			secs := int(flagDuration.Seconds()) + 1
			sum, n := make([]time.Duration, secs), make([]int, secs)
			for i, at := range all.at[t] {
				sec := min(int(at.Seconds()), secs-1)
				sum[sec] += all.lat[t][i]
				n[sec]++
			}
			for sec := range secs {
				if n[sec] > 0 {
					perSec[t] = append(perSec[t], fmt.Sprintf("%.1f", msOf(sum[sec]/time.Duration(n[sec]))))
				}
			}
		}
		var line [2]string
		var mean, p50, p99 [2]float64
		for t := range 2 {
			l := all.lat[t]
			slices.Sort(l)
			var sum time.Duration
			for _, d := range l {
				sum += d
			}
			mean[t] = msOf(sum / time.Duration(len(l)))
			p50[t], p99[t] = msOf(l[len(l)/2]), msOf(l[len(l)*99/100])
			line[t] = fmt.Sprintf("%d reads, mean %.2f ms, p50 %.2f ms, p99 %.2f ms", len(l), mean[t], p50[t], p99[t])
		}
		fmt.Printf("run %d (load average %s): sharded %s; unsharded %s\n", r, loadavg(), line[0], line[1])
		fmt.Printf("  mean ms of each second: sharded %s; unsharded %s\n", strings.Join(perSec[0], " "), strings.Join(perSec[1], " "))
		fmt.Printf("  tablets (leader/replicas) at the start: %s\n  at the end: %s\n", before, after)
		meanRatios = append(meanRatios, mean[1]/mean[0])
		p50Ratios = append(p50Ratios, p50[1]/p50[0])
		p99Ratios = append(p99Ratios, p99[1]/p99[0])
		ratios = append(ratios, fmt.Sprintf("%.2f", mean[1]/mean[0]))
	}
	fmt.Printf("\nsharded read speed over unsharded (unsharded mean latency / sharded), median of %d runs: %.2fx (per run %s); p50 %.2fx, p99 %.2fx\n",
		*flagRuns, median(meanRatios), strings.Join(ratios, ", "), median(p50Ratios), median(p99Ratios))
	return nil
}

// placement lists kvs's and kvu's tablets with their leader and replicas
// (cairn_catalog.tablets, which shows the tablets the node it is asked
// on has a replica of: so asked on every node), in key order.
func placement(ctx context.Context, nodes []*proc.Node) (string, error) {
	type tab struct {
		table, start, desc string
	}
	seen := map[int64]tab{}
	for _, nd := range nodes {
		c, err := nd.Connect(ctx, 10*time.Second)
		if err != nil {
			return "", err
		}
		rows, err := c.Query(ctx, "SELECT table_name, start_key, tablet_id, leader, replicas::TEXT FROM cairn_catalog.tablets WHERE table_name IN ('kvs', 'kvu') AND coalesce(index_name, '') = ''")
		if err != nil {
			c.Close(ctx)
			return "", err
		}
		for rows.Next() {
			var t, start, reps string
			var id, leader int64
			if err := rows.Scan(&t, &start, &id, &leader, &reps); err != nil {
				rows.Close()
				c.Close(ctx)
				return "", err
			}
			seen[id] = tab{t, start, fmt.Sprintf("%s:%d@n%d%s", t, id, leader, reps)}
		}
		rows.Close()
		c.Close(ctx)
		if err := rows.Err(); err != nil {
			return "", err
		}
	}
	var tabs []tab
	for _, t := range seen {
		tabs = append(tabs, t)
	}
	slices.SortFunc(tabs, func(a, b tab) int { return strings.Compare(a.table+a.start, b.table+b.start) })
	var out []string
	for _, t := range tabs {
		out = append(out, t.desc)
	}
	return strings.Join(out, " "), nil
}
