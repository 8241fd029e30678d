// Command colocation reproduces the demo of seeds/colocated-tables.txt on
// a simulated 3-region cluster (issue #5): the three nodes of `cairn demo
// --nodes 3 --global` (us-west, us-east, eu; round trips 60, 86 and
// 145 ms) in this process, a client connected to the us-west node, and
// the seed's statements verbatim: a colocated database with two colocated
// tables (opt_in_1, opt_in_2) and two opted out (opt_out_1, opt_out_2),
// an index on opt_in_1(b) and opt_out_1(b), 100,000 rows in each table
// (the seed's listing loads opt_out_1 twice and opt_out_2 never, a typo:
// this loads opt_out_2), then each query under EXPLAIN (ANALYZE, COSTS
// OFF): the index lookup, the two updates and the join. It also times the
// seed's pg_dump catalog query (Cairn's catalog is always colocated).
//
// It runs the whole demo once per lease placement (-modes): "us-west",
// every tablet's leader preferred in us-west (`--lease-preferences
// region=us-west`, as a user whose clients are in us-west would set it),
// and "spread", no region preference (the default): leaders balanced over
// the three nodes before the load, then, as the servers move leases toward
// the region their requests come from (issue #22), wherever the us-west
// client's workload draws them: after the load the client runs the read
// queries for -warmup (a minute by default) before the timed runs. Each
// query runs
// -runs times on the loaded cluster (the updates are undone, untimed,
// after each run so every run changes the same rows); the table shows
// medians of the client's wall time per statement (psql's "Time:", which
// is what the seed's figures are), the opted-out over the colocated time,
// and the seed's ratio.
//
// Usage: go run ./bench/colocation [-runs 3] [-rows 100000] [-modes us-west,spread] [-warmup 1m] [-warmup-pace 0] [-start-in region] [-balancer-log f] [-plans] [-cpuprofile f]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
	"github.com/cairn-db/cairn/server/localcluster"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	flagRuns    = flag.Int("runs", 3, "timed repetitions of each query; medians are reported")
	flagRows    = flag.Int("rows", 100_000, "rows loaded into each table (the seed's 100,000)")
	flagModes   = flag.String("modes", "us-west,spread", "lease placements to run: us-west (every leader preferred in us-west) and/or spread")
	flagPlans   = flag.Bool("plans", false, "print each EXPLAIN ANALYZE output of the first run")
	flagProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flagTimeout = flag.Duration("timeout", 30*time.Minute, "give up on one statement after this long")
	flagWarmup  = flag.Duration("warmup", time.Minute, "spread mode: how long the us-west client runs the read queries after the load, before the timed runs")
	flagPace    = flag.Duration("warmup-pace", 0, "spread mode: pause between the warm-up's queries (a slower client, as on a loaded machine)")
	flagStartIn = flag.String("start-in", "", "spread mode: before the warm-up, put the demo database's leases in this region (a zone's lease preference, then discarded), so the warm-up must draw them to us-west")
	flagBalLog  = flag.String("balancer-log", "", "write every node's lease balancer decisions (store.LeaseBalancerConfig.Logger) to this file")
)

// pair is one row of the seed's comparison: the same statement on the
// colocated and on the opted-out table, and the seed's times for them.
type pair struct {
	name         string
	colo, optout string
	undoColo     string // untimed statement that restores the rows (updates)
	undoOptout   string
	seedColo     float64 // ms, the seed's "Time:"
	seedOptout   float64
}

func pairs() []pair {
	return []pair{
		{name: "index lookup (b=6)",
			colo:     "explain (analyze, costs off) select * from opt_in_1 where b=6",
			optout:   "explain (analyze, costs off) select * from opt_out_1 where b=6",
			seedColo: 90.364, seedOptout: 1630.278},
		{name: "update b=100 where b=4",
			colo:     "explain (analyze, costs off) update opt_in_1 set b=100 where b=4",
			optout:   "explain (analyze, costs off) update opt_out_1 set b=100 where b=4",
			undoColo: "update opt_in_1 set b=4 where b=100", undoOptout: "update opt_out_1 set b=4 where b=100",
			seedColo: 7587.763, seedOptout: 16306.560},
		{name: "update b=100 where a<2",
			colo:     "explain (analyze, costs off) update opt_in_1 set b=100 where a<2",
			optout:   "explain (analyze, costs off) update opt_out_1 set b=100 where a<2",
			undoColo: "update opt_in_1 set b=1 where a<2", undoOptout: "update opt_out_1 set b=1 where a<2",
			seedColo: 314.916, seedOptout: 9395.853},
		{name: "join (b=6)",
			colo: `explain (analyze, costs off) select *
from opt_in_1, opt_in_2
where opt_in_1.a=opt_in_2.a and opt_in_1.b=6`,
			optout: `explain (analyze, costs off) select *
from opt_out_1, opt_out_2
where opt_out_1.a=opt_out_2.a and opt_out_1.b=6`,
			seedColo: 2698.550, seedOptout: 706200.404},
	}
}

