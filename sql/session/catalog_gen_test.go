package session_test

import (
	"context"
	"testing"
)

// TestCatalogGeneration: statements resolve names through the catalog
// generation's cache (one read per statement), so another session's DDL
// must show in the next statement here, a transaction's own DDL in its
// next statement, and a rolled-back DDL nowhere.
func TestCatalogGeneration(t *testing.T) {
	url := startServer(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	ctx := context.Background()
	mustExec(t, a, "CREATE TABLE g (k int PRIMARY KEY, v int)")
	mustExec(t, a, "INSERT INTO g VALUES (1, 10)")
	// Warm the cache in a.
	for range 3 {
		if n := count(t, a, "SELECT count(*) FROM g"); n != 1 {
			t.Fatalf("count = %d", n)
		}
	}
	// Another session adds a column: a sees it at once.
	mustExec(t, b, "ALTER TABLE g ADD COLUMN w int DEFAULT 7")
	var w int
	if err := a.QueryRow(ctx, "SELECT w FROM g WHERE k = 1").Scan(&w); err != nil || w != 7 {
		t.Fatalf("after another session's ADD COLUMN: w = %d, %v", w, err)
	}
	// A rename and a new table under the old name.
	mustExec(t, b, "ALTER TABLE g RENAME TO g_old")
	mustExec(t, b, "CREATE TABLE g (k int PRIMARY KEY)")
	if n := count(t, a, "SELECT count(*) FROM g"); n != 0 {
		t.Fatalf("g after the rename: %d rows, want the new empty table", n)
	}
	if n := count(t, a, "SELECT count(*) FROM g_old"); n != 1 {
		t.Fatalf("g_old: %d rows", n)
	}
	// A transaction's own DDL, then its statements see it; a rollback
	// leaves no trace, here or in the other session.
	mustExec(t, a, "BEGIN")
	mustExec(t, a, "CREATE TABLE inblock (x int)")
	mustExec(t, a, "INSERT INTO inblock VALUES (1)")
	if n := count(t, a, "SELECT count(*) FROM inblock"); n != 1 {
		t.Fatalf("inblock in its own transaction: %d", n)
	}
	mustExec(t, a, "ROLLBACK")
	for _, c := range []*struct{ name string }{{"a"}, {"b"}} {
		conn := a
		if c.name == "b" {
			conn = b
		}
		if _, err := conn.Exec(ctx, "SELECT * FROM inblock"); sqlState(err) != "42P01" {
			t.Errorf("session %s after the rollback: %v, want 42P01", c.name, err)
		}
	}
	// A drop in b, while a's cache knows the table.
	if n := count(t, a, "SELECT count(*) FROM g_old"); n != 1 {
		t.Fatalf("g_old again: %d", n)
	}
	mustExec(t, b, "DROP TABLE g_old")
	if _, err := a.Exec(ctx, "SELECT * FROM g_old"); sqlState(err) != "42P01" {
		t.Errorf("after another session's DROP: %v, want 42P01", err)
	}
}
