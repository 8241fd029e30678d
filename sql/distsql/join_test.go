package distsql_test

// Distributed joins on three real servers (issue 17): colocated,
// broadcast and repartitioned joins answer exactly what the gateway's
// join answers over random data, EXPLAIN says which way a join ran and
// the cost model's choice, and a failing or cancelled fragment stops
// the whole flow, repartitioning consumers and their producers included.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/server"
	"github.com/jackc/pgx/v5"
)

// loadJoinTables creates seeded random tables: a and b regular (range
// partitioned, split into tablets by splitUserData), tiny a small one,
// da and db distributed with six shards each (so colocated on their
// keys), dc distributed with four (not colocated with da). Join keys
// have NULLs and values with no partner.
func loadJoinTables(t *testing.T, servers []*server.Server, c *pgx.Conn, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	mustExec(t, c, "CREATE TABLE a (k INT PRIMARY KEY, g INT, x INT, c INT, s TEXT)")
	mustExec(t, c, "CREATE TABLE b (k INT PRIMARY KEY, g INT, y INT, c INT, t TEXT)")
	mustExec(t, c, "CREATE TABLE tiny (g INT PRIMARY KEY, name TEXT)")
	null := func(v int, p int) string {
		if rng.IntN(p) == 0 {
			return "NULL"
		}
		return fmt.Sprint(v)
	}
	insert := func(table string, n int, row func(i int) string, suffix ...string) {
		var sb strings.Builder
		for i := 1; i <= n; i++ {
			if sb.Len() == 0 {
				sb.WriteString("INSERT INTO " + table + " VALUES ")
			} else {
				sb.WriteString(", ")
			}
			sb.WriteString(row(i))
			if i%500 == 0 || i == n {
				mustExec(t, c, sb.String()+strings.Join(suffix, ""))
				sb.Reset()
			}
		}
	}
	insert("a", 3000, func(i int) string {
		return fmt.Sprintf("(%d, %s, %s, %d, 's%d')", i, null(rng.IntN(400), 20), null(rng.IntN(2000), 10), i%2, rng.IntN(300))
	})
	insert("b", 1500, func(i int) string {
		return fmt.Sprintf("(%d, %s, %s, %d, 's%d')", i, null(rng.IntN(400), 15), null(rng.IntN(1000), 10), i%2, rng.IntN(300))
	})
	insert("tiny", 40, func(i int) string { return fmt.Sprintf("(%d, 'name%d')", i-1, i) })
	splitUserData(t, servers[0])
	for _, d := range []struct {
		name, cols string
		shards, n  int
	}{{"da", "id INT PRIMARY KEY, v INT, w TEXT", 6, 2000}, {"db", "id INT PRIMARY KEY, z INT", 6, 1200}, {"dc", "id INT PRIMARY KEY, z INT", 4, 800}} {
		mustExec(t, c, fmt.Sprintf("CREATE TABLE %s (%s)", d.name, d.cols))
		mustExec(t, c, fmt.Sprintf("SELECT create_distributed_table('%s', 'id', shard_count => %d)", d.name, d.shards))
		insert(d.name, d.n, func(i int) string {
			id := rng.IntN(3000)
			if d.name == "da" {
				return fmt.Sprintf("(%d, %s, 'w%d')", id, null(rng.IntN(50), 10), rng.IntN(9))
			}
			return fmt.Sprintf("(%d, %s)", id, null(rng.IntN(100), 10))
		}, " ON CONFLICT DO NOTHING")
	}
	mustExec(t, c, "CREATE TABLE ref (g INT PRIMARY KEY, label TEXT)")
	insert("ref", 45, func(i int) string { return fmt.Sprintf("(%d, 'label%d')", i-1, i%7) })
	mustExec(t, c, "SELECT create_reference_table('ref')")
	for _, tb := range []string{"a", "b", "tiny", "da", "db", "dc", "ref"} {
		mustExec(t, c, "ANALYZE "+tb)
	}
}

// joinLabels are how EXPLAIN names each way of joining.
var joinLabels = map[string]string{"colocated": "Join: colocated", "reference": "Join: with reference table",
	"broadcast": "Join: broadcast", "repartition": "Join: hash repartitioned"}

// sorted returns q's rows sorted: a hash join's output order is not
// defined, locally or distributed.
func sorted(t *testing.T, c *pgx.Conn, q string) []string {
	t.Helper()
	out := rows(t, c, q)
	slices.Sort(out)
	return out
}

