package session_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSimpleQueryDMLPlanCache: UPDATE, DELETE and INSERT sent as text
// (pgbench's simple protocol) run the kept plan of their parameterized
// form, with SET and VALUES constants as parameters, not parsed again
// (the hits counter), and answer and write exactly what a fresh plan
// would: row counts, secondary indexes, NOT NULL, CHECK and unique
// violations, integer widths, a quoted string for an integer column,
// defaults and CURRENT_TIMESTAMP evaluated per statement, RETURNING,
// inside a block and after a schema change.
func TestSimpleQueryDMLPlanCache(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	url += "&default_query_exec_mode=simple_protocol"
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE acct (id int PRIMARY KEY, bal int NOT NULL CHECK (bal > -1000), small int2, note text)")
	mustExec(t, b, "CREATE INDEX acct_bal ON acct (bal)")
	mustExec(t, b, "CREATE UNIQUE INDEX acct_note ON acct (note)")
	mustExec(t, b, "INSERT INTO acct SELECT g, g * 10, 1, 'n' || g FROM generate_series(1, 50) g")
	mustExec(t, b, "CREATE TABLE hist (n serial PRIMARY KEY, id int, delta int, at timestamptz DEFAULT now(), m timestamp)")

	hits := func() float64 { return metric(t, srv, "cairn_sql_plan_cache_hits_total") }
	// run executes sql on a and returns its row count or "error SQLSTATE".
	run := func(sql string) string {
		t.Helper()
		tag, err := a.Exec(ctx, sql)
		if err != nil {
			return "error " + sqlState(err)
		}
		return strconv.FormatInt(tag.RowsAffected(), 10)
	}
	// one reads one value through b as text ("none": no row).
	one := func(sql string) string {
		t.Helper()
		var v *string
		err := b.QueryRow(ctx, sql).Scan(&v)
		switch {
		case err == pgx.ErrNoRows:
			return "none"
		case err != nil:
			t.Fatalf("%s: %v", sql, err)
		case v == nil:
			return "null"
		}
		return *v
	}

	// pgbench's UPDATE, a negative delta among them.
	h0 := hits()
	for i := 1; i <= 20; i++ {
		if got := run(fmt.Sprintf("UPDATE acct SET bal = bal + %d WHERE id = %d", 2*i-21, i)); got != "1" {
			t.Fatalf("update %d: %s", i, got)
		}
	}
	if got := hits() - h0; got < 18 {
		t.Fatalf("%v of 20 UPDATEs reused the plan", got)
	}
	for i := 1; i <= 20; i++ {
		want := strconv.Itoa(i*10 + 2*i - 21)
		if got := one(fmt.Sprintf("SELECT bal::text FROM acct WHERE id = %d", i)); got != want {
			t.Fatalf("bal of %d: %s, want %s", i, got, want)
		}
		// The secondary index followed the new value.
		if got := one(fmt.Sprintf("SELECT id::text FROM acct WHERE bal = %s", want)); got != strconv.Itoa(i) {
			t.Fatalf("acct_bal at %s: %s, want %d", want, got, i)
		}
	}
	if got := one("SELECT count(*)::text FROM acct WHERE bal = 10"); got != "0" {
		t.Errorf("acct_bal kept the old entry of id 1: %s rows at bal 10", got)
	}

	for _, tc := range []struct{ sql, want string }{
		{"UPDATE acct SET bal = bal + 1 WHERE id = 999", "0"},
		{"UPDATE acct SET bal = bal - 5000 WHERE id = 30", "error 23514"},
		{"UPDATE acct SET bal = bal - 1 WHERE id = 30", "1"},
		{"UPDATE acct SET small = 32767 WHERE id = 31", "1"},
		{"UPDATE acct SET small = small + 1 WHERE id = 31", "error 22003"},
		{"UPDATE acct SET small = 40000 WHERE id = 31", "error 22003"},
		{"UPDATE acct SET small = 7 WHERE id = 31", "1"},
		{"UPDATE acct SET small = '8' WHERE id = 32", "1"},
		{"UPDATE acct SET small = 'x' WHERE id = 32", "error 22P02"},
		{"UPDATE acct SET note = 'n40' WHERE id = 41", "error 23505"},
		{"UPDATE acct SET note = 'it''s' WHERE id = 41", "1"},
		{"UPDATE acct SET bal = NULL WHERE id = 42", "error 23502"},
		{"UPDATE acct SET bal = 5 WHERE id = NULL", "0"},
		{"UPDATE acct SET bal = 3 * bal WHERE id = 43", "1"},
		{"DELETE FROM acct WHERE id = 44", "1"},
		{"DELETE FROM acct WHERE id = 44", "0"},
		{"DELETE FROM acct WHERE id = 45", "1"},
		{"INSERT INTO acct VALUES (44, 1, 2, 'back')", "1"},
		{"INSERT INTO acct VALUES (45, 1, 2, 'back')", "error 23505"},
		{"INSERT INTO acct VALUES (46, 1, 2, 'x')", "error 23505"},
		{"INSERT INTO acct VALUES (101, NULL, 2, 'y')", "error 23502"},
		{"INSERT INTO acct VALUES (102, -2000, 2, 'z')", "error 23514"},
		{"INSERT INTO acct VALUES (103, 1, 99999, 'w')", "error 22003"},
		{"INSERT INTO acct VALUES ('104', '5', '6', 'v')", "1"},
	} {
		if got := run(tc.sql); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.sql, got, tc.want)
		}
	}
	for _, tc := range []struct{ sql, want string }{
		{"SELECT bal::text FROM acct WHERE id = 30", "299"},
		{"SELECT small::text FROM acct WHERE id = 31", "7"},
		{"SELECT small::text FROM acct WHERE id = 32", "8"},
		{"SELECT note FROM acct WHERE id = 41", "it's"},
		{"SELECT bal::text FROM acct WHERE id = 42", "420"},
		{"SELECT bal::text FROM acct WHERE id = 43", "1290"},
		{"SELECT note FROM acct WHERE id = 44", "back"},
		{"SELECT note FROM acct WHERE id = 45", "none"},
		{"SELECT count(*)::text FROM acct WHERE note = 'back'", "1"},
		{"SELECT bal::text || small::text || note FROM acct WHERE id = 104", "56v"},
		{"SELECT count(*)::text FROM acct WHERE id > 100", "1"},
	} {
		if got := one(tc.sql); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.sql, got, tc.want)
		}
	}

	// pgbench's INSERT: the default and CURRENT_TIMESTAMP are the
	// statement's, not the first plan's.
	h0 = hits()
	for i := 1; i <= 5; i++ {
		for i == 3 && one("SELECT (clock_timestamp() > max(m))::text FROM hist") != "true" {
			// The clock must pass the earlier rows' time for the later
			// rows to show a time of their own.
		}
		if got := run(fmt.Sprintf("INSERT INTO hist (id, delta, m) VALUES (%d, %d, CURRENT_TIMESTAMP)", i, -i)); got != "1" {
			t.Fatalf("insert %d: %s", i, got)
		}
	}
	if got := hits() - h0; got < 3 {
		t.Errorf("%v of 5 INSERTs reused the plan", got)
	}
	if got := one("SELECT string_agg(n || ':' || id || ':' || delta, ',' ORDER BY n) FROM hist"); got != "1:1:-1,2:2:-2,3:3:-3,4:4:-4,5:5:-5" {
		t.Errorf("hist: %s", got)
	}
	if got := one("SELECT count(DISTINCT m)::text || count(DISTINCT at)::text FROM hist"); got < "22" || len(got) != 2 {
		t.Errorf("distinct statement times (m, at): %s, want at least 2 of each", got)
	}

	// RETURNING, in a block; an error fails the block.
	for id := 2; id <= 3; id++ {
		var gotBal, gotID int
		err := a.QueryRow(ctx, fmt.Sprintf("UPDATE acct SET bal = bal + 1 WHERE id = %d RETURNING bal, id", id)).Scan(&gotBal, &gotID)
		if err != nil || gotBal != id*10+2*id-21+1 || gotID != id {
			t.Errorf("UPDATE RETURNING of %d: %d %d %v", id, gotBal, gotID, err)
		}
	}
	mustExec(t, a, "BEGIN")
	for _, tc := range []struct{ sql, want string }{
		{"UPDATE acct SET bal = bal + 100 WHERE id = 4", "1"},
		{"INSERT INTO acct VALUES (4, 1, 1, 'dup')", "error 23505"},
		{"UPDATE acct SET bal = bal + 100 WHERE id = 5", "error 25P02"}, // the failed block
	} {
		if got := run(tc.sql); got != tc.want {
			t.Errorf("in a block, %s: %s, want %s", tc.sql, got, tc.want)
		}
	}
	mustExec(t, a, "ROLLBACK")
	if got, want := one("SELECT bal::text FROM acct WHERE id = 4"), strconv.Itoa(4*10+2*4-21); got != want {
		t.Errorf("bal of 4 after ROLLBACK: %s, want %s", got, want)
	}

	// Another session adds a column with a default and a CHECK: the kept
	// plans are of the old generation and plan again.
	mustExec(t, b, "ALTER TABLE acct ADD COLUMN extra int DEFAULT 9")
	mustExec(t, b, "ALTER TABLE acct ADD CONSTRAINT small_pos CHECK (small > 0)")
	for _, tc := range []struct{ sql, want string }{
		{"INSERT INTO acct VALUES (105, 1, -1, 'u')", "error 23514"},
		{"INSERT INTO acct VALUES (106, 1, 1, 't')", "1"},
		{"UPDATE acct SET small = -3 WHERE id = 6", "error 23514"},
	} {
		if got := run(tc.sql); got != tc.want {
			t.Errorf("after ALTER, %s: %s, want %s", tc.sql, got, tc.want)
		}
	}
	if got := one("SELECT extra::text FROM acct WHERE id = 106"); got != "9" {
		t.Errorf("new column's default: %s", got)
	}
}

