package session_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/session"
	"github.com/jackc/pgx/v5/pgconn"
)

// The fast point UPDATE, INSERT ... VALUES and SELECT in a block
// (fastupdate.go) against the general path: each
// script below runs twice on fresh tables, once with the fast path and
// once with it turned off (session.SetFastUpdateOff), and what the
// clients read (descriptions, rows, tags, errors with their SQLSTATE) and
// the tables afterwards must be the same, while the fast path must have
// run in the first and not in the second. A script's statements run in
// order on connection a or b (a line "b: ..." runs on b); "b& ..."
// starts it on b without waiting, "wait b" waits for it, "blocked" waits
// until a statement in flight waits for a row lock (pg_stat_activity's
// wait_event_type 'Lock', read on a third connection), "cancel a" cancels a's
// statement in flight, "a& ..." and "wait a" as for b. A script named
// "refused..." (and the read-only one) must not take the fast path: its
// statements are what the gates send to the general path. Each UPDATE shape
// is first run three times (its shape, its plan, its kept shapes) so
// that the statements after take the fast path.

const fastUpdateSchema = `
CREATE TABLE acc (aid int4 PRIMARY KEY, bid int4, abalance int4, nn int4 NOT NULL DEFAULT 0, note text);
INSERT INTO acc SELECT g, g % 3, g * 10, g, 'n' || g FROM generate_series(1, 20) g;
CREATE TABLE two (a int8, b int8, v int8, PRIMARY KEY (a, b));
INSERT INTO two VALUES (1, 1, 100), (1, 2, 200), (2, 1, 300)
`

// fastInsertSchema is added for the INSERT script.
const fastInsertSchema = `
CREATE TABLE hist (tid int4, aid int4, delta int4, mtime timestamp, filler char(22));
CREATE TABLE child (id int4 PRIMARY KEY, parent int4 REFERENCES acc (aid), v int4 NOT NULL)
`

// warm runs each UPDATE and SELECT shape three times, outside any block.
const fastUpdateWarm = `
UPDATE acc SET abalance = abalance + 1 WHERE aid = 20
UPDATE acc SET abalance = abalance + 2 WHERE aid = 19
UPDATE acc SET abalance = abalance + 3 WHERE aid = 18
UPDATE acc SET abalance = abalance - 1 WHERE aid = 20
UPDATE acc SET abalance = abalance - 2 WHERE aid = 19
UPDATE acc SET abalance = abalance - 3 WHERE aid = 18
UPDATE acc SET note = 'w', bid = 7 WHERE aid = 20
UPDATE acc SET note = 'x', bid = 8 WHERE aid = 19
UPDATE acc SET note = 'y', bid = 9 WHERE aid = 18
UPDATE two SET v = v + 1 WHERE a = 2 AND b = 1
UPDATE two SET v = v + 2 WHERE a = 2 AND b = 1
UPDATE two SET v = v + 3 WHERE a = 2 AND b = 1
UPDATE acc SET nn = NULL WHERE aid = 20
UPDATE acc SET nn = NULL WHERE aid = 19
UPDATE acc SET nn = NULL WHERE aid = 18
b: UPDATE acc SET abalance = abalance + 1 WHERE aid = 20
b: UPDATE acc SET abalance = abalance + 2 WHERE aid = 19
b: UPDATE acc SET abalance = abalance + 3 WHERE aid = 18
SELECT abalance FROM acc WHERE aid = 20
SELECT abalance FROM acc WHERE aid = 19
SELECT abalance FROM acc WHERE aid = 18
SELECT * FROM acc WHERE aid = 20
SELECT * FROM acc WHERE aid = 19
SELECT * FROM acc WHERE aid = 18
SELECT aid, abalance FROM acc WHERE aid = 20
SELECT aid, abalance FROM acc WHERE aid = 19
SELECT aid, abalance FROM acc WHERE aid = 18
`

