package exec_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/server"
)

// The bulk path for tables that existed before the loading transaction
// (bulk.go): TRUNCATE moves a table to fresh storage and frees the old
// one after commit, a load into a table truncated in its transaction is
// written in bulk, and COPY into an existing empty table decides
// emptiness after writing its descriptor, so that a racing writer is
// either seen (the transactional path) or fails with 40001.

// oldPrimaryKeys counts the keys, at any version, left in the storage of
// the primary index that desc names (read below SQL, now).
func storedKeys(t *testing.T, s *server.Server, table string, c *pgx.Conn) func() int {
	t.Helper()
	desc := tableDesc(t, s, c, table)
	l, err := desc.Layout()
	if err != nil {
		t.Fatal(err)
	}
	sp := l.IndexSpan(&l.Primary)
	return func() int {
		t.Helper()
		kvs, err := s.DB().Scan(context.Background(), sp.Key, sp.EndKey, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(kvs)
	}
}

// sameThroughIndexes checks that the rows of table read through its index
// on a and its unique index on b equal those of a table scan.
func sameThroughIndexes(t *testing.T, c *pgx.Conn, table string) {
	t.Helper()
	ctx := context.Background()
	for _, q := range [][2]string{
		{"SELECT count(*), coalesce(sum(id), 0) FROM %s WHERE a >= 0", "SELECT count(*), coalesce(sum(id), 0) FROM %s WHERE a + 0 >= 0"},
		{"SELECT count(*), coalesce(sum(id), 0) FROM %s WHERE b >= ''", "SELECT count(*), coalesce(sum(id), 0) FROM %s WHERE b || '' >= ''"},
	} {
		var n1, s1, n2, s2 int64
		if err := c.QueryRow(ctx, fmt.Sprintf(q[0], table)).Scan(&n1, &s1); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, fmt.Sprintf(q[1], table)).Scan(&n2, &s2); err != nil {
			t.Fatal(err)
		}
		if n1 != n2 || s1 != s2 {
			t.Fatalf("%s: index gives %d rows (sum %d), table %d rows (sum %d)", table, n1, s1, n2, s2)
		}
	}
}

