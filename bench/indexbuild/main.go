// Command indexbuild measures CREATE INDEX on large tables (issue #18,
// bench/indexbuild): on a plain `cairn start` (built from this tree, ports
// from -port) it loads a table of each size in -rows
// (k INT PRIMARY KEY, v INT scattered, pad TEXT) and times, -runs times
// each, alternating:
//
//   - online: `CREATE INDEX` as a statement of its own, the online job
//     with its parallel, sorted backfill (sql/ddl index_backfill.go);
//   - row by row: the same index built in a transaction block
//     (`BEGIN; CREATE INDEX ...; COMMIT`), the transactional build that
//     scans the table and writes entries in table order, batch by batch
//     (the build before issue #18; the feature off, in the same program).
//
// Each build's index has a name of its own and is kept: DROP INDEX
// deletes the entries in its transaction (minutes at 10M rows), and a
// build reads only the table's rows. It prints each build (wall, node
// CPU, the node's peak RSS during it, sampled every 20 ms, and its growth;
// for the online build the sort's memory high-water mark from the node's
// log line "index backfill done"), then the medians, their ratio and the
// peaks, beside the seed's
// 19 s / 15 min / 280 min table (read-planning.txt, part 2). With
// -profile hdd the node runs with --store-profile hdd and
// --debug-store-latency hdd (storage/simfs: an hdd's read latency and
// seeks on whatever disk the machine has), as the issue asks.
//
// It also prints the load's time and the SSTs it and each build ingested
// (the node's cairn_tablet_ssts_ingested_total). -online-only skips the
// row-by-row build; -rbr-runs N runs it N times (at 10M rows one build
// takes many minutes).
//
// Usage: go run ./bench/indexbuild [-rows 1000000,3000000] [-runs 3]
// [-profile ssd|hdd] [-port 30300] [-keep] [-bin path/to/cairn] [-online-only]
// [-rbr-runs N]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/bench/internal/procstat"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
	"github.com/cairn-db/cairn/bench/internal/benchnode"
)

var (
	flagRows    = flag.String("rows", "1000000", "table sizes, comma-separated")
	flagRuns    = flag.Int("runs", 3, "builds of each kind per size; the median is reported")
	flagPort    = flag.Int("port", 30300, "first of three ports: SQL, HTTP, RPC")
	flagKeep    = flag.Bool("keep", false, "keep the store directory")
	flagProfile = flag.String("profile", "ssd", "storage profile: ssd (the disk as it is) or hdd (simulated read latency and seeks)")
	flagBin     = flag.String("bin", "", "a cairn binary to run instead of building one from this tree")
	flagOnline  = flag.Bool("online-only", false, "time only the online build (skip the row-by-row build, minutes per run at 1M rows and more), each run building an index of its own name, none dropped")
	flagRBRRuns = flag.Int("rbr-runs", -1, "row-by-row builds per size (-1: -runs); fewer where one takes minutes")
	flagKind    = flag.String("kind", "btree", "btree: CREATE INDEX t_v ON t (v); gin: a GIN index on a jsonb payload shaped like the seed's GitHub events, and the seed's containment query with and without it")
)

