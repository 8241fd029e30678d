package distsql_test

// A node dies in the middle of distributed statements (issue 17): every
// statement then ends, with the right answer or a clean error, and none
// hangs.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestNodeDiesDuringDistributedQueries(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, g INT, x INT, s TEXT)")
	mustExec(t, c, "INSERT INTO t SELECT i, i % 7, (i * 37) % 1000, repeat('s', 100) FROM generate_series(1, 20000) AS i")
	splitUserData(t, servers[0])
	mustExec(t, c, "SET distsql = on")
	want := rows(t, c, "SELECT g, count(*), sum(x) FROM t GROUP BY g ORDER BY g")
	queries := []string{
		"SELECT g, count(*), sum(x) FROM t GROUP BY g ORDER BY g",
		"SELECT k FROM t WHERE x = 999 ORDER BY k DESC LIMIT 3",
	}

	// The node to stop: one running fragments (never the gateway).
	var victim int
	for _, m := range regexp.MustCompile(`Fragment \d+: node (\d+)`).FindAllStringSubmatch(strings.Join(rows(t, c, "EXPLAIN "+queries[0]), "\n"), -1) {
		for i, s := range servers[1:] {
			if m[1] == fmt.Sprint(s.NodeID()) {
				victim = i + 1
			}
		}
	}
	if victim == 0 {
		t.Skip("every fragment's lease is on the gateway: no node to stop under a fragment")
	}
	type result struct {
		err  error
		took time.Duration
		rows []string
	}
	results := make(chan result, 1000)
	done := make(chan struct{})
	go func() {
		defer close(results)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			q := queries[i%len(queries)]
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			rs, err := c.Query(ctx, q)
			var out []string
			if err == nil {
				for rs.Next() {
					vals, _ := rs.Values()
					out = append(out, fmt.Sprint(vals...))
				}
				rs.Close()
				err = rs.Err()
			}
			cancel()
			if i%len(queries) != 0 {
				out = nil // only the aggregate's answer is compared
			}
			results <- result{err, time.Since(start), out}
		}
	}()
	// Let some statements run, then stop it while they go on.
	time.Sleep(300 * time.Millisecond)
	if err := servers[victim].Stop(context.Background()); err != nil {
		t.Logf("stopping node %d: %v", servers[victim].NodeID(), err)
	}
	time.Sleep(3 * time.Second)
	close(done)
	var ok, failed int
	for r := range results {
		if r.took > 30*time.Second {
			t.Errorf("a statement took %s", r.took)
		}
		if r.err != nil {
			failed++
			var pe *pgconn.PgError
			if !errors.As(r.err, &pe) {
				t.Errorf("not a PostgreSQL error: %v", r.err)
				continue
			}
			switch pe.Code[:2] {
			case "08", "40", "57", "XX", "55":
				// connection failure, retry, cancel, internal, unavailable
			default:
				t.Errorf("unexpected error %s: %v", pe.Code, r.err)
			}
			if failed <= 3 {
				t.Logf("failed cleanly: %s %s", pe.Code, pe.Message)
			}
			continue
		}
		ok++
		if r.rows != nil && strings.Join(r.rows, "\n") != strings.Join(want, "\n") {
			t.Errorf("wrong answer after the node stopped:\n%v\nwant\n%v", r.rows, want)
		}
	}
	t.Logf("%d statements answered, %d failed cleanly", ok, failed)
	if ok == 0 {
		t.Error("no statement answered at all")
	}
	// The session still works, its fragments placed on the living.
	if got := rows(t, c, "SELECT 1"); len(got) != 1 {
		t.Errorf("session after the node stopped: %v", got)
	}
	t.Logf("stopped node %d; now:\n%s", servers[victim].NodeID(), strings.Join(rows(t, c, "EXPLAIN ANALYZE "+queries[0]), "\n"))
}
