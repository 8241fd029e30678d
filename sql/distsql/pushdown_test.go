package distsql_test

// Pushdown into fragments on three real servers (issue 17): filters and
// projections, partial aggregation and per-fragment sorts run where the
// data is; every answer equals local execution's (order included), and
// EXPLAIN ANALYZE shows that fewer rows and bytes reach the gateway.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// loadRandom creates table r with n rows of seeded random data: a group column
// of few values, ints with NULLs, numerics, text, booleans and a wide
// pad that no query returns.
func loadRandom(t *testing.T, c *pgx.Conn, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	mustExec(t, c, "CREATE TABLE r (k INT PRIMARY KEY, g INT, h TEXT, x INT, y NUMERIC, b BOOL, s TEXT, pad TEXT)")
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if b.Len() == 0 {
			b.WriteString("INSERT INTO r VALUES ")
		} else {
			b.WriteString(", ")
		}
		x := "NULL"
		if rng.IntN(10) > 0 {
			x = fmt.Sprint(rng.IntN(2001) - 1000)
		}
		y := "NULL"
		if rng.IntN(8) > 0 {
			y = fmt.Sprintf("%d.%02d", rng.IntN(500)-250, rng.IntN(100))
		}
		bv := []string{"true", "false", "NULL"}[rng.IntN(3)]
		fmt.Fprintf(&b, "(%d, %d, '%c', %s, %s, %s, 's%d', repeat('p', 200))", i, rng.IntN(13), 'a'+rune(rng.IntN(4)), x, y, bv, rng.IntN(50))
		if i%500 == 0 || i == n {
			mustExec(t, c, b.String())
			b.Reset()
		}
	}
}