// fastInsertWarm runs each INSERT shape and the child's UPDATE three
// times, after fastUpdateWarm.
const fastInsertWarm = `
INSERT INTO hist (tid, aid, delta, mtime) VALUES (1, 20, 1, CURRENT_TIMESTAMP)
INSERT INTO hist (tid, aid, delta, mtime) VALUES (2, 19, 2, CURRENT_TIMESTAMP)
INSERT INTO hist (tid, aid, delta, mtime) VALUES (3, 18, 3, CURRENT_TIMESTAMP)
INSERT INTO acc (aid, bid, abalance) VALUES (101, 1, 5)
INSERT INTO acc (aid, bid, abalance) VALUES (102, 1, 5)
INSERT INTO acc (aid, bid, abalance) VALUES (103, 1, 5)
INSERT INTO child (id, parent, v) VALUES (1, 20, 1)
INSERT INTO child (id, parent, v) VALUES (2, 19, 1)
INSERT INTO child (id, parent, v) VALUES (3, 18, 1)
UPDATE child SET parent = 17 WHERE id = 1
UPDATE child SET parent = 16 WHERE id = 2
UPDATE child SET parent = 15 WHERE id = 3
`

var fastUpdateScripts = []struct{ name, script string }{
	{"pgbench block", `
BEGIN
UPDATE acc SET abalance = abalance + 5 WHERE aid = 1
SELECT abalance FROM acc WHERE aid = 1
UPDATE acc SET abalance = abalance + -7 WHERE aid = 1
SELECT * FROM acc WHERE aid = 1
END
SELECT * FROM acc WHERE aid = 1`},
	{"autocommit, missing row, two columns, two key columns", `
UPDATE acc SET abalance = abalance + 5 WHERE aid = 2
UPDATE acc SET abalance = abalance + 5 WHERE aid = 999
UPDATE acc SET abalance = abalance + 5 WHERE aid = -3
UPDATE acc SET note = 'z', bid = 1 WHERE aid = 3
UPDATE two SET v = v + 10 WHERE a = 1 AND b = 2
UPDATE two SET v = v + 10 WHERE a = 3 AND b = 2
BEGIN
UPDATE acc SET abalance = abalance + 5 WHERE aid = 999
UPDATE two SET v = v + 10 WHERE a = 1 AND b = 1
COMMIT`},
	{"overflow and NOT NULL", `
UPDATE acc SET abalance = abalance + 2147483000 WHERE aid = 4
BEGIN
UPDATE acc SET abalance = abalance + 1 WHERE aid = 4
UPDATE acc SET abalance = abalance + 2147483000 WHERE aid = 4
UPDATE acc SET abalance = abalance + 1 WHERE aid = 4
ROLLBACK
UPDATE acc SET nn = NULL WHERE aid = 4
BEGIN
UPDATE acc SET nn = NULL WHERE aid = 4
COMMIT
UPDATE two SET v = v + 9223372036854775000 WHERE a = 1 AND b = 1`},
	{"savepoints and rollback", `
BEGIN
UPDATE acc SET abalance = abalance + 1 WHERE aid = 5
SAVEPOINT s
UPDATE acc SET abalance = abalance + 100 WHERE aid = 5
UPDATE acc SET abalance = abalance + 100 WHERE aid = 6
ROLLBACK TO SAVEPOINT s
UPDATE acc SET abalance = abalance + 2 WHERE aid = 6
SAVEPOINT t
UPDATE acc SET abalance = abalance + 2147483000 WHERE aid = 6
ROLLBACK TO SAVEPOINT t
SELECT aid, abalance FROM acc WHERE aid = 5
SELECT aid, abalance FROM acc WHERE aid = 6
COMMIT
BEGIN
UPDATE acc SET abalance = abalance + 1000 WHERE aid = 7
ROLLBACK`},
	{"READ COMMITTED waits for the lock holder and updates its row", `
b: BEGIN ISOLATION LEVEL READ COMMITTED
b: UPDATE acc SET abalance = abalance + 1 WHERE aid = 8
BEGIN ISOLATION LEVEL READ COMMITTED
a& UPDATE acc SET abalance = abalance + 2 WHERE aid = 8
blocked
b: COMMIT
wait a
SELECT abalance FROM acc WHERE aid = 8
COMMIT`},
	{"SERIALIZABLE waits for the lock holder", `
b: BEGIN
b: UPDATE acc SET abalance = abalance + 1 WHERE aid = 9
BEGIN ISOLATION LEVEL SERIALIZABLE
SELECT abalance FROM acc WHERE aid = 10
a& UPDATE acc SET abalance = abalance + 2 WHERE aid = 9
blocked
b: COMMIT
wait a
ROLLBACK`},
	{"statement_timeout while blocked on the row", `
b: BEGIN
b: UPDATE acc SET abalance = abalance + 1 WHERE aid = 11
SET statement_timeout = '300ms'
BEGIN
UPDATE acc SET abalance = abalance + 1 WHERE aid = 12
UPDATE acc SET abalance = abalance + 2 WHERE aid = 11
ROLLBACK
UPDATE acc SET abalance = abalance + 2 WHERE aid = 11
RESET statement_timeout
b: ROLLBACK`},
	{"cancel while blocked on the row", `
b: BEGIN
b: UPDATE acc SET abalance = abalance + 1 WHERE aid = 13
BEGIN
a& UPDATE acc SET abalance = abalance + 2 WHERE aid = 13
blocked
cancel a
wait a
ROLLBACK
b: COMMIT`},
	{"INSERT ... VALUES: pgbench's, a duplicate key, NOT NULL, a foreign key", `
BEGIN
INSERT INTO hist (tid, aid, delta, mtime) VALUES (4, 1, -5, CURRENT_TIMESTAMP)
INSERT INTO hist (tid, aid, delta, mtime) VALUES (5, 1, 7, CURRENT_TIMESTAMP)
END
INSERT INTO hist (tid, aid, delta, mtime) VALUES (6, 2, 70000, CURRENT_TIMESTAMP)
INSERT INTO acc (aid, bid, abalance) VALUES (104, 2, 6)
INSERT INTO acc (aid, bid, abalance) VALUES (104, 2, 7)
BEGIN
INSERT INTO acc (aid, bid, abalance) VALUES (105, 2, 6)
INSERT INTO acc (aid, bid, abalance) VALUES (1, 2, 6)
ROLLBACK
INSERT INTO child (id, parent, v) VALUES (4, 1, 9)
INSERT INTO child (id, parent, v) VALUES (5, 999, 9)
INSERT INTO child (id, parent, v) VALUES (6, NULL, 9)
UPDATE child SET parent = 2 WHERE id = 4
UPDATE child SET parent = 998 WHERE id = 4
BEGIN
SAVEPOINT s
INSERT INTO child (id, parent, v) VALUES (7, 1, 9)
ROLLBACK TO SAVEPOINT s
INSERT INTO child (id, parent, v) VALUES (8, 3, 9)
COMMIT`},
	{"refused: a generated column, a CHECK, RETURNING, ON CONFLICT", `
CREATE TABLE g (id int4 PRIMARY KEY, a int4, b int4 GENERATED ALWAYS AS (a * 2) STORED, CHECK (a < 100))
INSERT INTO g (id, a) VALUES (1, 1)
INSERT INTO g (id, a) VALUES (2, 2)
INSERT INTO g (id, a) VALUES (3, 3)
INSERT INTO g (id, a) VALUES (4, 200)
UPDATE g SET a = a + 1 WHERE id = 1
UPDATE g SET a = a + 1 WHERE id = 2
UPDATE g SET a = a + 1 WHERE id = 3
UPDATE g SET a = a + 200 WHERE id = 1
SELECT * FROM g ORDER BY id
UPDATE acc SET abalance = abalance + 1 WHERE aid = 3 RETURNING abalance
UPDATE acc SET abalance = abalance + 1 WHERE aid = 4 RETURNING abalance
UPDATE acc SET abalance = abalance + 1 WHERE aid = 5 RETURNING abalance
UPDATE acc SET abalance = abalance + 1 WHERE aid = 6 RETURNING abalance
INSERT INTO two VALUES (5, 1, 1) ON CONFLICT (a, b) DO NOTHING
INSERT INTO two VALUES (5, 1, 2) ON CONFLICT (a, b) DO NOTHING
INSERT INTO two VALUES (5, 2, 3) ON CONFLICT (a, b) DO NOTHING
INSERT INTO two VALUES (5, 2, 4) ON CONFLICT (a, b) DO NOTHING`},
	{"a read-only transaction", `
BEGIN READ ONLY
UPDATE acc SET abalance = abalance + 1 WHERE aid = 14
ROLLBACK`},
}

