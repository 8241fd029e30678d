// Command distsql compares distributed execution (issue 17) with
// gateway-only execution on three local nodes, on a table shaped like the
// seed's github_events (parallel-indexing.txt: the same columns; PushEvent
// payloads with commits arrays of authors and emails; repo, actor and org
// objects; package workload/githubevents, loaded with COPY), loaded twice: as a regular table (range partitioned, split
// while it loads into tablets whose leases cairn start's balancer
// spreads) and as a distributed one (create_distributed_table, -shards
// shards). Each of the seed's two SELECTs (all repos, one repo_id), with
// no index, and the GROUP BY repo_id top 10 runs on each table
// with SET distsql = off and = on, -runs times each, alternating, answers
// compared; it prints the median wall time of each, off/on (above 1:
// distributed is faster) and, from EXPLAIN ANALYZE, the fragments and the
// rows and bytes they shipped to the gateway. With -global the nodes get
// `cairn demo --global`'s simulated latencies.
//
// -leases spread (the default) holds the tables' tablets where a Citus
// cluster holds its shards, on all three nodes: the nodes start with
// --lease-preferences none and, once the rows are loaded, each tablet's
// lease is handed to the nodes in turn (the program prints the count per
// node before and after the queries). -leases follow leaves leases to
// cairn start's balancer, which since issue 22 moves them towards the
// region whose requests they serve: every query comes from node 1, so
// they end up there, and "gateway-only" then reads local data.
//
// Both tables are the seed's shape, with no primary key
// (githubevents.SeedDDL): the distributed one's hidden rowid key becomes
// (repo_id, rowid) when it is distributed (docs/distributed.md).
//
// Usage:
//
//	go run ./bench/distsql [-rows 100000] [-runs 3] [-shards 32] [-global] [-leases spread|follow] [-log] [-only NAME] [-explain] [-cpuprofile FILE]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server/localcluster"
	"github.com/cairn-db/cairn/workload/githubevents"
	"github.com/jackc/pgx/v5"
)

var (
	flagRows   = flag.Int("rows", 100_000, "rows in each table")
	flagRuns   = flag.Int("runs", 3, "timed runs of each query and mode; medians are reported")
	flagShards = flag.Int("shards", 32, "shards of the distributed table")
	flagGlobal = flag.Bool("global", false, "simulated inter-region latency (cairn demo --global)")
	flagLog    = flag.Bool("log", false, "the nodes' logs on stderr (discarded otherwise)")
	flagOnly   = flag.String("only", "", "run only the queries whose names contain this")
	flagLeases = flag.String("leases", "spread", "spread: each tablet's lease handed to the nodes in turn and kept there; follow: the balancer's (leases follow the workload)")

	flagExplain    = flag.Bool("explain", false, "print each query's EXPLAIN ANALYZE (distsql = on) on stderr: where the distributed time goes, fragment by fragment")
	flagCPUProfile = flag.String("cpuprofile", "", "write a CPU profile of the query phase (all three nodes run in this process) to this file")
)

// queries are what the program times; seed is the seed's own figure for
// the query ("SELECT no indexes, ..." in parallel-indexing.txt: a regular
// table and a distributed one on its cluster, 219k rows), printed beside
// Cairn's for each table, "-" where the seed has none.
var queries = []struct {
	name, sql string
	seed      map[string]string
}{
	{"all repos (seed)", "SELECT repo_id, jsonb_array_elements(payload->'commits') FROM %s WHERE event_type = 'PushEvent' AND payload @> '" + githubevents.SeedContains + "'",
		map[string]string{"regular": "900", "distributed": "68"}},
	{"one repo (seed)", "SELECT repo_id, jsonb_array_elements(payload->'commits') FROM %s WHERE event_type = 'PushEvent' AND payload @> '" + githubevents.SeedContains + "' AND repo_id = " + fmt.Sprint(githubevents.SeedRepoID),
		map[string]string{"regular": "900", "distributed": "28"}},
	{"top-10 repos", "SELECT repo_id, count(*) FROM %s GROUP BY repo_id ORDER BY 2 DESC, 1 LIMIT 10", nil},
}