func TestDistributedJoins(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	loadJoinTables(t, servers, c, 42)

	queries := []string{
		"SELECT a.k, b.k, a.x, b.y FROM a JOIN b ON a.x = b.k",
		"SELECT a.k, t.name FROM a JOIN tiny t ON a.g = t.g",
		"SELECT a.k, b.k FROM a JOIN b ON a.g = b.g AND a.x > b.y",
		"SELECT a.k + b.k, upper(a.s) FROM a JOIN b ON a.s = b.t AND a.g = b.g",
		"SELECT a.k, b.y FROM a, b WHERE a.g = b.g AND a.k < 1500 AND b.y IS NOT NULL",
		"SELECT da.id, da.v, db.z FROM da JOIN db ON da.id = db.id WHERE db.z > 10",
		"SELECT da.id, da.w, dc.z FROM da JOIN dc ON da.id = dc.id",
		"SELECT a.k, da.w FROM a JOIN da ON a.x = da.id",
		"SELECT da.v, count(*) FROM da JOIN db ON da.id = db.id GROUP BY da.v",
		"SELECT da.id, ref.label FROM da JOIN ref ON da.v = ref.g",
		"SELECT ref.label, a.k FROM ref JOIN a ON ref.g = a.g WHERE a.x > 100",
	}
	// Every query, every way it can run, answers what the gateway's
	// join answers.
	ran := map[string]int{}
	for _, mode := range []string{"auto", "colocated", "reference", "broadcast", "repartition"} {
		mustExec(t, c, "SET sql.testing.distsql_join = "+mode)
		for _, q := range queries {
			mustExec(t, c, "SET distsql = off")
			want := sorted(t, c, q)
			mustExec(t, c, "SET distsql = on")
			got := sorted(t, c, q)
			if len(want) == 0 {
				t.Fatalf("%s: no rows; the data should give some", q)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s (join %s): %d rows distributed, %d at the gateway\non:  %.300v\noff: %.300v", q, mode, len(got), len(want), got, want)
			}
			plan := strings.Join(rows(t, c, "EXPLAIN "+q), "\n")
			for m, label := range joinLabels {
				if strings.Contains(plan, label) {
					ran[m]++
				}
			}
			if mode != "auto" && strings.Contains(plan, "Join: ") && !strings.Contains(plan, joinLabels[mode]) {
				t.Errorf("%s forced to %s:\n%s", q, mode, plan)
			}
		}
	}
	for m := range joinLabels {
		if ran[m] == 0 {
			t.Errorf("no query ran as a %s join (%v)", m, ran)
		}
	}
	t.Logf("joins by way: %v", ran)
	mustExec(t, c, "SET sql.testing.distsql_join = auto")
	mustExec(t, c, "SET distsql = auto")
	autoJoins := 0
	for _, q := range queries {
		plan := strings.Join(rows(t, c, "EXPLAIN "+q), "\n")
		if strings.Contains(plan, "Join: ") {
			autoJoins++
		}
		// auto distributes only plans on more than one node.
		if strings.Contains(plan, "Join: ") && strings.Contains(plan, "Distribution: local") {
			t.Errorf("auto ran a join on one node's fragments:\n%s", plan)
		}
	}

	if autoJoins == 0 {
		t.Error("distsql = auto distributed no join")
	}

	// The cost model: a small input is broadcast, two large ones are
	// repartitioned, two tables colocated on the key join tablet by
	// tablet; EXPLAIN ANALYZE gives every fragment's and node's figures.
	mustExec(t, c, "SET sql.testing.distsql_join = auto")
	mustExec(t, c, "SET distsql = on")
	for _, tc := range []struct{ q, want string }{
		{queries[1], "Join: broadcast of the right input"},
		{queries[5], "Join: colocated"},
		{queries[9], "Join: with reference table ref"},
		{queries[0], "Join: hash repartitioned"},
	} {
		plan := strings.Join(rows(t, c, "EXPLAIN ANALYZE "+tc.q), "\n")
		if !strings.Contains(plan, tc.want) || !strings.Contains(plan, "Distribution: ") || !strings.Contains(plan, "Node ") {
			t.Errorf("EXPLAIN ANALYZE %s: want %q and per-node figures:\n%s", tc.q, tc.want, plan)
		}
		t.Logf("EXPLAIN ANALYZE %s:\n%s", tc.q, plan)
	}
	// distsql = off plans nothing distributed; sql.testing.distsql_join
	// = off keeps the join at the gateway.
	mustExec(t, c, "SET sql.testing.distsql_join = off")
	if plan := strings.Join(rows(t, c, "EXPLAIN "+queries[5]), "\n"); strings.Contains(plan, "Join: ") {
		t.Errorf("distsql_join = off, yet:\n%s", plan)
	}
	mustExec(t, c, "SET sql.testing.distsql_join = auto")

	// A fragment that fails fails the statement with its error, in every
	// way of joining; a statement cancelled by its timeout stops every
	// fragment, consumers and producers alike.
	for _, mode := range []string{"colocated", "broadcast", "repartition"} {
		mustExec(t, c, "SET sql.testing.distsql_join = "+mode)
		// The division by zero is in the join's condition over both
		// inputs, which the fragments evaluate.
		q := "SELECT da.id, db.z FROM da JOIN db ON da.id = db.id AND 10 / (db.z - da.v) > -100"
		if mode != "colocated" {
			q = "SELECT a.k, b.k FROM a JOIN b ON a.g = b.g AND 10 / (a.x - b.y) > -100"
		}
		if plan := strings.Join(rows(t, c, "EXPLAIN "+q), "\n"); !strings.Contains(plan, "Join: ") {
			t.Errorf("%s does not distribute its join:\n%s", q, plan)
		}
		if _, err := c.Exec(context.Background(), q); err == nil || !strings.Contains(err.Error(), "22012") {
			t.Errorf("%s (%s): %v, want 22012 from the fragment", q, mode, err)
		}
		mustExec(t, c, "SET statement_timeout = '200ms'")
		_, err := c.Exec(context.Background(), "SELECT count(*) FROM a JOIN b ON a.c = b.c")
		mustExec(t, c, "SET statement_timeout = 0")
		if mode != "colocated" && (err == nil || !strings.Contains(err.Error(), "57014")) {
			t.Errorf("a 2.25M-row %s join under a 200 ms timeout: %v, want 57014", mode, err)
		}
		waitNoFragments(t, servers)
		if got := rows(t, c, "SELECT count(*) FROM a JOIN tiny ON a.g = tiny.g"); len(got) != 1 {
			t.Errorf("after the failures: %v", got)
		}
	}
}

// waitNoFragments waits until no server runs a fragment: a stopped flow
// leaves nothing running anywhere.
func waitNoFragments(t *testing.T, servers []*server.Server) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		active := int64(0)
		for _, s := range servers {
			active += s.DistSQLMetrics().Active
		}
		if active == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fragments still run 20 s after their statement ended", active)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
