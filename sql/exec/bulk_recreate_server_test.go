package exec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/workload/githubevents"
)

// TestBulkCopyRecreated: bench/parallelindex's sequence (COPY into a
// fresh table, CREATE INDEX USING GIN, DROP, CREATE again with the GIN
// index, COPY), looped, for a regular and a distributed table, with and
// without the GIN index. Each COPY into the table created empty in an
// earlier statement takes the bulk path for an existing table
// (bulkLoadExisting: a new descriptor version) and must succeed: nothing
// but the COPY writes the table meanwhile. The 40001 the benchmark met
// in this sequence came from the transaction cleanup aborting a COPY of
// over a minute whose heartbeats a loaded disk held up
// (store.TestTxnCleanupSparesSlowHeartbeats shows that mechanism); on an
// idle machine this test passed on the code before that fix too.
func TestBulkCopyRecreated(t *testing.T) {
	if testing.Short() {
		t.Skip("a loop of loads")
	}
	s, url := startNode(t, t.TempDir())
	c := connect(t, url)
	ctx := context.Background()
	exec(t, c, "SET sql.stats.automatic_collection.enabled = off")
	const rows = 3000
	for _, tc := range []struct {
		name        string
		distributed bool
		gin         bool
	}{
		{"distributed_gin", true, true},
		{"distributed", true, false},
		{"regular_gin", false, true},
		{"regular", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := "ev_" + tc.name
			create := func(withGIN bool) {
				t.Helper()
				exec(t, c, "DROP TABLE IF EXISTS "+table)
				exec(t, c, githubevents.DDL(table))
				if tc.distributed {
					// A group of its own, as bench/parallelindex's (an
					// empty table in a group holding rows:
					// TestBulkCopyEmptyInBusyGroup).
					exec(t, c, fmt.Sprintf("SELECT create_distributed_table('%s', 'repo_id', shard_count => 8, colocate_with => 'none')", table))
				}
				if withGIN {
					exec(t, c, fmt.Sprintf("CREATE INDEX %s_payload ON %s USING GIN (payload)", table, table))
				}
			}
			load := func(round int, what string) {
				t.Helper()
				v := tableDesc(t, s, c, table).Version
				if err := githubevents.Copy(ctx, c, table, 0, rows); err != nil {
					t.Fatalf("round %d, %s: %v", round, what, err)
				}
				if got := tableDesc(t, s, c, table).Version; got != v+1 {
					t.Fatalf("round %d, %s: descriptor version %d to %d: the COPY into the empty table did not load in bulk", round, what, v, got)
				}
				var n int64
				if err := c.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != rows {
					t.Fatalf("round %d, %s: %d rows, %v", round, what, n, err)
				}
			}
			for round := range 2 {
				create(false)
				load(round, "COPY into a fresh table")
				if tc.gin {
					exec(t, c, fmt.Sprintf("CREATE INDEX %s_payload ON %s USING GIN (payload)", table, table))
				}
				create(tc.gin)
				load(round, "COPY into the table re-created")
			}
		})
	}
}

// TestBulkCopyColocatedWriter: a COPY into an empty distributed table
// decides emptiness by a read of the table's whole group (its primary
// index spreads over the group's buckets), which a table colocated with
// it shares. That read must not be one a SERIALIZABLE transaction's
// commit refreshes: a row committed meanwhile into the colocated table
// (no conflict with the load) would then fail the COPY's transaction
// with 40001 once its commit timestamp moved above that row (here: a
// write of the same transaction pushed by another session's read), and
// the refresh would read every row and entry the load wrote.
func TestBulkCopyColocatedWriter(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	c, other := connect(t, url), connect(t, url)
	exec(t, c, "CREATE TABLE ca (id int8 PRIMARY KEY, v int8)")
	exec(t, c, "CREATE TABLE cb (id int8 PRIMARY KEY, v int8)")
	exec(t, c, "CREATE TABLE cz (id int8 PRIMARY KEY)")
	exec(t, c, "SELECT create_distributed_table('ca', 'id', shard_count => 4)")
	exec(t, c, "SELECT create_distributed_table('cb', 'id', colocate_with => 'ca')")
	if a, b := tableDesc(t, s, c, "ca"), tableDesc(t, s, c, "cb"); a.GroupID != b.GroupID {
		t.Fatalf("ca and cb are not colocated: groups %d and %d", a.GroupID, b.GroupID)
	}
	v := tableDesc(t, s, c, "ca").Version
	// SERIALIZABLE: a READ COMMITTED transaction (the default) refreshes
	// nothing at commit.
	exec(t, c, "BEGIN ISOLATION LEVEL SERIALIZABLE")
	var data strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&data, "%d,%d\n", i, i%13)
	}
	if _, err := copyIn(c, "ca (id, v)", data.String()); err != nil {
		t.Fatal(err)
	}
	exec(t, other, "INSERT INTO cb VALUES (1, 1)")
	exec(t, other, "SELECT * FROM cz WHERE id = 1")
	exec(t, c, "INSERT INTO cz VALUES (1)")
	if _, err := c.Exec(context.Background(), "COMMIT"); err != nil {
		t.Fatalf("COMMIT of the COPY after a colocated table's row: %v", err)
	}
	if got := tableDesc(t, s, c, "ca").Version; got != v+1 {
		t.Fatalf("ca's descriptor went from version %d to %d: the COPY did not load in bulk", v, got)
	}
	var n int64
	if err := c.QueryRow(context.Background(), "SELECT (SELECT count(*) FROM ca) + (SELECT count(*) FROM cb) * 1000000").Scan(&n); err != nil || n != 1005000 {
		t.Fatalf("ca has %d rows, cb %d (%v), want 5000 and 1", n%1000000, n/1000000, err)
	}
}

