package distsql_test

// Distributed scans through SQL on three real servers: every answer is
// the same with distsql on and off, EXPLAIN ANALYZE shows the fragments,
// and statement_timeout cancels a distributed statement.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
	"github.com/jackc/pgx/v5"
)

// startServers starts three members and returns them. Their RPC
// listeners are opened first on free loopback ports (as server's own
// cluster tests do): a fixed port can be taken at that moment as the
// ephemeral source port of some other connection.
func startServers(t *testing.T) []*server.Server {
	t.Helper()
	return startServersWith(t, func(*server.Config) {})
}

// startServersWith starts three servers with configs changed by with.
func startServersWith(t *testing.T, with func(*server.Config)) []*server.Server {
	t.Helper()
	return startNServers(t, 3, with)
}

// startNServers starts n servers with configs changed by with.
func startNServers(t *testing.T, n int, with func(*server.Config)) []*server.Server {
	t.Helper()
	ctx := context.Background()
	var lns []net.Listener
	var join []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		join = append(join, ln.Addr().String())
	}
	servers := make([]*server.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cfg := server.Config{Insecure: true, Join: join, RPCAddr: join[i], RPCListener: lns[i],
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			with(&cfg)
			servers[i], errs[i] = server.Start(ctx, cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Stop(context.Background())
		}
	})
	return servers
}

func connect(t *testing.T, s *server.Server) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func mustExec(t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// writeAlong runs the statements stmt(from), stmt(from+1), ... through c
// on a goroutine of its own until stop is called, which returns how many
// succeeded: another session's writes while a test changes the table.
func writeAlong(c *pgx.Conn, from int, stmt func(i int) string) (stop func() int) {
	done := make(chan struct{})
	wrote := make(chan int)
	go func() {
		n := 0
		for i := from; ; i++ {
			select {
			case <-done:
				wrote <- n
				return
			default:
			}
			if _, err := c.Exec(context.Background(), stmt(i)); err == nil {
				n++
			}
		}
	}()
	return func() int {
		close(done)
		return <-wrote
	}
}

// rows returns a query's rows as text, one string per row.
func rows(t *testing.T, c *pgx.Conn, sql string) []string {
	t.Helper()
	rs, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(vals...))
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// splitUserData splits the keys of the user table into three tablets
// at a third and two thirds of its KVs (any key will do: a split costs
// a fragment, never correctness).
func splitUserData(t *testing.T, s *server.Server) {
	t.Helper()
	ctx := context.Background()
	kvs, err := s.DB().Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) < 300 {
		t.Fatalf("only %d user KVs", len(kvs))
	}
	for _, at := range []int{len(kvs) / 3, 2 * len(kvs) / 3} {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: kvs[at].Key})
		if _, err := s.DB().Send(ctx, ba); err != nil {
			t.Fatalf("split: %v", err)
		}
	}
}

