// Command colocatedtxn measures what sharing a table group buys Citus
// colocation (issue 17, docs/distributed.md): on three local nodes it
// runs transaction blocks that write one distribution value in two
// distributed tables, an order and its two items,
//
//	BEGIN; INSERT INTO orders ...; INSERT INTO items ... (2 rows); COMMIT
//
// against a pair colocated by colocate_with (one table group: the rows
// are in one tablet, the commit is one phase) and a pair distributed with
// colocate_with => 'none' (two groups: two tablets, two phases), -txns
// blocks per run on one connection, the two pairs alternating, -runs
// times. It prints the median transactions per second of each, their
// ratio, and the commits by phase the gateway counted
// (cairn_sql_commits_total). With -global the nodes get cairn demo
// --global's simulated latencies.
//
// Usage:
//
//	go run ./bench/colocatedtxn [-txns 300] [-runs 3] [-shards 8] [-global]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/server/localcluster"
)

var (
	flagTxns   = flag.Int("txns", 300, "transaction blocks per run and layout")
	flagRuns   = flag.Int("runs", 3, "runs of each layout; medians are reported")
	flagShards = flag.Int("shards", 8, "shards of each distributed table")
	flagGlobal = flag.Bool("global", false, "simulated inter-region latency (cairn demo --global)")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 3, Global: *flagGlobal, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	conn, err := pgx.Connect(ctx, c.URL(0, "postgres"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	must := func(sql string) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			log.Fatalf("%s: %v", sql, err)
		}
	}
	layouts := []struct{ name, orders, items, colocate string }{
		{"colocated (one group)", "orders_c", "items_c", "'orders_c'"},
		{"not colocated ('none')", "orders_n", "items_n", "'none'"},
	}
	for _, l := range layouts {
		must(fmt.Sprintf("CREATE TABLE %s (customer INT, id INT, total INT, PRIMARY KEY (customer, id))", l.orders))
		must(fmt.Sprintf("CREATE TABLE %s (customer INT, id INT, line INT, qty INT, PRIMARY KEY (customer, id, line))", l.items))
		must(fmt.Sprintf("SELECT create_distributed_table('%s', 'customer', colocate_with => 'none', shard_count => %d)", l.orders, *flagShards))
		must(fmt.Sprintf("SELECT create_distributed_table('%s', 'customer', colocate_with => %s, shard_count => %d)", l.items, l.colocate, *flagShards))
	}
	tps := make([][]float64, len(layouts))
	next := 0
	for run := range *flagRuns {
		for i, l := range layouts {
			start := time.Now()
			for range *flagTxns {
				next++
				k := next
				b := &pgx.Batch{}
				b.Queue("BEGIN")
				b.Queue(fmt.Sprintf("INSERT INTO %s VALUES (%d, %d, 10)", l.orders, k%1000, k))
				b.Queue(fmt.Sprintf("INSERT INTO %s VALUES (%d, %d, 1, 2), (%d, %d, 2, 3)", l.items, k%1000, k, k%1000, k))
				b.Queue("COMMIT")
				if err := conn.SendBatch(ctx, b).Close(); err != nil {
					log.Fatalf("run %d, %s: %v", run, l.name, err)
				}
			}
			tps[i] = append(tps[i], float64(*flagTxns)/time.Since(start).Seconds())
		}
	}
	_, one, two := c.Nodes[0].SQLCommits()
	fmt.Printf("txns %d per run, runs %d, shards %d, global %t\n", *flagTxns, *flagRuns, *flagShards, *flagGlobal)
	med := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for i, l := range layouts {
		fmt.Printf("%-24s median %7.1f txn/s  (runs %.1f)\n", l.name, med(tps[i]), tps[i])
	}
	fmt.Printf("colocated / not colocated: %.2fx\n", med(tps[0])/med(tps[1]))
	fmt.Printf("gateway commits: one phase %d, two phases %d\n", one, two)
}
