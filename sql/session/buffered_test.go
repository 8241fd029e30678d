package session_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startServerHTTP starts an in-memory node and returns its SQL URL (for
// database db) and the base URL of its HTTP endpoints.
func startServerHTTP(t *testing.T) (sqlURL func(db string) string, httpURL string) {
	t.Helper()
	s, _ := startNode(t)
	return func(db string) string {
		return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), db)
	}, "http://" + s.HTTPAddr().String()
}

// scrape reads /metrics into series name (with labels) -> value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// metricDelta returns after-before of the one series whose name starts
// with prefix (labels included in the match).
func metricDelta(t *testing.T, before, after map[string]float64, prefix string) float64 {
	t.Helper()
	var name string
	for k := range after {
		if strings.HasPrefix(k, prefix) {
			if name != "" {
				t.Fatalf("%q matches %q and %q", prefix, name, k)
			}
			name = k
		}
	}
	if name == "" {
		t.Fatalf("no metric %q", prefix)
	}
	return after[name] - before[name]
}

// TestBufferedWritesColocatedOnePhase: transactions that write two tables
// of a colocated database (an INSERT into one, an UPDATE of the other, in
// an explicit block) commit in one phase: the SQL commit metric moves,
// each commits with exactly one write batch on the colocation tablet,
// and no intent is laid anywhere. With cairn_buffered_writes off the same
// transactions take two phases and lay intents, and a two-table
// transaction outside a colocated database takes two phases either way.
func TestBufferedWritesColocatedOnePhase(t *testing.T) {
	ctx := context.Background()
	sqlURL, httpURL := startServerHTTP(t)
	admin := connect(t, sqlURL("postgres"), nil)
	mustExec(t, admin, "CREATE DATABASE co WITH colocated = true")
	c := connect(t, sqlURL("co"), nil)
	mustExec(t, c, "SET sql.stats.automatic_collection.enabled = off")
	mustExec(t, c, "SET cairn_buffered_writes = on")
	mustExec(t, c, "CREATE TABLE t1 (id int PRIMARY KEY, v int)")
	mustExec(t, c, "CREATE TABLE t2 (id int PRIMARY KEY, v int, note text)")
	mustExec(t, c, "INSERT INTO t2 VALUES (1, 0, 'x')")
	var tablet int64
	if err := c.QueryRow(ctx, "SELECT DISTINCT tablet_id FROM cairn_catalog.tablets WHERE database_name = 'co' AND table_name = 't1'").Scan(&tablet); err != nil {
		t.Fatal(err)
	}
	writeBatches := fmt.Sprintf(`cairn_tablet_write_batches_total{node="1",tablet="%d"}`, tablet)

	run := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO t1 VALUES ($1, $1)", i); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "UPDATE t2 SET v = v + 1 WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	m0 := scrape(t, httpURL)
	run(0, 10)
	m1 := scrape(t, httpURL)
	if d := metricDelta(t, m0, m1, `cairn_sql_commits_total{phase="one"}`); d != 10 {
		t.Errorf("one-phase SQL commits moved by %v, want 10", d)
	}
	if d := metricDelta(t, m0, m1, `cairn_sql_commits_total{phase="two"}`); d != 0 {
		t.Errorf("two-phase SQL commits moved by %v, want 0", d)
	}
	if d := metricDelta(t, m0, m1, "cairn_tablet_intents_written_total"); d != 0 {
		t.Errorf("%v intents written by one-phase transactions", d)
	}
	if d := metricDelta(t, m0, m1, writeBatches); d != 10 {
		t.Errorf("colocation tablet evaluated %v write batches for 10 transactions, want 10", d)
	}

	// The same transactions with buffering off: intents, two phases.
	mustExec(t, c, "SET cairn_buffered_writes = off")
	run(10, 15)
	m2 := scrape(t, httpURL)
	if d := metricDelta(t, m1, m2, `cairn_sql_commits_total{phase="two"}`); d != 5 {
		t.Errorf("two-phase SQL commits with buffering off moved by %v, want 5", d)
	}
	if d := metricDelta(t, m1, m2, "cairn_tablet_intents_written_total"); d < 10 {
		t.Errorf("only %v intents written with buffering off", d)
	}
	mustExec(t, c, "SET cairn_buffered_writes = on")

	var n, v int
	if err := c.QueryRow(ctx, "SELECT (SELECT count(*) FROM t1), (SELECT v FROM t2 WHERE id = 1)").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != 15 || v != 15 {
		t.Fatalf("t1 has %d rows, t2.v = %d; want 15, 15", n, v)
	}

	// A duplicate key is 23505 at the statement, not at COMMIT, and ON
	// CONFLICT sees the transaction's own buffered rows.
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t1 VALUES (100, 1)"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO t1 VALUES (100, 2) ON CONFLICT (id) DO UPDATE SET v = t1.v + 10"); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "SELECT v FROM t1 WHERE id = 100").Scan(&v); err != nil || v != 11 {
		t.Fatalf("ON CONFLICT over a buffered row: v = %d, %v; want 11", v, err)
	}
	_, err = tx.Exec(ctx, "INSERT INTO t1 VALUES (100, 3)")
	if got := sqlState(err); got != "23505" {
		t.Fatalf("duplicate of a buffered row: %v (SQLSTATE %q), want 23505", err, got)
	}
	_ = tx.Rollback(ctx)
	_, err = c.Exec(ctx, "INSERT INTO t1 VALUES (1, 1)")
	if got := sqlState(err); got != "23505" {
		t.Fatalf("duplicate of a stored row: %v (SQLSTATE %q), want 23505", err, got)
	}

	// A DELETE (a range deletion of the row's span) and an UPDATE of every
	// value column of a packed row (a rewrite that deletes the row's
	// column entries by range) are buffered too.
	mustExec(t, c, "CREATE TABLE t3 (id int PRIMARY KEY, v int)")
	mustExec(t, c, "INSERT INTO t3 VALUES (1, 10)")
	m7 := scrape(t, httpURL)
	tx, err = c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DELETE FROM t1 WHERE id = 0", "UPDATE t3 SET v = v + 5 WHERE id = 1", "UPDATE t3 SET v = v * 2 WHERE id = 1"} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.QueryRow(ctx, "SELECT (SELECT count(*) FROM t1 WHERE id = 0) + (SELECT v FROM t3 WHERE id = 1)").Scan(&v); err != nil || v != 30 {
		t.Fatalf("reads through buffered deletions: %d, %v; want 30", v, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	m8 := scrape(t, httpURL)
	if d := metricDelta(t, m7, m8, `cairn_sql_commits_total{phase="one"}`); d != 1 {
		t.Errorf("DELETE and full-row UPDATE: one-phase commits moved by %v, want 1", d)
	}
	if d := metricDelta(t, m7, m8, "cairn_tablet_intents_written_total"); d != 0 {
		t.Errorf("DELETE and full-row UPDATE wrote %v intents", d)
	}
	if err := c.QueryRow(ctx, "SELECT (SELECT count(*) FROM t1 WHERE id = 0) + (SELECT v FROM t3 WHERE id = 1)").Scan(&v); err != nil || v != 30 {
		t.Fatalf("after commit: %d, %v; want 30", v, err)
	}

	// An autocommit single-row INSERT commits in one phase too.
	m3 := scrape(t, httpURL)
	mustExec(t, c, "INSERT INTO t1 VALUES (200, 1)")
	m4 := scrape(t, httpURL)
	if d := metricDelta(t, m3, m4, `cairn_sql_commits_total{phase="one"}`); d != 1 {
		t.Errorf("autocommit INSERT: one-phase commits moved by %v, want 1", d)
	}

	// Two tables of a database that is not colocated, on tablets of their
	// own: two phases.
	mustExec(t, admin, "SET cairn_buffered_writes = on")
	mustExec(t, admin, "CREATE TABLE a (id int PRIMARY KEY, v int) SPLIT INTO 2 TABLETS")
	mustExec(t, admin, "CREATE TABLE b (id int PRIMARY KEY, v int) SPLIT INTO 2 TABLETS")
	var tablets int
	if err := admin.QueryRow(ctx, "SELECT count(DISTINCT tablet_id) FROM cairn_catalog.tablets WHERE database_name = 'postgres' AND table_name IN ('a', 'b')").Scan(&tablets); err != nil || tablets < 2 {
		t.Fatalf("tables a and b on %d tablets (%v), want several", tablets, err)
	}
	m5 := scrape(t, httpURL)
	tx, err = admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"INSERT INTO a VALUES (1, 1)", "INSERT INTO b VALUES (1, 2)"} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	m6 := scrape(t, httpURL)
	if d := metricDelta(t, m5, m6, `cairn_sql_commits_total{phase="two"}`); d != 1 {
		t.Errorf("two-table transaction: two-phase commits moved by %v, want 1", d)
	}
	if err := admin.QueryRow(ctx, "SELECT (SELECT v FROM a WHERE id = 1) + (SELECT v FROM b WHERE id = 1)").Scan(&v); err != nil || v != 3 {
		t.Fatalf("two-table transaction wrote %d, %v; want 3", v, err)
	}
}