func TestPushdown(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	loadRandom(t, c, 3000, 17)
	splitUserData(t, servers[0])

	// same runs q locally and distributed and wants the same rows in the
	// same order.
	same := func(t *testing.T, q string) []string {
		t.Helper()
		mustExec(t, c, "SET distsql = off")
		off := rows(t, c, q)
		mustExec(t, c, "SET distsql = on")
		on := rows(t, c, q)
		if strings.Join(on, "\n") != strings.Join(off, "\n") {
			t.Errorf("%s:\n on: %v\noff: %v", q, on, off)
		}
		return on
	}
	explain := func(t *testing.T, q string) string {
		t.Helper()
		mustExec(t, c, "SET distsql = on")
		return strings.Join(rows(t, c, "EXPLAIN ANALYZE "+q), "\n")
	}

	t.Run("filter and projection", func(t *testing.T) {
		for _, q := range []string{
			"SELECT k, x FROM r WHERE x > 900",
			"SELECT k, x * 2 + 1, s || h FROM r WHERE x % 7 = 3 AND s LIKE 's1%'",
			"SELECT k, y FROM r WHERE y IS NULL OR y < -240",
			"SELECT k FROM r WHERE b AND h IN ('a', 'c') AND k BETWEEN 100 AND 2900",
			"SELECT k, coalesce(x, -1), CASE WHEN x > 0 THEN 'pos' ELSE 'neg' END FROM r WHERE g = 3",
			"SELECT k, x FROM r WHERE x > 0 LIMIT 10",
			"SELECT k, length(pad) FROM r WHERE k % 250 = 0",
		} {
			if got := same(t, q); len(got) == 0 {
				t.Errorf("%s: no rows; the comparison proves little", q)
			}
		}
		// Only the filtered rows' projected columns cross the network:
		// compare with the same flow shipping KVs.
		q := "SELECT k, x FROM r WHERE x > 900"
		pushed := fragmentStats(explain(t, q))
		mustExec(t, c, "SET sql.testing.distsql_pushdown = off")
		kvs := fragmentStats(explain(t, q))
		mustExec(t, c, "SET sql.testing.distsql_pushdown = on")
		pr, pb := shipped(pushed)
		kr, kb := shipped(kvs)
		if len(pushed) != 3 || len(kvs) != 3 || pushed[0].unit[:3] != "row" || kvs[0].unit[:3] != "key" {
			t.Fatalf("fragments: pushed %+v, KVs %+v", pushed, kvs)
		}
		want := rows(t, c, "SELECT count(*) FROM r WHERE x > 900")[0]
		if fmt.Sprint(pr) != want || kr < 3000 || pb*20 > kb {
			t.Errorf("pushdown shipped %d rows in %d bytes, KV fragments %d keys in %d bytes (want %s rows, under 1/20 of the bytes)", pr, pb, kr, kb, want)
		}
		t.Logf("filter+projection: %d rows, %d bytes pushed down; %d KVs, %d bytes without", pr, pb, kr, kb)
		// A function whose value depends on the session stays at the
		// gateway, and the answer is still the local one.
		same(t, "SELECT k FROM r WHERE x > 990 AND now() > '2000-01-01'")
	})

	t.Run("aggregation", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 5))
		aggs := []string{"count(*)", "count(x)", "sum(x)", "avg(x)", "min(x)", "max(x)", "sum(y)", "avg(y)", "min(y)",
			"max(s)", "min(h)", "bool_and(b)", "bool_or(b)", "every(x > -1000)", "bit_and(g)", "bit_or(x)", "count(y)", "sum(g)"}
		groups := []string{"", "g", "h", "g, h", "b", "x % 5", "s"}
		wheres := []string{"", "WHERE x > 0", "WHERE y < 0 OR b", "WHERE k > 2500", "WHERE s = 's3'"}
		for range 30 {
			var sel []string
			for range 1 + rng.IntN(4) {
				sel = append(sel, aggs[rng.IntN(len(aggs))])
			}
			g := groups[rng.IntN(len(groups))]
			q := "SELECT " + strings.Join(sel, ", ") + " FROM r " + wheres[rng.IntN(len(wheres))]
			if g != "" {
				q = "SELECT " + g + ", " + strings.Join(sel, ", ") + " FROM r " + wheres[rng.IntN(len(wheres))] + " GROUP BY " + g + " ORDER BY " + g
			}
			same(t, q)
		}
		same(t, "SELECT g, count(*), avg(x) FROM r GROUP BY g HAVING count(*) > 230 ORDER BY 3 DESC")
		same(t, "SELECT g + 1, sum(x) FROM r WHERE x > 5 GROUP BY g + 1 ORDER BY 1")
		// An empty input still yields one row (count 0, the rest NULL).
		same(t, "SELECT count(*), sum(x), avg(y), max(s) FROM r WHERE x > 5000")
		// Not split (DISTINCT, float sums) yet the same answer.
		same(t, "SELECT count(DISTINCT g), sum(x::float8) FROM r")

		// Each fragment ships at most one row per group.
		plan := explain(t, "SELECT g, count(*), sum(x), avg(y) FROM r GROUP BY g")
		st := fragmentStats(plan)
		if len(st) != 3 {
			t.Fatalf("not distributed:\n%s", plan)
		}
		for _, f := range st {
			if f.rows > 13 || f.unit[:3] != "row" {
				t.Errorf("a fragment shipped %d %s for 13 groups:\n%s", f.rows, f.unit, plan)
			}
		}
		t.Logf("grouped:\n%s", plan)
	})

	t.Run("sort", func(t *testing.T) {
		for _, q := range []string{
			"SELECT k, x FROM r ORDER BY x DESC NULLS LAST, k LIMIT 25",
			"SELECT k, x, y FROM r WHERE g < 4 ORDER BY y NULLS FIRST, k",
			"SELECT s, k FROM r ORDER BY s, k DESC LIMIT 40 OFFSET 15",
			"SELECT k, x FROM r WHERE x IS NOT NULL ORDER BY x, k",
			"SELECT h, k FROM r ORDER BY h DESC, k LIMIT 1",
		} {
			same(t, q)
		}
		// ORDER BY ... LIMIT 10: every fragment ships at most ten rows,
		// and the gateway merges them.
		plan := explain(t, "SELECT k, x FROM r ORDER BY x DESC NULLS LAST, k LIMIT 10")
		st := fragmentStats(plan)
		if len(st) != 3 || !strings.Contains(plan, "Distribution: ") {
			t.Fatalf("not distributed:\n%s", plan)
		}
		for _, f := range st {
			if f.rows > 10 {
				t.Errorf("a fragment shipped %d rows under LIMIT 10:\n%s", f.rows, plan)
			}
		}
	})

	t.Run("hash-partitioned", func(t *testing.T) {
		mustExec(t, c, "CREATE TABLE hp (k INT PRIMARY KEY, g INT, x INT) SPLIT INTO 8 TABLETS")
		mustExec(t, c, "INSERT INTO hp SELECT i, i % 11, (i * 7919) % 1000 FROM generate_series(1, 4000) AS i")
		for _, q := range []string{
			"SELECT g, count(*), sum(x), max(k) FROM hp GROUP BY g ORDER BY g",
			"SELECT count(*) FROM hp WHERE x > 500",
			"SELECT k, x FROM hp ORDER BY x DESC, k LIMIT 5",
			"SELECT k FROM hp WHERE x = 7",
		} {
			same(t, q)
		}
		plan := explain(t, "SELECT g, count(*) FROM hp GROUP BY g")
		if st := fragmentStats(plan); len(st) < 8 {
			t.Errorf("a scan of 8 tablets ran %d fragments:\n%s", len(st), plan)
		}
		// A router query (the hash column fixed) stays on its tablet.
		if p := strings.Join(rows(t, c, "EXPLAIN SELECT x FROM hp WHERE k = 42"), "\n"); strings.Contains(p, "Distribution") {
			t.Errorf("router query distributed:\n%s", p)
		}
	})
}