// pgDumpQuery is the seed's pg_dump index query, verbatim.
const pgDumpQuery = `SELECT 
     t.tableoid, t.oid, t.relname AS indexname,
     inh.inhparent AS parentidx,
     pg_catalog.pg_get_indexdef(i.indexrelid) AS indexdef,
     i.indnkeyatts AS indnkeyatts, i.indnatts AS indnatts,
     i.indkey, i.indisclustered, 
     i.indisreplident, i.indoption,
     t.relpages,
     c.contype, c.conname, c.condeferrable, c.condeferred,
     c.tableoid AS contableoid,
     c.oid AS conoid,
     pg_catalog.pg_get_constraintdef(c.oid, $1) AS condef,
     (SELECT spcname
           FROM pg_catalog.pg_tablespace s
           WHERE s.oid = t.reltablespace) AS tablespace,
     t.reloptions AS indreloptions,
     (SELECT pg_catalog.array_agg(attnum ORDER BY attnum)  
           FROM pg_catalog.pg_attribute  
           WHERE attrelid = i.indexrelid AND attstattarget >= $2)
           AS indstatcols,
     (SELECT pg_catalog.array_agg(attstattarget ORDER BY attnum)  
           FROM pg_catalog.pg_attribute  
           WHERE attrelid = i.indexrelid AND     attstattarget >= $3)
           AS indstatvals
FROM pg_catalog.pg_index i 
     JOIN pg_catalog.pg_class t ON (t.oid = i.indexrelid)
     JOIN pg_catalog.pg_class t2 ON (t2.oid = i.indrelid) 
     LEFT JOIN pg_catalog.pg_constraint c
           ON (i.indrelid = c.conrelid
                AND i.indexrelid = c.conindid
                AND c.contype IN ($4,$5,$6)) 
     LEFT JOIN pg_catalog.pg_inherits inh
           ON (inh.inhrelid = indexrelid)
WHERE i.indrelid = $7::pg_catalog.oid
     AND (i.indisvalid OR t2.relkind = $8)
     AND i.indisready ORDER BY indexname`

// seedPgDump is the seed's time for it on its colocated catalog (ms).
const seedPgDump = 76.0

// schema is the seed's DDL, verbatim.
var schema = []string{
	"CREATE TABLE opt_in_1(a int, b int, PRIMARY KEY(a))",
	"CREATE INDEX ON opt_in_1(b)",
	"CREATE TABLE opt_in_2(a int, b int, PRIMARY KEY(a))",
	"CREATE TABLE opt_out_1(a int, b int, PRIMARY KEY(a)) WITH (colocated = false)",
	"CREATE INDEX ON opt_out_1(b)",
	"CREATE TABLE opt_out_2(a int, b int, PRIMARY KEY(a)) WITH (colocated = false)",
}

// modeResult is one lease placement's figures (ms, medians over runs).
type modeResult struct {
	mode    string
	leaders string // leaders per region after convergence
	// placement says where the leaders the queries read from are.
	placement string
	load      map[string]time.Duration
	colo      []float64
	optout    []float64
	pgDump    float64
}

