package distsql_test

// The Citus distributed-table API on three real servers (issue 17):
// create_distributed_table moves a table with data into hash shards
// online as a job, the Citus views describe it, its scans run as one
// fragment per shard with the same answers, router queries stay on one
// tablet, and undistribute_table moves it back.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestCitusAPI(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE events (repo_id INT, id INT, actor TEXT, n INT, PRIMARY KEY (repo_id, id))")
	mustExec(t, c, "CREATE INDEX ON events (actor)")
	mustExec(t, c, "INSERT INTO events SELECT i % 97, i, 'a' || (i % 13), i % 5 FROM generate_series(1, 5000) AS i")
	queries := []string{
		"SELECT repo_id, count(*) FROM events GROUP BY repo_id ORDER BY 2 DESC, 1 LIMIT 10",
		"SELECT count(*), sum(n), min(actor) FROM events",
		"SELECT id, n FROM events WHERE repo_id = 42 ORDER BY id",
		"SELECT id FROM events WHERE actor = 'a7' ORDER BY id LIMIT 5",
	}
	before := answers(t, c, queries)

	// Bad calls change nothing.
	for _, bad := range []struct{ sql, code string }{
		{"SELECT create_distributed_table('events', 'actor')", "42P16"},
		{"SELECT create_distributed_table('events', 'nope')", "42703"},
		{"SELECT create_distributed_table('nosuch', 'repo_id')", "42P01"},
		{"SELECT create_distributed_table('events', 'repo_id', colocate_with => 'other')", "42P01"},
		{"SELECT create_distributed_table('events', 'repo_id', shard_count => 0)", "22023"},
		{"SELECT create_reference_table('nosuch')", "42P01"},
		{"SELECT undistribute_table('events')", "42P16"},
	} {
		_, err := c.Exec(context.Background(), bad.sql)
		if err == nil || !strings.Contains(err.Error(), bad.code) {
			t.Errorf("%s: %v, want %s", bad.sql, err, bad.code)
		}
	}
	if got := rows(t, c, "SELECT count(*) FROM pg_dist_partition"); got[0] != "0" {
		t.Fatalf("after failed calls pg_dist_partition has %v rows", got)
	}

	// Inside a transaction block the online move cannot run.
	mustExec(t, c, "BEGIN")
	if _, err := c.Exec(context.Background(), "SELECT create_distributed_table('events', 'repo_id')"); err == nil || !strings.Contains(err.Error(), "0A000") {
		t.Errorf("in a block: %v, want 0A000", err)
	}
	mustExec(t, c, "ROLLBACK")

	// Another session writes while the table moves; every write is there
	// afterwards.
	stop := writeAlong(connect(t, servers[1]), 100000, func(i int) string {
		return fmt.Sprintf("INSERT INTO events VALUES (%d, %d, 'w', 0)", i%97, i)
	})
	mustExec(t, c, "SET citus.shard_count = 8")
	got := rows(t, c, "SELECT create_distributed_table('events', 'repo_id')")
	n := stop()
	if len(got) != 1 {
		t.Fatalf("create_distributed_table returned %v", got)
	}
	if cnt := rows(t, c, "SELECT count(*) FROM events WHERE id >= 100000"); cnt[0] != fmt.Sprint(n) || n == 0 {
		t.Fatalf("%d concurrent inserts succeeded, %v rows are there", n, cnt)
	}
	t.Logf("%d rows inserted by another session during the move", n)
	mustExec(t, c, "DELETE FROM events WHERE id >= 100000")
	// It ran as a job.
	if got := rows(t, c, "SELECT count(*) FROM cairn_catalog.jobs WHERE status = 'succeeded' AND description LIKE '%create_distributed_table%'"); got[0] != "1" {
		jobs := rows(t, c, "SHOW JOBS")
		t.Errorf("no succeeded job for the distribution: %v", jobs)
	}
	sameAnswers(t, c, "after distribution", queries, before)
	if got := rows(t, c, "SELECT concat_ws(' ', logicalrelid::text, partmethod::text, repmodel::text) FROM pg_dist_partition"); strings.Join(got, ";") != "events h s" {
		t.Errorf("pg_dist_partition: %v", got)
	}
	if got := rows(t, c, "SELECT concat_ws(' ', table_name::text, citus_table_type, distribution_column, shard_count) FROM citus_tables"); strings.Join(got, ";") != "events distributed repo_id 8" {
		t.Errorf("citus_tables: %v", got)
	}
	if got := rows(t, c, "SELECT concat_ws(' ', count(*), min(shardminvalue::int), max(shardmaxvalue::int)) FROM pg_dist_shard"); strings.Join(got, ";") != "8 0 65535" {
		t.Errorf("pg_dist_shard: %v", got)
	}
	// Every shard is on a node and holds some bytes.
	if got := rows(t, c, "SELECT count(*), count(nodename), min(shard_size) > 0 FROM citus_shards WHERE nodename LIKE 'n_'"); strings.Join(got, ";") != "8 8 true" {
		t.Errorf("citus_shards: %v (%v)", got, rows(t, c, "SELECT shardid, nodename, shard_size FROM citus_shards"))
	}
	if got := rows(t, c, "SELECT shardcount FROM pg_dist_colocation"); strings.Join(got, ";") != "8" {
		t.Errorf("pg_dist_colocation: %v", got)
	}
	if got := rows(t, c, "SELECT count(DISTINCT tablet_id) FROM cairn_catalog.tablets WHERE table_name = 'events' AND index_name IS NULL"); got[0] != "8" {
		t.Errorf("events is in %v tablets, want 8", got)
	}
	// A scan of the whole table runs one fragment per shard, each
	// shipping one row per group it holds.
	mustExec(t, c, "SET distsql = on")
	plan := strings.Join(rows(t, c, "EXPLAIN ANALYZE "+queries[0]), "\n")
	if st := fragmentStats(plan); len(st) != 8 {
		t.Errorf("%d fragments for 8 shards:\n%s", len(st), plan)
	} else {
		for _, f := range st {
			if f.rows > 97 {
				t.Errorf("a fragment shipped %d rows for 97 groups", f.rows)
			}
		}
	}
	// The distribution column fixed: a router query on one tablet.
	plan = strings.Join(rows(t, c, "EXPLAIN ANALYZE "+queries[2]), "\n")
	if strings.Contains(plan, "Distribution") || !strings.Contains(plan, "to 1 tablet") {
		t.Errorf("router query:\n%s", plan)
	}
	t.Logf("router query:\n%s", plan)

	mustExec(t, c, "SELECT alter_distributed_table('events', distribution_column => 'repo_id', shard_count => 4)")
	if got := rows(t, c, "SELECT shard_count FROM citus_tables"); strings.Join(got, ";") != "4" {
		t.Errorf("shard_count after alter_distributed_table: %v", got)
	}
	sameAnswers(t, c, "after alter_distributed_table", queries, before)

	mustExec(t, c, "SELECT undistribute_table('events')")
	if got := rows(t, c, "SELECT count(*) FROM citus_tables"); got[0] != "0" {
		t.Errorf("citus_tables after undistribute_table: %v", got)
	}
	sameAnswers(t, c, "after undistribute_table", queries, before)
}