// runFastUpdateScript runs script on a fresh node and returns what the
// clients read and the tables' rows afterwards, one string per line.
func runFastUpdateScript(t *testing.T, script string) (out []string, fast uint64) {
	t.Helper()
	ctx := context.Background()
	_, url := startNode(t)
	conns := map[string]*pgconn.PgConn{}
	for _, n := range []string{"a", "b", "watch"} {
		c := connect(t, url, nil)
		conns[n] = c.PgConn()
		// A statistics refresh makes a new catalog generation, and the
		// kept plans are made again: not in the middle of a script.
		mustExec(t, c, "SET sql.stats.automatic_collection.enabled = off")
	}
	schema, warm := fastUpdateSchema, strings.TrimSpace(fastUpdateWarm)
	if strings.Contains(script, "INSERT") {
		schema += ";\n" + fastInsertSchema
		warm += "\n" + strings.TrimSpace(fastInsertWarm)
	}
	for _, q := range strings.Split(strings.TrimSpace(schema), ";\n") {
		if r := simpleQuery(ctx, conns["a"], q); r.err != "" {
			t.Fatalf("%s: %s", q, r.err)
		}
	}
	for _, l := range strings.Split(warm, "\n") {
		c, q := "a", l
		if s, ok := strings.CutPrefix(l, "b: "); ok {
			c, q = "b", s
		}
		if r := simpleQuery(ctx, conns[c], q); r.err != "" && !strings.Contains(r.err, "23502") {
			t.Fatalf("%s: %s", q, r.err)
		}
	}
	before := session.FastUpdates()
	pending := map[string]chan queryRun{}
	show := func(l string, r queryRun) string { return fmt.Sprintf("%s -> %v", l, r) }
	for _, l := range strings.Split(strings.TrimSpace(script), "\n") {
		switch {
		case l == "blocked":
			waitLockWaiter(ctx, t, conns["watch"])
		case strings.HasPrefix(l, "wait "):
			out = append(out, show(l, <-pending[l[5:]]))
		case strings.HasPrefix(l, "cancel "):
			if err := conns[l[7:]].CancelRequest(ctx); err != nil {
				t.Fatal(err)
			}
		case len(l) > 3 && l[1] == '&':
			ch := make(chan queryRun, 1)
			pending[l[:1]] = ch
			go func(pc *pgconn.PgConn, q string) { ch <- simpleQuery(ctx, pc, q) }(conns[l[:1]], l[3:])
		default:
			c, q := "a", l
			if s, ok := strings.CutPrefix(l, "b: "); ok {
				c, q = "b", s
			}
			out = append(out, show(l, simpleQuery(ctx, conns[c], q)))
		}
	}
	fast = session.FastUpdates() - before
	dump := []string{"SELECT * FROM acc ORDER BY aid", "SELECT * FROM two ORDER BY a, b"}
	if strings.Contains(script, "INSERT") {
		dump = append(dump, "SELECT tid, aid, delta, mtime IS NOT NULL, filler FROM hist ORDER BY tid, aid, delta",
			"SELECT * FROM child ORDER BY id")
	}
	for _, q := range dump {
		out = append(out, show(q, simpleQuery(ctx, conns["b"], q)))
	}
	return out, fast
}

