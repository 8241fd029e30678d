package session_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestBufferedWritesWaitAtStatement: with cairn_buffered_writes = on, the
// first writer's buffered UPDATE holds an unreplicated lock on the row, so
// a second explicit transaction's UPDATE of the row waits at the
// statement, as in PostgreSQL; under REPEATABLE READ it then fails there
// (40001 at the UPDATE, not at COMMIT), under READ COMMITTED it re-runs
// and commits.
func TestBufferedWritesWaitAtStatement(t *testing.T) {
	ctx := context.Background()
	url := startServer(t)
	setup := connect(t, url, nil)
	mustExec(t, setup, "CREATE TABLE acct (id int PRIMARY KEY, v int)")
	mustExec(t, setup, "INSERT INTO acct VALUES (1, 0)")
	for _, tc := range []struct {
		iso      string
		wantCode string // "" : the second UPDATE succeeds after the wait
		want     int
	}{
		{"REPEATABLE READ", "40001", 1},
		{"READ COMMITTED", "", 11},
	} {
		t.Run(tc.iso, func(t *testing.T) {
			mustExec(t, setup, "UPDATE acct SET v = 0 WHERE id = 1")
			c1, c2 := connect(t, url, nil), connect(t, url, nil)
			for _, c := range []interface {
				Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
			}{c1, c2} {
				if _, err := c.Exec(ctx, "SET cairn_buffered_writes = on"); err != nil {
					t.Fatal(err)
				}
			}
			mustExec(t, c1, "BEGIN ISOLATION LEVEL "+tc.iso)
			mustExec(t, c1, "UPDATE acct SET v = v + 1 WHERE id = 1")
			mustExec(t, c2, "BEGIN ISOLATION LEVEL "+tc.iso)
			mustExec(t, c2, "SELECT 1") // take the snapshot before c1 commits
			done := make(chan error, 1)
			go func() {
				_, err := c2.Exec(ctx, "UPDATE acct SET v = v + 10 WHERE id = 1")
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("second UPDATE did not wait for the first writer: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			mustExec(t, c1, "COMMIT")
			err := <-done
			if tc.wantCode != "" {
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != tc.wantCode {
					t.Fatalf("second UPDATE after the wait: %v, want SQLSTATE %s", err, tc.wantCode)
				}
				mustExec(t, c2, "ROLLBACK")
			} else {
				if err != nil {
					t.Fatalf("second UPDATE after the wait: %v", err)
				}
				mustExec(t, c2, "COMMIT")
			}
			var v int
			if err := setup.QueryRow(ctx, "SELECT v FROM acct WHERE id = 1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v != tc.want {
				t.Fatalf("v = %d, want %d", v, tc.want)
			}
		})
	}
}