// TestBulkCopyEmptyInBusyGroup: a COPY into an empty table whose group
// holds another table's rows (a distributed table colocated with a
// non-empty one; a table of a colocated database) loads in bulk: the
// emptiness probes look at the table's own primary index, per bucket for
// a distributed table (bulk.go, probePrimary). Writers of the other
// table, one pending across the COPY and one writing throughout, all
// commit and none of their rows is lost; a COPY that fails late leaves
// neither a row nor a key of the table in the group.
func TestBulkCopyEmptyInBusyGroup(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	ctx := context.Background()
	admin := connect(t, url)
	exec(t, admin, "CREATE DATABASE colo WITH colocated = true")
	for _, tc := range []struct {
		name   string
		url    string
		create func(c *pgx.Conn, full, empty string)
	}{
		{"distributed", url, func(c *pgx.Conn, full, empty string) {
			exec(t, c, fmt.Sprintf("SELECT create_distributed_table('%s', 'id', shard_count => 8, colocate_with => 'none')", full))
			exec(t, c, fmt.Sprintf("SELECT create_distributed_table('%s', 'id', colocate_with => '%s')", empty, full))
		}},
		{"colocated_database", strings.Replace(url, "/postgres?", "/colo?", 1), func(*pgx.Conn, string, string) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, pending, writer := connect(t, tc.url), connect(t, tc.url), connect(t, tc.url)
			full, empty := "full_"+tc.name, "empty_"+tc.name
			for _, tb := range []string{full, empty} {
				exec(t, c, fmt.Sprintf(ddl, tb))
			}
			tc.create(c, full, empty)
			if a, b := tableDesc(t, s, c, full), tableDesc(t, s, c, empty); a.GroupID != b.GroupID {
				t.Fatalf("%s and %s are not in one group: %d and %d", full, empty, a.GroupID, b.GroupID)
			}
			exec(t, c, fmt.Sprintf("INSERT INTO %s (id, a, b) SELECT i, i, 'r' || i FROM generate_series(1, 2000) AS i", full))

			// A COPY that fails late: nothing of it stays, in SQL or in
			// storage.
			v := tableDesc(t, s, c, empty).Version
			if _, err := copyIn(c, empty+" (id, a, b)", csvRows(30000, 25000, 0)); sqlState(err) != "22P02" {
				t.Fatalf("COPY with a bad row: %v, want 22P02", err)
			}
			if n, _ := stats(t, c, empty); n != 0 || tableDesc(t, s, c, empty).Version != v {
				t.Fatalf("after a failed COPY: %d rows, version %d (was %d)", n, tableDesc(t, s, c, empty).Version, v)
			}
			id := uint32(tableDesc(t, s, c, empty).ID)
			group := tableDesc(t, s, c, empty).GroupID
			keysOf := func() int {
				t.Helper()
				sp := rowenc.GroupSpan(group)
				kvs, err := s.DB().Scan(ctx, sp.Key, sp.EndKey, 0)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, kv := range kvs {
					if p, _, err := rowenc.DecodeKeyPrefix(kv.Key); err == nil && p.Table == id {
						n++
					}
				}
				return n
			}
			// The failed load's storage is cleared once its transaction
			// ended, in the background (sql/bulkclean).
			for deadline := time.Now().Add(30 * time.Second); keysOf() != 0; {
				if time.Now().After(deadline) {
					t.Fatalf("the failed COPY left %d keys of %s in the group", keysOf(), empty)
				}
				time.Sleep(10 * time.Millisecond)
			}

			// A writer of the other table pending across the COPY (its
			// intent or lock is in the group), and one writing throughout.
			exec(t, pending, "BEGIN")
			exec(t, pending, fmt.Sprintf("INSERT INTO %s (id, a, b) VALUES (-1, -1, 'pending')", full))
			stop, wrote := make(chan struct{}), make(chan struct{})
			var written int64
			var writeErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := int64(1); ; i++ {
					if _, err := writer.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, a, b) VALUES (%d, 1, 'w%d')", full, 100000+i, i)); err != nil {
						writeErr = err
						close(wrote)
						return
					}
					written = i
					if i == 1 {
						close(wrote)
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			})
			<-wrote
			v = tableDesc(t, s, c, empty).Version
			if n, err := copyIn(c, empty+" (id, a, b)", csvRows(20000, 0, 0)); err != nil || n != 20000 {
				t.Fatalf("COPY into the empty table: %d rows, %v", n, err)
			}
			close(stop)
			wg.Wait()
			if writeErr != nil {
				t.Fatalf("a writer of %s failed during the COPY into %s: %v", full, empty, writeErr)
			}
			exec(t, pending, "COMMIT")
			if got := tableDesc(t, s, c, empty).Version; got != v+1 || !bulkLoaded(t, s, c, empty) {
				t.Fatalf("%s went from version %d to %d: the COPY into the empty table of a busy group did not load in bulk", empty, v, got)
			}
			if n, _ := stats(t, c, empty); n != 20000 {
				t.Fatalf("%s holds %d rows, want 20000", empty, n)
			}
			sameThroughIndexes(t, c, empty)
			if n, _ := stats(t, c, full); n != 2000+1+written {
				t.Fatalf("%s holds %d rows, want %d (2000, the pending one and %d written during the COPY)", full, n, 2001+written, written)
			}
			sameThroughIndexes(t, c, full)
		})
	}
}