func TestDistSQLThroughSQL(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, g INT, x INT, s TEXT)")
	mustExec(t, c, "INSERT INTO t SELECT i, i % 7, (i * 37) % 1000 - 300, 'row' || i FROM generate_series(1, 3000) AS i")
	splitUserData(t, servers[0])

	queries := []string{
		"SELECT count(*), sum(x) FROM t",
		"SELECT min(x), max(x), avg(x), bool_and(x > -301), bool_or(x > 600) FROM t",
		"SELECT g, count(*), sum(x), min(s) FROM t GROUP BY g ORDER BY g",
		"SELECT k, x FROM t WHERE x > 650 ORDER BY x DESC, k LIMIT 7",
		"SELECT k, s FROM t WHERE k % 500 = 0",
		"SELECT count(*) FROM t WHERE s LIKE 'row1%'",
		"SELECT k, g FROM t ORDER BY k LIMIT 5",
		"SELECT k, g FROM t ORDER BY k LIMIT 1500",
		"SELECT * FROM (SELECT k, x FROM t ORDER BY k LIMIT 2500) AS s ORDER BY x, k LIMIT 4",
	}
	for _, q := range queries {
		mustExec(t, c, "SET distsql = off")
		off := rows(t, c, q)
		mustExec(t, c, "SET distsql = on")
		on := rows(t, c, q)
		if strings.Join(on, "\n") != strings.Join(off, "\n") || len(on) == 0 {
			t.Errorf("%s:\n on: %v\noff: %v", q, on, off)
		}
	}
	if got := rows(t, c, "SHOW distsql"); len(got) != 1 || got[0] != "on" {
		t.Errorf("SHOW distsql = %v", got)
	}
	if _, err := c.Exec(context.Background(), "SET distsql = sometimes"); err == nil || !strings.Contains(err.Error(), "22023") {
		t.Errorf("SET distsql = sometimes: %v, want 22023", err)
	}

	// EXPLAIN ANALYZE names the fragments, their nodes and tablets.
	plan := strings.Join(rows(t, c, "EXPLAIN ANALYZE SELECT sum(x) FROM t"), "\n")
	if !strings.Contains(plan, "Distribution: ") || !strings.Contains(plan, "Fragment 2: node ") {
		t.Errorf("EXPLAIN ANALYZE shows no fragments:\n%s", plan)
	}
	t.Logf("distributed:\n%s", plan)
	checkPerNode(t, plan)
	// count(*) is counted at the tablets (sql/exec/count.go), on both
	// nodes, without fragments: no key comes back, and plain EXPLAIN
	// shows no distribution either.
	plan = strings.Join(rows(t, c, "EXPLAIN ANALYZE SELECT count(*) FROM t"), "\n")
	if strings.Contains(plan, "Distribution: ") || !strings.Contains(plan, "to 3 tablets, read 0 keys") {
		t.Errorf("EXPLAIN ANALYZE of count(*) does not show a count at the 3 tablets:\n%s", plan)
	}
	if p := strings.Join(rows(t, c, "EXPLAIN SELECT count(*) FROM t"), "\n"); strings.Contains(p, "Distribution") {
		t.Errorf("EXPLAIN of count(*) shows a distribution:\n%s", p)
	}
	if got := rows(t, c, "SELECT count(*) FROM t"); len(got) != 1 || got[0] != "3000" {
		t.Errorf("count(*) = %v, want 3000", got)
	}
	// The limit reaches every fragment: none ships more than five rows.
	plan = strings.Join(rows(t, c, "EXPLAIN ANALYZE SELECT k FROM t ORDER BY k LIMIT 5"), "\n")
	if st := fragmentStats(plan); len(st) != 3 || st[0].rows != 5 || st[1].rows > 5 || st[2].rows > 5 {
		t.Errorf("LIMIT 5 not in every fragment (%+v):\n%s", st, plan)
	}
	t.Logf("limited:\n%s", plan)
	// Without pushdown the fragments ship KVs, each at most the KVs of
	// six rows (five and the one that ends the fifth).
	mustExec(t, c, "SET sql.testing.distsql_pushdown = off")
	plan = strings.Join(rows(t, c, "EXPLAIN ANALYZE SELECT k FROM t ORDER BY k LIMIT 5"), "\n")
	if !strings.Contains(plan, "Fragment 0: node ") || !strings.Contains(plan, ": 30 keys") || strings.Contains(plan, " 1000 keys") {
		t.Errorf("LIMIT 5 not in every KV fragment:\n%s", plan)
	}
	mustExec(t, c, "SET sql.testing.distsql_pushdown = on")
	mustExec(t, c, "SET distsql = off")
	plan = strings.Join(rows(t, c, "EXPLAIN ANALYZE SELECT sum(x) FROM t"), "\n")
	if strings.Contains(plan, "Distribution: ") {
		t.Errorf("distsql = off, yet:\n%s", plan)
	}

	// Plain EXPLAIN shows where the fragments would run: nothing with
	// distsql = off; with on, "full" exactly when they span nodes; auto
	// distributes exactly those plans.
	for _, q := range []string{"SELECT sum(x) FROM t", "SELECT k FROM t WHERE x > 5 ORDER BY x LIMIT 3", "SELECT k FROM t WHERE k < 10"} {
		mustExec(t, c, "SET distsql = off")
		if p := strings.Join(rows(t, c, "EXPLAIN "+q), "\n"); strings.Contains(p, "Distribution") {
			t.Errorf("EXPLAIN %s with distsql = off:\n%s", q, p)
		}
		mustExec(t, c, "SET distsql = on")
		on := strings.Join(rows(t, c, "EXPLAIN "+q), "\n")
		if !strings.Contains(on, "Distribution: ") || !strings.Contains(on, "Fragment 0: node ") {
			t.Errorf("EXPLAIN %s with distsql = on:\n%s", q, on)
		}
		mustExec(t, c, "SET distsql = auto")
		auto := strings.Join(rows(t, c, "EXPLAIN "+q), "\n")
		if strings.Contains(on, "Distribution: full") != strings.Contains(auto, "Distribution: full") || strings.Contains(auto, "Distribution: local") {
			t.Errorf("EXPLAIN %s: on\n%s\nauto\n%s", q, on, auto)
		}
		t.Logf("EXPLAIN %s (auto):\n%s", q, auto)
	}
	mustExec(t, c, "SET distsql = off")

	// statement_timeout cancels a distributed statement (57014), and the
	// session goes on.
	mustExec(t, c, "SET distsql = on")
	mustExec(t, c, "SET statement_timeout = '300ms'")
	_, err := c.Exec(context.Background(), "SELECT count(*) FROM t WHERE pg_sleep(0.01) IS NOT NULL")
	if err == nil || !strings.Contains(err.Error(), "57014") {
		t.Fatalf("slow distributed statement: %v, want 57014", err)
	}
	mustExec(t, c, "SET statement_timeout = 0")
	if got := rows(t, c, "SELECT count(*) FROM t"); len(got) != 1 || got[0] != "3000" {
		t.Errorf("after the timeout: %v", got)
	}
}

