package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSplitQueueSQL: on a node with a small --tablet-split-size, an
// ordinary table loaded past it is split into several tablets by the
// split queue with every row still readable, while a colocated
// database's tablet holding two tables, as large, stays one tablet.
func TestSplitQueueSQL(t *testing.T) {
	const splitSize = 32 << 10
	s, err := Start(context.Background(), Config{Insecure: true, TabletSplitSize: splitSize, TabletSplitQPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	ctx := context.Background()
	pg := connectDB(t, s, "postgres")
	execAll(t, pg, "CREATE DATABASE app WITH colocated = true",
		"CREATE TABLE plain (id int PRIMARY KEY, pad text)",
		"INSERT INTO plain SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 2000) g",
		// Column entries under some rows: a split must keep them with
		// their row.
		"UPDATE plain SET pad = 'z' WHERE id % 7 = 0")
	app := connectDB(t, s, "app")
	execAll(t, app, "CREATE TABLE big (id int PRIMARY KEY, pad text)", "CREATE TABLE small (id int PRIMARY KEY, pad text)",
		"INSERT INTO big SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 2000) g",
		"INSERT INTO small SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 500) g")

	var plain *TableInfo
	var dbs []DatabaseInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := s.eng.Flush(); err != nil {
			t.Fatal(err)
		}
		getJSON(t, s, "/api/databases", &dbs)
		if plain = findTable(dbs, "postgres", "plain"); plain != nil && len(plain.Tablets) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plain has tablets %+v after 30s; split queue %+v", plain, s.store.SplitQueueStats())
		}
		time.Sleep(200 * time.Millisecond)
	}
	var n, sum int64
	if err := pg.QueryRow(ctx, "SELECT count(*), sum(id) FROM plain WHERE pad = 'z' OR length(pad) = 192").Scan(&n, &sum); err != nil || n != 2000 || sum != 2000*2001/2 {
		t.Fatalf("plain after splits: count %d sum %d (%v), want 2000 rows", n, sum, err)
	}
	for _, id := range []int{1, 7, 999, 1001, 2000} {
		var pad string
		if err := pg.QueryRow(ctx, "SELECT pad FROM plain WHERE id = $1", id).Scan(&pad); err != nil || (id%7 == 0) != (pad == "z") {
			t.Fatalf("row %d: %q, %v", id, pad, err)
		}
	}

	if _, _, body := httpGet(t, s, "/metrics"); !strings.Contains(body, "\ncairn_split_queue_splits_by_size_total{node=\"1\"} ") ||
		strings.Contains(body, "\ncairn_split_queue_splits_by_size_total{node=\"1\"} 0\n") {
		t.Errorf("/metrics counts no split by size")
	}

	var appDB *DatabaseInfo
	for i := range dbs {
		if dbs[i].Name == "app" {
			appDB = &dbs[i]
		}
	}
	if appDB == nil || len(appDB.ColocationTablets) != 1 || appDB.ColocationSizeBytes <= splitSize {
		t.Fatalf("app: %+v, want one colocation tablet over %d bytes", appDB, splitSize)
	}
	for _, name := range []string{"big", "small"} {
		if tb := findTable(dbs, "app", name); tb == nil || fmt.Sprint(tb.Tablets) != fmt.Sprint(appDB.ColocationTablets) {
			t.Fatalf("app.%s: %+v, want in tablet %v", name, tb, appDB.ColocationTablets)
		}
	}
	if err := app.QueryRow(ctx, "SELECT (SELECT count(*) FROM big) + (SELECT count(*) FROM small)").Scan(&n); err != nil || n != 2500 {
		t.Fatalf("app: %d rows (%v), want 2500", n, err)
	}
}

// TestSplitByLoadWaitsForSecondNode: a cluster of one does not split by
// load (splitByLoadUseful: both halves would stay on its one node); once
// a second node has joined, both nodes do.
func TestSplitByLoadWaitsForSecondNode(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "")
	if n1.splitByLoadUseful() {
		t.Fatal("a cluster of one would split by load")
	}
	n2 := c.start([]string{c.addrs[1]}, "")
	deadline := time.Now().Add(30 * time.Second)
	for !n1.splitByLoadUseful() || !n2.splitByLoadUseful() {
		if time.Now().After(deadline) {
			t.Fatalf("after a join: node 1 splits by load %v, node 2 %v; want both", n1.splitByLoadUseful(), n2.splitByLoadUseful())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSplitHeldByLoadOnlyAloneInDomain: a node without a region skips a
// split by load for a tablet whose requests hold its lease here only if
// the tablet is alone in its lease domain (aloneInDomain): a bucket of a
// hash-sharded index is not (the balancer keeps an index's tablets
// spread over the nodes, so its load split is of use), a table sharing
// the system tablet is.
func TestSplitHeldByLoadOnlyAloneInDomain(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "")
	execSQL(t, n1, "CREATE TABLE plain (k int PRIMARY KEY, v int)")
	execSQL(t, n1, "CREATE TABLE sharded (k int PRIMARY KEY USING HASH WITH (bucket_count = 4), v int)")
	var buckets []uint64
	waitFor(t, "sharded's four bucket tablets in node 1's directory", 30*time.Second, func() (bool, string) {
		execSQL(t, n1, "SELECT count(*) FROM sharded")
		buckets = zoneTablets(t, n1, "postgres", "sharded")
		return len(buckets) == 4, fmt.Sprintf("%d tablets %v", len(buckets), buckets)
	})
	for _, id := range buckets {
		if n1.aloneInDomain(id) {
			t.Errorf("bucket tablet %d alone in its domain; want it counted with the other buckets %v", id, buckets)
		}
	}
	plain := zoneTablets(t, n1, "postgres", "plain")
	if len(plain) != 1 {
		t.Fatalf("plain in tablets %v, want one", plain)
	}
	if !n1.aloneInDomain(plain[0]) {
		t.Errorf("plain's tablet %d not alone in its domain", plain[0])
	}
}
