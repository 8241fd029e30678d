package session_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadCommittedConflictAfterRowsSent: a READ COMMITTED statement that
// meets a conflict after more than maxHeldRows of its rows reached the
// client cannot be rerun, and fails with 40001 (docs/sql.md,
// "Transactions"), where PostgreSQL would re-check the row in place.
//
// A's SELECT ... FOR UPDATE streams the first rows of a large table, then
// waits on row 2900, which B has updated and not committed; once A is seen
// waiting (pg_stat_activity) with more than 1,000 rows received, B
// commits, and A's statement meets a version newer than its snapshot.
func TestReadCommittedConflictAfterRowsSent(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	setup := connect(t, url, nil)
	for _, q := range []string{
		`CREATE TABLE big (k int PRIMARY KEY, v int NOT NULL, pad text NOT NULL)`,
		`INSERT INTO big SELECT g, 0, repeat('x', 1000) FROM generate_series(1, 3000) g`,
	} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	a, b := connect(t, url, nil), connect(t, url, nil)
	var aPID int
	if err := a.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&aPID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "UPDATE big SET v = 1 WHERE k = 2900"} {
		if _, err := b.Exec(ctx, q); err != nil {
			t.Fatalf("B: %s: %v", q, err)
		}
	}
	if _, err := a.Exec(ctx, "BEGIN ISOLATION LEVEL READ COMMITTED"); err != nil {
		t.Fatal(err)
	}
	var received atomic.Int64
	done := make(chan error, 1)
	go func() {
		rows, err := a.Query(ctx, "SELECT k, v, pad FROM big ORDER BY k FOR UPDATE")
		if err != nil {
			done <- err
			return
		}
		for rows.Next() {
			received.Add(1)
		}
		done <- rows.Err()
	}()
	// A waits on B's lock: the condition to act on, not a sleep.
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			t.Fatalf("A's SELECT ended before it waited on B's lock (%d rows): %v", received.Load(), err)
		default:
		}
		var ev string
		if err := setup.QueryRow(ctx, "SELECT coalesce(wait_event_type, '') FROM pg_stat_activity WHERE pid = $1", aPID).Scan(&ev); err != nil {
			t.Fatal(err)
		}
		waiting = ev == "Lock"
		if !waiting {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if n := received.Load(); n <= 1000 {
		t.Fatalf("A waits on B's lock with only %d rows received; the test needs more than 1,000 sent", n)
	}
	if _, err := b.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if sqlState(err) != "40001" {
		t.Fatalf("A's SELECT after %d rows sent: %v, want 40001", received.Load(), err)
	}
	_, _ = a.Exec(ctx, "ROLLBACK")
}
