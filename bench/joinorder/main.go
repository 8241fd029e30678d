// Command joinorder measures the planning of large joins (issue 15)
// against PostgreSQL 15: N tables of 10 rows, joined as a shuffled
// comma-separated FROM list with a chain of equality predicates and one
// constant filter (gen.py prints the same SQL), for each N of -tables. It
// reports, per system, the median over -runs of the wall time of EXPLAIN
// (parsing and planning, no execution) and of the query itself, and
// checks that both systems give the same answer.
//
// Usage: go run ./bench/joinorder [-tables 24,64] [-runs 5] [-port 34200] [-skip-pg]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/bench/internal/benchflag"
	"github.com/cairn-db/cairn/bench/internal/benchnode"
)

var (
	flagTables = flag.String("tables", "24,64", "comma-separated table counts")
	flagRuns   = flag.Int("runs", 5, "timed runs per query and system; medians are reported")
	flagPort   = flag.Int("port", 34200, "first of the ports used (Cairn SQL, Cairn HTTP, Cairn RPC, PostgreSQL)")
	flagSkipPG = flag.Bool("skip-pg", false, "do not run PostgreSQL")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// setup is the DDL and data of n tables j1..jn of 10 rows each.
func setup(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out,
			fmt.Sprintf("DROP TABLE IF EXISTS j%d", i),
			fmt.Sprintf("CREATE TABLE j%d (id int PRIMARY KEY, nxt int, v int)", i),
			fmt.Sprintf("INSERT INTO j%d SELECT g, (g %% 10) + 1, g * %d FROM generate_series(1, 10) g", i, i))
	}
	return out
}

// query is the join of j1..jn in a shuffled FROM list (seeded: the same
// SQL on both systems and every run).
func query(n int) string {
	order := make([]int, n)
	for i := range order {
		order[i] = i + 1
	}
	rand.New(rand.NewSource(int64(n))).Shuffle(n, func(a, b int) { order[a], order[b] = order[b], order[a] })
	var from, preds []string
	for _, i := range order {
		from = append(from, fmt.Sprintf("j%d", i))
	}
	for i := 1; i < n; i++ {
		preds = append(preds, fmt.Sprintf("j%d.nxt = j%d.id", i, i+1))
	}
	preds = append(preds, "j1.id = 3")
	return fmt.Sprintf("SELECT count(*), min(j%d.v) FROM %s WHERE %s", n, strings.Join(from, ", "), strings.Join(preds, " AND "))
}

func run() error {
	ctx := context.Background()
	sizes, err := benchflag.Counts("tables", *flagTables, 2)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-joinorder-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// PostgreSQL runs as the postgres OS user when we are root
	// (scripts/pg15.sh): its directory must be reachable.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	bin, err := benchnode.Build(dir)
	if err != nil {
		return err
	}
	p := *flagPort
	node, err := benchnode.Start(benchnode.Options{Bin: bin, Store: filepath.Join(dir, "store"), Log: filepath.Join(dir, "cairn.log"), Port: p})
	if err != nil {
		return err
	}
	defer node.Kill()
	systems := []struct{ name, url string }{{"Cairn", node.URL}}
	if !*flagSkipPG {
		pgDir := filepath.Join(dir, "pg")
		if out, err := exec.Command("scripts/pg15.sh", "start", pgDir, strconv.Itoa(p+3)).CombinedOutput(); err != nil {
			return fmt.Errorf("starting PostgreSQL 15: %v\n%s", err, out)
		}
		defer exec.Command("scripts/pg15.sh", "stop", pgDir, strconv.Itoa(p+3)).Run()
		systems = append(systems, struct{ name, url string }{"PostgreSQL 15", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p+3)})
	}
	conns := make([]*pgx.Conn, len(systems))
	for i, s := range systems {
		if conns[i], err = benchnode.ConnectURL(ctx, s.url); err != nil {
			return fmt.Errorf("%s: %v", s.name, err)
		}
		defer conns[i].Close(ctx)
		for _, stmt := range setup(slices.Max(sizes)) {
			if _, err := conns[i].Exec(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %s: %v", s.name, stmt, err)
			}
		}
	}
	fmt.Printf("join of N tables of 10 rows, shuffled comma FROM list; median of %d runs, ms\n\n", *flagRuns)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tables\tsystem\tEXPLAIN ms\tquery ms\tanswer\t")
	for _, n := range sizes {
		q := query(n)
		answers := map[string]bool{}
		for i, s := range systems {
			var explain, exec []float64
			var answer string
			for range *flagRuns {
				d, _, err := timed(ctx, conns[i], "EXPLAIN "+q)
				if err != nil {
					return fmt.Errorf("%s, %d tables, EXPLAIN: %v", s.name, n, err)
				}
				explain = append(explain, d)
				if d, answer, err = timed(ctx, conns[i], q); err != nil {
					return fmt.Errorf("%s, %d tables: %v", s.name, n, err)
				}
				exec = append(exec, d)
			}
			answers[answer] = true
			fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%s\t\n", n, s.name, median(explain), median(exec), answer)
		}
		if len(answers) != 1 {
			tw.Flush()
			return fmt.Errorf("%d tables: the systems' answers differ", n)
		}
	}
	return tw.Flush()
}

// timed runs q (simple protocol) and returns its wall time in ms and its
// rows, printed.
func timed(ctx context.Context, conn *pgx.Conn, q string) (float64, string, error) {
	start := time.Now()
	rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return 0, "", err
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
		return 0, "", err
	}
	return float64(time.Since(start).Microseconds()) / 1000, strings.Join(out, ";"), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
