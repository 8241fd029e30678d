package session_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestReadCommittedContention runs pgbench's tpcb-like transaction from 8
// connections on a few hot rows under READ COMMITTED, in the simple and
// the extended protocol. PostgreSQL never fails such a transaction (an
// UPDATE meeting a concurrent update waits and re-evaluates); neither may
// Cairn, whose statements roll back to a statement savepoint and rerun at
// a fresh snapshot instead. At the end every table's balances must add up
// to the sum of the deltas the history recorded.
func TestReadCommittedContention(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	setup := connect(t, url, nil)
	for _, q := range []string{
		`CREATE TABLE branches (bid int PRIMARY KEY, bbalance int NOT NULL)`,
		`CREATE TABLE tellers (tid int PRIMARY KEY, bid int NOT NULL, tbalance int NOT NULL)`,
		`CREATE TABLE accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL)`,
		`CREATE TABLE history (tid int, bid int, aid int, delta int, mtime timestamp)`,
		`INSERT INTO branches SELECT g, 0 FROM generate_series(1, 2) g`,
		`INSERT INTO tellers SELECT g, 1 + g % 2, 0 FROM generate_series(1, 4) g`,
		`INSERT INTO accounts SELECT g, 1 + g % 2, 0 FROM generate_series(1, 20) g`,
	} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			const clients = 8
			deadline := time.Now().Add(2 * time.Second)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var errs []error
			done := 0
			for c := range clients {
				conn := connect(t, url, nil)
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(c), 7))
					for time.Now().Before(deadline) {
						aid, tid, bid := 1+rng.IntN(20), 1+rng.IntN(4), 1+rng.IntN(2)
						delta := rng.IntN(10001) - 5000
						err := tpcb(ctx, conn, mode, aid, tid, bid, delta)
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
						} else {
							done++
						}
						mu.Unlock()
						if err != nil {
							_, _ = conn.Exec(ctx, "ROLLBACK")
						}
					}
				}()
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatalf("%d of %d transactions failed; first: %v", len(errs), len(errs)+done, errs[0])
			}
			if done == 0 {
				t.Fatal("no transaction ran")
			}
			t.Logf("%d transactions", done)
		})
	}
	var hist int64
	if err := setup.QueryRow(ctx, `SELECT coalesce(sum(delta), 0) FROM history`).Scan(&hist); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"branches", "tellers", "accounts"} {
		var sum int64
		col := map[string]string{"branches": "bbalance", "tellers": "tbalance", "accounts": "abalance"}[tbl]
		if err := setup.QueryRow(ctx, fmt.Sprintf(`SELECT sum(%s) FROM %s`, col, tbl)).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		if sum != hist {
			t.Errorf("sum of %s = %d, history says %d", tbl, sum, hist)
		}
	}
}

// tpcb is pgbench's default script.
func tpcb(ctx context.Context, c *pgx.Conn, mode pgx.QueryExecMode, aid, tid, bid, delta int) error {
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	stmts := []struct {
		sql  string
		args []any
	}{
		{`UPDATE accounts SET abalance = abalance + $1 WHERE aid = $2`, []any{delta, aid}},
		{`SELECT abalance FROM accounts WHERE aid = $1`, []any{aid}},
		{`UPDATE tellers SET tbalance = tbalance + $1 WHERE tid = $2`, []any{delta, tid}},
		{`UPDATE branches SET bbalance = bbalance + $1 WHERE bid = $2`, []any{delta, bid}},
		{`INSERT INTO history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)`, []any{tid, bid, aid, delta}},
	}
	for _, st := range stmts {
		rows, err := c.Query(ctx, st.sql, append([]any{mode}, st.args...)...)
		if err != nil {
			return fmt.Errorf("%s: %w", st.sql, err)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: %w", st.sql, err)
		}
	}
	_, err := c.Exec(ctx, "COMMIT")
	return err
}

