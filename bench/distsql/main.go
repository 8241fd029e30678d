// Command distsql compares distributed scans (issue 17) with gateway-only
// reads on three local nodes: a table of -rows rows split into tablets of
// -per-tablet × 20,000 rows while it loads (leases spread by cairn
// start's balancer), then aggregate and filtered scans each run with SET distsql =
// off and = on, -runs times each, alternating; it prints the median wall
// time of each and off/on (above 1: distributed is faster). With -global
// the nodes get `cairn demo --global`'s simulated latencies.
//
// What is distributed today is the scan's KV reading (fragments on the
// tablets' leaseholders stream to the gateway in parallel, each up to
// its window); filters, projections and aggregation still run at the
// gateway, so every row crosses the network either way.
//
// Usage: go run ./bench/distsql [-rows 300000] [-runs 3] [-per-tablet 2] [-global]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server/localcluster"
	"github.com/jackc/pgx/v5"
)

var (
	flagRows      = flag.Int("rows", 300_000, "rows in the table")
	flagRuns      = flag.Int("runs", 3, "timed runs of each query and mode; medians are reported")
	flagPerTablet = flag.Int("per-tablet", 2, "loading batches of 20,000 rows per tablet")
	flagGlobal    = flag.Bool("global", false, "simulated inter-region latency (cairn demo --global)")
	flagLog       = flag.Bool("log", false, "the nodes' logs on stderr (discarded otherwise)")
)

var queries = []struct{ name, sql string }{
	{"count+sum", "SELECT count(*), sum(x) FROM t"},
	{"grouped", "SELECT g, count(*), sum(x) FROM t GROUP BY g ORDER BY g"},
	{"filtered", "SELECT count(*) FROM t WHERE x > 990"},
	{"top-10", "SELECT k, x FROM t ORDER BY x DESC, k LIMIT 10"},
}

func main() {
	flag.Parse()
	ctx := context.Background()
	logTo := io.Discard
	if *flagLog {
		logTo = os.Stderr
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 3, Global: *flagGlobal, Logger: slog.New(slog.NewTextHandler(logTo, nil))})
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
	must("CREATE TABLE t (k INT PRIMARY KEY, g INT, x INT, pad TEXT)")
	for lo := 1; lo <= *flagRows; lo += 20_000 {
		hi := min(lo+19_999, *flagRows)
		// Idempotent, so a batch that failed while leases moved (the
		// balancer runs during the load) can simply run again.
		load := fmt.Sprintf("INSERT INTO t SELECT i, i %% 100, (i::bigint * 7919) %% 1000, repeat('p', 40) FROM generate_series(%d, %d) AS i ON CONFLICT (k) DO NOTHING", lo, hi)
		for attempt := 1; ; attempt++ {
			_, err := conn.Exec(ctx, load)
			if err == nil {
				break
			}
			if attempt == 5 {
				log.Fatalf("loading rows %d..%d: %v", lo, hi, err)
			}
			log.Printf("loading rows %d..%d (attempt %d): %v", lo, hi, attempt, err)
		}
		if (hi/20_000)%*flagPerTablet == 0 {
			splitAfterLast(ctx, c)
		}
	}
	must("SET distsql = on")
	var plan []string
	rs, err := conn.Query(ctx, "EXPLAIN ANALYZE SELECT count(*) FROM t")
	if err != nil {
		log.Fatal(err)
	}
	for rs.Next() {
		var line string
		_ = rs.Scan(&line)
		plan = append(plan, line)
	}
	rs.Close()
	fmt.Printf("rows %d, runs %d, global %t; placement as EXPLAIN ANALYZE shows it:\n%s\n\n", *flagRows, *flagRuns, *flagGlobal, strings.Join(plan, "\n"))

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\toff ms\ton ms\toff/on\t")
	for _, q := range queries {
		times := map[string][]time.Duration{}
		var want string
		for range *flagRuns {
			for _, mode := range []string{"off", "on"} {
				must("SET distsql = " + mode)
				start := time.Now()
				got := result(ctx, conn, q.sql)
				times[mode] = append(times[mode], time.Since(start))
				if want == "" {
					want = got
				} else if got != want {
					log.Fatalf("%s: distsql=%s answered %q, before %q", q.name, mode, got, want)
				}
			}
		}
		off, on := median(times["off"]), median(times["on"])
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2f×\t\n", q.name, ms(off), ms(on), float64(off)/float64(on))
	}
	tw.Flush()
}

// splitAfterLast splits the user keyspace just after its last key, so
// the rows loaded next go to a fresh tablet: the table ends up in
// tablets of -per-tablet loading batches each, whose leases the
// balancer spreads over the nodes. (One tablet growing to the whole
// table while three in-process nodes share two cores lost its lease for
// good in the first runs of this program: "no leaseholder found for
// tablet 1".)
func splitAfterLast(ctx context.Context, c *localcluster.Cluster) {
	db := c.Nodes[0].DB()
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.ScanRequest{Key: []byte("\x03"), EndKey: []byte("\x04"), Reverse: true, MaxKeys: 1})
	br, err := db.Send(ctx, ba)
	if err != nil {
		log.Fatalf("finding the last key: %v", err)
	}
	rows := br.Responses[0].(*kvpb.ScanResponse).Rows
	if len(rows) == 0 {
		return
	}
	ba = &kvpb.BatchRequest{}
	ba.Add(&kvpb.SplitRequest{SplitKey: append(rows[0].Key, 0)})
	if _, err := db.Send(ctx, ba); err != nil {
		log.Printf("split: %v (the next tablet is larger)", err)
	}
}

func result(ctx context.Context, conn *pgx.Conn, sql string) string {
	rs, err := conn.Query(ctx, sql)
	if err != nil {
		log.Fatalf("%s: %v", sql, err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		v, err := rs.Values()
		if err != nil {
			log.Fatal(err)
		}
		out = append(out, fmt.Sprint(v...))
	}
	if err := rs.Err(); err != nil {
		log.Fatalf("%s: %v", sql, err)
	}
	return strings.Join(out, ";")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