// TestDistributeConcurrentlyOnline: create_distributed_table_concurrently
// of a table with 20,000 rows on three nodes is an online job: while it
// runs, another session's INSERTs all succeed, a third session's reads
// keep answering the table's rows exactly, and a fourth sees the job
// running in cairn_catalog.jobs (SHOW JOBS) with its progress growing,
// some of it strictly between 0 and 1; afterwards the table is
// distributed with every row.
func TestDistributeConcurrentlyOnline(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE events (repo_id INT, id INT, actor TEXT, PRIMARY KEY (repo_id, id))")
	mustExec(t, c, "INSERT INTO events SELECT i % 97, i, 'a' || (i % 13) FROM generate_series(1, 20000) AS i")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	// Writes.
	var wrote atomic.Int64
	w := connect(t, servers[1])
	wg.Go(func() {
		for i := 100_000; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.Exec(ctx, fmt.Sprintf("INSERT INTO events VALUES (%d, %d, 'w')", i%97, i)); err != nil {
				errs <- fmt.Errorf("insert %d: %w", i, err)
				return
			}
			wrote.Add(1)
		}
	})
	// Reads: the rows that were there before always answer the same.
	var reads atomic.Int64
	r := connect(t, servers[2])
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n, sum int64
			if err := r.QueryRow(ctx, "SELECT count(*), sum(id) FROM events WHERE id <= 20000").Scan(&n, &sum); err != nil {
				errs <- fmt.Errorf("read: %w", err)
				return
			}
			if n != 20000 || sum != 20000*20001/2 {
				errs <- fmt.Errorf("read %d rows summing to %d during the move", n, sum)
				return
			}
			reads.Add(1)
		}
	})
	// The job's progress as another session sees it.
	var mu sync.Mutex
	var seen []float64
	watch := connect(t, servers[1])
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var f float64
			err := watch.QueryRow(ctx, "SELECT fraction_completed FROM cairn_catalog.jobs WHERE status = 'running' AND description LIKE '%create_distributed_table_concurrently%'").Scan(&f)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				errs <- fmt.Errorf("watcher: %w", err)
				return
			}
			mu.Lock()
			seen = append(seen, f)
			mu.Unlock()
		}
	})
	mustExec(t, c, "SELECT create_distributed_table_concurrently('events', 'repo_id', shard_count => 8)")
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if wrote.Load() == 0 || reads.Load() == 0 {
		t.Errorf("during the move: %d inserts, %d reads", wrote.Load(), reads.Load())
	}
	mid := 0
	for i, f := range seen {
		if i > 0 && f < seen[i-1] {
			t.Errorf("progress went back: %v", seen)
			break
		}
		if f > 0 && f < 1 {
			mid++
		}
	}
	t.Logf("%d inserts and %d reads during the move; progress seen: %d readings, %d strictly between 0 and 1", wrote.Load(), reads.Load(), len(seen), mid)
	if mid == 0 {
		t.Errorf("no progress strictly between 0 and 1 was seen: %v", seen)
	}
	if got := rows(t, c, "SELECT concat_ws(' ', table_name::text, citus_table_type, distribution_column, shard_count) FROM citus_tables"); strings.Join(got, ";") != "events distributed repo_id 8" {
		t.Errorf("citus_tables: %v", got)
	}
	if got := rows(t, c, "SELECT count(*) FROM events"); got[0] != strconv.FormatInt(20000+wrote.Load(), 10) {
		t.Errorf("%v rows after the move, want %d", got, 20000+wrote.Load())
	}
	if got := rows(t, c, "SELECT count(*) FROM cairn_catalog.jobs WHERE status = 'succeeded' AND fraction_completed = 1 AND description LIKE '%create_distributed_table_concurrently%'"); got[0] != "1" {
		t.Errorf("jobs: %v", rows(t, c, "SHOW JOBS"))
	}
}