func main() {
	flag.Parse()
	stopProfile, err := benchflag.CPUProfile(*flagProfile)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()
	var results []modeResult
	for _, mode := range strings.Split(*flagModes, ",") {
		prefs := map[string]string{"us-west": "region=us-west", "spread": "spread"}[mode]
		if prefs == "" {
			log.Fatalf("unknown mode %q: want us-west or spread", mode)
		}
		r, err := runMode(mode, prefs)
		if err != nil {
			log.Fatalf("%s: %v", mode, err)
		}
		results = append(results, r)
	}
	fmt.Printf("\ncolocation bench: 3 nodes in us-west, us-east, eu (%s), client on us-west, %d rows per table, median of %d runs\n",
		localcluster.GlobalLatencyMap, *flagRows, *flagRuns)
	for _, r := range results {
		fmt.Printf("\nleaders %s (%s)\n  %s\n  load: %s\n", r.mode, r.leaders, r.placement, loadLine(r.load))
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "query\tcolocated ms\topted-out ms\tratio\tseed's ratio\t")
		for i, p := range pairs() {
			fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f×\t%.1f×\t\n", p.name, r.colo[i], r.optout[i], r.optout[i]/r.colo[i], p.seedOptout/p.seedColo)
		}
		fmt.Fprintf(w, "pg_dump index query (catalog)\t%.1f\t\t\t(seed: %.0f ms colocated)\t\n", r.pgDump, seedPgDump)
		w.Flush()
	}
}

func loadLine(m map[string]time.Duration) string {
	var parts []string
	for _, t := range []string{"opt_in_1", "opt_in_2", "opt_out_1", "opt_out_2"} {
		parts = append(parts, fmt.Sprintf("%s %.1fs", t, m[t].Seconds()))
	}
	return strings.Join(parts, ", ")
}

func runMode(mode, prefs string) (modeResult, error) {
	res := modeResult{mode: mode, load: map[string]time.Duration{}}
	ctx := context.Background()
	log.Printf("%s: starting the global cluster (lease preferences %s)", mode, prefs)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if *flagBalLog != "" {
		f, err := os.OpenFile(*flagBalLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return res, err
		}
		defer f.Close()
		logger = slog.New(balancerHandler{errs: logger.Handler(), bal: slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})})
		logger.Debug("lease balancer log: mode " + mode)
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: 3, Global: true, LeasePreferences: prefs, Logger: logger})
	if err != nil {
		return res, err
	}
	defer c.Stop(context.Background())
	admin, err := pgx.Connect(ctx, c.URL(0, "postgres"))
	if err != nil {
		return res, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE colocation_demo WITH colocated = true"); err != nil {
		return res, err
	}
	conn, err := pgx.Connect(ctx, c.URL(0, "colocation_demo"))
	if err != nil {
		return res, err
	}
	defer conn.Close(ctx)
	for _, s := range schema {
		if _, err := conn.Exec(ctx, s); err != nil {
			return res, fmt.Errorf("%s: %w", s, err)
		}
	}
	// The leases settle before the load, as an operator's preferences
	// would have long before: the load measures writes, not transfers.
	if _, err := settleLeases(ctx, conn, mode, c.Regions); err != nil {
		return res, err
	}
	for _, t := range []string{"opt_in_1", "opt_in_2", "opt_out_1", "opt_out_2"} {
		q := fmt.Sprintf("INSERT INTO %s\n     SELECT a, a%%10 FROM generate_series(1,%d) AS a", t, *flagRows)
		start := time.Now()
		if _, err := conn.Exec(ctx, q); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Detail != "" {
				// The KV error behind a fault (40003, XX000) is the detail.
				return res, fmt.Errorf("loading %s: %w (detail: %s)", t, err, pgErr.Detail)
			}
			return res, fmt.Errorf("loading %s: %w", t, err)
		}
		res.load[t] = time.Since(start)
		log.Printf("%s: loaded %s in %v", mode, t, res.load[t].Round(time.Millisecond))
	}
	settle := mode
	if mode == "spread" {
		// The workload from us-west draws the leases it reads (issue
		// #22): a minute of the read queries, then no balance to wait for.
		if *flagStartIn != "" {
			if err := startIn(ctx, conn, *flagStartIn, c.Regions); err != nil {
				return res, err
			}
		}
		if err := warmUp(ctx, conn, *flagWarmup); err != nil {
			return res, err
		}
		settle = "led"
	}
	if res.leaders, err = settleLeases(ctx, conn, settle, c.Regions); err != nil {
		return res, err
	}
	if res.placement, err = placement(ctx, conn, c.Regions); err != nil {
		return res, err
	}
	log.Printf("%s: leaders %s; %s", mode, res.leaders, res.placement)

	var oid uint32
	if err := conn.QueryRow(ctx, "SELECT 'opt_in_1'::regclass::oid").Scan(&oid); err != nil {
		return res, err
	}
	ps := pairs()
	colo := make([][]float64, len(ps))
	optout := make([][]float64, len(ps))
	var dump []float64
	for run := range *flagRuns {
		for i, p := range ps {
			for _, side := range []struct {
				q, undo string
				out     *[]float64
			}{{p.colo, p.undoColo, &colo[i]}, {p.optout, p.undoOptout, &optout[i]}} {
				ms, plan, err := timed(ctx, conn, side.q)
				if err != nil {
					return res, fmt.Errorf("%s: %w", side.q, err)
				}
				*side.out = append(*side.out, ms)
				log.Printf("%s run %d: %s: %.1f ms", mode, run+1, firstLine(side.q), ms)
				if *flagPlans && run == 0 {
					fmt.Printf("-- %s (%s leaders)\n%s\n%s\nTime: %.3f ms\n\n", mode, mode, side.q, plan, ms)
				}
				if side.undo != "" {
					if _, err := conn.Exec(ctx, side.undo); err != nil {
						return res, fmt.Errorf("%s: %w", side.undo, err)
					}
				}
			}
		}
		start := time.Now()
		rows, err := conn.Query(ctx, pgDumpQuery, false, 0, 0, "p", "u", "x", oid, "p")
		if err != nil {
			return res, fmt.Errorf("pg_dump query: %w", err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			return res, fmt.Errorf("pg_dump query: %w", err)
		}
		if n != 2 {
			return res, fmt.Errorf("pg_dump query: %d rows for opt_in_1's indexes, want 2", n)
		}
		dump = append(dump, float64(time.Since(start).Microseconds())/1000)
	}
	for i := range ps {
		res.colo = append(res.colo, median(colo[i]))
		res.optout = append(res.optout, median(optout[i]))
	}
	res.pgDump = median(dump)
	return res, nil
}

