package localcluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestSQLScanReadsNextTabletAhead: on a three-region cluster whose leases
// are all in us-east (node 2), a table of three tablets is read from
// node 1 (us-west, 60 ms away) without distsql: count(*) at the tablets
// and a full ordered SELECT walk the tablets one after the other, and
// node 1 asks for each next tablet while the current one is read (kv's
// dist_sender_prefetch.go; the KV test
// testcluster.TestClusterScanReadsNextTabletAhead shows the overlap
// itself). The answers are exact and in order, and node 1's router used
// answers read ahead.
func TestSQLScanReadsNextTabletAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-region cluster")
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 3, Global: true, LeasePreferences: "region=us-east", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	conn := dial(t, ctx, c, 0)
	mustExec(t, ctx, conn, `CREATE TABLE t (k int PRIMARY KEY, v text)`)
	mustExec(t, ctx, conn, `INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3000) AS i`)
	db := c.Nodes[0].DB()
	kvs, err := db.Scan(ctx, []byte("\x03"), []byte("\x04"), 0)
	if err != nil || len(kvs) < 3000 {
		t.Fatalf("user KVs: %d, %v", len(kvs), err)
	}
	for _, at := range []int{len(kvs) / 3, 2 * len(kvs) / 3} {
		ba := &kvpb.BatchRequest{}
		ba.Add(&kvpb.SplitRequest{SplitKey: kvs[at].Key})
		if _, err := db.Send(ctx, ba); err != nil {
			t.Fatalf("split: %v", err)
		}
	}
	ids := tabletsOf(t, ctx, conn, "t")
	if len(ids) < 3 {
		t.Fatalf("table t has tablets %v, want 3", ids)
	}
	waitLeasesIn(t, c, 1, ids)
	mustExec(t, ctx, conn, `SET distsql = off`)

	var want strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "%d v%d\n", i, i)
	}
	sent0, used0 := db.ScanPrefetches()
	// The first round teaches node 1 where the leases are; the later
	// ones read ahead.
	for round := range 3 {
		if got := query1(t, ctx, conn, `SELECT count(*) FROM t`); got != "3000" {
			t.Fatalf("round %d: count(*) = %s", round, got)
		}
		rows, err := conn.Query(ctx, `SELECT k, v FROM t ORDER BY k`)
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for rows.Next() {
			var k int64
			var v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&got, "%d %s\n", k, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("round %d: SELECT k, v FROM t ORDER BY k returned %d bytes, not the 3000 rows in order", round, got.Len())
		}
	}
	sent, used := db.ScanPrefetches()
	if used == used0 {
		t.Fatalf("node 1 used no answer read ahead over tablets %v led by node 2", ids)
	}
	t.Logf("tablets %v: %d prefetches sent, %d used", ids, sent-sent0, used-used0)
}
