package exec_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/catalog"
)

// The bulk-load path (bulk.go) driven over pgwire: COPY into a table
// created in the same transaction writes committed values into fresh
// storage, and CREATE INDEX backfills its fresh storage the same way.
// Each test checks what a client sees: atomicity, isolation, uniqueness,
// index contents and durability.

func startNode(t *testing.T, dir string) (*server.Server, string) {
	t.Helper()
	s, err := server.Start(context.Background(), server.Config{
		StoreDir: dir, Insecure: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func exec(t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// csvRows is n CSV rows "i,(i*7919)%1000003,row-i"; bad, when > 0, makes
// row bad unparsable, dup > 0 repeats id 1 at row dup.
func csvRows(n, bad, dup int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		switch i {
		case bad:
			fmt.Fprintf(&b, "%d,notanumber,row-%d\n", i, i)
		case dup:
			fmt.Fprintf(&b, "1,%d,row-%d\n", (i*7919)%1000003, i)
		default:
			fmt.Fprintf(&b, "%d,%d,row-%d\n", i, (i*7919)%1000003, i)
		}
	}
	return b.String()
}

// csvRowsDupLater is csvRows(n, 0, 0) but for line at, whose id is that
// of the later line of.
func csvRowsDupLater(n, at, of int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		id := i
		if i == at {
			id = of
		}
		fmt.Fprintf(&b, "%d,%d,row-%d\n", id, (i*7919)%1000003, i)
	}
	return b.String()
}

func copyIn(c *pgx.Conn, table, data string) (int64, error) {
	tag, err := c.PgConn().CopyFrom(context.Background(), strings.NewReader(data), "COPY "+table+" FROM STDIN WITH (FORMAT csv)")
	return tag.RowsAffected(), err
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// stats returns count(*) and sum(a) of the table, and the same through an
// index on a (a predicate the index serves) and through the table (a
// predicate no index serves).
func stats(t *testing.T, c *pgx.Conn, table string) (n, sum int64) {
	t.Helper()
	if err := c.QueryRow(context.Background(), "SELECT count(*), coalesce(sum(a), 0) FROM "+table).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	return n, sum
}

// bulkLoaded reports whether table's primary index lives in fresh storage,
// i.e. whether the bulk path loaded it (read from its descriptor).
func bulkLoaded(t *testing.T, s *server.Server, c *pgx.Conn, table string) bool {
	t.Helper()
	return tableDesc(t, s, c, table).PrimaryIndex.StorageID != 0
}

// tableDesc reads table's committed descriptor.
func tableDesc(t *testing.T, s *server.Server, c *pgx.Conn, table string) *catalog.Table {
	t.Helper()
	ctx := context.Background()
	var id uint32
	if err := c.QueryRow(ctx, fmt.Sprintf("SELECT '%s'::regclass::oid", table)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	txn := s.DB().NewTxn(ctx, "test", kv.Serializable)
	defer txn.Rollback(ctx)
	desc, err := catalog.NewWriter(txn, nil).TableByID(ctx, catalog.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

const ddl = "CREATE TABLE %s (id int8 PRIMARY KEY, a int8, b text UNIQUE, c int8 DEFAULT 7 CHECK (c > 0))"

// TestBulkCopyAtomic: a COPY that fails at a bad row or a duplicate key
// late in its input leaves nothing, and the name (and the reused table
// ID, since IDs are allocated in the transaction) is usable again.
func TestBulkCopyAtomic(t *testing.T) {
	s, url := startNode(t, "")
	defer s.Stop(context.Background())
	c := connect(t, url)
	ctx := context.Background()
	// Rows go in batches of 10,000: the failures below fall in the last
	// batch, in a middle one and in the first one, and the error names the
	// input line of the row that failed, as PostgreSQL's does.
	for _, tc := range []struct {
		name      string
		data      string
		wantState string
		wantLine  string
	}{
		{"bad row", csvRows(30000, 25000, 0), "22P02", "line 25000"},
		{"bad row in a middle batch", csvRows(30000, 12000, 0), "22P02", "line 12000"},
		{"duplicate primary key", csvRows(30000, 0, 25000), "23505", "line 25000"},
		{"duplicate primary key in a middle batch", csvRows(30000, 0, 15000), "23505", "line 15000"},
		{"duplicate in one batch", csvRows(300, 0, 200), "23505", "line 200"},
		// Two batches in flight at once (parallel bulk writes): the
		// second occurrence in input order is the row that fails,
		// whichever batch reached the tablet first.
		{"duplicate of a later row in flight", csvRowsDupLater(30000, 15000, 25000), "23505", "line 25000"},
	} {
		exec(t, c, "BEGIN")
		exec(t, c, fmt.Sprintf(ddl, "t"))
		_, err := copyIn(c, "t (id, a, b)", tc.data)
		if got := sqlState(err); got != tc.wantState {
			t.Fatalf("%s: COPY error %v (SQLSTATE %q), want %s", tc.name, err, got, tc.wantState)
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v is not a PostgreSQL error", tc.name, err)
		}
		if !strings.Contains(pe.Where, tc.wantLine) {
			t.Errorf("%s: error context %q, want it to name %q", tc.name, pe.Where, tc.wantLine)
		}
		exec(t, c, "ROLLBACK")
		var exists bool
		if err := c.QueryRow(ctx, "SELECT count(*) > 0 FROM pg_class WHERE relname = 't'").Scan(&exists); err != nil || exists {
			t.Fatalf("%s: table t after ROLLBACK: exists=%t err=%v", tc.name, exists, err)
		}
		// A new table of the same name (and, the ID being allocated in
		// the rolled-back transaction, of the same ID) starts empty.
		exec(t, c, fmt.Sprintf(ddl, "t"))
		if n, _ := stats(t, c, "t"); n != 0 {
			t.Fatalf("%s: a new table t holds %d rows of the failed load", tc.name, n)
		}
		exec(t, c, "DROP TABLE t")
	}
	// An implicit transaction: CREATE TABLE then COPY in one.
	exec(t, c, "BEGIN")
	exec(t, c, fmt.Sprintf(ddl, "u"))
	if n, err := copyIn(c, "u (id, a, b)", csvRows(20000, 0, 0)); err != nil || n != 20000 {
		t.Fatalf("COPY: %d rows, %v", n, err)
	}
	exec(t, c, "COMMIT")
	if !bulkLoaded(t, s, c, "u") {
		t.Fatal("COPY into a table created in its transaction did not take the bulk path")
	}
	n, sum := stats(t, c, "u")
	var want int64
	for i := int64(1); i <= 20000; i++ {
		want += (i * 7919) % 1000003
	}
	if n != 20000 || sum != want {
		t.Fatalf("u holds %d rows summing to %d, want 20000 and %d", n, sum, want)
	}
	// The default and CHECK applied on the bulk path too.
	var bad int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM u WHERE c IS DISTINCT FROM 7").Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("%d rows without the default, %v", bad, err)
	}
}

// TestBulkCopyInTransaction: what the same transaction does around a bulk
// COPY: a rollback to a savepoint before it undoes it; later writes see
// its rows (uniqueness against them, updates and deletes of them); a
// second COPY into the now non-empty table goes the transactional way
// and still finds duplicates of the first one.
func TestBulkCopyInTransaction(t *testing.T) {
	s, url := startNode(t, "")
	defer s.Stop(context.Background())
	c := connect(t, url)
	ctx := context.Background()
	exec(t, c, "BEGIN")
	exec(t, c, fmt.Sprintf(ddl, "t"))
	exec(t, c, "SAVEPOINT s")
	if _, err := copyIn(c, "t (id, a, b)", csvRows(5000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "ROLLBACK TO SAVEPOINT s")
	if n, _ := stats(t, c, "t"); n != 0 {
		t.Fatalf("after ROLLBACK TO SAVEPOINT, t holds %d rows", n)
	}
	if _, err := copyIn(c, "t (id, a, b)", csvRows(5000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO t (id, a, b) VALUES (10, 1, 'x')"); sqlState(err) != "23505" {
		t.Fatalf("INSERT of an id the bulk COPY wrote: %v, want 23505", err)
	}
	exec(t, c, "ROLLBACK TO SAVEPOINT s")
	// The savepoint is before both COPYs: nothing is left.
	if n, _ := stats(t, c, "t"); n != 0 {
		t.Fatalf("after the second ROLLBACK TO SAVEPOINT, t holds %d rows", n)
	}
	if _, err := copyIn(c, "t (id, a, b)", csvRows(5000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "UPDATE t SET a = -a WHERE id <= 100")
	exec(t, c, "DELETE FROM t WHERE id > 4900")
	exec(t, c, "INSERT INTO t (id, a, b) VALUES (6000, 5, 'new')")
	// Not empty any more: the transactional path, which sees the bulk rows.
	if _, err := copyIn(c, "t (id, a, b)", "7000,1,fresh\n50,1,again\n"); sqlState(err) != "23505" {
		t.Fatalf("second COPY with a duplicate of the first: %v, want 23505", err)
	}
	exec(t, c, "ROLLBACK")
}

// TestBulkCopyIsolation: another session sees neither the table nor its
// rows before the loading transaction commits, and all of them after.
func TestBulkCopyIsolation(t *testing.T) {
	s, url := startNode(t, "")
	defer s.Stop(context.Background())
	c, r := connect(t, url), connect(t, url)
	ctx := context.Background()
	exec(t, c, "BEGIN")
	exec(t, c, fmt.Sprintf(ddl, "t"))
	if _, err := copyIn(c, "t (id, a, b)", csvRows(20000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := r.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); sqlState(err) != "42P01" {
		t.Fatalf("a reader during the load: %d rows, %v; want 42P01", n, err)
	}
	exec(t, c, "COMMIT")
	if err := r.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 20000 {
		t.Fatalf("a reader after commit: %d rows, %v", n, err)
	}
	if !bulkLoaded(t, s, c, "t") {
		t.Fatal("the load did not take the bulk path")
	}
	// COPY into an existing empty table also loads in bulk (bulk.go):
	// a reader sees nothing until commit, then every row.
	exec(t, r, fmt.Sprintf(ddl, "e"))
	before := tableDesc(t, s, c, "e")
	exec(t, c, "BEGIN")
	if _, err := copyIn(c, "e (id, a, b)", csvRows(2000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := r.QueryRow(ctx, "SELECT count(*) FROM e").Scan(&n); err != nil || n != 0 {
		t.Fatalf("a reader during a COPY into an existing table: %d rows, %v", n, err)
	}
	exec(t, c, "COMMIT")
	if after := tableDesc(t, s, c, "e"); after.PrimaryIndex.StorageID == before.PrimaryIndex.StorageID {
		t.Fatal("COPY into an existing empty table did not take the bulk path")
	}
	if err := r.QueryRow(ctx, "SELECT count(*) FROM e").Scan(&n); err != nil || n != 2000 {
		t.Fatalf("a reader after commit: %d rows, %v", n, err)
	}
}

// TestBulkIndexes: after a bulk COPY (unique and plain secondary indexes
// written from the rows) and after CREATE INDEX (backfilled into fresh
// storage), scans through each index return exactly what a table scan
// does, on the running node and after a restart; a CREATE UNIQUE INDEX
// over duplicates fails with 23505 and leaves the table usable.
func TestBulkIndexes(t *testing.T) {
	dir := t.TempDir()
	s, url := startNode(t, dir)
	c := connect(t, url)
	ctx := context.Background()
	exec(t, c, "BEGIN")
	exec(t, c, fmt.Sprintf(ddl, "t"))
	exec(t, c, "CREATE INDEX t_a_idx ON t (a)")
	if _, err := copyIn(c, "t (id, a, b)", csvRows(10000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "COMMIT")
	if !bulkLoaded(t, s, c, "t") {
		t.Fatal("the load did not take the bulk path")
	}
	exec(t, c, "CREATE INDEX t_a_id_idx ON t (a DESC, id)")
	if _, err := c.Exec(ctx, "CREATE UNIQUE INDEX t_bad ON t ((a % 10))"); sqlState(err) != "23505" {
		t.Fatalf("CREATE UNIQUE INDEX over duplicates: %v, want 23505", err)
	}
	exec(t, c, "CREATE UNIQUE INDEX t_c ON t (id, a)")
	exec(t, c, "ANALYZE t")

	check := func(c *pgx.Conn) {
		t.Helper()
		// Each query's plan is checked to use what it is meant to.
		for _, q := range []struct{ sql, plan string }{
			{"SELECT id, a FROM t WHERE a + 0 BETWEEN 1000 AND 40000", "Seq Scan on t"},
			{"SELECT id, a FROM t WHERE a BETWEEN 1000 AND 40000", "t_a_"},
			{"SELECT id, a FROM t WHERE b || '' BETWEEN 'row-1000' AND 'row-1001'", "Seq Scan on t"},
			{"SELECT id, a FROM t WHERE b BETWEEN 'row-1000' AND 'row-1001'", "t_b_key"},
		} {
			var plan strings.Builder
			rows, err := c.Query(ctx, "EXPLAIN "+q.sql)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(line + "\n")
			}
			if !strings.Contains(plan.String(), q.plan) {
				t.Errorf("%s: plan does not use %s:\n%s", q.sql, q.plan, plan.String())
			}
		}
		read := func(sql string) string {
			rows, err := c.Query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for rows.Next() {
				var id, a int64
				if err := rows.Scan(&id, &a); err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%d:%d", id, a))
			}
			if rows.Err() != nil {
				t.Fatal(rows.Err())
			}
			slices.Sort(out)
			return strings.Join(out, " ")
		}
		seq := read("SELECT id, a FROM t WHERE a + 0 BETWEEN 1000 AND 40000")
		if idx := read("SELECT id, a FROM t WHERE a BETWEEN 1000 AND 40000"); idx != seq || seq == "" {
			t.Errorf("index on a and table scan differ (%d and %d bytes)", len(idx), len(seq))
		}
		seqB := read("SELECT id, a FROM t WHERE b || '' BETWEEN 'row-1000' AND 'row-1001'")
		if idx := read("SELECT id, a FROM t WHERE b BETWEEN 'row-1000' AND 'row-1001'"); idx != seqB || seqB == "" {
			t.Errorf("unique index on b and table scan differ (%d and %d bytes)", len(idx), len(seqB))
		}
	}
	check(c)
	c.Close(ctx)
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s, url = startNode(t, dir)
	defer s.Stop(ctx)
	c = connect(t, url)
	if n, _ := stats(t, c, "t"); n != 10000 {
		t.Fatalf("after restart t holds %d rows, want 10000", n)
	}
	check(c)
	// Writes after the load maintain the bulk-built indexes.
	exec(t, c, "UPDATE t SET a = a + 1 WHERE id % 3 = 0")
	exec(t, c, "DELETE FROM t WHERE id % 7 = 0")
	check(c)
}

// TestBulkInsertSelect: CREATE TABLE AS and INSERT ... SELECT into a
// table created in the same transaction load in bulk, with the same
// results and the same atomicity as the transactional path.
func TestBulkInsertSelect(t *testing.T) {
	s, url := startNode(t, "")
	defer s.Stop(context.Background())
	c := connect(t, url)
	ctx := context.Background()
	exec(t, c, "CREATE TABLE ctas AS SELECT i AS id, i % 100 AS a FROM generate_series(1, 5000) AS i")
	if !bulkLoaded(t, s, c, "ctas") {
		t.Fatal("CREATE TABLE AS did not load in bulk")
	}
	if n, sum := stats(t, c, "ctas"); n != 5000 || sum != 247500 {
		t.Fatalf("ctas: %d rows, sum %d", n, sum)
	}
	exec(t, c, "BEGIN")
	exec(t, c, "CREATE TABLE ins (id int8 PRIMARY KEY, a int8 UNIQUE)")
	if _, err := c.Exec(ctx, "INSERT INTO ins SELECT id, a FROM ctas"); sqlState(err) != "23505" {
		t.Fatalf("INSERT ... SELECT with duplicates of a: %v, want 23505", err)
	}
	exec(t, c, "ROLLBACK")
	exec(t, c, "BEGIN")
	exec(t, c, "CREATE TABLE ins (id int8 PRIMARY KEY, a int8 UNIQUE)")
	var ret int64
	if err := c.QueryRow(ctx, "WITH w AS (INSERT INTO ins SELECT id, -id FROM ctas RETURNING a) SELECT sum(a) FROM w").Scan(&ret); err != nil || ret != -5000*5001/2 {
		t.Fatalf("INSERT ... SELECT ... RETURNING: sum %d, %v", ret, err)
	}
	exec(t, c, "COMMIT")
	if !bulkLoaded(t, s, c, "ins") {
		t.Fatal("INSERT ... SELECT into a new table did not load in bulk")
	}
	if n, sum := stats(t, c, "ins"); n != 5000 || sum != -5000*5001/2 {
		t.Fatalf("ins: %d rows, sum %d", n, sum)
	}
	var found int64
	if err := c.QueryRow(ctx, "SELECT id FROM ins WHERE a = -4321").Scan(&found); err != nil || found != 4321 {
		t.Fatalf("lookup through the unique index: %d, %v", found, err)
	}
}

// TestBulkAlterPrimaryKey: ALTER TABLE ADD PRIMARY KEY on a table keyed by
// its hidden row id moves it to fresh storage written in bulk. A
// duplicate or a NULL of the new key, early or late in the table, fails
// the ALTER with nothing changed; a ROLLBACK undoes it; after it the
// rows, the new key's uniqueness and the rebuilt index survive a
// restart.
func TestBulkAlterPrimaryKey(t *testing.T) {
	dir := t.TempDir()
	s, url := startNode(t, dir)
	c := connect(t, url)
	ctx := context.Background()
	const n = 25000 // more than two bulk batches
	exec(t, c, "CREATE TABLE t (id int8, a int8, b text)")
	exec(t, c, fmt.Sprintf("INSERT INTO t SELECT i, (i * 7919) %% 1000003, 'row-' || i FROM generate_series(1, %d) AS i", n))
	exec(t, c, "CREATE INDEX t_a_idx ON t (a)")
	_, wantSum := stats(t, c, "t")

	for _, tc := range []struct {
		name, bad, state string
	}{
		{"duplicate in the first batch", "INSERT INTO t VALUES (2, 0, 'dup')", "23505"},
		{"duplicate in the last batch", fmt.Sprintf("INSERT INTO t VALUES (%d, 0, 'dup')", n-1), "23505"},
		{"NULL key", "INSERT INTO t VALUES (NULL, 0, 'dup')", "23502"},
	} {
		exec(t, c, tc.bad)
		if _, err := c.Exec(ctx, "ALTER TABLE t ADD PRIMARY KEY (id)"); sqlState(err) != tc.state {
			t.Fatalf("%s: ALTER gave %v, want %s", tc.name, err, tc.state)
		}
		if bulkLoaded(t, s, c, "t") {
			t.Fatalf("%s: the failed ALTER left the table in fresh storage", tc.name)
		}
		if cnt, sum := stats(t, c, "t"); cnt != n+1 || sum != wantSum {
			t.Fatalf("%s: after the failed ALTER t holds %d rows (sum %d), want %d (sum %d)", tc.name, cnt, sum, n+1, wantSum)
		}
		exec(t, c, "DELETE FROM t WHERE b = 'dup'")
	}

	// Rolled back: the table is as it was, duplicates allowed again.
	exec(t, c, "BEGIN")
	exec(t, c, "ALTER TABLE t ADD PRIMARY KEY (id)")
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES (1, 0, 'dup')"); sqlState(err) != "23505" {
		t.Fatalf("duplicate inside the ALTER's transaction: %v, want 23505", err)
	}
	exec(t, c, "ROLLBACK")
	if bulkLoaded(t, s, c, "t") {
		t.Fatal("the rolled-back ALTER left the table in fresh storage")
	}
	exec(t, c, "INSERT INTO t VALUES (1, 0, 'dup')")
	exec(t, c, "DELETE FROM t WHERE b = 'dup'")

	exec(t, c, "ALTER TABLE t ADD PRIMARY KEY (id)")
	if !bulkLoaded(t, s, c, "t") {
		t.Fatal("ADD PRIMARY KEY did not move the table to fresh storage")
	}
	check := func(c *pgx.Conn) {
		t.Helper()
		if cnt, sum := stats(t, c, "t"); cnt != n || sum != wantSum {
			t.Fatalf("t holds %d rows (sum %d), want %d (sum %d)", cnt, sum, n, wantSum)
		}
		var viaIdx, viaTable int64
		if err := c.QueryRow(ctx, "SELECT coalesce(sum(id), 0) FROM t WHERE a BETWEEN 1000 AND 400000").Scan(&viaIdx); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, "SELECT coalesce(sum(id), 0) FROM t WHERE a + 0 BETWEEN 1000 AND 400000").Scan(&viaTable); err != nil {
			t.Fatal(err)
		}
		if viaIdx != viaTable || viaIdx == 0 {
			t.Fatalf("index on a and table scan differ: %d and %d", viaIdx, viaTable)
		}
		if _, err := c.Exec(ctx, "INSERT INTO t VALUES (7, 0, 'dup')"); sqlState(err) != "23505" {
			t.Fatalf("duplicate of the new key: %v, want 23505", err)
		}
		var b string
		if err := c.QueryRow(ctx, fmt.Sprintf("SELECT b FROM t WHERE id = %d", n-3)).Scan(&b); err != nil || b != fmt.Sprintf("row-%d", n-3) {
			t.Fatalf("point read by the new key: %q, %v", b, err)
		}
	}
	check(c)
	c.Close(ctx)
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s, url = startNode(t, dir)
	defer s.Stop(ctx)
	c = connect(t, url)
	check(c)
	// Writes after the rewrite land in the new storage.
	exec(t, c, "UPDATE t SET a = a + 1 WHERE id % 3 = 0")
	exec(t, c, "DELETE FROM t WHERE id > 20000")
	if cnt, _ := stats(t, c, "t"); cnt != 20000 {
		t.Fatalf("after the DELETE t holds %d rows, want 20000", cnt)
	}
}

// sstsIngested reads the node's cairn_tablet_ssts_ingested_total.
func sstsIngested(t *testing.T, s *server.Server) int64 {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "cairn_tablet_ssts_ingested_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("cairn_tablet_ssts_ingested_total not found")
	return 0
}

// TestBulkCopySortedRuns: a bulk COPY whose input is in primary-key
// order has its rows ingested as SSTs, filled across batches (the three
// batches of this table's one tablet are one SST), while its
// secondary index entries go as BulkPuts; every row is found by key and
// through both indexes. Input whose keys stop ascending after the first
// batch has that batch ingested and the rest written as BulkPuts, with
// the same result. (TestBulkCopyAtomic's duplicates of an ingested key
// later in the input are found by those BulkPuts.)
func TestBulkCopySortedRuns(t *testing.T) {
	s, url := startNode(t, "")
	defer s.Stop(context.Background())
	c := connect(t, url)
	ctx := context.Background()
	const n = 30000
	shuffled := func() string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			id := (i * 7919) % 30011 // distinct, not ascending
			fmt.Fprintf(&b, "%d,%d,row-%d\n", id, (id*7919)%1000003, id)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, data string
		minSSTs    int64
		maxSSTs    int64
	}{
		{"sorted", csvRows(n, 0, 0), 1, 1},
		{"order breaks after the first batch", shuffled(), 1, 1},
	} {
		before := sstsIngested(t, s)
		exec(t, c, "BEGIN")
		exec(t, c, fmt.Sprintf(ddl, "t"))
		exec(t, c, "CREATE INDEX t_a_idx ON t (a)")
		if got, err := copyIn(c, "t (id, a, b)", tc.data); err != nil || got != n {
			t.Fatalf("%s: COPY: %d rows, %v", tc.name, got, err)
		}
		exec(t, c, "COMMIT")
		if !bulkLoaded(t, s, c, "t") {
			t.Fatalf("%s: the load did not take the bulk path", tc.name)
		}
		ssts := sstsIngested(t, s) - before
		t.Logf("%s: %d SSTs ingested", tc.name, ssts)
		if ssts < tc.minSSTs || ssts > tc.maxSSTs {
			t.Errorf("%s: %d SSTs ingested, want %d to %d", tc.name, ssts, tc.minSSTs, tc.maxSSTs)
		}
		rows, err := c.Query(ctx, "SELECT id, a, b FROM t")
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			id, a int64
			b     string
		}
		var all []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.a, &r.b); err != nil {
				t.Fatal(err)
			}
			all = append(all, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(all) != n {
			t.Fatalf("%s: %d rows", tc.name, len(all))
		}
		for i, r := range all {
			if i%97 != 0 {
				continue
			}
			var id1, id2, a int64
			if err := c.QueryRow(ctx, "SELECT a FROM t WHERE id = $1", r.id).Scan(&a); err != nil || a != r.a {
				t.Fatalf("%s: row %d by key: a = %d, %v (want %d)", tc.name, r.id, a, err, r.a)
			}
			if err := c.QueryRow(ctx, "SELECT id FROM t WHERE b = $1", r.b).Scan(&id1); err != nil || id1 != r.id {
				t.Fatalf("%s: row %d through t_b_key: %d, %v", tc.name, r.id, id1, err)
			}
			if err := c.QueryRow(ctx, "SELECT min(id) FROM t WHERE a = $1", r.a).Scan(&id2); err != nil || id2 > r.id {
				t.Fatalf("%s: row %d through t_a_idx: %d, %v", tc.name, r.id, id2, err)
			}
		}
		exec(t, c, "DROP TABLE t")
	}
}