func main() {
	flag.Parse()
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	sizes, err := benchflag.Counts("rows", *flagRows, 0)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-indexbuild-")
	if err != nil {
		return err
	}
	if !*flagKeep {
		defer os.RemoveAll(dir)
	}
	bin := *flagBin
	if bin == "" {
		if bin, err = benchnode.Build(dir); err != nil {
			return err
		}
	}
	p := *flagPort
	args := []string{"--store-profile", *flagProfile}
	if *flagProfile != "ssd" {
		args = append(args, "--debug-store-latency", *flagProfile)
	}
	node, err := benchnode.Start(benchnode.Options{Bin: bin, Store: filepath.Join(dir, "store"), Log: filepath.Join(dir, "cairn.log"), Port: p, Args: args})
	if err != nil {
		return err
	}
	defer node.Kill()
	conn, err := node.Connect(ctx)
	if err != nil {
		return fmt.Errorf("cairn did not start: %v", err)
	}
	defer conn.Close(ctx)
	exec := func(sql string) error {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		return nil
	}
	pid := node.Pid()
	logPath := filepath.Join(dir, "cairn.log")
	// build times sqls and samples the node's RSS meanwhile: it returns
	// the wall time, the node's CPU seconds, its peak RSS during the
	// build and that peak's growth over the RSS before it (KiB).
	build := func(sqls ...string) (buildStats, error) {
		before, _ := procstat.RSSKiB(pid)
		cpu0, _ := procstat.CPUSeconds(pid)
		var peak atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				if r, err := procstat.RSSKiB(pid); err == nil && r > peak.Load() {
					peak.Store(r)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		start := time.Now()
		for _, s := range sqls {
			if err := exec(s); err != nil {
				close(stop)
				<-done
				return buildStats{}, err
			}
		}
		d := time.Since(start)
		close(stop)
		<-done
		cpu1, _ := procstat.CPUSeconds(pid)
		return buildStats{wall: d.Seconds(), cpu: cpu1 - cpu0, peakMiB: float64(peak.Load()) / 1024,
			growMiB: float64(max(peak.Load()-before, 0)) / 1024}, nil
	}
	if *flagKind == "gin" {
		return runGIN(sizes, exec, func(sqls ...string) (time.Duration, int64, error) {
			b, err := build(sqls...)
			return time.Duration(b.wall * float64(time.Second)), int64(b.growMiB * 1024), err
		}, conn)
	}
	rbrRuns := *flagRuns
	if *flagRBRRuns >= 0 {
		rbrRuns = *flagRBRRuns
	}
	if *flagOnline {
		rbrRuns = 0
	}
	fmt.Printf("cairn start (one node, storage profile %s), CREATE INDEX ON t (v); %d online and %d row-by-row builds, medians\n", *flagProfile, *flagRuns, rbrRuns)
	fmt.Printf("each build's index has a name of its own and is kept (DROP INDEX deletes its entries in a transaction: minutes at 10M rows); a build reads only the table's rows\n\n")
	httpAddr := fmt.Sprintf("127.0.0.1:%d", p+1)
	type result struct {
		n        int
		loadS    float64
		loadSSTs int64
		on, rbr  []buildStats
		idxSSTs  []float64
		sortPeak []float64
	}
	var results []result
	for _, n := range sizes {
		if err := exec("DROP TABLE IF EXISTS t"); err != nil {
			return err
		}
		// Created and loaded in one transaction: the bulk path
		// (docs/architecture.md, "Bulk loads"), minutes faster than
		// transactional inserts at these sizes. Its rows are in key
		// order, so they are ingested as SSTs filled across batches
		// (kv.SortedStream): those files are what every build scans.
		s0 := sstsIngested(httpAddr)
		loadStart := time.Now()
		for _, s := range []string{"BEGIN", "CREATE TABLE t (k INT PRIMARY KEY, v INT, pad TEXT)",
			fmt.Sprintf("INSERT INTO t SELECT g, (g::int8 * 7919) %% %d, repeat('x', 20) FROM generate_series(1, %d) g", n, n), "COMMIT"} {
			if err := exec(s); err != nil {
				return err
			}
		}
		res := result{n: n, loadS: time.Since(loadStart).Seconds(), loadSSTs: sstsIngested(httpAddr) - s0}
		fmt.Printf("%d rows loaded in %.1f s (%d SSTs)\n", n, res.loadS, res.loadSSTs)
		for r := range max(*flagRuns, rbrRuns) {
			if r < *flagRuns {
				s0 := sstsIngested(httpAddr)
				b, err := build(fmt.Sprintf("CREATE INDEX t_on%d ON t (v)", r))
				if err != nil {
					return err
				}
				peak := sortPeakMiB(logPath)
				res.on, res.idxSSTs, res.sortPeak = append(res.on, b), append(res.idxSSTs, float64(sstsIngested(httpAddr)-s0)), append(res.sortPeak, peak)
				fmt.Printf("  online %d: %s, sort peak %.1f MiB, %d SSTs\n", r+1, b, peak, sstsIngested(httpAddr)-s0)
			}
			if r < rbrRuns {
				b, err := build("BEGIN", fmt.Sprintf("CREATE INDEX t_rbr%d ON t (v)", r), "COMMIT")
				if err != nil {
					return err
				}
				res.rbr = append(res.rbr, b)
				fmt.Printf("  row by row %d: %s (%.0f rows/s)\n", r+1, b, float64(n)/b.wall)
			}
		}
		results = append(results, res)
	}
	fmt.Printf("\n%10s %10s %10s %10s %10s %8s %9s %9s %9s %9s %9s %7s %6s\n", "rows", "online s", "online CPU", "rbr s", "rbr CPU", "ratio",
		"on RSS MB", "on +RSS", "sort MiB", "rbr RSS", "rbr +RSS", "load s", "SSTs")
	for _, r := range results {
		rbrS, rbrCPU, ratio, rbrRSS, rbrGrow := "-", "-", "-", "-", "-"
		if len(r.rbr) > 0 {
			rbrS = fmt.Sprintf("%.2f", medianOf(r.rbr, func(b buildStats) float64 { return b.wall }))
			rbrCPU = fmt.Sprintf("%.2f", medianOf(r.rbr, func(b buildStats) float64 { return b.cpu }))
			ratio = fmt.Sprintf("%.2fx", medianOf(r.rbr, func(b buildStats) float64 { return b.wall })/medianOf(r.on, func(b buildStats) float64 { return b.wall }))
			rbrRSS = fmt.Sprintf("%.0f", maxOf(r.rbr, func(b buildStats) float64 { return b.peakMiB }))
			rbrGrow = fmt.Sprintf("%.0f", maxOf(r.rbr, func(b buildStats) float64 { return b.growMiB }))
		}
		fmt.Printf("%10d %10.2f %10.2f %10s %10s %8s %9.0f %9.0f %9.1f %9s %9s %7.1f %6.0f\n", r.n,
			medianOf(r.on, func(b buildStats) float64 { return b.wall }), medianOf(r.on, func(b buildStats) float64 { return b.cpu }),
			rbrS, rbrCPU, ratio,
			maxOf(r.on, func(b buildStats) float64 { return b.peakMiB }), maxOf(r.on, func(b buildStats) float64 { return b.growMiB }),
			slices.Max(r.sortPeak), rbrRSS, rbrGrow, r.loadS, median(r.idxSSTs))
	}
	fmt.Printf("\n(times: medians; RSS and the sort's high-water mark: the most of any build)\n")
	fmt.Printf("seed (read-planning.txt part 2, LightDB on hdd): 1M rows 19 s, 3M 15 min, 10M 280 min\n")
	return nil
}

// buildStats is one build's wall and node CPU seconds, the node's peak
// RSS during it and that peak's growth over the RSS before it.
type buildStats struct {
	wall, cpu, peakMiB, growMiB float64
}

func (b buildStats) String() string {
	return fmt.Sprintf("%.2f s, CPU %.2f s, peak RSS %.0f MiB (+%.0f)", b.wall, b.cpu, b.peakMiB, b.growMiB)
}

func medianOf(bs []buildStats, f func(buildStats) float64) float64 {
	xs := make([]float64, len(bs))
	for i, b := range bs {
		xs[i] = f(b)
	}
	return median(xs)
}

func maxOf(bs []buildStats, f func(buildStats) float64) float64 {
	m := 0.0
	for _, b := range bs {
		m = max(m, f(b))
	}
	return m
}

// sortPeakRE finds the sort's high-water mark in the backfill's log line
// ("cairn: index backfill done ... sort_peak_bytes=N").
var sortPeakRE = regexp.MustCompile(`index backfill done.*sort_peak_bytes=(\d+)`)

// sortPeakMiB is the last online backfill's sort memory high-water mark
// from the node's log (-1 when no line has it).
func sortPeakMiB(logPath string) float64 {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return -1
	}
	m := sortPeakRE.FindAllSubmatch(data, -1)
	if len(m) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[len(m)-1][1]), 64)
	return v / (1 << 20)
}

