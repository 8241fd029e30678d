// Command spill measures Cairn's spilling operators against PostgreSQL
// 15 (issue 15): an ORDER BY, a GROUP BY with many groups, a hash join and
// a window function over generated rows, with work_mem = '4MB' on both.
// For each query it reports the median wall time of -runs runs on each
// system, their ratio, and the peak resident memory of the `cairn start`
// process during Cairn's runs (VmHWM of /proc/PID/status, reset before
// each query through /proc/PID/clear_refs). Then it runs -conc copies of
// the queries at once on Cairn and reports whether they all completed, the
// wall time and the peak RSS.
//
// It also reports the CPU time each system spent on each query (median
// of the runs): utime + stime of the `cairn start` process, and of the
// PostgreSQL backend serving the connection (pg_backend_pid; these
// queries have no parallel plan), from /proc/PID/stat. On a machine
// other work loads, wall times move with the load by several times; CPU
// times move far less, so their ratio is the steadier comparison of the
// two systems' work.
//
// Each query returns one row (an aggregate over the operator's output or
// an OFFSET past all but the last row), so the client's transfer does not
// dominate; PostgreSQL cannot skip the work (no LIMIT, no top-N).
//
// Usage: go run ./bench/spill [-rows 10000000] [-runs 3] [-conc 10] [-port 30100] [-one-partition=false]
// [-cpuprofile DIR [-profile-seconds 10]] [-cairn BIN]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/bench/internal/procstat"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/bench/internal/benchnode"
)

var (
	flagRows     = flag.Int("rows", 10_000_000, "generated rows per query")
	flagRuns     = flag.Int("runs", 3, "timed runs per query and system; medians are reported")
	flagConc     = flag.Int("conc", 10, "concurrent queries in the concurrency round (0: skip)")
	flagConcRows = flag.Int("conc-rows", 0, "rows per query of the concurrency round (0: -rows)")
	flagPort     = flag.Int("port", 30100, "first of the ports used (Cairn SQL, Cairn HTTP, Cairn RPC, PostgreSQL)")
	flagWorkMem  = flag.String("work-mem", "4MB", "work_mem on both systems")
	flagSQLMem   = flag.String("max-sql-memory", "25%", "Cairn's --max-sql-memory")
	flagSkipPG   = flag.Bool("skip-pg", false, "do not run PostgreSQL")
	flagOnly     = flag.String("only", "", "run only queries whose names contain this")
	flagTimeout  = flag.Duration("timeout", 30*time.Minute, "give up on one query after this long")
	flagOnePart  = flag.Bool("one-partition", true, "also run the window queries over one partition of all the rows")
	flagProfile  = flag.String("cpuprofile", "", "write a CPU profile of Cairn's first run of each query to this directory (from /debug/pprof, -profile-seconds long)")
	flagProfSecs = flag.Int("profile-seconds", 10, "length of each -cpuprofile profile, from the query's start")
	flagCairn    = flag.String("cairn", "", "a cairn binary to run (default: build ./cmd/cairn first; a prebuilt one keeps the compiler out of a benchmark lock)")
)

type query struct{ name, sql string }

func queries(n int) []query {
	return []query{
		{"order by", fmt.Sprintf(`SELECT g FROM generate_series(1, %d) g ORDER BY (g * 2654435761) %% 1000000007 DESC OFFSET %d`, n, n-1)},
		{"group by", fmt.Sprintf(`SELECT count(*), sum(c) FROM (SELECT g %% %d AS k, count(*) AS c FROM generate_series(1, %d) g GROUP BY 1) s`, n/2, n)},
		{"hash join", fmt.Sprintf(`SELECT count(*) FROM (SELECT g AS a FROM generate_series(1, %d) g) x JOIN (SELECT g * 2 AS b FROM generate_series(1, %d) g) y ON a = b`, n, n/2)},
		{"window", fmt.Sprintf(`SELECT count(*), sum(rn) FROM (SELECT row_number() OVER (PARTITION BY g %% 1000 ORDER BY g DESC) AS rn FROM generate_series(1, %d) g) s`, n)},
	}
}