// TestFastPointUpdate: see above.
func TestFastPointUpdate(t *testing.T) {
	for _, sc := range fastUpdateScripts {
		t.Run(sc.name, func(t *testing.T) {
			got, fast := runFastUpdateScript(t, sc.script)
			restore := session.SetFastUpdateOff()
			want, slow := runFastUpdateScript(t, sc.script)
			restore()
			if slow != 0 {
				t.Fatalf("the fast path ran %d times while off", slow)
			}
			if !reflect.DeepEqual(got, want) {
				for i := range max(len(got), len(want)) {
					var g, w string
					if i < len(got) {
						g = got[i]
					}
					if i < len(want) {
						w = want[i]
					}
					if g != w {
						t.Errorf("fast:    %s\ngeneral: %s", g, w)
					}
				}
			}
			refused := sc.name == "a read-only transaction" || strings.HasPrefix(sc.name, "refused")
			if fast == 0 && !refused {
				t.Errorf("the fast path did not run")
			}
			if fast != 0 && refused {
				t.Errorf("the fast path ran %d times", fast)
			}
			if testing.Verbose() {
				t.Logf("fast path ran %d times:\n%s", fast, strings.Join(got, "\n"))
			}
		})
	}
}

// TestFastPointUpdateObjects: pgbench's simple-update transaction
// (BEGIN; UPDATE; SELECT; INSERT; END) on the fast paths allocates fewer
// objects than by the general path, whole process counted
// (runtime.MemStats.Mallocs: the in-process node and the client, whose
// share is the same in both), the lower of three rounds each,
// alternating: for its UPDATE, SELECT and INSERT the plan instance, the
// executor's runner, operators and Rows, the copy of the input row and
// the cursor are not made, and the UPDATE's own state is one object
// (26 fewer when written, 232.9 against 258.8; the test asks for 20).
func TestFastPointUpdateObjects(t *testing.T) {
	if session.RaceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	ctx := context.Background()
	_, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "SET sql.stats.automatic_collection.enabled = off") // no new plans midway
	mustExec(t, a, "CREATE TABLE acct (id int4 PRIMARY KEY, bid int4, bal int4, filler char(84))")
	mustExec(t, a, "INSERT INTO acct SELECT g, 1, 0, '' FROM generate_series(1, 100) g")
	mustExec(t, a, "CREATE TABLE hist (tid int4, bid int4, aid int4, delta int4, mtime timestamp, filler char(22))")
	pc := a.PgConn()
	txns := make([][]string, 100)
	for i := range txns {
		txns[i] = []string{"BEGIN",
			fmt.Sprintf("UPDATE acct SET bal = bal + %d WHERE id = %d", i-50, i+1),
			fmt.Sprintf("SELECT bal FROM acct WHERE id = %d", i+1),
			fmt.Sprintf("INSERT INTO hist (tid, bid, aid, delta, mtime) VALUES (%d, 1, %d, %d, CURRENT_TIMESTAMP)", i%10+1, i+1, i-50),
			"END"}
	}
	const n = 1000
	round := func(off bool) float64 {
		if off {
			defer session.SetFastUpdateOff()()
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i := 0; i < n; i++ {
			for _, q := range txns[i%len(txns)] {
				if r := simpleQuery(ctx, pc, q); r.err != "" {
					t.Fatalf("%s: %+v", q, r)
				}
			}
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.Mallocs-m0.Mallocs) / n
	}
	round(false)
	round(true)
	before := session.FastUpdates()
	fast, general := math.Inf(1), math.Inf(1)
	for range 3 {
		fast, general = min(fast, round(false)), min(general, round(true))
	}
	if got := session.FastUpdates() - before; got != 3*3*n {
		t.Errorf("the fast path ran %d statements, want %d", got, 3*3*n)
	}
	t.Logf("objects per transaction: fast path %.1f, general path %.1f", fast, general)
	if general-fast < 20 {
		t.Errorf("objects per transaction: fast path %.1f, general path %.1f; want at least 20 fewer", fast, general)
	}
}