// TestBulkTruncate: TRUNCATE gives the table fresh storage and frees the
// old after commit (not after a rollback); a COPY after it in the same
// transaction takes the bulk path; a reader sees the old rows until
// commit, then only the new ones, also after a restart.
func TestBulkTruncate(t *testing.T) {
	dir := t.TempDir()
	s, url := startNode(t, dir)
	c, r := connect(t, url), connect(t, url)
	ctx := context.Background()
	exec(t, c, fmt.Sprintf(ddl, "t"))
	exec(t, c, "CREATE INDEX t_a_idx ON t (a)")
	exec(t, c, "INSERT INTO t (id, a, b) SELECT i, i, 'old-' || i FROM generate_series(1, 3000) AS i")
	old := storedKeys(t, s, "t", c)
	if n := old(); n != 3000 {
		t.Fatalf("before TRUNCATE the primary storage holds %d keys, want 3000", n)
	}
	v0 := tableDesc(t, s, c, "t").Version

	// A rolled-back TRUNCATE changes and frees nothing.
	exec(t, c, "BEGIN")
	exec(t, c, "TRUNCATE t")
	exec(t, c, "ROLLBACK")
	if n, _ := stats(t, c, "t"); n != 3000 || old() != 3000 || tableDesc(t, s, c, "t").Version != v0 {
		t.Fatalf("after a rolled-back TRUNCATE: %d rows, %d stored keys", n, old())
	}
	// As does one rolled back to a savepoint, and the COPY after it goes
	// the transactional way (the table is not empty).
	exec(t, c, "BEGIN")
	exec(t, c, "SAVEPOINT s")
	exec(t, c, "TRUNCATE t")
	exec(t, c, "ROLLBACK TO SAVEPOINT s")
	if _, err := copyIn(c, "t (id, a, b)", "5001,1,x\n"); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "COMMIT")
	if n, _ := stats(t, c, "t"); n != 3001 || old() != 3001 || tableDesc(t, s, c, "t").Version != v0 {
		t.Fatalf("after TRUNCATE rolled back to a savepoint: %d rows, %d stored keys, version %d (was %d)", n, old(), tableDesc(t, s, c, "t").Version, v0)
	}

	exec(t, c, "BEGIN")
	exec(t, c, "TRUNCATE t")
	if n, _ := stats(t, c, "t"); n != 0 {
		t.Fatalf("the truncating transaction sees %d rows", n)
	}
	if _, err := copyIn(c, "t (id, a, b)", csvRows(20000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := r.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 3001 {
		t.Fatalf("a reader during TRUNCATE+COPY: %d rows, %v; want the old 3001", n, err)
	}
	exec(t, c, "COMMIT")
	// TRUNCATE wrote one version, the bulk COPY another.
	if v := tableDesc(t, s, c, "t").Version; v != v0+2 {
		t.Fatalf("descriptor version %d after TRUNCATE+COPY, want %d (TRUNCATE and a bulk load)", v, v0+2)
	}
	if k := old(); k != 0 {
		t.Fatalf("the old primary storage still holds %d keys after the TRUNCATE committed", k)
	}
	if err := r.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 20000 {
		t.Fatalf("a reader after commit: %d rows, %v", n, err)
	}
	sameThroughIndexes(t, r, "t")

	// INSERT ... SELECT after TRUNCATE in one transaction loads in bulk
	// too, and a failure in it leaves the TRUNCATE's empty table.
	exec(t, c, "BEGIN")
	exec(t, c, "TRUNCATE t")
	if _, err := c.Exec(ctx, "INSERT INTO t (id, a, b) SELECT i, i, 'dup' FROM generate_series(1, 10) AS i"); sqlState(err) != "23505" {
		t.Fatalf("INSERT ... SELECT of duplicate b: %v, want 23505", err)
	}
	exec(t, c, "ROLLBACK")
	v1 := tableDesc(t, s, c, "t").Version
	exec(t, c, "BEGIN")
	exec(t, c, "TRUNCATE t")
	exec(t, c, "INSERT INTO t (id, a, b) SELECT i, i % 97, 'ins-' || i FROM generate_series(1, 7000) AS i")
	exec(t, c, "COMMIT")
	if v := tableDesc(t, s, c, "t").Version; v != v1+2 {
		t.Fatalf("descriptor version %d after TRUNCATE+INSERT ... SELECT, want %d", v, v1+2)
	}
	c.Close(ctx)
	r.Close(ctx)
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s, url = startNode(t, dir)
	defer s.Stop(ctx)
	c = connect(t, url)
	if n, sum := stats(t, c, "t"); n != 7000 || sum != sumMod(7000, 97) {
		t.Fatalf("after restart: %d rows, sum(a) %d", n, sum)
	}
	sameThroughIndexes(t, c, "t")
}

func sumMod(n, m int64) int64 {
	var s int64
	for i := int64(1); i <= n; i++ {
		s += i % m
	}
	return s
}

// TestBulkTruncateColocated: TRUNCATE and DROP TABLE of one table of a
// colocated database free its rows (after commit, not after a rollback)
// and leave its neighbours' rows, which share its tablet, alone.
func TestBulkTruncateColocated(t *testing.T) {
	s, url := startNode(t, "")
	defer s.Stop(context.Background())
	c := connect(t, url)
	exec(t, c, "CREATE DATABASE colo WITH colocated = true")
	c = connect(t, strings.Replace(url, "/postgres?", "/colo?", 1))
	for _, tb := range []string{"a", "b", "z"} {
		exec(t, c, fmt.Sprintf(ddl, tb))
		exec(t, c, fmt.Sprintf("INSERT INTO %s (id, a, b) SELECT i, i, 'r' || i FROM generate_series(1, 500) AS i", tb))
	}
	stored := map[string]func() int{}
	for _, tb := range []string{"a", "b", "z"} {
		stored[tb] = storedKeys(t, s, tb, c)
	}
	exec(t, c, "TRUNCATE b")
	for tb, want := range map[string]int{"a": 500, "b": 0, "z": 500} {
		if got := stored[tb](); got != want {
			t.Errorf("after TRUNCATE b, %s's storage holds %d keys, want %d", tb, got, want)
		}
		if n, _ := stats(t, c, tb); n != int64(want) {
			t.Errorf("after TRUNCATE b, %s holds %d rows, want %d", tb, n, want)
		}
		sameThroughIndexes(t, c, tb)
	}
	// DROP TABLE frees the table's storage once it commits, and only
	// then; the neighbours keep theirs.
	exec(t, c, "BEGIN")
	exec(t, c, "DROP TABLE z")
	exec(t, c, "ROLLBACK")
	if got := stored["z"](); got != 500 {
		t.Errorf("after a rolled-back DROP TABLE z, its storage holds %d keys, want 500", got)
	}
	exec(t, c, "DROP TABLE z")
	if got := stored["z"](); got != 0 {
		t.Errorf("after DROP TABLE z, its storage holds %d keys, want 0", got)
	}
	if got := stored["a"](); got != 500 {
		t.Errorf("after DROP TABLE z, a's storage holds %d keys, want 500", got)
	}
	sameThroughIndexes(t, c, "a")
}

// TestBulkCopyExisting: COPY into a table that existed before its
// transaction loads in bulk when the table is empty, at every isolation
// level, atomically; otherwise (rows, the transaction's own earlier rows,
// a foreign key to another table) it goes the transactional way without
// writing a descriptor version. What it loaded survives a restart.
func TestBulkCopyExisting(t *testing.T) {
	dir := t.TempDir()
	s, url := startNode(t, dir)
	c := connect(t, url)
	ctx := context.Background()
	version := func(table string) int64 { return int64(tableDesc(t, s, c, table).Version) }

	// A failure late in the input leaves the table empty and unchanged.
	exec(t, c, fmt.Sprintf(ddl, "e"))
	v := version("e")
	if _, err := copyIn(c, "e (id, a, b)", csvRows(30000, 25000, 0)); sqlState(err) != "22P02" {
		t.Fatalf("COPY with a bad row: %v, want 22P02", err)
	}
	if _, err := copyIn(c, "e (id, a, b)", csvRows(30000, 0, 25000)); sqlState(err) != "23505" {
		t.Fatalf("COPY with a duplicate key: %v, want 23505", err)
	}
	if n, _ := stats(t, c, "e"); n != 0 || version("e") != v {
		t.Fatalf("after failed COPYs: %d rows, version %d (was %d)", n, version("e"), v)
	}
	for _, iso := range []string{"READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"} {
		exec(t, c, "TRUNCATE e")
		v := version("e")
		exec(t, c, "BEGIN ISOLATION LEVEL "+iso)
		if _, err := copyIn(c, "e (id, a, b)", csvRows(12000, 0, 0)); err != nil {
			t.Fatalf("%s: %v", iso, err)
		}
		exec(t, c, "COMMIT")
		if version("e") != v+1 {
			t.Fatalf("%s: COPY into an empty table did not load in bulk", iso)
		}
		if n, _ := stats(t, c, "e"); n != 12000 {
			t.Fatalf("%s: %d rows", iso, n)
		}
	}
	sameThroughIndexes(t, c, "e")

	// Not empty: transactional, no descriptor version.
	v = version("e")
	if _, err := copyIn(c, "e (id, a, b)", "20001,1,more\n"); err != nil {
		t.Fatal(err)
	}
	if n, _ := stats(t, c, "e"); n != 12001 || version("e") != v {
		t.Fatalf("COPY into a non-empty table: %d rows, version %d (was %d)", n, version("e"), v)
	}
	// The transaction's own earlier row: transactional, and it is kept.
	exec(t, c, fmt.Sprintf(ddl, "own"))
	v = version("own")
	exec(t, c, "BEGIN")
	exec(t, c, "INSERT INTO own (id, a, b) VALUES (0, 0, 'first')")
	if _, err := copyIn(c, "own (id, a, b)", csvRows(3000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "COMMIT")
	if n, _ := stats(t, c, "own"); n != 3001 || version("own") != v {
		t.Fatalf("COPY after an INSERT in its transaction: %d rows, version %d (was %d)", n, version("own"), v)
	}
	// A rollback to a savepoint before a bulk COPY undoes it.
	exec(t, c, "TRUNCATE own")
	exec(t, c, "BEGIN")
	exec(t, c, "SAVEPOINT s")
	if _, err := copyIn(c, "own (id, a, b)", csvRows(3000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "ROLLBACK TO SAVEPOINT s")
	if n, _ := stats(t, c, "own"); n != 0 {
		t.Fatalf("after ROLLBACK TO SAVEPOINT: %d rows", n)
	}
	if _, err := copyIn(c, "own (id, a, b)", csvRows(100, 0, 0)); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "COMMIT")
	if n, _ := stats(t, c, "own"); n != 100 {
		t.Fatalf("after the COPY that followed the rollback: %d rows", n)
	}

	// A foreign key to another table: transactional, and enforced.
	exec(t, c, "CREATE TABLE parent (id int8 PRIMARY KEY)")
	exec(t, c, "INSERT INTO parent SELECT generate_series(1, 100)")
	exec(t, c, "CREATE TABLE child (id int8 PRIMARY KEY, p int8 REFERENCES parent, d int8 GENERATED ALWAYS AS (p * 2) STORED)")
	v = version("child")
	if _, err := c.PgConn().CopyFrom(ctx, strings.NewReader("1,5\n2,500\n"), "COPY child (id, p) FROM STDIN WITH (FORMAT csv)"); sqlState(err) != "23503" {
		t.Fatalf("COPY of a dangling reference: %v, want 23503", err)
	}
	if _, err := c.PgConn().CopyFrom(ctx, strings.NewReader("1,5\n2,50\n"), "COPY child (id, p) FROM STDIN WITH (FORMAT csv)"); err != nil {
		t.Fatal(err)
	}
	var sum int64
	if err := c.QueryRow(ctx, "SELECT sum(d) FROM child").Scan(&sum); err != nil || sum != 110 || version("child") != v {
		t.Fatalf("child: sum(d) %d, %v, version %d (was %d)", sum, err, version("child"), v)
	}
	// A table others reference loads in bulk; their checks see its rows
	// after commit.
	exec(t, c, "CREATE TABLE p2 (id int8 PRIMARY KEY, s bigserial)")
	exec(t, c, "CREATE TABLE c2 (id int8 PRIMARY KEY, p int8 REFERENCES p2)")
	v = version("p2")
	if _, err := c.PgConn().CopyFrom(ctx, strings.NewReader("1\n2\n3\n"), "COPY p2 (id) FROM STDIN"); err != nil {
		t.Fatal(err)
	}
	if version("p2") != v+1 {
		t.Fatal("COPY into an empty referenced table did not load in bulk")
	}
	exec(t, c, "INSERT INTO c2 VALUES (1, 3)")
	if _, err := c.Exec(ctx, "INSERT INTO c2 VALUES (2, 4)"); sqlState(err) != "23503" {
		t.Fatalf("INSERT of a dangling reference: %v, want 23503", err)
	}
	if err := c.QueryRow(ctx, "SELECT sum(s) FROM p2").Scan(&sum); err != nil || sum != 6 {
		t.Fatalf("p2: sum of the serial column %d, %v", sum, err)
	}
	// What the bulk COPYs committed survives a restart.
	c.Close(ctx)
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	s, url = startNode(t, dir)
	defer s.Stop(ctx)
	c = connect(t, url)
	if n, _ := stats(t, c, "e"); n != 12001 {
		t.Fatalf("after restart e holds %d rows, want 12001", n)
	}
	sameThroughIndexes(t, c, "e")
	if n, _ := stats(t, c, "own"); n != 100 {
		t.Fatalf("after restart own holds %d rows, want 100", n)
	}
}

// TestBulkCopyRacingWriter: a writer racing a COPY into an empty table
// loses no acknowledged row: each either committed before the load
// decided emptiness (the COPY then went the transactional way) or failed
// with 40001, or ran after it; indexes agree with the table throughout.
func TestBulkCopyRacingWriter(t *testing.T) {
	s, url := startNode(t, "")
	defer s.Stop(context.Background())
	c, w := connect(t, url), connect(t, url)
	ctx := context.Background()

	// Deterministic: the writer's row goes in while the load's descriptor
	// write is pending; its commit must not pass validation.
	exec(t, c, fmt.Sprintf(ddl, "d"))
	exec(t, c, "BEGIN")
	if _, err := copyIn(c, "d (id, a, b)", csvRows(5000, 0, 0)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Exec(ctx, "INSERT INTO d (id, a, b) VALUES (900001, 1, 'w')")
		done <- err
	}()
	select {
	case err := <-done:
		// Finished before the load committed: it must have failed.
		if sqlState(err) != "40001" {
			t.Fatalf("a writer racing a pending bulk COPY: %v, want 40001 (or to wait)", err)
		}
		exec(t, c, "COMMIT")
		if n, _ := stats(t, c, "d"); n != 5000 {
			t.Fatalf("d: %d rows, want 5000", n)
		}
	case <-time.After(300 * time.Millisecond):
		// Waiting on the load: after its commit the row lands in the new
		// storage (or fails with 40001).
		exec(t, c, "COMMIT")
		err := <-done
		want := int64(5000)
		if err == nil {
			want++
		} else if sqlState(err) != "40001" {
			t.Fatal(err)
		}
		if n, _ := stats(t, c, "d"); n != want {
			t.Fatalf("d: %d rows, want %d", n, want)
		}
	}
	sameThroughIndexes(t, c, "d")

	// Deterministic, the other order: a writer's uncommitted row is in
	// the table when the COPY starts. The COPY goes the transactional
	// way without waiting for it and without writing a descriptor
	// version, so the writer's commit passes validation afterwards.
	exec(t, c, fmt.Sprintf(ddl, "p"))
	v := tableDesc(t, s, c, "p").Version
	tx, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO p (id, a, b) VALUES (900001, 1, 'w')"); err != nil {
		t.Fatal(err)
	}
	if _, err := copyIn(c, "p (id, a, b)", csvRows(5000, 0, 0)); err != nil {
		t.Fatalf("COPY beside a pending writer: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the writer's commit after a transactional COPY: %v", err)
	}
	if n, _ := stats(t, c, "p"); n != 5001 || tableDesc(t, s, c, "p").Version != v {
		t.Fatalf("p: %d rows, version %d (was %d); want 5001 and no new version", n, tableDesc(t, s, c, "p").Version, v)
	}
	sameThroughIndexes(t, c, "p")

	// Random: a few inserts, each in a transaction of its own held open
	// for a moment, timed around the start of a COPY into the table,
	// emptied between rounds, so that some land before the load decides
	// emptiness, some while its descriptor write is pending and some
	// after it commits.
	exec(t, c, fmt.Sprintf(ddl, "race"))
	for round := range 16 {
		exec(t, c, "TRUNCATE race")
		v = tableDesc(t, s, c, "race").Version
		var (
			mu    sync.Mutex
			acked []int
			wg    sync.WaitGroup
		)
		wg.Go(func() {
			time.Sleep(time.Duration(round%8) * 500 * time.Microsecond)
			for i := range 3 {
				id := 1000000 + round*100 + i
				tx, err := w.Begin(ctx)
				if err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				_, err = tx.Exec(ctx, fmt.Sprintf("INSERT INTO race (id, a, b) VALUES (%d, %d, 'w%d')", id, i, id))
				if err == nil {
					time.Sleep(time.Millisecond)
					err = tx.Commit(ctx)
				} else {
					_ = tx.Rollback(ctx)
				}
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				case sqlState(err) != "40001":
					t.Errorf("writer: %v", err)
					return
				}
				time.Sleep(time.Duration(round%3) * time.Millisecond)
			}
		})
		_, copyErr := copyIn(c, "race (id, a, b)", csvRows(5000, 0, 0))
		wg.Wait()
		if copyErr != nil && sqlState(copyErr) != "40001" {
			t.Fatalf("round %d: COPY: %v", round, copyErr)
		}
		var got int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM race WHERE id >= 1000000").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != int64(len(acked)) {
			t.Fatalf("round %d: %d writer rows in the table, %d acknowledged", round, got, len(acked))
		}
		for _, id := range acked {
			var one int
			if err := c.QueryRow(ctx, fmt.Sprintf("SELECT 1 FROM race WHERE id = %d", id)).Scan(&one); err != nil {
				t.Fatalf("round %d: acknowledged row %d: %v", round, id, err)
			}
		}
		var loaded int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM race WHERE id < 1000000").Scan(&loaded); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int64{true: 5000, false: 0}[copyErr == nil]; loaded != want {
			t.Fatalf("round %d: %d COPY rows in the table, want %d (COPY error %v)", round, loaded, want, copyErr)
		}
		sameThroughIndexes(t, c, "race")
		t.Logf("round %d: bulk %v, COPY error %v, %d of 3 writes acknowledged", round, tableDesc(t, s, c, "race").Version > v, copyErr, len(acked))
	}
}