// onePartition are window functions read by position over one partition
// of all n rows (lag/lead, a sliding frame): not part of the concurrency
// round, which runs the four queries above.
func onePartition(n int) []query {
	return []query{
		{"window lag/lead, 1 partition", fmt.Sprintf(`SELECT count(*), sum(x) FROM (SELECT lag(g, 3) OVER w - lead(g, 1000, 0) OVER w AS x FROM generate_series(1, %d) g WINDOW w AS (ORDER BY g DESC)) s`, n)},
		{"window sliding, 1 partition", fmt.Sprintf(`SELECT count(*), sum(x) FROM (SELECT sum(g) OVER (ORDER BY g DESC ROWS BETWEEN 5 PRECEDING AND 5 FOLLOWING) AS x FROM generate_series(1, %d) g) s`, n)},
	}
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// run returns its errors so its deferred stops of both servers run.
func run() error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "bench-spill-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// PostgreSQL runs as the postgres OS user when we are root
	// (scripts/pg15.sh): its directory must be reachable.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}

	bin := *flagCairn
	if bin == "" {
		if bin, err = benchnode.Build(dir); err != nil {
			return err
		}
	}
	p := *flagPort
	node, err := benchnode.Start(benchnode.Options{Bin: bin, Store: filepath.Join(dir, "store"), Log: filepath.Join(dir, "cairn.log"), Port: p,
		Args: []string{"--max-sql-memory", *flagSQLMem}})
	if err != nil {
		return err
	}
	defer node.Kill()
	cmd := node.Cmd
	cairnURL := node.URL
	pgURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p+3)
	if err := waitReady(ctx, cairnURL); err != nil {
		return fmt.Errorf("cairn did not start: %v", err)
	}
	if !*flagSkipPG {
		pgDir := filepath.Join(dir, "pg")
		if out, err := exec.Command("scripts/pg15.sh", "start", pgDir, strconv.Itoa(p+3)).CombinedOutput(); err != nil {
			return fmt.Errorf("starting PostgreSQL 15: %v\n%s", err, out)
		}
		defer exec.Command("scripts/pg15.sh", "stop", pgDir, strconv.Itoa(p+3)).Run()
	}
	pid := node.Pid()
	fmt.Printf("rows %d, work_mem %s, --max-sql-memory %s, runs %d (median)\n\n", *flagRows, *flagWorkMem, *flagSQLMem, *flagRuns)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "query\tCairn s\tPostgreSQL s\tratio\tCairn CPU s\tPostgreSQL CPU s\tCPU ratio\tCairn peak RSS MiB\tanswer\t")
	qs := queries(*flagRows)
	if *flagOnePart {
		qs = append(qs, onePartition(*flagRows)...)
	}
	for _, q := range qs {
		if !strings.Contains(q.name, *flagOnly) {
			continue
		}
		var ct, pt, cc, pc []float64
		var answer, pgAnswer string
		_ = procstat.ResetPeakRSS(pid)
		for run := range *flagRuns {
			var prof chan error
			if run == 0 && *flagProfile != "" {
				prof = make(chan error, 1)
				go func() {
					prof <- cpuProfile(p+1, filepath.Join(*flagProfile, strings.ReplaceAll(q.name, " ", "_")+".pprof"))
				}()
			}
			t, c, a, err := timed(ctx, cairnURL, q.sql, func(*pgx.Conn) (int, error) { return pid, nil })
			if prof != nil {
				if err := <-prof; err != nil {
					return fmt.Errorf("profiling %s: %v", q.name, err)
				}
			}
			if err != nil {
				return fmt.Errorf("cairn %s: %v", q.name, err)
			}
			ct, cc, answer = append(ct, t), append(cc, c), a
			if !*flagSkipPG {
				t, c, a, err := timed(ctx, pgURL, q.sql, pgBackend)
				if err != nil {
					return fmt.Errorf("postgres %s: %v", q.name, err)
				}
				pt, pc, pgAnswer = append(pt, t), append(pc, c), a
			}
		}
		hwm, err := procstat.PeakRSSKiB(pid)
		if err != nil {
			return err
		}
		if !*flagSkipPG && answer != pgAnswer {
			return fmt.Errorf("%s: Cairn answered %s, PostgreSQL %s", q.name, answer, pgAnswer)
		}
		pgs, ratio, pgc, cratio := "-", "-", "-", "-"
		if len(pt) > 0 {
			pgs, ratio = fmt.Sprintf("%.2f", median(pt)), fmt.Sprintf("%.2f×", median(ct)/median(pt))
			pgc, cratio = fmt.Sprintf("%.2f", median(pc)), fmt.Sprintf("%.2f×", median(cc)/median(pc))
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%.2f\t%s\t%s\t%d\t%s\t\n", q.name, median(ct), pgs, ratio, median(cc), pgc, cratio, hwm>>10, answer)
		fmt.Fprintf(os.Stderr, "%s done: Cairn %v (CPU %v), PostgreSQL %v (CPU %v)\n", q.name, ct, cc, pt, pc)
	}
	tw.Flush()

	if *flagConc > 0 {
		n := *flagConcRows
		if n == 0 {
			n = *flagRows
		}
		_ = procstat.ResetPeakRSS(pid)
		qs := queries(n)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, *flagConc)
		for i := range *flagConc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, _, errs[i] = timed(ctx, cairnURL, qs[i%len(qs)].sql, nil)
			}()
		}
		wg.Wait()
		hwm, _ := procstat.PeakRSSKiB(pid)
		failed := 0
		for i, err := range errs {
			if err != nil {
				failed++
				fmt.Printf("concurrent query %d (%s): %v\n", i, qs[i%len(qs)].name, err)
			}
		}
		alive := cmd.ProcessState == nil && cmd.Process.Signal(syscallZero()) == nil
		fmt.Printf("\n%d concurrent queries of %d rows (the four in turn): %d failed, %.1f s, peak RSS %d MiB, node alive %v\n",
			*flagConc, n, failed, time.Since(start).Seconds(), hwm>>10, alive)
	}
	return nil
}