// TestShapeAfterDDL: the first statement of a shape after a DDL statement
// of its own transaction (autocommit) finds the shape a plan is kept for:
// the session forgot that the ended transaction wrote the catalog, which
// before left the shape without a plan for the rest of the session
// (endTxn, txnWroteCatalog), on the fast path and the general one alike.
func TestShapeAfterDDL(t *testing.T) {
	ctx := context.Background()
	_, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "SET sql.stats.automatic_collection.enabled = off")
	mustExec(t, a, "CREATE TABLE acc (aid int4 PRIMARY KEY, abalance int4)")
	mustExec(t, a, "INSERT INTO acc SELECT g, 0 FROM generate_series(1, 10) g")
	mustExec(t, a, "CREATE TABLE other (x int4)")
	before := session.FastUpdates()
	for i := range 6 {
		if r := simpleQuery(ctx, a.PgConn(), fmt.Sprintf("UPDATE acc SET abalance = abalance + %d WHERE aid = %d", i+1, i+1)); r.err != "" {
			t.Fatal(r.err)
		}
	}
	// The shape and its plan, the executor's kept shapes, then the fast
	// path.
	if got := session.FastUpdates() - before; got != 4 {
		t.Errorf("the fast path ran %d of 6 UPDATEs after a CREATE TABLE, want 4", got)
	}
}

// waitLockWaiter returns once pg_stat_activity shows a statement waiting
// for a lock, polling every 5 ms for up to 10 s.
func waitLockWaiter(ctx context.Context, t *testing.T, watch *pgconn.PgConn) {
	t.Helper()
	const q = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND wait_event_type = 'Lock'"
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := simpleQuery(ctx, watch, q)
		if r.err != "" {
			t.Fatalf("%s: %s", q, r.err)
		}
		if len(r.rows) == 1 && string(r.rows[0][0]) != "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement waited for a lock within 10 s")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
}
