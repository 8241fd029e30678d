// Command parallelindex runs the parallel-indexing seed's experiment
// (/work/shared/seeds/parallel-indexing.txt; issue 18) on one `cairn
// start` node built from this tree: the seed's github_events table
// (package workload/githubevents, the rows `cairn workload github-events
// init` loads) as a regular table (range partitioned, one tablet until
// it passes the split size) and as a distributed one
// (create_distributed_table on repo_id, -shards shards), at each size of
// -rows. For each table, -runs times, alternating the tables:
//
//  1. COPY the rows into the fresh, empty table (one COPY ... FROM STDIN
//     WITH (FORMAT csv), as the seed's \COPY): "COPY no index";
//  2. on the first run, the seed's two SELECTs (commits by
//     test@gmail.com in all repos, and in repo 17330407) with no index;
//  3. CREATE INDEX ... USING GIN (payload) (the online build): "CREATE
//     INDEX";
//  4. on the first run, the two SELECTs again, through the GIN index;
//  5. the table dropped and created again with the GIN index, then the
//     same COPY: "COPY with GIN".
//
// It prints the medians beside the seed's tables, and regular/distributed
// (above 1: distributed is faster). Each query's answer is checked
// against githubevents.SeedMatches; its time is the median of -qruns
// executions.
//
// Each CREATE INDEX and COPY with GIN is also charged the node's CPU
// seconds (/proc), which a loaded machine moves far less than wall
// seconds; automatic statistics are off for the benchmark's session
// (their collection after a COPY parses every payload beside the next
// step). -tables runs one of the tables only; -profile DIR takes a CPU
// profile of the node during each CREATE INDEX; the node logs
// where each build's time went ("index backfill done": pieces per node,
// entries, spilled runs, SSTs, splits, read/sort/write seconds), kept
// with -keep.
//
// The seed's table has no primary key; Cairn distributes by the first
// primary-key column (docs/distributed.md), so both tables have PRIMARY
// KEY (repo_id, event_id) (githubevents.DDL).
//
// Usage:
//
//	go run ./bench/parallelindex [-rows 219000,438000,876000] [-runs 3] [-shards 32]
//	    [-port 26100] [-bin path/to/cairn] [-keep] [-qruns 3] [-index-only]
//	    [-tables regular,distributed] [-profile DIR [-profile-seconds 20]]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/bench/internal/procstat"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
	"github.com/cairn-db/cairn/bench/internal/benchnode"
	"github.com/cairn-db/cairn/workload/githubevents"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	flagRows   = flag.String("rows", "219000,438000,876000", "table sizes, comma-separated (smaller first)")
	flagRuns   = flag.Int("runs", 3, "timed runs of each step and table; medians are reported")
	flagQRuns  = flag.Int("qruns", 3, "executions of each SELECT; the median is reported")
	flagShards = flag.Int("shards", 32, "shards of the distributed table")
	flagPort   = flag.Int("port", 26100, "first of three ports: SQL, HTTP, RPC")
	flagBin    = flag.String("bin", "", "a cairn binary to run instead of building one from this tree")
	flagKeep   = flag.Bool("keep", false, "keep the store directory")
	flagTables = flag.String("tables", "regular,distributed", "the tables to run, of regular and distributed")
	flagProf   = flag.String("profile", "", "a directory: a CPU profile of the node during each CREATE INDEX and each COPY with GIN (-profile-seconds from its start) goes there")
	flagProfS  = flag.Int("profile-seconds", 20, "the length of each -profile profile")
	flagLSM    = flag.Bool("lsm", false, "print the store's LSM (the node's /debug/lsm: levels, L0 sublevels, read amplification) before and after each CREATE INDEX")
	flagIndex  = flag.Bool("index-only", false, "time only CREATE INDEX: load each table once, then build -runs GIN indexes of their own names (none dropped: DROP INDEX deletes a GIN index's entries in its transaction, minutes)")
)

// The seed's SELECTs.
var queries = []struct{ name, sql string }{
	{"all repos", "SELECT repo_id, jsonb_array_elements(payload->'commits') FROM %s WHERE event_type = 'PushEvent' AND payload @> '" +
		githubevents.SeedContains + "'"},
	{"single repo", "SELECT repo_id, jsonb_array_elements(payload->'commits') FROM %s WHERE event_type = 'PushEvent' AND payload @> '" +
		githubevents.SeedContains + "' AND repo_id = " + strconv.Itoa(githubevents.SeedRepoID)},
}

var tables = []string{"regular", "distributed"}

func main() {
	flag.Parse()
	tables = strings.Split(*flagTables, ",")
	if err := run(context.Background()); err != nil {
		// A server error's detail says what a bare 40001 does not (the
		// KV error behind a restart).
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Detail != "" {
			log.Fatalf("%v\nDETAIL: %s", err, pe.Detail)
		}
		log.Fatal(err)
	}
}