// sstsIngested is the node's cairn_tablet_ssts_ingested_total (-1 when
// it cannot be read: the columns then say nothing).
func sstsIngested(addr string) int64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	var n int64
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "cairn_tablet_ssts_ingested_total"); ok {
			f := strings.Fields(rest)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				n += int64(v)
				found = true
			}
		}
	}
	if !found {
		return -1
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// ginPayload is a PushEvent payload like the seed's: a commits array of
// one to three commits with an author email among 1,000 (so the seed's
// query matches about a thousandth of the rows).
const ginPayload = `jsonb_build_object('push_id', g, 'size', 1 + g % 3, 'ref', 'refs/heads/master',
  'commits', (SELECT jsonb_agg(jsonb_build_object('sha', md5((g * 10 + c)::text),
    'author', jsonb_build_object('email', 'u' || ((g * 7 + c) % 1000) || '@example.com', 'name', 'user ' || ((g * 7 + c) % 1000)),
    'message', 'commit ' || c, 'distinct', true)) FROM generate_series(0, g % 3) c))`

// runGIN times, at each size, the GIN build online and in a transaction
// block, and the seed's containment query through the index and with
// index scans off (a full scan filtering every row).
func runGIN(sizes []int, exec func(string) error, build func(...string) (time.Duration, int64, error), conn *pgx.Conn) error {
	ctx := context.Background()
	fmt.Printf("cairn start (one node, storage profile %s), CREATE INDEX ... USING gin (payload); median of %d runs\n\n", *flagProfile, *flagRuns)
	fmt.Printf("%10s %12s %12s %14s %14s %14s %10s\n", "rows", "online s", "in txn s", "online +RSS MB", "query idx ms", "query scan ms", "matches")
	const q = `SELECT count(*) FROM t WHERE payload @> '{"commits": [{"author": {"email": "u7@example.com"}}]}'`
	for _, n := range sizes {
		if err := exec("DROP TABLE IF EXISTS t"); err != nil {
			return err
		}
		for _, s := range []string{"BEGIN", "CREATE TABLE t (k INT PRIMARY KEY, payload JSONB)",
			fmt.Sprintf("INSERT INTO t SELECT g, %s FROM generate_series(1, %d) g", ginPayload, n), "COMMIT", "ANALYZE t"} {
			if err := exec(s); err != nil {
				return err
			}
		}
		var on, txn, onMem, qi, qs []float64
		var matches, scanned int64
		for range *flagRuns {
			d, m, err := build("CREATE INDEX t_gin ON t USING gin (payload)")
			if err != nil {
				return err
			}
			on, onMem = append(on, d.Seconds()), append(onMem, float64(m)/1024)
			for _, off := range []bool{false, true} {
				if err := exec(fmt.Sprintf("SET enable_indexscan = %t", !off)); err != nil {
					return err
				}
				start := time.Now()
				got := &matches
				if off {
					got = &scanned
				}
				if err := conn.QueryRow(ctx, q).Scan(got); err != nil {
					return err
				}
				if off {
					qs = append(qs, float64(time.Since(start).Microseconds())/1000)
					if scanned != matches {
						return fmt.Errorf("the query counts %d rows through the index, %d by a full scan", matches, scanned)
					}
				} else {
					qi = append(qi, float64(time.Since(start).Microseconds())/1000)
				}
			}
			if err := exec("RESET enable_indexscan"); err != nil {
				return err
			}
			if err := exec("DROP INDEX t_gin"); err != nil {
				return err
			}
			d, _, err = build("BEGIN", "CREATE INDEX t_gin ON t USING gin (payload)", "COMMIT")
			if err != nil {
				return err
			}
			txn = append(txn, d.Seconds())
			if err := exec("DROP INDEX t_gin"); err != nil {
				return err
			}
		}
		fmt.Printf("%10d %12.2f %12.2f %14.0f %14.1f %14.1f %10d\n", n, median(on), median(txn), median(onMem), median(qi), median(qs), matches)
	}
	fmt.Printf("\nseed (parallel-indexing.txt, regular LightDB table, 219k rows): CREATE INDEX GIN 33.2 s; SELECT 900 ms without, 2 ms with the index\n")
	return nil
}
