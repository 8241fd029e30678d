package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// infoConn connects to s and collects the INFO and NOTICE messages it
// receives.
type infoConn struct {
	*pgx.Conn
	mu   sync.Mutex
	msgs []string
}

func connectInfo(t *testing.T, s *Server) *infoConn {
	t.Helper()
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := &infoConn{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		c.mu.Lock()
		c.msgs = append(c.msgs, n.Severity+": "+n.Message)
		c.mu.Unlock()
	}
	if c.Conn, err = pgx.ConnectConfig(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

var removedRE = regexp.MustCompile(`^INFO: finished vacuuming "t": removed (\d+) old row versions \((-?\d+) bytes\), repacked (\d+) rows$`)

// vacuum runs VACUUM VERBOSE t and returns the versions it reports removed.
func (c *infoConn) vacuum(t *testing.T) int {
	n, _ := c.vacuumRepack(t)
	return n
}

// vacuumRepack runs VACUUM VERBOSE t and returns the versions it reports
// removed and the rows it reports repacked.
func (c *infoConn) vacuumRepack(t *testing.T) (int, int) {
	t.Helper()
	c.mu.Lock()
	c.msgs = nil
	c.mu.Unlock()
	if _, err := c.Exec(context.Background(), "VACUUM VERBOSE t"); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if sm := removedRE.FindStringSubmatch(m); sm != nil {
			n, _ := strconv.Atoi(sm[1])
			r, _ := strconv.Atoi(sm[3])
			return n, r
		}
	}
	t.Fatalf("VACUUM VERBOSE reported no removal: %q", c.msgs)
	return 0, 0
}

// vacuumUntil runs VACUUM VERBOSE t until the node's GC, VACUUM and the
// background queue together (the queue may collect some of the versions
// first, more often on a loaded machine), has removed want versions since
// *base (the queue's count, store.GCQueueStats().Versions, then), and
// fails if it removed more. *base moves to the queue's count after.
func (c *infoConn) vacuumUntil(t *testing.T, s *Server, base *int64, want int64) {
	t.Helper()
	var byVacuum int64
	removed := func() int64 { return byVacuum + s.store.GCQueueStats().Versions - *base }
	for deadline := time.Now().Add(30 * time.Second); removed() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("GC removed %d versions in 30s, want %d", removed(), want)
		}
		byVacuum += int64(c.vacuum(t))
		if removed() < want {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := removed(); got != want {
		t.Fatalf("GC removed %d versions (VACUUM %d), want exactly %d", got, byVacuum, want)
	}
	*base = s.store.GCQueueStats().Versions
}

// A long REPEATABLE READ transaction keeps seeing its snapshot while VACUUM
// collects with gc.ttlseconds = 1: GC stops at its snapshot, and collects
// the rest once it commits. VACUUM VERBOSE reports what it removed.
func TestVacuumRespectsOpenSnapshot(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connectInfo(t, s)
	defer c.Close(ctx)
	reader := connect(t, s)
	defer reader.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE t (k int PRIMARY KEY, v int)",
		"ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = 1",
		"INSERT INTO t VALUES (1, 0)",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	update := func(n int) {
		for range n {
			if _, err := c.Exec(ctx, "UPDATE t SET v = v + 1 WHERE k = 1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func(conn *pgx.Conn) int {
		var v int
		if err := conn.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Only t has a TTL short enough for anything to be collected here.
	base := s.store.GCQueueStats().Versions
	update(20)
	if _, err := reader.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	if v := read(reader); v != 20 {
		t.Fatalf("snapshot read %d, want 20", v)
	}
	update(20)
	written := time.Now()
	// The 20 versions under the snapshot's (0..19) go; the snapshot's own
	// and the 20 above it stay, even once the TTL has passed for all.
	c.vacuumUntil(t, s, &base, 20)
	for time.Since(written) < 1500*time.Millisecond {
		time.Sleep(100 * time.Millisecond) // the TTL passing is the condition
	}
	if n := c.vacuum(t); n != 0 {
		t.Fatalf("VACUUM past the TTL removed %d versions the open snapshot needs", n)
	}
	if n := s.store.GCQueueStats().Versions - base; n != 0 {
		t.Fatalf("GC past the TTL removed %d versions the open snapshot needs", n)
	}
	if v := read(reader); v != 20 {
		t.Fatalf("snapshot read %d after GC, want 20", v)
	}
	if _, err := reader.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	c.vacuumUntil(t, s, &base, 20)
	if v := read(c.Conn); v != 40 {
		t.Fatalf("read %d after GC, want 40", v)
	}
}

// metric reads one of the node's unlabelled-by-tablet metrics.
func metric(t *testing.T, s *Server, name string) int64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", s.HTTPAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + `\{node="\d+"\} (\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// The GC queue runs on its own: a row updated 50 times in a table with
// gc.ttlseconds = 1 is collected without a VACUUM, and /metrics says so.
func TestGCQueueRunsInServer(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, s)
	defer c.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE t (k int PRIMARY KEY, v int)",
		"ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = 1",
		"INSERT INTO t VALUES (1, 0)",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := metric(t, s, "cairn_gc_queue_versions_removed_total")
	for range 50 {
		if _, err := c.Exec(ctx, "UPDATE t SET v = v + 1 WHERE k = 1"); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); metric(t, s, "cairn_gc_queue_versions_removed_total")-before < 50; {
		if time.Now().After(deadline) {
			t.Fatalf("the GC queue removed %d versions in 30s, want at least 50", metric(t, s, "cairn_gc_queue_versions_removed_total")-before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if metric(t, s, "cairn_gc_queue_runs_total") == 0 || metric(t, s, "cairn_gc_queue_bytes_removed_total") == 0 {
		t.Fatalf("versions removed but no run or bytes counted")
	}
	var v int
	if err := c.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != 50 {
		t.Fatalf("read after GC: %d, %v", v, err)
	}
}

// Rows of a packed table updated one column at a time, across an ADD and
// a DROP COLUMN, are folded back into one packed row each by GC once the
// TTL has passed (mvcc invariant 10), and read the same afterwards;
// /metrics counts the repacks.
func TestVacuumRepacksRows(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connectInfo(t, s)
	defer c.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE t (k int PRIMARY KEY, a int, b text, x int)",
		"ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = 1",
		"INSERT INTO t SELECT i, i, 'b' || i, i FROM generate_series(1, 5) AS g(i)",
		"UPDATE t SET a = a + 10",
		"ALTER TABLE t ADD COLUMN d int DEFAULT 4",
		"UPDATE t SET b = b || '!' WHERE k <= 3",
		"ALTER TABLE t DROP COLUMN x",
		"UPDATE t SET a = a + 100 WHERE k >= 3",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows := func() string {
		r, err := c.Query(ctx, "SELECT k, a, b, d FROM t ORDER BY k")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		out := ""
		for r.Next() {
			var k, a, d int
			var b string
			if err := r.Scan(&k, &a, &b, &d); err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintf("(%d,%d,%s,%d)", k, a, b, d)
		}
		return out
	}
	const want = "(1,11,b1!,4)(2,12,b2!,4)(3,113,b3!,4)(4,114,b4,4)(5,115,b5,4)"
	if got := rows(); got != want {
		t.Fatalf("before GC: %s, want %s", got, want)
	}
	for deadline := time.Now().Add(30 * time.Second); metric(t, s, "cairn_gc_rows_repacked_total") < 5; {
		if time.Now().After(deadline) {
			t.Fatalf("GC repacked %d rows in 30s, want 5", metric(t, s, "cairn_gc_rows_repacked_total"))
		}
		c.vacuum(t)
		time.Sleep(100 * time.Millisecond)
	}
	if got := rows(); got != want {
		t.Fatalf("after GC: %s, want %s", got, want)
	}
}

// VACUUM VERBOSE reports the rows it repacked: rows packed before a DROP
// COLUMN, which no update touched (so the GC queue, which runs only where
// there are old versions, leaves them), are rewritten by VACUUM under the
// current version once the TTL has passed, and it says so, as /metrics
// does.
func TestVacuumVerboseReportsRepacks(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connectInfo(t, s)
	defer c.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE t (k int PRIMARY KEY, a int, x text)",
		"ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = 1",
		"INSERT INTO t SELECT i, i * 2, 'x' || i FROM generate_series(1, 7) AS g(i)",
		"ALTER TABLE t DROP COLUMN x",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := metric(t, s, "cairn_gc_rows_repacked_total")
	reported := 0
	for deadline := time.Now().Add(30 * time.Second); reported < 7; {
		if time.Now().After(deadline) {
			t.Fatalf("VACUUM VERBOSE reported %d rows repacked in 30s, want 7: %q", reported, c.msgs)
		}
		_, r := c.vacuumRepack(t)
		reported += r
		if reported < 7 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if reported != 7 {
		t.Fatalf("VACUUM VERBOSE reported %d rows repacked, want 7", reported)
	}
	if got := metric(t, s, "cairn_gc_rows_repacked_total") - before; got != 7 {
		t.Fatalf("/metrics counted %d repacks, VACUUM reported 7", got)
	}
	if _, r := c.vacuumRepack(t); r != 0 {
		t.Fatalf("a second VACUUM repacked %d rows already current", r)
	}
	var n, sum int
	if err := c.QueryRow(ctx, "SELECT count(*), sum(a) FROM t").Scan(&n, &sum); err != nil || n != 7 || sum != 56 {
		t.Fatalf("after repacking: %d rows summing to %d, %v", n, sum, err)
	}
}

// A table's repack stamp restarts only when what repacked rows depend on
// changes: its row schema version (ADD or DROP COLUMN) or its primary
// index's storage, not another descriptor change such as a new version
// for a zone, a grant or a rename.
func TestRepackLayout(t *testing.T) {
	base := &catalog.Table{ID: 100, DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID, Name: "t", Version: 1, GroupID: 100, NextColumnID: 3,
		Columns: []catalog.Column{{ID: 1, Name: "k", Type: types.Int8}, {ID: 2, Name: "v", Type: types.Int8, Nullable: true}},
		PrimaryIndex: catalog.Index{ID: 1, Name: "t_pkey", Unique: true, Kind: catalog.IndexBTree, State: catalog.IndexPublic,
			KeyColumnIDs: []rowenc.ColumnID{1}, KeyDirections: []rowenc.Order{rowenc.Asc}},
		NextIndexID: 2, Partitioning: catalog.Partitioning{Kind: catalog.PartitionRange},
		RowFormat: catalog.RowFormat{Packed: true, SchemaVersion: 1}}
	for _, tc := range []struct {
		name   string
		change func(*catalog.Table)
		same   bool
	}{
		{"new version, rename", func(t *catalog.Table) { t.Version++; t.Name = "u" }, true},
		{"add column", func(t *catalog.Table) { _, _ = t.AddColumn(catalog.Column{Name: "w", Type: types.Int8}) }, false},
		{"drop column", func(t *catalog.Table) { _ = t.DropColumn("v") }, false},
		{"fresh primary storage", func(t *catalog.Table) { t.PrimaryIndex.StorageID = 2000 }, false},
	} {
		c, err := catalog.Clone(base)
		if err != nil {
			t.Fatal(err)
		}
		tc.change(c)
		if got := repackLayout(c) == repackLayout(base); got != tc.same {
			t.Errorf("%s: same layout = %v, want %v", tc.name, got, tc.same)
		}
	}
}

// The repacker's table refresh reads every descriptor only when the
// catalog generation changed since its last scan: with nothing changed a
// refresh reads one key (with 10,000 tables the scan was a third of an
// idle node's CPU), and after a DDL the next refresh scans and gives the
// repacker the table's new layout.
func TestRepackRefreshScansOnlyAfterDDL(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connectInfo(t, s)
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE TABLE t (k int PRIMARY KEY, a int)"); err != nil {
		t.Fatal(err)
	}
	// refresh runs a refresh now, as the GC loop's would once the
	// interval has passed, and returns the scans made so far (by this
	// or by the loop's own refreshes).
	refresh := func() int {
		t.Helper()
		s.gc.mu.Lock()
		s.gc.refreshedAt = time.Time{}
		s.gc.mu.Unlock()
		if err := s.refreshRepackTables(ctx, false); err != nil {
			t.Fatal(err)
		}
		s.gc.mu.Lock()
		defer s.gc.mu.Unlock()
		return s.gc.scans
	}
	var id int64
	if err := c.QueryRow(ctx, "SELECT 't'::regclass::oid::int8").Scan(&id); err != nil {
		t.Fatal(err)
	}
	layout := func() string {
		s.gc.mu.Lock()
		defer s.gc.mu.Unlock()
		return s.gc.tables[catalog.ID(id)].layout
	}
	first := refresh()
	before := layout()
	if n := refresh(); n != first {
		t.Fatalf("a refresh with the catalog unchanged scanned the descriptors (%d scans, then %d)", first, n)
	}
	if n := refresh(); n != first {
		t.Fatalf("a second refresh with the catalog unchanged scanned the descriptors (%d scans, then %d)", first, n)
	}
	if _, err := c.Exec(ctx, "ALTER TABLE t ADD COLUMN b int"); err != nil {
		t.Fatal(err)
	}
	// (An ADD COLUMN may commit more than one descriptor version, and
	// the GC loop may refresh between them: at least one scan.)
	n := refresh()
	if n == first {
		t.Fatal("the refresh after a DDL did not scan the descriptors")
	}
	if again := refresh(); again != n {
		t.Fatalf("a refresh with the catalog unchanged since the DDL scanned the descriptors (%d scans, then %d)", n, again)
	}
	if after := layout(); before == "" || after == before || after == "" {
		t.Fatalf("the repacker's layout of t after ADD COLUMN: %q, before %q", after, before)
	}
}