// TestSimpleQueryTxnControlRepeated: transaction-control texts sent again
// and again (kept parsed by their text, plancache.go) keep their meaning
// each time: isolation options, savepoints, COMMIT of a failed block,
// COMMIT outside a block.
func TestSimpleQueryTxnControlRepeated(t *testing.T) {
	ctx := context.Background()
	_, url := startNode(t)
	url += "&default_query_exec_mode=simple_protocol"
	var notices []string
	a, b := connect(t, url, &notices), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE n (k int PRIMARY KEY, v int)")
	mustExec(t, b, "INSERT INTO n VALUES (1, 0)")
	v := func() string {
		t.Helper()
		var s string
		if err := b.QueryRow(ctx, "SELECT v::text FROM n WHERE k = 1").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for round := 1; round <= 3; round++ {
		mustExec(t, a, "BEGIN ISOLATION LEVEL REPEATABLE READ;")
		if got := show(t, a, "transaction_isolation"); got != "repeatable read" {
			t.Errorf("round %d: isolation %q", round, got)
		}
		mustExec(t, a, "UPDATE n SET v = v + 1 WHERE k = 1")
		mustExec(t, a, "SAVEPOINT s1;")
		mustExec(t, a, "UPDATE n SET v = v + 100 WHERE k = 1")
		mustExec(t, a, "ROLLBACK TO SAVEPOINT s1;")
		mustExec(t, a, "END;")
		if got, want := v(), strconv.Itoa(round); got != want {
			t.Errorf("round %d: v = %s, want %s", round, got, want)
		}
		mustExec(t, a, "BEGIN;")
		if got := show(t, a, "transaction_isolation"); got != "read committed" {
			t.Errorf("round %d: plain BEGIN's isolation %q", round, got)
		}
		mustExec(t, a, "UPDATE n SET v = v + 1000 WHERE k = 1")
		if _, err := a.Exec(ctx, "SELECT 1/0"); sqlState(err) != "22012" {
			t.Errorf("round %d: division by zero: %v", round, err)
		}
		// COMMIT of a failed block rolls back (tag ROLLBACK).
		tag, err := a.Exec(ctx, "END;")
		if err != nil || tag.String() != "ROLLBACK" {
			t.Errorf("round %d: END of a failed block: %q, %v", round, tag, err)
		}
		if got, want := v(), strconv.Itoa(round); got != want {
			t.Errorf("round %d: after the failed block v = %s, want %s", round, got, want)
		}
		notices = notices[:0]
		mustExec(t, a, "END;")
		if len(notices) != 1 || !strings.Contains(notices[0], "there is no transaction in progress") {
			t.Errorf("round %d: END outside a block: notices %q", round, notices)
		}
	}
}