// timed runs q on a fresh connection with work_mem set and returns its
// wall time, the CPU time of the process cpuPid names (nil: 0) and its
// one row, printed.
func timed(ctx context.Context, url, q string, cpuPid func(*pgx.Conn) (int, error)) (float64, float64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, *flagTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0, "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET work_mem = '"+*flagWorkMem+"'"); err != nil {
		return 0, 0, "", err
	}
	cpu := func() (float64, error) { return 0, nil }
	if cpuPid != nil {
		p, err := cpuPid(conn)
		if err != nil {
			return 0, 0, "", err
		}
		cpu = func() (float64, error) { return procstat.CPUSeconds(p) }
	}
	cpu0, err := cpu()
	if err != nil {
		return 0, 0, "", err
	}
	start := time.Now()
	rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return 0, 0, "", err
	}
	var out []string
	for rows.Next() {
		var vals []string
		for _, v := range rows.RawValues() {
			vals = append(vals, string(v))
		}
		out = append(out, strings.Join(vals, ","))
	}
	if err := rows.Err(); err != nil {
		return 0, 0, "", err
	}
	wall := time.Since(start).Seconds()
	cpu1, err := cpu()
	if err != nil {
		return 0, 0, "", err
	}
	return wall, cpu1 - cpu0, strings.Join(out, ";"), nil
}

// pgBackend is the PostgreSQL backend process serving conn.
func pgBackend(conn *pgx.Conn) (int, error) {
	var pid int
	err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid)
	return pid, err
}

// cpuProfile writes a CPU profile of the Cairn node whose HTTP port is
// port (an --insecure node serves /debug/pprof to anyone) to path.
func cpuProfile(port int, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, *flagProfSecs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// waitReady waits until url accepts a connection (benchnode.ConnectURL).
func waitReady(ctx context.Context, url string) error {
	conn, err := benchnode.ConnectURL(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func syscallZero() os.Signal { return syscall.Signal(0) }