// timed runs an EXPLAIN ANALYZE statement and returns its wall time as
// the client sees it (ms) and the plan it printed.
func timed(ctx context.Context, conn *pgx.Conn, q string) (float64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, *flagTimeout)
	defer cancel()
	start := time.Now()
	rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return 0, "", err
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return 0, "", err
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		return 0, "", err
	}
	return float64(time.Since(start).Microseconds()) / 1000, strings.Join(lines, "\n"), nil
}

// warmUp runs the seed's read queries (lookups and joins, colocated and
// opted out) from the client for d.
func warmUp(ctx context.Context, conn *pgx.Conn, d time.Duration) error {
	log.Printf("spread: %v of read queries from the us-west client", d)
	until := time.Now().Add(d)
	n := 0
	for time.Now().Before(until) {
		for _, p := range pairs() {
			if p.undoColo != "" {
				continue // the updates: not part of the warm-up
			}
			for _, q := range []string{p.colo, p.optout} {
				if _, _, err := timed(ctx, conn, q); err != nil {
					return fmt.Errorf("warm-up: %s: %w", q, err)
				}
				n++
				time.Sleep(*flagPace) // a client's think time, not a wait for a condition
			}
		}
	}
	log.Printf("spread: warm-up ran %d queries", n)
	return nil
}

// startIn puts every lease of the demo database's tablets in region
// (a zone's lease preference), waits for them there, and discards the
// zone, so the leases start the warm-up away from the client and only
// its requests can draw them back.
func startIn(ctx context.Context, conn *pgx.Conn, region string, regions []string) error {
	node := slices.Index(regions, region) + 1
	if node == 0 {
		return fmt.Errorf("-start-in %s: not one of %v", region, regions)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE colocation_demo CONFIGURE ZONE USING lease_preferences = '[[+region=%s]]'", region)); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var total, there int
		if err := conn.QueryRow(ctx, `SELECT count(DISTINCT tablet_id), count(DISTINCT tablet_id) FILTER (WHERE leader = $1)
			FROM cairn_catalog.tablets WHERE database_name = 'colocation_demo'`, node).Scan(&total, &there); err != nil {
			return err
		}
		if total > 0 && there == total {
			log.Printf("spread: %d tablets of the demo database led from %s", total, region)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("-start-in %s: %d of %d leases there after 2 minutes", region, there, total)
		}
		time.Sleep(500 * time.Millisecond) // polling the placement: no event to wait on
	}
	_, err := conn.Exec(ctx, "ALTER DATABASE colocation_demo CONFIGURE ZONE DISCARD")
	return err
}