// TestRowLocks shows FOR UPDATE locking rows for the rest of the
// transaction, seen from a second connection: a plain read does not wait,
// a locking read and an UPDATE wait until the holder commits (and then see
// its update), NOWAIT fails with 55P03, SKIP LOCKED takes the next free
// row (the job-queue pattern), and OF names the tables locked.
func TestRowLocks(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	a, b := connect(t, url, nil), connect(t, url, nil)
	for _, q := range []string{
		`CREATE TABLE jobs (id int PRIMARY KEY, state text NOT NULL, n int NOT NULL DEFAULT 0)`,
		`CREATE TABLE owners (id int PRIMARY KEY, job int NOT NULL)`,
		`INSERT INTO jobs (id, state) VALUES (1, 'pending'), (2, 'pending'), (3, 'pending')`,
		`INSERT INTO owners VALUES (10, 1), (20, 2)`,
	} {
		if _, err := a.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec := func(c *pgx.Conn, q string) {
		t.Helper()
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ints := func(c *pgx.Conn, q string) []int {
		t.Helper()
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	// waits runs q on c in the background and reports, through the
	// returned function, whether it was still blocked after d and what it
	// finally returned.
	waits := func(c *pgx.Conn, q string) func() (bool, []int, error) {
		res := make(chan struct {
			v   []int
			err error
		}, 1)
		go func() {
			rows, err := c.Query(ctx, q)
			var v []int
			if err == nil {
				v, err = pgx.CollectRows(rows, pgx.RowTo[int])
			}
			res <- struct {
				v   []int
				err error
			}{v, err}
		}()
		blocked := false
		select {
		case <-res:
			t.Fatalf("%s did not wait for the lock", q)
		case <-time.After(300 * time.Millisecond):
			blocked = true
		}
		return func() (bool, []int, error) {
			r := <-res
			return blocked, r.v, r.err
		}
	}

	exec(a, "BEGIN")
	if got := ints(a, "SELECT id FROM jobs WHERE id = 1 FOR UPDATE"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("locking read = %v", got)
	}
	// A plain read does not wait for a row lock.
	if got := ints(b, "SELECT n FROM jobs WHERE id = 1"); fmt.Sprint(got) != "[0]" {
		t.Fatalf("plain read = %v", got)
	}
	_, err := b.Exec(ctx, "SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT")
	if sqlState(err) != "55P03" || err.Error() != `ERROR: could not obtain lock on row in relation "jobs" (SQLSTATE 55P03)` {
		t.Fatalf("NOWAIT: %v", err)
	}
	// SKIP LOCKED: the first free job.
	exec(b, "BEGIN")
	if got := ints(b, "SELECT id FROM jobs WHERE state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"); fmt.Sprint(got) != "[2]" {
		t.Fatalf("SKIP LOCKED = %v, want [2]", got)
	}
	exec(b, "COMMIT")
	// A locking read and an UPDATE of the locked row wait for the holder,
	// then see what it wrote.
	finish := waits(b, "SELECT n FROM jobs WHERE id = 1 FOR UPDATE")
	exec(a, "UPDATE jobs SET n = n + 1 WHERE id = 1")
	exec(a, "COMMIT")
	if blocked, got, err := finish(); !blocked || err != nil || fmt.Sprint(got) != "[1]" {
		t.Fatalf("waiting FOR UPDATE: blocked=%v got=%v err=%v, want the committed [1]", blocked, got, err)
	}
	exec(a, "BEGIN")
	ints(a, "SELECT id FROM jobs WHERE id = 3 FOR SHARE")
	finish = waits(b, "UPDATE jobs SET n = n + 10 WHERE id = 3 RETURNING n")
	exec(a, "COMMIT")
	if blocked, got, err := finish(); !blocked || err != nil || fmt.Sprint(got) != "[10]" {
		t.Fatalf("UPDATE behind FOR SHARE: blocked=%v got=%v err=%v", blocked, got, err)
	}
	// OF owners locks the owners row only: jobs stay free.
	exec(a, "BEGIN")
	ints(a, "SELECT o.id FROM owners o JOIN jobs j ON j.id = o.job WHERE o.id = 10 FOR UPDATE OF o")
	if got := ints(b, "SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("jobs row locked by FOR UPDATE OF owners: %v", got)
	}
	if _, err := b.Exec(ctx, "SELECT id FROM owners WHERE id = 10 FOR UPDATE NOWAIT"); sqlState(err) != "55P03" {
		t.Fatalf("owners row not locked: %v", err)
	}
	exec(a, "ROLLBACK")
	// Rolled back: the lock is gone.
	if got := ints(b, "SELECT id FROM owners WHERE id = 10 FOR UPDATE NOWAIT"); fmt.Sprint(got) != "[10]" {
		t.Fatalf("after ROLLBACK: %v", got)
	}
	// Two transactions locking the same rows in opposite orders: one of
	// them is the deadlock victim (40P01), the other goes on.
	exec(a, "BEGIN")
	exec(b, "BEGIN")
	ints(a, "SELECT id FROM jobs WHERE id = 1 FOR UPDATE")
	ints(b, "SELECT id FROM jobs WHERE id = 2 FOR UPDATE")
	finish = waits(a, "SELECT id FROM jobs WHERE id = 2 FOR UPDATE")
	_, errB := b.Exec(ctx, "SELECT id FROM jobs WHERE id = 1 FOR UPDATE")
	if errB == nil {
		// a was the victim; b holds both rows now.
		_, _, errA := finish()
		if sqlState(errA) != "40P01" {
			t.Fatalf("deadlock: neither side failed with 40P01 (a: %v)", errA)
		}
	} else {
		if sqlState(errB) != "40P01" {
			t.Fatalf("deadlock victim got %v, want 40P01", errB)
		}
		if _, got, errA := finish(); errA != nil || fmt.Sprint(got) != "[2]" {
			t.Fatalf("survivor: %v %v", got, errA)
		}
	}
	exec(a, "ROLLBACK")
	exec(b, "ROLLBACK")
}

// TestReadCommittedLockingRead: transactions that lock several rows with
// one SELECT ... FOR UPDATE and then update them never fail under READ
// COMMITTED, as in PostgreSQL, though each of them meets rows the others
// updated after its snapshot: the SELECT, whose rows are held back until
// it completes, is rerun at a newer snapshot. The counters end up counting
// every transaction.
func TestReadCommittedLockingRead(t *testing.T) {
	url := startServer(t)
	ctx := context.Background()
	setup := connect(t, url, nil)
	for _, q := range []string{
		`CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL, m int NOT NULL DEFAULT 0)`,
		`INSERT INTO counters VALUES (1, 0), (2, 0), (3, 0)`,
	} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const clients, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, clients*each+1)
	// Meanwhile another connection keeps updating the last row alone, so
	// the lockers meet it changed after they locked the first ones.
	stop := make(chan struct{})
	bumps := 0
	bumper := connect(t, url, nil)
	var bwg sync.WaitGroup
	bwg.Add(1)
	go func() {
		defer bwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := bumper.Exec(ctx, "UPDATE counters SET m = m + 1 WHERE id = 3"); err != nil {
				errs <- fmt.Errorf("bump: %w", err)
				return
			}
			bumps++
		}
	}()
	for range clients {
		conn := connect(t, url, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := func() error {
					if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
						return err
					}
					rows, err := conn.Query(ctx, "SELECT id, n FROM counters ORDER BY id FOR UPDATE")
					if err != nil {
						return err
					}
					type row struct{ ID, N int }
					got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
					if err != nil {
						return fmt.Errorf("FOR UPDATE: %w", err)
					}
					for _, r := range got {
						// The values read under the lock are the latest:
						// writing them back plus one loses nothing.
						if _, err := conn.Exec(ctx, "UPDATE counters SET n = $1 WHERE id = $2", r.N+1, r.ID); err != nil {
							return err
						}
					}
					_, err = conn.Exec(ctx, "COMMIT")
					return err
				}()
				if err != nil {
					_, _ = conn.Exec(ctx, "ROLLBACK")
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("transaction failed: %v", err)
	}
	var m int
	if err := setup.QueryRow(ctx, "SELECT m FROM counters WHERE id = 3").Scan(&m); err != nil || m != bumps {
		t.Fatalf("m = %d (%v), want %d bumps", m, err, bumps)
	}
	rows, err := setup.Query(ctx, "SELECT n FROM counters ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint([]int{clients * each, clients * each, clients * each}); fmt.Sprint(ns) != want {
		t.Fatalf("counters = %v, want %s", ns, want)
	}
}
