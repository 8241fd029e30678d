package localcluster

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestTabletsViewListsEveryTablet: on four nodes at three replicas per
// tablet, every node lacks some tablets, and cairn_catalog.tablets must
// still list every tablet of the cluster through every node (a tablet the
// node holds no replica of is described by its leaseholder), with the
// replicas and leader its leaseholder knows. The view used to read only
// the asking node's own replicas, so a node listed just the tablets it
// happened to hold.
func TestTabletsViewListsEveryTablet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a four-node cluster")
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 4, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	conns := make([]*pgx.Conn, len(c.Nodes))
	for i := range c.Nodes {
		if conns[i], err = pgx.Connect(ctx, c.URL(i, "postgres")); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close(ctx)
	}
	if _, err := conns[0].Exec(ctx, `CREATE TABLE t (k int PRIMARY KEY, v int) WITH (cairn_split_tablets = 8)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conns[0].Exec(ctx, `INSERT INTO t SELECT g, g FROM generate_series(1, 800) AS g`); err != nil {
		t.Fatal(err)
	}
	type tabletRow struct {
		ID       int64
		Replicas []int32
	}
	list := func(conn *pgx.Conn) []tabletRow {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT tablet_id, replicas FROM cairn_catalog.tablets
			WHERE table_name = 't' ORDER BY tablet_id`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[tabletRow])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The cluster starts with every member a voter of every tablet; the
	// replicate queue takes each down to three. Wait until node 1 sees
	// every tablet of t at three replicas and some node is missing from
	// one of them.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := list(conns[0])
		missing := false
		three := len(got) == 8
		for _, r := range got {
			three = three && len(r.Replicas) == 3
			missing = missing || len(r.Replicas) < len(c.Nodes)
		}
		if three && missing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("t's tablets through node 1 after 3 minutes: %v, want 8 tablets of 3 replicas each", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	want := list(conns[0])
	ids := func(rs []tabletRow) []int64 {
		out := make([]int64, len(rs))
		for i, r := range rs {
			out[i] = r.ID
		}
		return out
	}
	for i, conn := range conns {
		got := list(conn)
		if !slices.Equal(ids(got), ids(want)) {
			t.Errorf("node %d lists t's tablets %v, node 1 lists %v", i+1, ids(got), ids(want))
		}
		held := 0
		for _, r := range got {
			if slices.Contains(r.Replicas, int32(i+1)) {
				held++
			}
		}
		t.Logf("node %d: %d of t's %d tablets listed, %d held", i+1, len(got), len(want), held)
	}
	// The whole view covers the keyspace once: the tablets' spans chain,
	// every end but the last is another tablet's start and every start
	// but the first another's end, and no two start at the same key.
	// (The printed keys do not sort in key order, so no ORDER BY.)
	for i, conn := range conns {
		var tablets, starts, unmatchedEnds, unmatchedStarts int
		if err := conn.QueryRow(ctx, `WITH d AS (SELECT DISTINCT tablet_id, start_key, end_key FROM cairn_catalog.tablets)
			SELECT (SELECT count(*) FROM d), (SELECT count(DISTINCT start_key) FROM d),
				(SELECT count(*) FROM d WHERE end_key NOT IN (SELECT start_key FROM d)),
				(SELECT count(*) FROM d WHERE start_key NOT IN (SELECT end_key FROM d))`).Scan(&tablets, &starts, &unmatchedEnds, &unmatchedStarts); err != nil {
			t.Fatal(err)
		}
		if starts != tablets || unmatchedEnds != 1 || unmatchedStarts != 1 {
			t.Errorf("node %d: %d tablets, %d distinct starts, %d ends that start no tablet, %d starts that end none; want the spans to chain (1 and 1)",
				i+1, tablets, starts, unmatchedEnds, unmatchedStarts)
		}
	}
}
