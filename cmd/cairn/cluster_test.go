package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/test/proc"
	"github.com/jackc/pgx/v5"
)

// freeAddrs returns n loopback addresses that were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	a, err := proc.FreeAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// member is one cairn process of the cluster (test/proc, shared with the
// chaos harness); args are more flags for its `cairn start`.
type member struct {
	*proc.Node
	args []string
}

// start starts the member's process; with no join addresses, a plain
// `cairn start` (a cluster of one that others can join).
func (m *member) start(t *testing.T, bin string, join []string) {
	t.Helper()
	if err := m.Start(bin, join, m.args...); err != nil {
		t.Fatal(err)
	}
}

func (m *member) kill() { m.Kill() }

// newMembers builds the cairn binary into the test's directory and
// returns n members on fresh loopback addresses, not started, each with
// extra flags args; when the test ends they are killed, and their logs'
// tails are printed if it failed.
func newMembers(t *testing.T, n int, args ...string) (bin string, ms []*member) {
	t.Helper()
	dir := t.TempDir()
	bin = buildCairn(t)
	addrs := freeAddrs(t, 3*n)
	ms = make([]*member, n)
	for i := range ms {
		ms[i] = &member{Node: &proc.Node{Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), RPC: addrs[i], SQL: addrs[n+i], HTTP: addrs[2*n+i]}, args: args}
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.kill()
		}
		if t.Failed() {
			for _, m := range ms {
				b, _ := os.ReadFile(m.Dir + ".log")
				t.Logf("%s:\n%s", m.Dir, tail(string(b), 3000))
			}
		}
	})
	return bin, ms
}

// TestClusterProcesses runs three `cairn start --join` processes on
// loopback and a bank workload over pgwire through every one of them,
// SIGKILLs a random member three times (restarting it on its store each
// time), and then checks through every member that the total balance is
// unchanged and every acknowledged transfer is in the ledger.
func TestClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three processes")
	}
	bin, ms := newMembers(t, 3)
	join := []string{ms[0].RPC, ms[1].RPC, ms[2].RPC}
	for _, m := range ms {
		m.start(t, bin, join)
	}
	ctx := context.Background()
	connect := func(m *member, timeout time.Duration) (*pgx.Conn, error) {
		deadline := time.Now().Add(timeout)
		for {
			c, err := pgx.Connect(ctx, "postgres://postgres@"+m.SQL+"/postgres?sslmode=disable&connect_timeout=2")
			if err == nil {
				return c, nil
			}
			if time.Now().After(deadline) {
				return nil, err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c, err := connect(ms[0], 60*time.Second)
	if err != nil {
		t.Fatalf("connect to node 1: %v", err)
	}
	const accounts, initial = 10, 100
	for _, s := range []string{
		"CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL)",
		"CREATE TABLE ledger (id INT PRIMARY KEY)",
		fmt.Sprintf("INSERT INTO accounts SELECT g, %d FROM generate_series(1, %d) AS g", initial, accounts),
	} {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	c.Close(ctx)

	var (
		mu    sync.Mutex
		acked []int64
		// lastAck and maxGap measure the longest time without any
		// acknowledged transfer (the cluster's worst unavailability).
		lastAck, firstAck time.Time
		maxGap            time.Duration
		failed            int
		seq               atomic.Int64
		stop              atomic.Bool
		down              [3]atomic.Bool
		wg                sync.WaitGroup
	)
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			var conn *pgx.Conn
			for !stop.Load() {
				if conn == nil {
					if down[w].Load() {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					var err error
					if conn, err = connect(ms[w], 2*time.Second); err != nil {
						conn = nil
						continue
					}
				}
				id := seq.Add(1)
				a, b := 1+rng.IntN(accounts), 1+rng.IntN(accounts)
				if a == b {
					continue
				}
				tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := pgx.BeginFunc(tctx, conn, func(tx pgx.Tx) error {
					if _, err := tx.Exec(tctx, "UPDATE accounts SET balance = balance - 1 WHERE id = $1", a); err != nil {
						return err
					}
					if _, err := tx.Exec(tctx, "UPDATE accounts SET balance = balance + 1 WHERE id = $1", b); err != nil {
						return err
					}
					_, err := tx.Exec(tctx, "INSERT INTO ledger VALUES ($1)", id)
					return err
				})
				cancel()
				mu.Lock()
				if err == nil {
					acked = append(acked, id)
					now := time.Now()
					if !lastAck.IsZero() && now.Sub(lastAck) > maxGap {
						maxGap = now.Sub(lastAck)
					}
					if firstAck.IsZero() {
						firstAck = now
					}
					lastAck = now
				} else {
					failed++
				}
				mu.Unlock()
				if err != nil && conn.IsClosed() {
					conn = nil
				}
			}
			if conn != nil {
				conn.Close(ctx)
			}
		})
	}
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitProgress := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for ackedNow() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d transfers acknowledged, waiting for %d", ackedNow(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	kills := 0
	waitProgress(20)
	for range 3 {
		v := rng.IntN(3)
		down[v].Store(true)
		ms[v].kill()
		kills++
		waitProgress(ackedNow() + 10)
		ms[v].start(t, bin, join)
		down[v].Store(false)
		waitProgress(ackedNow() + 10)
	}
	stop.Store(true)
	wg.Wait()

	for i, m := range ms {
		conn, err := connect(m, 60*time.Second)
		if err != nil {
			t.Fatalf("connect to node %d: %v", i+1, err)
		}
		var total, n int
		if err := conn.QueryRow(ctx, "SELECT sum(balance), count(*) FROM accounts").Scan(&total, &n); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		if total != accounts*initial || n != accounts {
			t.Fatalf("node %d: total %d over %d accounts, want %d over %d", i+1, total, n, accounts*initial, accounts)
		}
		rows, err := conn.Query(ctx, "SELECT id FROM ledger")
		if err != nil {
			t.Fatal(err)
		}
		present := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			present[id] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, id := range acked {
			if !present[id] {
				t.Fatalf("node %d: acknowledged transfer %d is not in the ledger", i+1, id)
			}
		}
		conn.Close(ctx)
	}
	t.Logf("%d transfers acknowledged in %s, %d failed or unknown, %d SIGKILLs survived, longest time without an acknowledged transfer %s",
		len(acked), lastAck.Sub(firstAck).Round(time.Millisecond), failed, kills, maxGap.Round(time.Millisecond))
}

func tail(s string, n int) string { return proc.Tail(s, n) }
