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

// TestCatalogLeasesThreeNodes: on a three-node cluster every node answers
// statements under a catalog generation lease, with no catalog read (the
// generation and descriptor counters do not move), and a DDL through one
// node is seen by the very next statement on the others (the DDL revoked
// their leases before it committed).
func TestCatalogLeasesThreeNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Stop(context.Background())
		}
	})
	conns := make([]*pgx.Conn, 3)
	for i, s := range servers {
		c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
		if err != nil {
			t.Fatalf("connect to node %d: %v", i+1, err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close(context.Background()) })
	}
	exec := func(i int, sql string) {
		t.Helper()
		if _, err := conns[i].Exec(ctx, sql); err != nil {
			t.Fatalf("node %d: %s: %v", i+1, sql, err)
		}
	}
	col := func(i int, name string) (v int) {
		t.Helper()
		if err := conns[i].QueryRow(ctx, "SELECT "+name+" FROM t WHERE k = 1").Scan(&v); err != nil {
			t.Fatalf("node %d: reading column %s: %v", i+1, name, err)
		}
		return v
	}
	exec(0, "CREATE TABLE t (k INT PRIMARY KEY, v INT)")
	exec(0, "INSERT INTO t VALUES (1, 10)")

	// Each node's statements ask for a lease; once held, a point SELECT
	// reads no catalog key.
	for i, s := range servers {
		for !s.backend.CatalogLeased() {
			if ctx.Err() != nil {
				gen, _ := s.backend.CatalogStats()
				t.Fatalf("node %d acquired no catalog lease (stats %+v)", i+1, gen)
			}
			col(i, "v")
		}
		gen0, cache0 := s.backend.CatalogStats()
		if v := col(i, "v"); v != 10 {
			t.Fatalf("node %d: v = %d, want 10", i+1, v)
		}
		gen1, cache1 := s.backend.CatalogStats()
		if gen1.Hits <= gen0.Hits || gen1.Reads != gen0.Reads || cache1.Misses != cache0.Misses {
			t.Fatalf("node %d under a lease: generation %+v -> %+v, descriptors %+v -> %+v: want hits only", i+1, gen0, gen1, cache0, cache1)
		}
	}

	// DDL through each node in turn; the other two see it at once.
	for i, name := range []string{"a", "b", "c"} {
		exec(i, fmt.Sprintf("ALTER TABLE t ADD COLUMN %s INT DEFAULT %d", name, i+1))
		for j := range servers {
			if v := col(j, name); v != i+1 {
				t.Fatalf("node %d after node %d added %s: %d, want %d", j+1, i+1, name, v, i+1)
			}
		}
	}
	var revoked uint64
	for _, s := range servers {
		gen, _ := s.backend.CatalogStats()
		revoked += gen.Revoked
	}
	if revoked == 0 {
		t.Fatal("no DDL revoked a lease")
	}
}
