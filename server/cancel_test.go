package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestCancelRequest: a CancelRequest on a second connection, carrying the
// BackendKeyData of the first, stops the query running there with 57014,
// and the session goes on serving; a CancelRequest with a wrong key
// cancels nothing.
func TestCancelRequest(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	conn := connect(t, s)
	defer conn.Close(ctx)

	// Long enough that only a cancel ends it within the test's time.
	const long = "SELECT count(*) FROM generate_series(1, 10000000000)"
	cancelAfter := func(d time.Duration) chan error {
		done := make(chan error, 1)
		go func() {
			time.Sleep(d)
			done <- conn.PgConn().CancelRequest(ctx)
		}()
		return done
	}
	done := cancelAfter(200 * time.Millisecond)
	start := time.Now()
	_, err := conn.Exec(ctx, long)
	if cerr := <-done; cerr != nil {
		t.Fatalf("sending the cancel request: %v", cerr)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" || pe.Message != "canceling statement due to user request" {
		t.Fatalf("cancelled query: got %v, want 57014", err)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("the cancel took effect only after %v", el)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("after the cancel the session should serve: %v", err)
	}

	// In a transaction block the cancelled statement aborts the block,
	// as in PostgreSQL.
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	done = cancelAfter(200 * time.Millisecond)
	_, err = conn.Exec(ctx, long)
	<-done
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("cancelled query in a block: got %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); !errors.As(err, &pe) || pe.Code != "25P02" {
		t.Fatalf("after a cancel in a block: got %v, want 25P02", err)
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	// A cancel request that names another key is ignored.
	other := connect(t, s)
	defer other.Close(ctx)
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = other.PgConn().CancelRequest(ctx)
	}()
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 3000000)").Scan(&one); err != nil {
		t.Fatalf("a cancel for another session stopped this one: %v", err)
	}
}
