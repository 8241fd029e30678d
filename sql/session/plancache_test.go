package session_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/server"
	"github.com/jackc/pgx/v5"
)

// metric reads one counter of the node's /metrics.
func metric(t *testing.T, s *server.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// TestPreparedPointPlanCache: a prepared point lookup by primary key
// reuses its plan across parameter values, and still answers exactly as a
// fresh plan would: NULL and missing keys, DDL in between (another
// session's, renaming the table away and making a new one of that name),
// search_path changes, and a transaction that itself ran DDL.
func TestPreparedPointPlanCache(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE acct (id int PRIMARY KEY, bal int, note text)")
	mustExec(t, b, "INSERT INTO acct SELECT g, g * 10, 'n' || g FROM generate_series(1, 50) g")
	mustExec(t, b, "CREATE TABLE kv2 (a int, b text, v int, PRIMARY KEY (a, b))")
	mustExec(t, b, "INSERT INTO kv2 VALUES (1, 'x', 11), (1, 'y', 12), (2, 'x', 21)")

	// get runs a prepared statement (pgx prepares each distinct text once
	// per connection and then binds and executes it) and returns its first
	// column, "none" when there is no row.
	get := func(c *pgx.Conn, sql string, args ...any) string {
		t.Helper()
		var v *int
		err := c.QueryRow(ctx, sql, args...).Scan(&v)
		if err == pgx.ErrNoRows {
			return "none"
		}
		if err != nil {
			t.Fatalf("%s %v: %v", sql, args, err)
		}
		if v == nil {
			return "null"
		}
		return strconv.Itoa(*v)
	}
	const q = "SELECT bal FROM acct WHERE id = $1"
	explain := func() string {
		t.Helper()
		rows, err := a.Query(ctx, "EXPLAIN "+q, 3)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	before := explain()
	hits0 := metric(t, srv, "cairn_sql_plan_cache_hits_total")
	for i := 1; i <= 20; i++ {
		if got, want := get(a, q, i), strconv.Itoa(i*10); got != want {
			t.Fatalf("id %d: %s, want %s", i, got, want)
		}
	}
	if hits := metric(t, srv, "cairn_sql_plan_cache_hits_total") - hits0; hits < 15 {
		t.Fatalf("%v of 20 executions reused the plan", hits)
	}
	// EXPLAIN plans afresh (a point read of the primary key, the plan
	// the cache holds) and is unchanged by the cached executions.
	if after := explain(); after != before || !strings.Contains(after, "Index Scan using acct_pkey on acct") {
		t.Errorf("EXPLAIN after cached executions:\n%s\nbefore:\n%s", after, before)
	}
	for _, tc := range []struct {
		arg  any
		want string
	}{{nil, "none"}, {999, "none"}, {-1, "none"}, {7, "70"}} {
		if got := get(a, q, tc.arg); got != tc.want {
			t.Errorf("id %v: %s, want %s", tc.arg, got, tc.want)
		}
	}
	// Two-column key, parameters in either order.
	if got := get(a, "SELECT v FROM kv2 WHERE b = $2 AND a = $1", 1, "y"); got != "12" {
		t.Errorf("kv2 (1, y): %s", got)
	}
	if got := get(a, "SELECT v FROM kv2 WHERE b = $2 AND a = $1", 2, "x"); got != "21" {
		t.Errorf("kv2 (2, x): %s", got)
	}
	if got := get(a, "SELECT v FROM kv2 WHERE b = $2 AND a = $1", 2, "y"); got != "none" {
		t.Errorf("kv2 (2, y): %s", got)
	}

	// A hash-sharded primary key: the bucket is computed from each
	// execution's values, so every key is found in its own bucket.
	mustExec(t, b, "CREATE TABLE hkv (k int PRIMARY KEY USING HASH WITH (bucket_count = 8), v int)")
	mustExec(t, b, "INSERT INTO hkv SELECT g, g * 3 FROM generate_series(1, 64) g")
	mustExec(t, b, "CREATE TABLE hkv2 (a int, b text, v int, PRIMARY KEY (a, b) USING HASH WITH (bucket_count = 5))")
	mustExec(t, b, "INSERT INTO hkv2 VALUES (1, 'x', 11), (1, 'y', 12), (2, 'x', 21)")
	hits0 = metric(t, srv, "cairn_sql_plan_cache_hits_total")
	for i := 1; i <= 64; i++ {
		if got, want := get(a, "SELECT v FROM hkv WHERE k = $1", i), strconv.Itoa(i*3); got != want {
			t.Fatalf("hkv k %d: %s, want %s", i, got, want)
		}
	}
	if hits := metric(t, srv, "cairn_sql_plan_cache_hits_total") - hits0; hits < 60 {
		t.Errorf("%v of 64 executions on a hash-sharded key reused the plan", hits)
	}
	// The kv workload's read of one key: IN of one element.
	hits0 = metric(t, srv, "cairn_sql_plan_cache_hits_total")
	for i := 1; i <= 20; i++ {
		if got, want := get(a, "SELECT v FROM hkv WHERE k IN ($1)", i), strconv.Itoa(i*3); got != want {
			t.Fatalf("hkv k IN (%d): %s, want %s", i, got, want)
		}
	}
	if hits := metric(t, srv, "cairn_sql_plan_cache_hits_total") - hits0; hits < 16 {
		t.Errorf("%v of 20 executions of k IN ($1) reused the plan", hits)
	}
	for _, tc := range []struct {
		arg  any
		want string
	}{{nil, "none"}, {65, "none"}, {-3, "none"}, {9, "27"}} {
		if got := get(a, "SELECT v FROM hkv WHERE k = $1", tc.arg); got != tc.want {
			t.Errorf("hkv k %v: %s, want %s", tc.arg, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a    int
		b    string
		want string
	}{{1, "y", "12"}, {2, "x", "21"}, {1, "x", "11"}, {2, "y", "none"}} {
		if got := get(a, "SELECT v FROM hkv2 WHERE b = $2 AND a = $1", tc.a, tc.b); got != tc.want {
			t.Errorf("hkv2 (%d, %s): %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
	// A new bucket count: the cached plan's buckets are the old ones.
	mustExec(t, b, "ALTER INDEX hkv_pkey SET (bucket_count = 3)")
	for i := 1; i <= 64; i += 7 {
		if got, want := get(a, "SELECT v FROM hkv WHERE k = $1", i), strconv.Itoa(i*3); got != want {
			t.Fatalf("hkv k %d after the bucket count changed: %s, want %s", i, got, want)
		}
	}

	// Another session's DDL: the old plan names the old table.
	mustExec(t, b, "ALTER TABLE acct RENAME TO acct_old")
	mustExec(t, b, "CREATE TABLE acct (id int PRIMARY KEY, bal int)")
	mustExec(t, b, "INSERT INTO acct VALUES (3, 333)")
	if got := get(a, q, 3); got != "333" {
		t.Errorf("after the table was replaced: %s, want 333", got)
	}
	if got := get(a, q, 4); got != "none" {
		t.Errorf("after the table was replaced, id 4: %s, want none", got)
	}
	// A column change the plan's scan depends on.
	mustExec(t, b, "ALTER TABLE acct ADD COLUMN extra int DEFAULT 5")
	mustExec(t, b, "UPDATE acct SET bal = 334 WHERE id = 3")
	if got := get(a, q, 3); got != "334" {
		t.Errorf("after ADD COLUMN: %s, want 334", got)
	}

	// search_path decides which acct the name means.
	mustExec(t, a, "CREATE SCHEMA other")
	mustExec(t, a, "CREATE TABLE other.acct (id int PRIMARY KEY, bal int)")
	mustExec(t, a, "INSERT INTO other.acct VALUES (3, 999)")
	if got := get(a, q, 3); got != "334" {
		t.Errorf("public.acct: %s", got)
	}
	mustExec(t, a, "SET search_path = other, public")
	if got := get(a, q, 3); got != "999" {
		t.Errorf("after SET search_path: %s, want other.acct's 999", got)
	}
	mustExec(t, a, "RESET search_path")
	if got := get(a, q, 3); got != "334" {
		t.Errorf("after RESET search_path: %s, want 334", got)
	}

	// Inside a transaction that ran DDL, the statement sees its own
	// changes (and a rollback forgets them).
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "DROP TABLE acct"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE acct (id int PRIMARY KEY, bal int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO acct VALUES (3, 1)"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := tx.QueryRow(ctx, q, 3).Scan(&v); err != nil || v != 1 {
		t.Errorf("in the DDL transaction: %d, %v; want 1", v, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(a, q, 3); got != "334" {
		t.Errorf("after the rollback: %s, want 334", got)
	}
	// A dropped table: the cached plan must not read it.
	mustExec(t, b, "DROP TABLE acct")
	if _, err := a.Exec(ctx, q, 3); sqlState(err) != "42P01" {
		t.Errorf("after DROP TABLE: %v, want 42P01", err)
	}
}

// TestSimpleQueryPlanCache: statements sent as text that differ only in
// the constants of WHERE pk = const run a cached plan, and answer as the
// statement typed would: literals of other types or out of range, errors,
// NULL, other sessions' DDL and search_path.
func TestSimpleQueryPlanCache(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	url += "&default_query_exec_mode=simple_protocol"
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE acct (id int PRIMARY KEY, bal int)")
	mustExec(t, b, "INSERT INTO acct SELECT g, g * 10 FROM generate_series(1, 50) g")
	mustExec(t, b, "CREATE TABLE small (k int2 PRIMARY KEY, v int)")
	mustExec(t, b, "INSERT INTO small VALUES (1, 1), (32767, 2)")
	mustExec(t, b, "CREATE TABLE named (name text PRIMARY KEY, v int)")
	mustExec(t, b, "INSERT INTO named VALUES ('a', 1), ('it''s', 2), ('5', 3)")

	// get runs sql and returns its first column, "none" when there is no
	// row, "error SQLSTATE" on error.
	get := func(c *pgx.Conn, sql string) string {
		t.Helper()
		var v *int
		err := c.QueryRow(ctx, sql).Scan(&v)
		switch {
		case err == pgx.ErrNoRows:
			return "none"
		case err != nil:
			return "error " + sqlState(err)
		case v == nil:
			return "null"
		}
		return strconv.Itoa(*v)
	}
	hits0 := metric(t, srv, "cairn_sql_plan_cache_hits_total")
	for i := 1; i <= 20; i++ {
		if got, want := get(a, fmt.Sprintf("SELECT bal FROM acct WHERE id = %d", i)), strconv.Itoa(i*10); got != want {
			t.Fatalf("id %d: %s, want %s", i, got, want)
		}
	}
	if hits := metric(t, srv, "cairn_sql_plan_cache_hits_total") - hits0; hits < 15 {
		t.Fatalf("%v of 20 statements reused the plan", hits)
	}
	// The same in an explicit transaction, and in a failed one.
	mustExec(t, a, "BEGIN")
	if got := get(a, "SELECT bal FROM acct WHERE id = 11"); got != "110" {
		t.Errorf("in a block: %s", got)
	}
	if got := get(a, "SELECT 1/0 FROM acct WHERE id = 11"); got != "error 22012" {
		t.Errorf("division by zero: %s", got)
	}
	if got := get(a, "SELECT bal FROM acct WHERE id = 12"); got != "error 25P02" {
		t.Errorf("in the failed block: %s, want error 25P02", got)
	}
	mustExec(t, a, "ROLLBACK")
	for _, tc := range []struct{ sql, want string }{
		{"SELECT bal FROM acct WHERE id = 999", "none"},
		{"SELECT bal FROM acct WHERE id = -3", "none"},
		{"SELECT bal FROM acct WHERE id = '7'", "70"},
		{"SELECT bal FROM acct WHERE id = ' 8 '", "80"},
		{"SELECT bal FROM acct WHERE id = 'x'", "error 22P02"},
		{"SELECT bal FROM acct WHERE id = NULL", "none"},
		{"SELECT bal FROM acct WHERE id = 9.0", "90"},
		{"SELECT bal FROM acct WHERE id = 9999999999", "none"},
		{"SELECT v FROM small WHERE k = 1", "1"},
		{"SELECT v FROM small WHERE k = 32767", "2"},
		{"SELECT v FROM small WHERE k = 100000", "none"},
		{"SELECT v FROM small WHERE k = 32767", "2"},
		{"SELECT v FROM named WHERE name = 'it''s'", "2"},
		{"SELECT v FROM named WHERE name = 'a'", "1"},
		{"SELECT v FROM named WHERE name = 'b'", "none"},
		{"SELECT v FROM named WHERE name = 5", "error 42883"},
		{"SELECT v FROM named WHERE name = '5'", "3"},
		{"SELECT v FROM named WHERE name = '5' ", "3"},
		{"select v from named where name = 'a'", "1"},
		{"SELECT bal FROM acct WHERE id = -5", "none"},
		{"SELECT bal FROM acct WHERE id = 5", "50"},
		{"SELECT bal FROM acct WHERE id = - 6", "none"},
		{"SELECT bal FROM acct WHERE id = 6 LIMIT 1", "60"},
		{"SELECT bal FROM acct WHERE id = 6 LIMIT 0", "none"},
		{"SELECT bal FROM acct WHERE id = 7 LIMIT 1", "70"},
		{"SELECT bal + 1 FROM acct WHERE id = 7", "71"},
		{"SELECT bal + 2 FROM acct WHERE id = 7", "72"},
		{"SELECT bal + 2 FROM acct WHERE id = 8", "82"},
		{"SELECT bal + 1 FROM acct WHERE id = 8", "81"},
		{"SELECT bal FROM acct WHERE id = 8 AND 1 = 1", "80"},
		{"SELECT bal FROM acct WHERE id = 8 AND 1 = 2", "none"},
		{"SELECT bal FROM acct WHERE id = 9; ", "90"},
		{"SELECT bal FROM acct WHERE id = 9 /* c */", "90"},
		{"SELECT bal FROM acct WHERE id = E'9'", "90"},
		{"SELECT bal FROM acct WHERE id = 10 + 0", "100"},
	} {
		if got := get(a, tc.sql); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.sql, got, tc.want)
		}
	}

	// Another session replaces the table.
	mustExec(t, b, "ALTER TABLE acct RENAME TO acct_old")
	mustExec(t, b, "CREATE TABLE acct (id int PRIMARY KEY, bal int)")
	mustExec(t, b, "INSERT INTO acct VALUES (3, 333)")
	if got := get(a, "SELECT bal FROM acct WHERE id = 3"); got != "333" {
		t.Errorf("after the table was replaced: %s, want 333", got)
	}
	if got := get(a, "SELECT bal FROM acct WHERE id = 4"); got != "none" {
		t.Errorf("after the table was replaced, id 4: %s, want none", got)
	}
	mustExec(t, a, "CREATE SCHEMA other")
	mustExec(t, a, "CREATE TABLE other.acct (id int PRIMARY KEY, bal int)")
	mustExec(t, a, "INSERT INTO other.acct VALUES (3, 999)")
	mustExec(t, a, "SET search_path = other, public")
	if got := get(a, "SELECT bal FROM acct WHERE id = 3"); got != "999" {
		t.Errorf("after SET search_path: %s, want 999", got)
	}
	mustExec(t, a, "RESET search_path")
	if got := get(a, "SELECT bal FROM acct WHERE id = 3"); got != "333" {
		t.Errorf("after RESET search_path: %s, want 333", got)
	}
	mustExec(t, b, "DROP TABLE acct")
	if got := get(a, "SELECT bal FROM acct WHERE id = 3"); got != "error 42P01" {
		t.Errorf("after DROP TABLE: %s, want error 42P01", got)
	}
}

// TestPreparedGenericPlans: prepared UPDATE, DELETE and INSERT, and a
// SELECT through a secondary index, keep one plan across parameter
// values (the hits counter), answer as fresh plans would for varying
// values, NULLs and a parameter cast to the key's type, and a schema
// change makes them plan again.
func TestPreparedGenericPlans(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE acct (id int PRIMARY KEY, bal int, note text)")
	mustExec(t, b, "INSERT INTO acct SELECT g, g * 10, 'n' || g FROM generate_series(1, 50) g")
	mustExec(t, b, "CREATE TABLE people (id int PRIMARY KEY, city text, age int)")
	mustExec(t, b, "CREATE INDEX people_city ON people (city)")
	mustExec(t, b, "INSERT INTO people SELECT g, 'c' || (g % 5), g FROM generate_series(1, 40) g")
	mustExec(t, b, "CREATE TABLE hist (n serial PRIMARY KEY, id int, delta int, at timestamptz DEFAULT now())")

	hits := func() float64 { return metric(t, srv, "cairn_sql_plan_cache_hits_total") }
	misses := func() float64 { return metric(t, srv, "cairn_sql_plan_cache_misses_total") }
	exec := func(sql string, args ...any) int64 {
		t.Helper()
		tag, err := a.Exec(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s %v: %v", sql, args, err)
		}
		return tag.RowsAffected()
	}
	// bal reads one account with a plain query (not a cached plan).
	bal := func(id int) string {
		t.Helper()
		var v *int
		err := b.QueryRow(ctx, fmt.Sprintf("SELECT bal FROM acct WHERE id = %d", id), pgx.QueryExecModeSimpleProtocol).Scan(&v)
		if err == pgx.ErrNoRows {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		if v == nil {
			return "null"
		}
		return strconv.Itoa(*v)
	}

	// UPDATE by primary key, the parameter of SET a placeholder of the
	// kept plan: every execution after the first reuses it.
	const upd = "UPDATE acct SET bal = bal + $1 WHERE id = $2"
	h0 := hits()
	for i := 1; i <= 20; i++ {
		if n := exec(upd, i, i); n != 1 {
			t.Fatalf("update id %d: %d rows", i, n)
		}
	}
	if got := hits() - h0; got < 19 {
		t.Fatalf("%v of 20 UPDATEs reused the plan", got)
	}
	for i := 1; i <= 20; i++ {
		if got, want := bal(i), strconv.Itoa(i*11); got != want {
			t.Fatalf("id %d after the updates: %s, want %s", i, got, want)
		}
	}
	if got, want := bal(21), "210"; got != want {
		t.Fatalf("id 21 (not updated): %s, want %s", got, want)
	}
	// A NULL key matches nothing; a NULL in SET is written.
	if n := exec(upd, 5, nil); n != 0 {
		t.Errorf("update id NULL: %d rows", n)
	}
	if n := exec(upd, nil, 3); n != 1 || bal(3) != "null" {
		t.Errorf("update bal + NULL: %d rows, bal %s", n, bal(3))
	}
	if n := exec(upd, 1, 999); n != 0 {
		t.Errorf("update a missing id: %d rows", n)
	}

	// A key parameter cast to the key's type: the cast is made at each
	// execution, and a value it rejects is the custom plan's error.
	const updCast = "UPDATE acct SET note = $1 WHERE id = $2::text::int"
	h0 = hits()
	for i := 1; i <= 10; i++ {
		if n := exec(updCast, "x"+strconv.Itoa(i), strconv.Itoa(i)); n != 1 {
			t.Fatalf("update id '%d': %d rows", i, n)
		}
	}
	if got := hits() - h0; got < 9 {
		t.Errorf("%v of 10 UPDATEs with a cast key reused the plan", got)
	}
	var note string
	if err := b.QueryRow(ctx, "SELECT note FROM acct WHERE id = 7", pgx.QueryExecModeSimpleProtocol).Scan(&note); err != nil || note != "x7" {
		t.Errorf("note of 7: %q, %v", note, err)
	}
	if _, err := a.Exec(ctx, updCast, "y", "seven"); sqlState(err) != "22P02" {
		t.Errorf("update id 'seven': %v, want 22P02", err)
	}
	if _, err := a.Exec(ctx, updCast, "y", " 8 "); err != nil {
		t.Errorf("update id ' 8 ': %v", err)
	} else if err := b.QueryRow(ctx, "SELECT note FROM acct WHERE id = 8", pgx.QueryExecModeSimpleProtocol).Scan(&note); err != nil || note != "y" {
		t.Errorf("note of 8: %q, %v", note, err)
	}

	// INSERT ... VALUES: the default (a sequence, the time) is evaluated
	// at every execution, not kept with the plan.
	const ins = "INSERT INTO hist (id, delta) VALUES ($1, $2)"
	h0 = hits()
	for i := 1; i <= 10; i++ {
		exec(ins, i, -i)
	}
	if got := hits() - h0; got < 9 {
		t.Errorf("%v of 10 INSERTs reused the plan", got)
	}
	exec(ins, nil, nil)
	var rows, distinct, sum, nulls int64
	if err := b.QueryRow(ctx, "SELECT count(*), count(DISTINCT n), sum(id + delta), count(*) - count(id) FROM hist",
		pgx.QueryExecModeSimpleProtocol).Scan(&rows, &distinct, &sum, &nulls); err != nil {
		t.Fatal(err)
	}
	if rows != 11 || distinct != 11 || sum != 0 || nulls != 1 {
		t.Errorf("hist: %d rows, %d distinct n, sum %d, %d NULL ids; want 11, 11, 0, 1", rows, distinct, sum, nulls)
	}

	// SELECT through a secondary index (an index join).
	sel := func(city any) string {
		t.Helper()
		r, err := a.Query(ctx, "SELECT id, age FROM people WHERE city = $1", city)
		if err != nil {
			t.Fatal(err)
		}
		type row struct{ ID, Age int }
		got, err := pgx.CollectRows(r, pgx.RowToStructByPos[row])
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, x := range got {
			if x.ID != x.Age {
				t.Fatalf("row %+v", x)
			}
			sum += x.ID
		}
		return fmt.Sprintf("%d rows, sum %d", len(got), sum)
	}
	h0 = hits()
	for range 2 {
		for c := range 5 {
			// ids g with g % 5 = c among 1..40: 8 of them.
			want := 0
			for g := 1; g <= 40; g++ {
				if g%5 == c {
					want += g
				}
			}
			if got := sel("c" + strconv.Itoa(c)); got != fmt.Sprintf("8 rows, sum %d", want) {
				t.Fatalf("city c%d: %s", c, got)
			}
		}
	}
	if got := hits() - h0; got < 9 {
		t.Errorf("%v of 10 index SELECTs reused the plan", got)
	}
	if got := sel(nil); got != "0 rows, sum 0" {
		t.Errorf("city NULL: %s", got)
	}
	if got := sel("nowhere"); got != "0 rows, sum 0" {
		t.Errorf("city nowhere: %s", got)
	}

	// DELETE by primary key.
	const del = "DELETE FROM acct WHERE id = $1"
	h0 = hits()
	for i := 41; i <= 50; i++ {
		if n := exec(del, i); n != 1 {
			t.Fatalf("delete id %d: %d rows", i, n)
		}
	}
	if got := hits() - h0; got < 9 {
		t.Errorf("%v of 10 DELETEs reused the plan", got)
	}
	if got := count(t, b, "SELECT count(*) FROM acct"); got != 40 {
		t.Errorf("%d accounts after the deletes, want 40", got)
	}

	// A schema change: the kept plans name the old descriptors, so the
	// next execution of each plans again (a miss), then keeps the new
	// plan. Without the index the SELECT is a full scan, still right.
	mustExec(t, b, "DROP INDEX people_city")
	mustExec(t, b, "ALTER TABLE acct ADD COLUMN flag int DEFAULT 7")
	m0, h0 := misses(), hits()
	cities := sel("c1")
	n1 := exec(upd, 100, 10)
	if got := misses() - m0; got != 2 {
		t.Errorf("%v misses after the schema change, want 2 (one per statement)", got)
	}
	if got := hits() - h0; got != 0 {
		t.Errorf("%v hits after the schema change, want 0", got)
	}
	h0 = hits()
	n2 := exec(upd, 1, 10)
	if got := hits() - h0; got != 1 {
		t.Errorf("%v hits for the update after re-planning, want 1", got)
	}
	if cities != "8 rows, sum 148" {
		t.Errorf("city c1 without the index: %s", cities)
	}
	if n1 != 1 || n2 != 1 || bal(10) != "211" {
		t.Errorf("updates after ADD COLUMN: %d and %d rows, bal %s, want 211", n1, n2, bal(10))
	}
	// The column's type changes under the cached UPDATE's SET: the new
	// descriptor's type is the one written.
	mustExec(t, b, "ALTER TABLE acct ALTER COLUMN bal TYPE bigint")
	if n := exec(upd, 1, 10); n != 1 || bal(10) != "212" {
		t.Errorf("update after ALTER TYPE: %d rows, bal %s", n, bal(10))
	}
}