func main() {
	flag.Parse()
	ctx := context.Background()
	logTo := io.Discard
	if *flagLog {
		logTo = os.Stderr
	}
	prefs := ""
	switch *flagLeases {
	case "spread":
		prefs = "none" // leases stay where they are put
	case "follow":
	default:
		log.Fatalf("-leases %q: spread or follow", *flagLeases)
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 3, Global: *flagGlobal, LeasePreferences: prefs, Logger: slog.New(slog.NewTextHandler(logTo, nil))})
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
	must("SET distsql = off")
	must(githubevents.SeedDDL("regular"))
	must(githubevents.SeedDDL("distributed"))
	must(fmt.Sprintf("SELECT create_distributed_table('distributed', 'repo_id', shard_count => %d)", *flagShards))
	const batch = 10_000
	for lo := int64(0); lo < int64(*flagRows); lo += batch {
		hi := min(lo+batch, int64(*flagRows))
		for _, table := range []string{"regular", "distributed"} {
			// A COPY is one transaction: one that failed while leases
			// moved (the balancer runs during the load) runs again
			// unless its rows are there after all (an ambiguous
			// result, 40003, may have committed).
			for attempt := 1; ; attempt++ {
				err := githubevents.Copy(ctx, conn, table, lo, hi)
				if err == nil {
					break
				}
				var n int64
				if cerr := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE event_id >= %d AND event_id < %d", table, lo, hi)).Scan(&n); cerr == nil && n == hi-lo {
					log.Printf("loading %s: %v; its rows are there", table, err)
					break
				}
				if attempt == 5 {
					log.Fatalf("loading %s: %v", table, err)
				}
				log.Printf("loading %s (attempt %d): %v", table, attempt, err)
			}
		}
		if (hi/batch)%4 == 0 {
			splitAfterLast(ctx, c)
		}
	}
	if *flagLeases == "spread" {
		spreadLeases(ctx, c)
	}
	fmt.Printf("rows %d per table, runs %d, shards %d, global %t, leases %s\n", *flagRows, *flagRuns, *flagShards, *flagGlobal, *flagLeases)
	fmt.Printf("user-data leases per node before the queries: %s\n\n", leaseCounts(ctx, c))
	defer func() { fmt.Printf("\nuser-data leases per node after the queries: %s\n", leaseCounts(ctx, c)) }()
	// The queries only, not the load: the nodes run in this process,
	// so the profile shows the fragments' work as well as the gateway's.
	stopProfile, err := benchflag.CPUProfile(*flagCPUProfile)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\ttable\toff ms\ton ms\toff/on\tfragments\trows shipped\tbytes shipped\tseed ms\t")
	for _, q := range queries {
		if !strings.Contains(q.name, *flagOnly) {
			continue
		}
		for _, table := range []string{"regular", "distributed"} {
			sql := fmt.Sprintf(q.sql, table)
			times := map[string][]time.Duration{}
			var want string
			for range *flagRuns {
				for _, mode := range []string{"off", "on"} {
					must("SET distsql = " + mode)
					start := time.Now()
					got := result(ctx, conn, sql)
					times[mode] = append(times[mode], time.Since(start))
					if want == "" {
						want = got
					} else if got != want {
						log.Fatalf("%s on %s: distsql=%s answered %q, before %q", q.name, table, mode, got, want)
					}
				}
			}
			must("SET distsql = on")
			frags, shippedRows, shippedBytes := shipped(ctx, conn, sql)
			off, on := median(times["off"]), median(times["on"])
			seed := q.seed[table]
			if seed == "" {
				seed = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.2f×\t%d\t%d\t%d\t%s\t\n", q.name, table, ms(off), ms(on), float64(off)/float64(on), frags, shippedRows, shippedBytes, seed)
		}
	}
	tw.Flush()
}

var fragLine = regexp.MustCompile(`Fragment \d+: node \d+, tablet \d+: (\d+) (?:rows?|keys?) \((\d+)( bytes|kB)\)`)

// shipped runs EXPLAIN ANALYZE of sql and sums what its fragments
// shipped to the gateway.
func shipped(ctx context.Context, conn *pgx.Conn, sql string) (frags int, rows, bytes int64) {
	plan := result(ctx, conn, "EXPLAIN ANALYZE "+sql)
	if *flagExplain {
		fmt.Fprintf(os.Stderr, "EXPLAIN ANALYZE %s\n%s\n\n", sql, strings.ReplaceAll(plan, ";", "\n"))
	}
	for _, m := range fragLine.FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		b, _ := strconv.ParseInt(m[2], 10, 64)
		if m[3] == "kB" {
			b *= 1024
		}
		frags++
		rows += n
		bytes += b
	}
	return frags, rows, bytes
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

// userTablets describes every tablet of the user keyspace (the tables'
// rows and indexes) as its leaseholder sees it, in key order.
func userTablets(ctx context.Context, c *localcluster.Cluster) []*kvpb.PlacementResponse {
	var out []*kvpb.PlacementResponse
	for key := []byte("\x03"); bytes.Compare(key, []byte("\x04")) < 0; {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.PlacementRequest{Key: key})
		br, err := c.Nodes[0].DB().Send(ctx, ba)
		if err != nil {
			log.Fatalf("describing the tablet at %x: %v", key, err)
		}
		p := br.Responses[0].(*kvpb.PlacementResponse)
		out = append(out, p)
		if len(p.Desc.EndKey) == 0 || bytes.Compare(p.Desc.EndKey, key) <= 0 {
			break
		}
		key = p.Desc.EndKey
	}
	return out
}

// spreadLeases hands the lease of the i-th user tablet to node i mod 3
// (with --lease-preferences none nothing moves them back), asking each
// until it is done or 30 s have passed.
func spreadLeases(ctx context.Context, c *localcluster.Cluster) {
	for i, p := range userTablets(ctx, c) {
		node := c.Nodes[i%len(c.Nodes)].NodeID()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.SpreadLeaseRequest{Key: p.Desc.StartKey, Node: node})
			br, err := c.Nodes[0].DB().Send(ctx, ba)
			if err == nil && br.Responses[0].(*kvpb.SpreadLeaseResponse).Done {
				break
			}
			if err == nil && br.Responses[0].(*kvpb.SpreadLeaseResponse).Refused || time.Now().After(deadline) {
				log.Printf("the lease of tablet %d did not reach node %d: %v", p.Desc.TabletID, node, err)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// leaseCounts is how many user tablets each node leads ("n1 12, n2 11, n3 11").
func leaseCounts(ctx context.Context, c *localcluster.Cluster) string {
	counts := map[uint64]int{}
	for _, p := range userTablets(ctx, c) {
		counts[p.Leaseholder]++
	}
	var out []string
	for _, n := range c.Nodes {
		out = append(out, fmt.Sprintf("n%d %d", n.NodeID(), counts[n.NodeID()]))
	}
	return strings.Join(out, ", ")
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
