package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/mvcc"
)

// The leftovers of failed bulk loads (issue #14, sql/bulkclean): a COPY that wrote part of its rows into fresh
// storage and then failed leaves no row, no byte and no record once its
// transaction has ended, whether it failed at a bad row, lost its
// connection, was rolled back to a savepoint before it, or its process
// was killed.

// tableStats counts every version of every key in table name's keyspace
// (all the storage IDs it ever had) on s's engine.
func tableStats(t *testing.T, s *Server, name string) mvcc.SpanStats {
	t.Helper()
	l, err := tableDesc(t, s, name).Layout()
	if err != nil {
		t.Fatal(err)
	}
	var st mvcc.SpanStats
	for _, sp := range l.TableSpans() {
		o, err := mvcc.ComputeSpanStats(s.eng, sp.Key, sp.EndKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		st = st.Add(o)
	}
	return st
}

// loadRecords counts the records of bulk loads in flight.
func loadRecords(t *testing.T, s *Server) int {
	t.Helper()
	p := keys.System([]byte("bulkload/"))
	kvs, err := s.db.Scan(context.Background(), p, keys.PrefixEnd(p), 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(kvs)
}

// csvStream is CSV rows 1..n "i,i*3,row-i" (row bad, when > 0, has an
// unparsable a). Before row pauseAt it calls pause once.
type csvStream struct {
	n, bad, pauseAt, next int
	pause                 func()
	buf                   []byte
}

func (r *csvStream) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		r.next++
		if r.next > r.n {
			return 0, io.EOF
		}
		if r.next == r.pauseAt && r.pause != nil {
			r.pause()
		}
		if r.next == r.bad {
			r.buf = fmt.Appendf(r.buf, "%d,notanumber,row-%d\n", r.next, r.next)
		} else {
			r.buf = fmt.Appendf(r.buf, "%d,%d,row-%d\n", r.next, r.next*3, r.next)
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// waitUntil is waitFor with a 30 s timeout and a condition that says
// nothing.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, 30*time.Second, func() (bool, string) { return cond(), "" })
}

// smallSortedSSTs makes a sorted bulk load ingest an SST every 64 KiB of
// rows (kv.SortedSSTBytes, 24 MiB otherwise, which these loads never
// reach before their end), so that a load paused in the middle has
// written rows for the cases below to find and remove. It must run before
// the node starts.
func smallSortedSSTs(t *testing.T) {
	prev := kv.SortedSSTBytes
	kv.SortedSSTBytes = 64 << 10
	t.Cleanup(func() { kv.SortedSSTBytes = prev })
}

func TestFailedBulkLoadLeavesNothing(t *testing.T) {
	smallSortedSSTs(t)
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, s)
	defer c.Close(ctx)
	for _, tb := range []string{"t", "u", "v"} {
		if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id int8 PRIMARY KEY, a int8, b text); CREATE INDEX %[1]s_a ON %[1]s (a)", tb)); err != nil {
			t.Fatal(err)
		}
	}
	// loaded waits, mid-COPY, until the load's rows are in storage, so
	// each case below has leftovers to remove.
	loaded := func(table string) func() {
		return func() {
			waitUntil(t, "the COPY wrote no rows into storage", func() bool { return tableStats(t, s, table).LiveKeys >= 10000 })
			if loadRecords(t, s) != 1 {
				t.Errorf("a bulk load in flight has %d records, want 1", loadRecords(t, s))
			}
		}
	}
	gone := func(table string) {
		t.Helper()
		waitUntil(t, "the failed load's storage was not cleared", func() bool {
			st := tableStats(t, s, table)
			return st.TotalBytes == 0 && st.Versions == 0 && loadRecords(t, s) == 0
		})
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s holds %d rows after a failed load, %v", table, n, err)
		}
		if _, err := c.Exec(ctx, "VACUUM "+table); err != nil {
			t.Fatal(err)
		}
		if st := tableStats(t, s, table); st.TotalBytes != 0 {
			t.Fatalf("%s: %d bytes after VACUUM", table, st.TotalBytes)
		}
	}

	// A bad row at 25,000, after two batches of 10,000 were written.
	_, err := c.PgConn().CopyFrom(ctx, &csvStream{n: 30000, bad: 25000, pauseAt: 24000, pause: loaded("t")}, "COPY t FROM STDIN WITH (FORMAT csv)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22P02" {
		t.Fatalf("COPY with a bad row: %v, want 22P02", err)
	}
	gone("t")
	// The same load without the bad row stays, in the bulk path's fresh
	// storage.
	if tag, err := c.PgConn().CopyFrom(ctx, &csvStream{n: 30000}, "COPY t FROM STDIN WITH (FORMAT csv)"); err != nil || tag.RowsAffected() != 30000 {
		t.Fatalf("COPY: %v, %v", tag, err)
	}
	if tableDesc(t, s, "t").PrimaryIndex.StorageID == 0 {
		t.Fatal("the COPY did not take the bulk path")
	}
	waitUntil(t, "a committed load's record stays", func() bool { return loadRecords(t, s) == 0 })
	var n, sum int64
	if err := c.QueryRow(ctx, "SELECT count(*), sum(a) FROM t WHERE a > 0").Scan(&n, &sum); err != nil || n != 30000 || sum != 3*30000*30001/2 {
		t.Fatalf("after a committed load: %d rows, sum %d, %v", n, sum, err)
	}

	// A connection killed in the middle of a COPY.
	k := connect(t, s)
	_, err = k.PgConn().CopyFrom(ctx, &csvStream{n: 30000, pauseAt: 24000, pause: func() {
		loaded("u")()
		_ = k.PgConn().Conn().Close()
	}}, "COPY u FROM STDIN WITH (FORMAT csv)")
	if err == nil {
		t.Fatal("a COPY over a closed connection succeeded")
	}
	gone("u")

	// A rollback to a savepoint taken before the load, then a commit.
	for _, q := range []string{"BEGIN", "SAVEPOINT s"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PgConn().CopyFrom(ctx, &csvStream{n: 30000, bad: 25000, pauseAt: 24000, pause: loaded("v")}, "COPY v FROM STDIN WITH (FORMAT csv)"); err == nil {
		t.Fatal("COPY with a bad row succeeded")
	}
	for _, q := range []string{"ROLLBACK TO SAVEPOINT s", "INSERT INTO v VALUES (1, 1, 'one')", "COMMIT"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	waitUntil(t, "the load rolled back to a savepoint was not cleared", func() bool {
		st := tableStats(t, s, "v")
		return st.LiveKeys == 2 && st.Versions == 2 && loadRecords(t, s) == 0 // the row and its index entry
	})
}

// A unique index build that meets a duplicate after writing part of its
// entries, and a table rewrite (ALTER COLUMN TYPE) that fails at a row
// it cannot convert, leave nothing of their fresh storage.
func TestFailedIndexBuildAndRewriteLeaveNothing(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, s)
	defer c.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE t (id int8 PRIMARY KEY, a int8, b text)",
		"INSERT INTO t SELECT i, i, CASE WHEN i = 30000 THEN 'x' ELSE i::text END FROM generate_series(1, 30000) AS g(i)",
		"UPDATE t SET a = 1 WHERE id = 30000",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := tableStats(t, s, "t")
	settled := func(what string) {
		t.Helper()
		waitUntil(t, what+": its storage was not cleared", func() bool {
			st := tableStats(t, s, "t")
			return st.LiveKeys == before.LiveKeys && st.TotalBytes == before.TotalBytes && loadRecords(t, s) == 0
		})
	}
	_, err := c.Exec(ctx, "CREATE UNIQUE INDEX t_a ON t (a)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		t.Fatalf("CREATE UNIQUE INDEX over a duplicate: %v, want 23505", err)
	}
	settled("a failed CREATE INDEX")
	_, err = c.Exec(ctx, "ALTER TABLE t ALTER COLUMN b TYPE int8 USING b::int8")
	if !errors.As(err, &pe) || pe.Code != "22P02" {
		t.Fatalf("ALTER COLUMN TYPE over an unconvertible row: %v, want 22P02", err)
	}
	settled("a failed rewrite")
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 30000 {
		t.Fatalf("t holds %d rows, %v", n, err)
	}
}

const bulkCrashEnvDir = "CAIRN_BULK_CRASH_DIR"

// TestBulkLoadCrashChild is TestBulkLoadCrash's child: it runs a node on
// the directory, starts a COPY into t, says "loaded" once rows are in
// storage, and waits to be killed.
func TestBulkLoadCrashChild(t *testing.T) {
	dir := os.Getenv(bulkCrashEnvDir)
	if dir == "" {
		t.Skip("run by TestBulkLoadCrash only")
	}
	smallSortedSSTs(t)
	s := start(t, Config{Insecure: true, StoreDir: dir})
	ctx := context.Background()
	c := connect(t, s)
	if _, err := c.Exec(ctx, "CREATE TABLE t (id int8 PRIMARY KEY, a int8, b text)"); err != nil {
		t.Fatal(err)
	}
	_, _ = c.PgConn().CopyFrom(ctx, &csvStream{n: 30000, pauseAt: 24000, pause: func() {
		waitUntil(t, "no rows in storage", func() bool { return tableStats(t, s, "t").LiveKeys >= 10000 && loadRecords(t, s) == 1 })
		fmt.Println("loaded")
		select {}
	}}, "COPY t FROM STDIN WITH (FORMAT csv)")
}

// TestBulkLoadCrash kills a node (SIGKILL) in the middle of a bulk COPY
// and starts it again on its store: its sweep clears what the load wrote.
func TestBulkLoadCrash(t *testing.T) {
	if os.Getenv(bulkCrashEnvDir) != "" {
		t.Skip("child")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBulkLoadCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), bulkCrashEnvDir+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var seen []string
	loaded := false
	for !loaded && sc.Scan() {
		loaded = sc.Text() == "loaded"
		seen = append(seen, sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !loaded {
		t.Fatalf("the child never loaded: %q, %s", seen, stderr.String())
	}

	// The child said "loaded" once its rows were in storage with a
	// record; the restarted node's sweep clears them.
	s := start(t, Config{Insecure: true, StoreDir: dir})
	defer s.Stop(context.Background())
	// The sweep counts a load once it has cleared the load's storage and
	// deleted its record, so the count can trail both by a moment.
	waitUntil(t, "the sweep did not clear the killed load", func() bool {
		st := tableStats(t, s, "t")
		return st.TotalBytes == 0 && loadRecords(t, s) == 0 && metric(t, s, "cairn_gc_bulk_loads_swept_total") >= 1
	})
	if n := metric(t, s, "cairn_gc_bulk_loads_swept_total"); n != 1 {
		t.Fatalf("the sweep cleared %d loads, want 1 (child output %q, %s)", n, seen, stderr.String())
	}
	c := connect(t, s)
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("t holds %d rows after the crash, %v", n, err)
	}
}
