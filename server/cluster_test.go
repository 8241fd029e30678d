package server

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestThreeNodeCluster starts three members of one replicated cluster in
// this process and uses each as a SQL gateway: a table created and
// written through node 1 is read through nodes 2 and 3, and a write
// through node 3 is read through node 1. Then node 1 stops and the other
// two keep serving reads and writes.
func TestThreeNodeCluster(t *testing.T) {
	ctx := context.Background()
	var lns []net.Listener
	var join []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		join = append(join, ln.Addr().String())
	}
	// Members start together: none can bootstrap the catalog without a
	// quorum.
	servers := make([]*Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			servers[i], errs[i] = Start(ctx, Config{Insecure: true, Join: join, RPCAddr: join[i], RPCListener: lns[i], Logger: quiet()})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	stopped := make([]bool, 3)
	defer func() {
		for i, s := range servers {
			if !stopped[i] {
				_ = s.Stop(ctx)
			}
		}
	}()
	conn := func(i int) *pgx.Conn {
		c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", servers[i].Addr()))
		if err != nil {
			t.Fatalf("connect to node %d: %v", i+1, err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	c1, c2, c3 := conn(0), conn(1), conn(2)
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(c *pgx.Conn) int {
		t.Helper()
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatalf("count: %v", err)
		}
		return n
	}
	exec(c1, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)")
	exec(c1, "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 100) AS g")
	if n := count(c2); n != 100 {
		t.Fatalf("node 2 sees %d rows, want 100", n)
	}
	exec(c3, "INSERT INTO t VALUES (101, 'from node 3')")
	if n := count(c1); n != 101 {
		t.Fatalf("node 1 sees %d rows, want 101", n)
	}

	// Lose node 1: the others elect leaseholders and go on.
	c1.Close(ctx)
	if err := servers[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped[0] = true
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c2.Exec(cctx, "INSERT INTO t VALUES (102, 'after node 1 stopped')"); err != nil {
		t.Fatalf("insert after stopping node 1: %v", err)
	}
	if n := count(c3); n != 102 {
		t.Fatalf("node 3 sees %d rows, want 102", n)
	}
}

// TestSideloadEnabledByDefault: side-loading is on unless the environment
// turns it off.
func TestSideloadEnabledByDefault(t *testing.T) {
	for _, c := range []struct {
		env  string
		want bool
	}{{"", true}, {"on", true}, {"off", false}} {
		t.Setenv("CAIRN_RAFT_SIDELOAD", c.env)
		if got := SideloadEnabled(); got != c.want {
			t.Errorf("CAIRN_RAFT_SIDELOAD=%q: side-loading %v, want %v", c.env, got, c.want)
		}
	}
}
