package server

import (
	"context"
	"testing"
	"time"
)

// TestSoleCatalogWriterUntilJoin: a cluster of one (its own address as
// Join) answers statements from the in-memory catalog generation; once a
// second node joins, it answers from memory only under a generation
// lease (sql/catalog genlease.go), so a DDL through the new node is seen
// by the first node's next statement; and
// restarted, the first node does not take the in-memory generation back
// (catalogwriter.go, invariants 1–3).
func TestSoleCatalogWriterUntilJoin(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "")
	if !n1.backend.LocalCatalog() {
		t.Fatal("a cluster of one started without the in-memory catalog generation")
	}
	execSQL(t, n1, "CREATE TABLE t (k INT PRIMARY KEY)")
	execSQL(t, n1, "INSERT INTO t VALUES (1)")
	_, _, hits0, _ := n1.backend.PlanStats()
	for range 3 {
		countRows(t, n1, "t")
	}
	_, _, hits1, _ := n1.backend.PlanStats()
	if hits1 < hits0+3 {
		t.Fatalf("generation hits %d -> %d over three statements: not answered from memory", hits0, hits1)
	}

	n2 := c.start([]string{c.addrs[1]}, "")
	if n1.backend.LocalCatalog() || n2.backend.LocalCatalog() {
		t.Fatalf("after a join: node 1 in-memory %v, node 2 %v; want neither", n1.backend.LocalCatalog(), n2.backend.LocalCatalog())
	}
	// A DDL through the new node; the first node's next statement must
	// see it (from memory it would resolve t without v).
	execSQL(t, n2, "ALTER TABLE t ADD COLUMN v INT DEFAULT 7")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, n1)
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != 7 {
		t.Fatalf("node 1 after node 2 added column v: %d, %v; want 7", v, err)
	}

	// Restarted with its own address as Join, the first node finds node
	// 2 in the node table and stays off the in-memory generation.
	addr, dir := c.addrs[1], c.dirs[1]
	c.stop(1)
	n1 = c.startAt(addr, relisten(t, addr), dir, []string{addr}, "")
	if n1.backend.LocalCatalog() {
		t.Fatal("node 1 restarted with the in-memory generation though node 2 is a member")
	}
	execSQL(t, n2, "ALTER TABLE t ADD COLUMN w INT DEFAULT 8")
	conn1 := connect(t, n1)
	defer conn1.Close(ctx)
	if err := conn1.QueryRow(ctx, "SELECT w FROM t WHERE k = 1").Scan(&v); err != nil || v != 8 {
		t.Fatalf("restarted node 1 after node 2 added column w: %d, %v; want 8", v, err)
	}
}