// fragStat is one "Fragment i: ..." line of EXPLAIN ANALYZE: what the
// fragment shipped to the gateway.
type fragStat struct {
	rows  int64
	unit  string // "row(s)" or "key(s)"
	bytes int64
}

var fragLine = regexp.MustCompile(`Fragment \d+: node \d+, tablet \d+: (\d+) (rows?|keys?) \((\d+)( bytes|kB)\)`)

// fragmentStats parses every fragment line of an EXPLAIN ANALYZE.
func fragmentStats(plan string) []fragStat {
	var out []fragStat
	for _, m := range fragLine.FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		b, _ := strconv.ParseInt(m[3], 10, 64)
		if m[4] == "kB" {
			b *= 1024
		}
		out = append(out, fragStat{rows: n, unit: m[2], bytes: b})
	}
	return out
}

func shipped(st []fragStat) (rows, bytes int64) {
	for _, s := range st {
		rows += s.rows
		bytes += s.bytes
	}
	return rows, bytes
}

var (
	fragTimeLine = regexp.MustCompile(`Fragment \d+: node (\d+), tablet \d+: (\d+) rows? \([^)]*\) in ([0-9.]+) ms`)
	nodeLine     = regexp.MustCompile(`Node (\d+): (\d+) fragments?, (\d+) rows? \([^)]*\), longest ([0-9.]+) ms`)
)

// checkPerNode checks EXPLAIN ANALYZE's line per node against its
// fragment lines: one line for every node that ran a fragment, with that
// node's number of fragments, the sum of their rows and the longest of
// their times.
func checkPerNode(t *testing.T, plan string) {
	t.Helper()
	type agg struct {
		frags, rows int64
		longest     float64
	}
	want := map[string]*agg{}
	for _, m := range fragTimeLine.FindAllStringSubmatch(plan, -1) {
		a := want[m[1]]
		if a == nil {
			a = &agg{}
			want[m[1]] = a
		}
		r, _ := strconv.ParseInt(m[2], 10, 64)
		ms, _ := strconv.ParseFloat(m[3], 64)
		a.frags++
		a.rows += r
		a.longest = max(a.longest, ms)
	}
	got := nodeLine.FindAllStringSubmatch(plan, -1)
	if len(want) == 0 || len(got) != len(want) {
		t.Errorf("EXPLAIN ANALYZE: %d per-node lines for fragments on %d nodes:\n%s", len(got), len(want), plan)
		return
	}
	for _, m := range got {
		a := want[m[1]]
		f, _ := strconv.ParseInt(m[2], 10, 64)
		r, _ := strconv.ParseInt(m[3], 10, 64)
		if a == nil || f != a.frags || r != a.rows || m[4] != strconv.FormatFloat(a.longest, 'f', 3, 64) {
			t.Errorf("EXPLAIN ANALYZE: node line %q, its fragments %+v:\n%s", m[0], a, plan)
		}
	}
}