// TestBulkLoadTruncatedInBusyGroup: a distributed table truncated in
// the loading transaction loads in bulk although its group holds rows:
// another table's, and its own old rows, which TRUNCATE leaves in the
// group until its commit (bulk.go, isEmptyOwn: the table's emptiness is
// its current storage's, looked at from outside the transaction). The
// transaction's own rows in the new storage still make the load
// transactional and are kept, whether intents (an INSERT before the
// COPY) or an earlier bulk load's rows (a second COPY). A table cannot
// be distributed inside a transaction block, so one created in the
// loading transaction is never in a shared group.
func TestBulkLoadTruncatedInBusyGroup(t *testing.T) {
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	c := connect(t, url)
	exec(t, c, "SET sql.stats.automatic_collection.enabled = off")
	fill := func(table string, n int) {
		t.Helper()
		exec(t, c, fmt.Sprintf("INSERT INTO %s (id, a, b) SELECT i, i, 'r' || i FROM generate_series(1, %d) AS i", table, n))
	}
	exec(t, c, fmt.Sprintf(ddl, "busy"))
	exec(t, c, "SELECT create_distributed_table('busy', 'id', shard_count => 8, colocate_with => 'none')")
	fill("busy", 2000)
	exec(t, c, fmt.Sprintf(ddl, "trunc"))
	exec(t, c, "SELECT create_distributed_table('trunc', 'id', colocate_with => 'busy')")
	exec(t, c, fmt.Sprintf(ddl, "alone"))
	exec(t, c, "SELECT create_distributed_table('alone', 'id', shard_count => 8, colocate_with => 'none')")
	if a, b, o := tableDesc(t, s, c, "busy"), tableDesc(t, s, c, "trunc"), tableDesc(t, s, c, "alone"); a.GroupID != b.GroupID || a.GroupID == o.GroupID {
		t.Fatalf("groups: busy %d, trunc %d, alone %d; want trunc with busy, alone apart", a.GroupID, b.GroupID, o.GroupID)
	}

	// TRUNCATE writes one descriptor version, a bulk load another.
	load := func(table, data string, rows int64, wantVersions uint64, what string) {
		t.Helper()
		v := tableDesc(t, s, c, table).Version
		exec(t, c, "BEGIN")
		exec(t, c, "TRUNCATE "+table)
		if strings.HasPrefix(data, "INSERT") {
			exec(t, c, data)
			data = csvRows(3000, 0, 0)
		}
		if n, err := copyIn(c, table+" (id, a, b)", data); err != nil {
			t.Fatalf("%s: COPY after TRUNCATE: %d rows, %v", what, n, err)
		}
		exec(t, c, "COMMIT")
		if got := tableDesc(t, s, c, table).Version; got != v+wantVersions {
			t.Fatalf("%s: %s went from version %d to %d, want %d", what, table, v, got, v+wantVersions)
		}
		if n, _ := stats(t, c, table); n != rows {
			t.Fatalf("%s: %s holds %d rows, want %d", what, table, n, rows)
		}
		sameThroughIndexes(t, c, table)
	}
	for _, table := range []string{"trunc", "alone"} {
		fill(table, 100)
		load(table, csvRows(5000, 0, 0), 5000, 2, "TRUNCATE and COPY: in bulk")
		load(table, "INSERT INTO "+table+" (id, a, b) VALUES (-1, 5, 'mine')", 3001, 1,
			"TRUNCATE, INSERT and COPY: transactional, the INSERT's row kept")
	}

	// An earlier bulk load's rows: the second COPY is transactional, and
	// a duplicate of a row of the first is 23505.
	exec(t, c, "BEGIN")
	exec(t, c, "TRUNCATE trunc")
	if _, err := copyIn(c, "trunc (id, a, b)", csvRows(3000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := copyIn(c, "trunc (id, a, b)", "2999,1,again\n"); sqlState(err) != "23505" {
		t.Fatalf("a second COPY repeating a key of the first: %v, want 23505", err)
	}
	exec(t, c, "ROLLBACK")
	exec(t, c, "BEGIN")
	exec(t, c, "TRUNCATE trunc")
	for _, data := range []string{csvRows(3000, 0, 0), "-1,1,more\n-2,2,more-2\n"} {
		if _, err := copyIn(c, "trunc (id, a, b)", data); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, c, "COMMIT")
	if n, _ := stats(t, c, "trunc"); n != 3002 {
		t.Fatalf("after TRUNCATE and two COPYs, trunc holds %d rows, want 3002", n)
	}
	sameThroughIndexes(t, c, "trunc")
	if n, _ := stats(t, c, "busy"); n != 2000 {
		t.Fatalf("busy holds %d rows, want 2000", n)
	}
}

// TestBulkCopyDistributedBatches: a bulk COPY into a distributed table
// spans many batches, each cut into a request per shard and several in
// flight at once: a bad row or a duplicate key late in it (also one
// duplicating a row of an earlier batch, which reached the tablets
// first) fails it at its own input line and leaves the table empty, and
// a load without them keeps every row.
func TestBulkCopyDistributedBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("loads of 90,000 rows")
	}
	s, url := startNode(t, t.TempDir())
	defer s.Stop(context.Background())
	c := connect(t, url)
	exec(t, c, fmt.Sprintf(ddl, "d"))
	exec(t, c, "SELECT create_distributed_table('d', 'id', shard_count => 8)")
	const rows = 90000
	for _, tc := range []struct {
		name, data, state, line string
	}{
		{"bad row in the last batch", csvRows(rows, 85000, 0), "22P02", "line 85000"},
		{"duplicate in the last batch", csvRows(rows, 0, 85000), "23505", "line 85000"},
		{"duplicate of a row of the first batch, in the fifth", csvRowsDupLater(rows, 3, 50000), "23505", "line 50000"},
	} {
		v := tableDesc(t, s, c, "d").Version
		_, err := copyIn(c, "d (id, a, b)", tc.data)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != tc.state || !strings.Contains(pe.Where, tc.line) {
			t.Fatalf("%s: %v (context %q), want %s at %s", tc.name, err, whereOf(err), tc.state, tc.line)
		}
		if n, _ := stats(t, c, "d"); n != 0 || tableDesc(t, s, c, "d").Version != v {
			t.Fatalf("%s: the table holds %d rows, version %d (was %d)", tc.name, n, tableDesc(t, s, c, "d").Version, v)
		}
	}
	v := tableDesc(t, s, c, "d").Version
	if n, err := copyIn(c, "d (id, a, b)", csvRows(rows, 0, 0)); err != nil || n != rows {
		t.Fatalf("COPY: %d rows, %v", n, err)
	}
	if tableDesc(t, s, c, "d").Version != v+1 {
		t.Fatal("the COPY into the empty distributed table did not load in bulk")
	}
	n, sum := stats(t, c, "d")
	var want int64
	for i := int64(1); i <= rows; i++ {
		want += (i * 7919) % 1000003
	}
	if n != rows || sum != want {
		t.Fatalf("d holds %d rows summing to %d, want %d and %d", n, sum, rows, want)
	}
	sameThroughIndexes(t, c, "d")
}

func whereOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Where
	}
	return ""
}