// TestAlterDistributedTableCascade: alter_distributed_table(...,
// cascade_to_colocated => true) on three nodes changes the shard count of
// the whole colocation group, as Citus does: the tables colocated with
// the altered one follow it into the same new tablets, keep every row,
// and their join on the distribution column still runs tablet by tablet,
// now in as many fragments as the new shard count.
func TestAlterDistributedTableCascade(t *testing.T) {
	servers := startServers(t)
	c := connect(t, servers[0])
	mustExec(t, c, "CREATE TABLE orders (tenant INT, id INT, v INT, PRIMARY KEY (tenant, id))")
	mustExec(t, c, "CREATE TABLE lines (tenant INT, n INT, qty INT, PRIMARY KEY (tenant, n))")
	mustExec(t, c, "INSERT INTO orders SELECT i % 97, i, i FROM generate_series(1, 2000) AS i")
	mustExec(t, c, "INSERT INTO lines SELECT i % 97, i, i % 11 FROM generate_series(1, 4000) AS i")
	mustExec(t, c, "SELECT create_distributed_table('orders', 'tenant', shard_count => 4, colocate_with => 'none')")
	mustExec(t, c, "SELECT create_distributed_table('lines', 'tenant', colocate_with => 'orders')")
	join := "SELECT count(*), sum(o.v), sum(l.qty) FROM orders o JOIN lines l ON o.tenant = l.tenant"
	before := strings.Join(rows(t, c, join), ",")

	if _, err := c.Exec(context.Background(), "SELECT alter_distributed_table('orders', shard_count => 8)"); err == nil || !strings.Contains(err.Error(), "22023") {
		t.Fatalf("a new shard count of a table with colocated tables, no cascade_to_colocated: %v, want 22023", err)
	}
	mustExec(t, c, "SELECT alter_distributed_table('orders', shard_count => 8, cascade_to_colocated => true)")
	if got := strings.Join(rows(t, c, "SELECT concat_ws(' ', table_name::text, shard_count) FROM citus_tables ORDER BY 1"), ","); got != "lines 8,orders 8" {
		t.Errorf("citus_tables after the cascade: %s", got)
	}
	if got := rows(t, c, "SELECT count(DISTINCT colocation_id) FROM citus_tables"); got[0] != "1" {
		t.Errorf("%s colocation groups after the cascade, want 1", got[0])
	}
	tabletsOf := func(table string) string {
		return strings.Join(rows(t, c, "SELECT tablet_id FROM cairn_catalog.tablets WHERE table_name = '"+table+"' AND index_name IS NULL ORDER BY 1"), ",")
	}
	if o, l := tabletsOf("orders"), tabletsOf("lines"); o != l || strings.Count(o, ",") != 7 {
		t.Errorf("orders in tablets %s, lines in %s: want the same 8", o, l)
	}
	if got := strings.Join(rows(t, c, join), ","); got != before {
		t.Errorf("join after the cascade: %s, before: %s", got, before)
	}
	mustExec(t, c, "ANALYZE orders")
	mustExec(t, c, "ANALYZE lines")
	mustExec(t, c, "SET distsql = on")
	plan := strings.Join(rows(t, c, "EXPLAIN ANALYZE "+join), "\n")
	if !strings.Contains(plan, "Join: colocated") || len(fragmentStats(plan)) != 8 {
		t.Errorf("the join after the cascade, %d fragments:\n%s", len(fragmentStats(plan)), plan)
	}
}
