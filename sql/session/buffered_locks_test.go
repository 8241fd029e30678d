package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestBufferedWritesWaitAtStatement: with cairn_buffered_writes = on, the
// first writer's buffered UPDATE holds an unreplicated lock on the row, so
// a second explicit transaction's UPDATE of the row waits at the
// statement, as in PostgreSQL; under REPEATABLE READ, having read the row
// before the first committed, it then fails there (40001 at the UPDATE,
// not at COMMIT), under READ COMMITTED it re-runs and commits.
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
			// Take the snapshot before c1 commits, reading the row: the
			// read is what places c1's commit after the snapshot (a
			// snapshot is a timestamp, and c1 began first). Without it
			// c1 commits at its own earlier timestamp, inside c2's
			// snapshot, and c2's UPDATE, whose read now waits for the
			// lock, reads and updates c1's row (11) under either level.
			mustExec(t, c2, "SELECT v FROM acct WHERE id = 1")
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

// TestUpdateLocksWithRead: inside a block (which buffers its writes with
// unreplicated locks), an UPDATE of one row by its primary key takes the
// row's lock with its read, so each such UPDATE is one batch to the
// tablets (its read) instead of two (the read, then the lock its buffered
// write needed). The tablets' batch counters over 20 UPDATEs say so (a
// margin for the transaction's heartbeats, which are not the UPDATEs').
// The lock is held from the read: another block's UPDATE of the row waits
// for the first to commit, then adds to its value.
func TestUpdateLocksWithRead(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE acct (id int PRIMARY KEY, bal int)")
	mustExec(t, a, "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 40) g")
	batches := func() int {
		t.Helper()
		resp, err := http.Get("http://" + srv.HTTPAddr().String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "cairn_tablet_read_batches_total{") || strings.HasPrefix(l, "cairn_tablet_write_batches_total{") {
				v, err := strconv.Atoi(l[strings.LastIndexByte(l, ' ')+1:])
				if err != nil {
					t.Fatalf("metric line %q: %v", l, err)
				}
				n += v
			}
		}
		return n
	}
	mustExec(t, a, "BEGIN")
	mustExec(t, a, "UPDATE acct SET bal = bal + 1 WHERE id = 40") // the block's first write
	before := batches()
	for i := 1; i <= 20; i++ {
		mustExec(t, a, fmt.Sprintf("UPDATE acct SET bal = bal + 1 WHERE id = %d", i))
	}
	if n := batches() - before; n < 20 || n > 23 {
		t.Errorf("20 single-row UPDATEs in a block sent %d batches, want 20 (one each)", n)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(ctx, "UPDATE acct SET bal = bal + 10 WHERE id = 5")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a second UPDATE of the row did not wait for the first block: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	mustExec(t, a, "COMMIT")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := count(t, b, "SELECT bal FROM acct WHERE id = 5"); got != 11 {
		t.Errorf("bal of 5: %d, want 11", got)
	}
	if got := count(t, b, "SELECT sum(bal) FROM acct"); got != 31 {
		t.Errorf("sum: %d, want 31", got)
	}
}