// TestBufferedWritesBank: sessions transferring between accounts of a
// colocated table in explicit transactions, with buffering on, at READ
// COMMITTED and SERIALIZABLE, retrying on 40001 as clients must: the
// total is conserved (no lost update) and every transfer is logged once.
func TestBufferedWritesBank(t *testing.T) {
	ctx := context.Background()
	sqlURL, _ := startServerHTTP(t)
	admin := connect(t, sqlURL("postgres"), nil)
	mustExec(t, admin, "CREATE DATABASE bank WITH colocated = true")
	c := connect(t, sqlURL("bank"), nil)
	const accounts, start = 8, 1000
	mustExec(t, c, "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL)")
	mustExec(t, c, "CREATE TABLE log (id serial PRIMARY KEY, src int, dst int, amount int)")
	mustExec(t, c, fmt.Sprintf("INSERT INTO acct SELECT g, %d FROM generate_series(1, %d) g", start, accounts))

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		conn := connect(t, sqlURL("bank"), nil)
		mustExec(t, conn, "SET cairn_buffered_writes = on")
		iso := []string{"READ COMMITTED", "SERIALIZABLE"}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 25 {
				src, dst := rng.IntN(accounts)+1, rng.IntN(accounts)+1
				amount := rng.IntN(50) + 1
				for attempt := 0; ; attempt++ {
					err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.TxIsoLevel(strings.ToLower(iso))}, func(tx pgx.Tx) error {
						// Read-modify-write in SQL: a client-side one
						// (SELECT, then SET bal = $computed) loses updates
						// under READ COMMITTED in PostgreSQL too.
						if _, err := tx.Exec(ctx, "UPDATE acct SET bal = bal - $2 WHERE id = $1", src, amount); err != nil {
							return err
						}
						if _, err := tx.Exec(ctx, "UPDATE acct SET bal = bal + $2 WHERE id = $1", dst, amount); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, "INSERT INTO log (src, dst, amount) VALUES ($1, $2, $3)", src, dst, amount)
						return err
					})
					if err == nil {
						break
					}
					if sqlState(err) != "40001" && sqlState(err) != "40P01" || attempt > 100 {
						errs <- fmt.Errorf("%s transfer %d->%d (attempt %d): %w", iso, src, dst, attempt, err)
						return
					}
					time.Sleep(time.Duration(rng.IntN(attempt+2)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var total, logged int
	if err := c.QueryRow(ctx, "SELECT (SELECT sum(bal) FROM acct), (SELECT count(*) FROM log)").Scan(&total, &logged); err != nil {
		t.Fatal(err)
	}
	if total != accounts*start {
		t.Fatalf("total %d, want %d", total, accounts*start)
	}
	if logged != 100 {
		t.Fatalf("%d transfers logged, want 100", logged)
	}
}

// TestBufferedWritesAuto: under the default, cairn_buffered_writes =
// auto, every transaction buffers: simple-protocol autocommit statements,
// extended-protocol ones and explicit blocks of either isolation level
// on one tablet commit in one phase; autocommit increments of
// one hot row from several sessions, buffered and so conflicting at
// commit, are rerun by the session and none is lost or fails; a bad value
// is 22023.
func TestBufferedWritesAuto(t *testing.T) {
	ctx := context.Background()
	sqlURL, httpURL := startServerHTTP(t)
	c := connect(t, sqlURL("postgres"), nil)
	mustExec(t, c, "CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL, note text)")
	mustExec(t, c, "INSERT INTO counter VALUES (1, 0, '')")
	var v string
	if err := c.QueryRow(ctx, "SHOW cairn_buffered_writes").Scan(&v); err != nil || v != "auto" {
		t.Fatalf("cairn_buffered_writes = %q, %v; want auto", v, err)
	}
	if _, err := c.Exec(ctx, "SET cairn_buffered_writes = maybe"); sqlState(err) != "22023" {
		t.Fatalf("SET cairn_buffered_writes = maybe: %v, want 22023", err)
	}

	phases := func(f func()) (one, two float64) {
		t.Helper()
		m0 := scrape(t, httpURL)
		f()
		m1 := scrape(t, httpURL)
		return metricDelta(t, m0, m1, `cairn_sql_commits_total{phase="one"}`), metricDelta(t, m0, m1, `cairn_sql_commits_total{phase="two"}`)
	}
	block := func(iso string) func() {
		return func() {
			tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.TxIsoLevel(iso)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name     string
		run      func()
		one, two float64
	}{
		{"simple-protocol autocommit", func() {
			if _, err := c.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
		}, 1, 0},
		{"extended-protocol autocommit", func() {
			if _, err := c.Exec(ctx, "UPDATE counter SET n = n + $1 WHERE id = 1", 1); err != nil {
				t.Fatal(err)
			}
		}, 1, 0},
		{"explicit serializable", block("serializable"), 1, 0},
		{"explicit read committed", block("read committed"), 1, 0},
	} {
		if one, two := phases(tc.run); one != tc.one || two != tc.two {
			t.Errorf("%s: %v one-phase and %v two-phase commits, want %v and %v", tc.name, one, two, tc.one, tc.two)
		}
	}

	// EXPLAIN ANALYZE of a DML statement in an implicit transaction ends
	// with the commit it leads to, and the commit goes as it says.
	explainCommit := func(conn *pgx.Conn, q string) string {
		t.Helper()
		rows, err := conn.Query(ctx, "EXPLAIN ANALYZE "+q, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		// The commit line comes before PostgreSQL's two summary lines.
		if n := len(lines); n < 3 || !strings.HasPrefix(lines[n-2], "Planning Time: ") || !strings.HasPrefix(lines[n-1], "Execution Time: ") {
			t.Fatalf("EXPLAIN ANALYZE %s: no summary lines:\n%s", q, strings.Join(lines, "\n"))
		}
		return lines[len(lines)-3]
	}
	var line string
	one, two := phases(func() { line = explainCommit(c, "UPDATE counter SET n = n + 1 WHERE id = 1") })
	if want := "Commit: one phase (2 buffered writes on one tablet)"; line != want || one != 1 || two != 0 {
		t.Errorf("EXPLAIN ANALYZE UPDATE: %q and %v/%v one/two-phase commits, want %q and 1/0", line, one, two, want)
	}
	mustExec(t, c, "CREATE TABLE spread (id int PRIMARY KEY) SPLIT INTO 4 TABLETS")
	one, two = phases(func() { line = explainCommit(c, "INSERT INTO spread SELECT generate_series(1, 20)") })
	if want := "Commit: two phases (20 buffered writes on several tablets)"; line != want || one != 0 || two != 1 {
		t.Errorf("EXPLAIN ANALYZE INSERT over 4 tablets: %q and %v/%v one/two-phase commits, want %q and 0/1", line, one, two, want)
	}
	mustExec(t, c, "SET cairn_buffered_writes = off")
	if line = explainCommit(c, "UPDATE counter SET n = n + 1 WHERE id = 1"); line != "Commit: two phases (writes sent as intents)" {
		t.Errorf("EXPLAIN ANALYZE UPDATE with buffering off ends with %q", line)
	}
	mustExec(t, c, "RESET cairn_buffered_writes")

	const sessions, each = 6, 30
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	m0 := scrape(t, httpURL)
	for range sessions {
		conn := connect(t, sqlURL("postgres"), nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := conn.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1", pgx.QueryExecModeSimpleProtocol); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("hot-row autocommit increment: %v", err)
	}
	m1 := scrape(t, httpURL)
	var n int
	if err := c.QueryRow(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := 6 + sessions*each; n != want {
		t.Fatalf("counter = %d, want %d", n, want)
	}
	if d := metricDelta(t, m0, m1, `cairn_sql_commits_total{phase="one"}`); d == 0 {
		t.Fatal("no hot-row increment committed in one phase")
	}
}
