package session_test

import (
	"context"
	"testing"
	"time"
)

// TestTempTablesDroppedAtClose: a session's temporary tables live in a
// schema of its own that other sessions cannot read from (0A000), and
// ending the session drops the schema, its tables and their sequences.
func TestTempTablesDroppedAtClose(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	owner, other := connect(t, url, nil), connect(t, url, nil)
	for _, sql := range []string{
		"CREATE TEMP TABLE tt (id serial PRIMARY KEY, v text)",
		"INSERT INTO tt (v) VALUES ('a'), ('b')",
	} {
		if _, err := simple(owner, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var schema string
	if err := owner.QueryRow(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = 'tt'`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := simple(other, "SELECT * FROM "+schema+".tt"); sqlState(err) != "0A000" {
		t.Fatalf("another session reading %s.tt: %v, want 0A000", schema, err)
	}
	if err := owner.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The server ends the session once it sees the connection close.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("schema %s still exists after the session closed", schema)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for one
	}
	var n int
	if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname IN ('tt', 'tt_id_seq', 'tt_pkey')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d relations of the temporary table left", n)
	}
}

// TestDiscardTemp: DISCARD TEMP and DISCARD ALL drop the session's
// temporary tables (connection poolers send DISCARD ALL between clients).
func TestDiscardTemp(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	for _, discard := range []string{"DISCARD TEMP", "DISCARD ALL"} {
		if _, err := simple(c, "CREATE TEMP TABLE d (x int); INSERT INTO d VALUES (1)"); err != nil {
			t.Fatalf("before %s: %v", discard, err)
		}
		if _, err := simple(c, discard); err != nil {
			t.Fatalf("%s: %v", discard, err)
		}
		if _, err := simple(c, "SELECT * FROM d"); sqlState(err) != "42P01" {
			t.Errorf("after %s: %v, want 42P01", discard, err)
		}
	}
	// Inside a block, DISCARD TEMP drops them in the block's transaction.
	if _, err := simple(c, "CREATE TEMP TABLE d (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := simple(c, "BEGIN; DISCARD TEMP; ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := simple(c, "SELECT * FROM d"); err != nil {
		t.Errorf("after a rolled-back DISCARD TEMP: %v", err)
	}
}