// settleLeases waits until the leases are where the mode wants them (all
// on the us-west node, within one of each other for "spread", or merely
// led for "led") and describes them.
func settleLeases(ctx context.Context, conn *pgx.Conn, mode string, regions []string) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rows, err := conn.Query(ctx, "SELECT DISTINCT tablet_id, leader FROM cairn_catalog.tablets")
		if err != nil {
			return "", err
		}
		counts := map[int32]int{}
		total := 0
		for rows.Next() {
			var id int64
			var leader *int32
			if err := rows.Scan(&id, &leader); err != nil {
				return "", err
			}
			total++
			if leader != nil {
				counts[*leader]++
			}
		}
		if err := rows.Err(); err != nil {
			return "", err
		}
		var desc []string
		lo, hi := total, 0
		for i, r := range regions {
			n := counts[int32(i+1)]
			desc = append(desc, fmt.Sprintf("%s %d", r, n))
			lo, hi = min(lo, n), max(hi, n)
		}
		d := fmt.Sprintf("%d tablets: %s", total, strings.Join(desc, ", "))
		ok := counts[1] == total
		switch mode {
		case "spread":
			ok = hi-lo <= 1 && counts[1]+counts[2]+counts[3] == total
		case "led":
			ok = counts[1]+counts[2]+counts[3] == total
		}
		if ok {
			return d, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("leases did not settle within 2 minutes: %s", d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// placement names the region of the leader of the catalog's tablet (the
// system span, tablet 1), of the colocated tablet and of each opted-out
// table's and index's tablets.
func placement(ctx context.Context, conn *pgx.Conn, regions []string) (string, error) {
	rows, err := conn.Query(ctx, `SELECT DISTINCT coalesce(index_name, table_name, 'catalog'), tablet_id, leader
		FROM cairn_catalog.tablets
		WHERE tablet_id = 1 OR (database_name = 'colocation_demo' AND (colocated OR index_name IS NULL OR index_name LIKE '%b_idx'))
		ORDER BY 2, 1`)
	if err != nil {
		return "", err
	}
	where := map[string][]string{}
	var order []string
	for rows.Next() {
		var name string
		var id int64
		var leader *int32
		if err := rows.Scan(&name, &id, &leader); err != nil {
			return "", err
		}
		region := "none"
		if leader != nil && *leader >= 1 && int(*leader) <= len(regions) {
			region = regions[*leader-1]
		}
		if strings.HasPrefix(name, "opt_in") {
			name = fmt.Sprintf("colocated tablet %d", id)
		}
		if _, ok := where[name]; !ok {
			order = append(order, name)
		}
		if !slices.Contains(where[name], region) || !strings.HasPrefix(name, "colocated") {
			where[name] = append(where[name], region)
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	var parts []string
	for _, n := range order {
		parts = append(parts, n+": "+strings.Join(where[n], " "))
	}
	return "leaders of " + strings.Join(parts, "; "), nil
}

func firstLine(q string) string {
	l, _, _ := strings.Cut(q, "\n")
	return strings.TrimPrefix(l, "explain (analyze, costs off) ")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// balancerHandler sends the lease balancers' records ("lease balancer
// ..." messages, at Debug) to bal and every other record to errs (which
// keeps only errors).
type balancerHandler struct{ errs, bal slog.Handler }

func (h balancerHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.errs.Enabled(ctx, l) || h.bal.Enabled(ctx, l)
}

func (h balancerHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "lease balancer") {
		return h.bal.Handle(ctx, r)
	}
	if h.errs.Enabled(ctx, r.Level) {
		return h.errs.Handle(ctx, r)
	}
	return nil
}

func (h balancerHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return balancerHandler{h.errs.WithAttrs(as), h.bal.WithAttrs(as)}
}

func (h balancerHandler) WithGroup(name string) slog.Handler {
	return balancerHandler{h.errs.WithGroup(name), h.bal.WithGroup(name)}
}