// result is one size's measurements, per table.
type result struct {
	rows                          int64
	copyNoIdx, createIdx, copyGIN map[string][]float64 // seconds
	createCPU, copyGINCPU         map[string][]float64 // the node's CPU seconds
	selNoIdx, selGIN              map[string][]float64 // ms, per query
}

func run(ctx context.Context) error {
	sizes, err := benchflag.Counts[int64]("rows", *flagRows, 0)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-parallelindex-")
	if err != nil {
		return err
	}
	if !*flagKeep {
		defer os.RemoveAll(dir)
	} else {
		log.Printf("store and node log (cairn.log) kept in %s", dir)
	}
	bin := *flagBin
	if bin == "" {
		if bin, err = benchnode.Build(dir); err != nil {
			return err
		}
	}
	p := *flagPort
	node, err := benchnode.Start(benchnode.Options{Bin: bin, Store: filepath.Join(dir, "store"), Log: filepath.Join(dir, "cairn.log"), Port: p})
	if err != nil {
		return err
	}
	defer node.Kill()
	conn, err := node.Connect(ctx)
	if err != nil {
		return fmt.Errorf("cairn did not start: %v", err)
	}
	defer conn.Close(ctx)
	// No automatic statistics: a collection after each COPY reads the
	// whole table (parsing every payload) beside the next step and took
	// a quarter of the node's CPU during a 438k-row CREATE INDEX; the
	// SELECTs' statistics come from an explicit ANALYZE.
	if _, err := conn.Exec(ctx, "SET sql.stats.automatic_collection.enabled = off"); err != nil {
		return err
	}
	b := &bench{ctx: ctx, conn: conn, pid: node.Pid(), admin: fmt.Sprintf("http://127.0.0.1:%d", p+1)}
	fmt.Printf("cairn start (one node, %s), github_events rows from workload/githubevents; distributed: %d shards; median of %d runs, SELECTs median of %d\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), *flagShards, *flagRuns, *flagQRuns)
	var results []*result
	for _, n := range sizes {
		r, err := b.size(n)
		if err != nil {
			return err
		}
		results = append(results, r)
		printResult(r)
	}
	fmt.Println("\nAll sizes:")
	for _, r := range results {
		printResult(r)
	}
	printSeed()
	return nil
}

type bench struct {
	ctx  context.Context
	conn *pgx.Conn
	pid  int // the node's process
	// lastCPU is the node's CPU seconds during the last timed step.
	lastCPU float64
	admin   string // the node's HTTP address (/debug/pprof)
}

// profile starts a CPU profile of the node of -profile-seconds into
// -profile's directory as name.pprof (nothing without -profile); wait
// waits for it to be written.
func (b *bench) profile(name string) (wait func()) {
	if *flagProf == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", b.admin, *flagProfS))
		if err != nil {
			log.Printf("profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(filepath.Join(*flagProf, name+".pprof"), data, 0o644)
		}
		if err != nil {
			log.Printf("profile %s: %v", name, err)
		}
	}()
	return func() { <-done }
}

// lsm prints the node's LSM under title when -lsm is set.
func (b *bench) lsm(title string) {
	if !*flagLSM {
		return
	}
	resp, err := http.Get(b.admin + "/debug/lsm")
	if err != nil {
		log.Printf("lsm %s: %v", title, err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Printf("lsm %s: %v", title, err)
		return
	}
	log.Printf("LSM, %s:\n%s", title, data)
}

// peakRSS is the node's peak resident set so far, "?" when unknown.
func peakRSS(pid int) string {
	kib, err := procstat.PeakRSSKiB(pid)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%d kB", kib)
}

// load is the machine's 1-minute load average, as /proc/loadavg says.
func load() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

func (b *bench) exec(sql string) error {
	if _, err := b.conn.Exec(b.ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// create makes table afresh: dropped, created, distributed when it is
// the distributed one, with the GIN index when gin.
func (b *bench) create(table string, gin bool) error {
	if err := b.exec("DROP TABLE IF EXISTS " + table); err != nil {
		return err
	}
	if err := b.exec(githubevents.DDL(table)); err != nil {
		return err
	}
	if table == "distributed" {
		if err := b.exec(fmt.Sprintf("SELECT create_distributed_table('%s', 'repo_id', shard_count => %d)", table, *flagShards)); err != nil {
			return err
		}
	}
	if gin {
		return b.exec(fmt.Sprintf("CREATE INDEX %s_payload_idx ON %s USING GIN (payload)", table, table))
	}
	return nil
}

// timed runs f and returns its wall seconds; the node's CPU seconds
// during it are left in b.lastCPU.
func (b *bench) timed(f func() error) (float64, error) {
	c0, _ := procstat.CPUSeconds(b.pid)
	start := time.Now()
	err := f()
	c1, _ := procstat.CPUSeconds(b.pid)
	b.lastCPU = c1 - c0
	return time.Since(start).Seconds(), err
}

func (b *bench) size(n int64) (*result, error) {
	r := &result{rows: n, copyNoIdx: map[string][]float64{}, createIdx: map[string][]float64{}, copyGIN: map[string][]float64{},
		createCPU: map[string][]float64{}, copyGINCPU: map[string][]float64{},
		selNoIdx: map[string][]float64{}, selGIN: map[string][]float64{}}
	copyAll := func(table string) func() error {
		return func() error { return githubevents.Copy(b.ctx, b.conn, table, 0, n) }
	}
	if *flagIndex {
		return b.indexOnly(n, r)
	}
	for run := range *flagRuns {
		for _, table := range tables {
			if err := b.create(table, false); err != nil {
				return nil, err
			}
			d, err := b.timed(copyAll(table))
			if err != nil {
				return nil, err
			}
			r.copyNoIdx[table] = append(r.copyNoIdx[table], d)
			log.Printf("%d rows, run %d, %s: COPY no index %.1f s, node CPU %.1f s, load %s", n, run+1, table, d, b.lastCPU, load())
			if run == 0 {
				if err := b.exec("ANALYZE " + table); err != nil {
					return nil, err
				}
				if r.selNoIdx[table], err = b.selects(table, n); err != nil {
					return nil, err
				}
			}
			b.lsm(fmt.Sprintf("%d rows, run %d, %s: before CREATE INDEX", n, run+1, table))
			wait := b.profile(fmt.Sprintf("%s-%d-%d", table, n, run+1))
			d, err = b.timed(func() error {
				return b.exec(fmt.Sprintf("CREATE INDEX %s_payload_idx ON %s USING GIN (payload)", table, table))
			})
			wait()
			b.lsm(fmt.Sprintf("%d rows, run %d, %s: after CREATE INDEX", n, run+1, table))
			if err != nil {
				return nil, err
			}
			r.createIdx[table] = append(r.createIdx[table], d)
			r.createCPU[table] = append(r.createCPU[table], b.lastCPU)
			log.Printf("%d rows, run %d, %s: CREATE INDEX %.1f s, node CPU %.1f s, load %s", n, run+1, table, d, b.lastCPU, load())
			if run == 0 {
				if r.selGIN[table], err = b.selects(table, n); err != nil {
					return nil, err
				}
				if err := b.usesGIN(table); err != nil {
					return nil, err
				}
			}
			if err := b.create(table, true); err != nil {
				return nil, err
			}
			wait = b.profile(fmt.Sprintf("copygin-%s-%d-%d", table, n, run+1))
			d, err = b.timed(copyAll(table))
			wait()
			if err != nil {
				return nil, err
			}
			r.copyGIN[table] = append(r.copyGIN[table], d)
			r.copyGINCPU[table] = append(r.copyGINCPU[table], b.lastCPU)
			log.Printf("%d rows, run %d, %s: COPY with GIN %.1f s, node CPU %.1f s, load %s, node peak RSS %s", n, run+1, table, d, b.lastCPU, load(), peakRSS(b.pid))
		}
	}
	for _, table := range tables {
		if err := b.exec("DROP TABLE IF EXISTS " + table); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// indexOnly is size for -index-only.
func (b *bench) indexOnly(n int64, r *result) (*result, error) {
	for _, table := range tables {
		if err := b.create(table, false); err != nil {
			return nil, err
		}
		d, err := b.timed(func() error { return githubevents.Copy(b.ctx, b.conn, table, 0, n) })
		if err != nil {
			return nil, err
		}
		r.copyNoIdx[table] = append(r.copyNoIdx[table], d)
	}
	for run := range *flagRuns {
		for _, table := range tables {
			wait := b.profile(fmt.Sprintf("%s-%d-%d", table, n, run+1))
			d, err := b.timed(func() error {
				return b.exec(fmt.Sprintf("CREATE INDEX %s_payload_idx%d ON %s USING GIN (payload)", table, run, table))
			})
			wait()
			if err != nil {
				return nil, err
			}
			r.createIdx[table] = append(r.createIdx[table], d)
			r.createCPU[table] = append(r.createCPU[table], b.lastCPU)
			log.Printf("%d rows, run %d, %s: CREATE INDEX %.1f s, node CPU %.1f s, load %s", n, run+1, table, d, b.lastCPU, load())
		}
	}
	for _, table := range tables {
		if err := b.exec("DROP TABLE IF EXISTS " + table); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// selects runs each of the seed's SELECTs -qruns times on table and
// returns their median times in ms, after checking the rows they return.
func (b *bench) selects(table string, n int64) ([]float64, error) {
	all, one := githubevents.SeedMatches(n)
	var out []float64
	for i, q := range queries {
		want := all
		if i == 1 {
			want = one
		}
		// The SELECT returns a row per commit of each matching event; its
		// events are counted apart (untimed) against SeedMatches.
		var events int64
		count := strings.Replace(fmt.Sprintf(q.sql, table), "repo_id, jsonb_array_elements(payload->'commits')", "count(*)", 1)
		if err := b.conn.QueryRow(b.ctx, count).Scan(&events); err != nil {
			return nil, fmt.Errorf("%s: %w", count, err)
		}
		if events != want {
			return nil, fmt.Errorf("%s on %s: %d events, want %d", q.name, table, events, want)
		}
		var ms []float64
		for range *flagQRuns {
			start := time.Now()
			rows, err := b.conn.Query(b.ctx, fmt.Sprintf(q.sql, table))
			if err != nil {
				return nil, err
			}
			got := int64(0)
			for rows.Next() {
				got++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, fmt.Errorf("%s on %s: %w", q.name, table, err)
			}
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
			if got < want || got > 12*want { // 1 to 12 commits an event
				return nil, fmt.Errorf("%s on %s: %d commits for %d events", q.name, table, got, want)
			}
		}
		out = append(out, median(ms))
	}
	return out, nil
}

// usesGIN fails unless the all-repos SELECT's plan reads table's GIN
// index (the times "with GIN" would otherwise be of a full scan).
func (b *bench) usesGIN(table string) error {
	rows, err := b.conn.Query(b.ctx, "EXPLAIN "+fmt.Sprintf(queries[0].sql, table))
	if err != nil {
		return err
	}
	var plan []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			rows.Close()
			return err
		}
		plan = append(plan, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, table+"_payload_idx") {
		return fmt.Errorf("the all-repos SELECT on %s does not use its GIN index:\n%s", table, p)
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func printResult(r *result) {
	k := fmt.Sprintf("%dk", (r.rows+500)/1000)
	fmt.Printf("\n| %d rows | Regular table | Distributed table | Speedup |\n|---|---|---|---|\n", r.rows)
	row := func(name string, m map[string][]float64) {
		reg, dist := median(m["regular"]), median(m["distributed"])
		fmt.Printf("| %s | %.1fs | %.1fs | %.2fx |\n", name, reg, dist, reg/dist)
	}
	row("CREATE INDEX on "+k+" rows", r.createIdx)
	row("CREATE INDEX, node CPU", r.createCPU)
	row("COPY "+k+" rows no index", r.copyNoIdx)
	if len(r.copyGIN["regular"]) > 0 {
		row("COPY "+k+" rows with GIN", r.copyGIN)
		row("COPY with GIN, node CPU", r.copyGINCPU)
	}
	for i, q := range queries {
		for _, idx := range []struct {
			name string
			m    map[string][]float64
		}{{"no indexes", r.selNoIdx}, {"with GIN on payload", r.selGIN}} {
			reg, dist := idx.m["regular"], idx.m["distributed"]
			if len(reg) <= i || len(dist) <= i {
				continue
			}
			fmt.Printf("| SELECT %s, %s | %.1fms | %.1fms | %.2fx |\n", idx.name, q.name, reg[i], dist[i], reg[i]/dist[i])
		}
	}
	fmt.Printf("each run (s): CREATE INDEX regular %v distributed %v; COPY no index regular %v distributed %v; COPY with GIN regular %v distributed %v\n",
		r.createIdx["regular"], r.createIdx["distributed"], r.copyNoIdx["regular"], r.copyNoIdx["distributed"], r.copyGIN["regular"], r.copyGIN["distributed"])
}

// printSeed prints the seed's tables (LightDB and Canopy, four workers of
// four cores each).
func printSeed() {
	fmt.Print(`
The seed's figures (parallel-indexing.txt; four worker nodes of four cores):

| | Regular table | Distributed table | Speedup |
|---|---|---|---|
| CREATE INDEX on 219k rows | 33.2s | 2.6s | 13x |
| CREATE INDEX on 438k rows | 55.9s | 3.2s | 17x |
| CREATE INDEX on 876k rows | 110.9s | 5.0s | 22x |
| COPY 219k rows no index | 18.9s | 12.4s | 1.5x |
| COPY 219k rows with GIN | 49.3s | 12.9s | 3.8x |
| SELECT no indexes, all repos | 900ms | 68ms* | |
| SELECT with GIN on payload, all repos | 2ms | 11ms* | |
| SELECT no indexes, single repo | 900ms | 28ms | |
| SELECT with indexes, single repo | 2ms | 2ms | |
`)
}
