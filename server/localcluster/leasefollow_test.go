package localcluster

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/jackc/pgx/v5"
)

// TestLeaseFollowsOneShell is issue #22's demo case: `cairn demo --nodes
// 3 --global` (the seed's regions and round trips, default lease
// preferences), the demo's customers table, its lease in eu, and one
// client on the us-west node sending point SELECTs one after another, as
// a psql shell does (about 7 a second while each crosses the 145 ms
// round trip). Within the minute the lease moves to the us-west
// node, and it stays there while the client goes on.
//
// The table shares its tablet with the system catalog, which every node's
// own loops read and write (liveness, generation leases, jobs): while
// those were counted as the tablet's load, the one shell in us-west never
// had the share that draws a lease, and the lease stayed in eu for good.
// Only clients' requests are counted now (kv.WithClientRequests).
func TestLeaseFollowsOneShell(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster with the seed's round trips")
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 3, Global: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	if c.Regions[0] != "us-west" || c.Regions[2] != "eu" {
		t.Fatalf("regions %v: want node 1 in us-west and node 3 in eu", c.Regions)
	}
	conn, err := pgx.Connect(ctx, c.URL(0, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`CREATE TABLE customers (id INT PRIMARY KEY, name TEXT NOT NULL, city TEXT)`,
		`INSERT INTO customers VALUES (1, 'Ada', 'London'), (2, 'Grace', 'New York'), (3, 'Linus', 'Helsinki')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var tablet int64
	if err := conn.QueryRow(ctx, `SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = 'customers'`).Scan(&tablet); err != nil {
		t.Fatal(err)
	}
	// holder is the index of the node holding the lease (-1: none now,
	// during an election or a transfer).
	holder := func() int {
		for i, n := range c.Nodes {
			if r := n.Replica(kvpb.TabletID(tablet)); r != nil && r.HoldsLease() {
				return i
			}
		}
		return -1
	}
	// The lease to eu, where the demo found it. Nothing reads
	// customers meanwhile, so no client request draws it back.
	eu := c.Nodes[2].NodeID()
	deadline := time.Now().Add(30 * time.Second)
	for holder() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("tablet %d's lease not in eu after 30s (holder: node index %d)", tablet, holder())
		}
		if h := holder(); h >= 0 {
			if err := c.Nodes[h].TransferLease(kvpb.TabletID(tablet), eu); err != nil {
				t.Logf("transfer to eu: %v", err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// point runs one point SELECT from the shell's node.
	n := 0
	point := func() {
		t.Helper()
		n++
		var name, city string
		if err := conn.QueryRow(ctx, `SELECT name, city FROM customers WHERE id = $1`, n%3+1).Scan(&name, &city); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for holder() != 0 {
		if time.Since(start) > time.Minute {
			t.Fatalf("tablet %d's lease still on node index %d after a minute of %d point SELECTs from us-west", tablet, holder(), n)
		}
		point()
	}
	t.Logf("the lease moved to us-west after %d point SELECTs (%v)", n, time.Since(start).Round(time.Millisecond))
	// The shell goes on: the lease stays (held nowhere for a moment at
	// most, if the machine's load costs it an election).
	until := time.Now().Add(5 * time.Second)
	for time.Now().Before(until) {
		point()
		if h := holder(); h > 0 {
			t.Fatalf("the lease left us-west for node index %d under the shell's requests", h)
		}
	}
}
