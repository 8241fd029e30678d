package server

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// zoneTablets lists the tablets holding table's rows (cairn_catalog.tablets)
// in database db, read through s.
func zoneTablets(t *testing.T, s *Server, db, table string) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connectDB(t, s, db)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT DISTINCT tablet_id FROM cairn_catalog.tablets WHERE database_name = $1 AND table_name = $2 AND index_name IS NULL", db, table)
	if err != nil {
		t.Fatalf("tablets of %s.%s: %v", db, table, err)
	}
	var out []uint64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, uint64(id))
	}
	if err := rows.Err(); err != nil || len(out) == 0 {
		t.Fatalf("tablets of %s.%s: %v (%d tablets)", db, table, err, len(out))
	}
	return out
}

// leaders returns the node holding the lease of each tablet (0: none).
func (c *memberCluster) leaders(ids []uint64) map[uint64]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uint64]uint64{}
	for _, id := range ids {
		out[id] = 0
		for nid, s := range c.nodes {
			if rep := s.repl.raft.Replica(id); rep != nil {
				if term, _ := rep.Lease(); term != 0 {
					out[id] = nid
				}
			}
		}
	}
	return out
}

// waitFor polls cond until it holds or timeout passes (then fails with
// what it last said).
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within %s; last: %s", what, timeout, last)
}

// TestZones: three nodes in regions a, b and c (replication factor 3).
// A table configured with num_replicas = 1 converges to one voter while
// another keeps three, and a database whose zone prefers region b gets
// the leases of its tables (one created after the setting) on node 2;
// after DISCARD the first table is back to three voters.
func TestZones(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "region=a")
	join := []string{c.addrs[1]}
	c.start(join, "region=b")
	c.start(join, "region=c")
	// Up-replicated first: a tablet not yet at three voters would pass
	// the one-voter check below without any zone.
	c.waitPlacement("three voters", 30*time.Second, sameNodes(1, 2, 3))
	execSQL(t, n1, "CREATE TABLE one (k INT PRIMARY KEY)")
	execSQL(t, n1, "CREATE TABLE three (k INT PRIMARY KEY)")
	execSQL(t, n1, "ALTER TABLE one CONFIGURE ZONE USING num_replicas = 1")
	execSQL(t, n1, "CREATE DATABASE geo")
	execSQL(t, n1, "ALTER DATABASE geo CONFIGURE ZONE USING lease_preferences = '[[+region=b], [+region=c]]'")
	ctx := context.Background()
	geo := connectDB(t, n1, "geo")
	defer geo.Close(ctx)
	if _, err := geo.Exec(ctx, "CREATE TABLE g (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	// three's group is split off too, so its tablets are its own.
	execSQL(t, n1, "ALTER TABLE three CONFIGURE ZONE USING num_replicas = 5")

	one, three, g := zoneTablets(t, n1, "postgres", "one"), zoneTablets(t, n1, "postgres", "three"), zoneTablets(t, n1, "geo", "g")
	if slices.ContainsFunc(one, func(id uint64) bool { return slices.Contains(three, id) }) {
		t.Fatalf("tables one %v and three %v share a tablet", one, three)
	}
	voters := func(ids []uint64, want int) func() (bool, string) {
		return func() (bool, string) {
			p := c.placement()
			for _, id := range ids {
				if vl, ok := p[id]; !ok || len(vl[0]) != want || len(vl[1]) != 0 {
					return false, fmt.Sprintf("tablet %d: %v", id, p[id])
				}
			}
			return true, ""
		}
	}
	// num_replicas = 5 on three nodes is three voters.
	waitFor(t, "table one at one voter", 60*time.Second, voters(one, 1))
	waitFor(t, "table three at three voters", 60*time.Second, voters(three, 3))
	waitFor(t, "database geo's leases in region b", 60*time.Second, func() (bool, string) {
		l := c.leaders(g)
		for _, n := range l {
			if n != 2 {
				return false, fmt.Sprint(l)
			}
		}
		return true, ""
	})
	if n := countRows(t, c.nodes[3], "one"); n != 0 {
		t.Fatalf("table one has %d rows, want 0", n)
	}
	execSQL(t, c.nodes[3], "INSERT INTO one VALUES (1)")
	if n := countRows(t, n1, "one"); n != 1 {
		t.Fatalf("table one has %d rows after an insert, want 1", n)
	}
	execSQL(t, n1, "ALTER TABLE one CONFIGURE ZONE DISCARD")
	waitFor(t, "table one back at three voters", 60*time.Second, voters(one, 3))
}
