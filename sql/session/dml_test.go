package session_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

func mustExec(t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	if _, err := simple(c, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, c *pgx.Conn, sql string) int64 {
	t.Helper()
	var n int64
	if err := c.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestStatementsAndTransactions(t *testing.T) {
	url := startServer(t)
	var notices []string
	c := connect(t, url, &notices)
	ctx := context.Background()

	// DDL and DML through the simple protocol, with their tags; an
	// inline INDEX (a derived statement) shares its table's tag.
	tags, err := simple(c, "CREATE TABLE kv (k INT PRIMARY KEY, v TEXT, INDEX (v)); INSERT INTO kv VALUES (1, 'a'), (2, 'b'); UPDATE kv SET v = 'c' WHERE k = 2; DELETE FROM kv WHERE k = 3; SELECT * FROM kv")
	if err != nil || strings.Join(tags, ",") != "CREATE TABLE,INSERT 0 2,UPDATE 1,DELETE 0,SELECT 2" {
		t.Fatalf("tags %v, %v", tags, err)
	}
	// A column used only by ORDER BY is hidden from the client.
	res, err := c.PgConn().Exec(ctx, "SELECT v FROM kv ORDER BY k DESC").ReadAll()
	if err != nil || len(res[0].FieldDescriptions) != 1 || len(res[0].Rows) != 2 || string(res[0].Rows[0][0]) != "c" || len(res[0].Rows[0]) != 1 {
		t.Fatalf("ORDER BY a hidden column: %+v %v", res, err)
	}
	// IF NOT EXISTS on an existing table skips the derived index too.
	notices = nil
	if tags, err := simple(c, "CREATE TABLE IF NOT EXISTS kv (k INT PRIMARY KEY, v TEXT, INDEX (v))"); err != nil || tags[0] != "CREATE TABLE" {
		t.Fatalf("IF NOT EXISTS: %v %v", tags, err)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], `relation "kv" already exists, skipping`) {
		t.Errorf("IF NOT EXISTS notices: %v", notices)
	}

	// Statements of one Query message are one implicit transaction.
	if _, err := simple(c, "INSERT INTO kv VALUES (10, 'x'); SELECT 1/0"); sqlState(err) != "22012" {
		t.Fatalf("want division by zero, got %v", err)
	}
	if n := count(t, c, "SELECT count(*) FROM kv WHERE k = 10"); n != 0 {
		t.Errorf("the failed implicit transaction kept its insert")
	}
	// ... unless they hold transaction control.
	if _, err := simple(c, "INSERT INTO kv VALUES (11, 'x'); BEGIN; INSERT INTO kv VALUES (12, 'y'); SELECT 1/0"); sqlState(err) != "22012" {
		t.Fatalf("want division by zero, got %v", err)
	}
	mustExec(t, c, "ROLLBACK")
	if n := count(t, c, "SELECT count(*) FROM kv WHERE k IN (11, 12)"); n != 1 {
		t.Errorf("statements around BEGIN: %d rows, want the one before BEGIN", n)
	}

	// A block commits or rolls back as a whole, and sees its own writes.
	mustExec(t, c, "BEGIN")
	mustExec(t, c, "INSERT INTO kv VALUES (20, 'in')")
	if n := count(t, c, "SELECT count(*) FROM kv WHERE k = 20"); n != 1 {
		t.Errorf("own write not visible")
	}
	mustExec(t, c, "ROLLBACK")
	if n := count(t, c, "SELECT count(*) FROM kv WHERE k = 20"); n != 0 {
		t.Errorf("rolled back write visible")
	}
	// Savepoints undo writes.
	mustExec(t, c, "BEGIN; INSERT INTO kv VALUES (30, 'a'); SAVEPOINT s")
	if _, err := simple(c, "INSERT INTO kv VALUES (30, 'dup')"); sqlState(err) != "23505" {
		t.Fatalf("duplicate: %v", err)
	}
	mustExec(t, c, "ROLLBACK TO s; INSERT INTO kv VALUES (31, 'b'); SAVEPOINT t; INSERT INTO kv VALUES (32, 'c'); ROLLBACK TO t; COMMIT")
	rows, _ := c.Query(ctx, "SELECT k FROM kv WHERE k >= 30 ORDER BY k")
	ks, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(ks) != 2 || ks[0] != 30 || ks[1] != 31 {
		t.Errorf("after savepoints: %v %v", ks, err)
	}

	// Read-only transactions refuse writes and DDL.
	mustExec(t, c, "BEGIN READ ONLY")
	if _, err := simple(c, "INSERT INTO kv VALUES (40, 'r')"); sqlState(err) != "25006" || !strings.Contains(err.Error(), "cannot execute INSERT in a read-only transaction") {
		t.Errorf("write in read-only: %v", err)
	}
	mustExec(t, c, "ROLLBACK; SET default_transaction_read_only = on")
	for sql, want := range map[string]string{
		"CREATE TABLE nope (a INT)":             "cannot execute CREATE TABLE in a read-only transaction",
		"-- why\nCREATE UNIQUE INDEX ON kv (v)": "cannot execute CREATE INDEX in a read-only transaction",
		"DROP TABLE kv":                         "cannot execute DROP TABLE in a read-only transaction",
		"/* x */ COMMENT ON TABLE kv IS 'k'":    "cannot execute COMMENT ON in a read-only transaction",
	} {
		if _, err := simple(c, sql); sqlState(err) != "25006" || !strings.Contains(err.Error(), want) {
			t.Errorf("%s in read-only: %v, want %q", sql, err, want)
		}
	}
	if n := count(t, c, "SELECT count(*) FROM kv"); n < 3 {
		t.Errorf("reads in read-only: %d", n)
	}
	mustExec(t, c, "SET default_transaction_read_only = off")

	// The extended protocol's implicit transaction ends at Sync; inside a
	// block it does not.
	if _, err := c.Exec(ctx, "INSERT INTO kv VALUES ($1, $2)", 50, "p"); err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO kv VALUES ($1, $2)", 51, "q"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, c, "SELECT count(*) FROM kv WHERE k IN (50, 51)"); n != 1 {
		t.Errorf("extended protocol transactions: %d rows, want 1", n)
	}
}

func TestCopy(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, price NUMERIC(8,2))")
	// pgx's CopyFrom sends the binary format.
	n, err := c.CopyFrom(ctx, pgx.Identifier{"items"}, []string{"id", "name", "price"}, pgx.CopyFromRows([][]any{
		{1, "granite", "12.50"}, {2, "slate", nil}, {3, "", "0.10"},
	}))
	if err != nil || n != 3 {
		t.Fatalf("CopyFrom: %d %v", n, err)
	}
	// Text format through the raw connection.
	tag, err := c.PgConn().CopyFrom(ctx, strings.NewReader("4\tbasalt\t21.75\n5\t\\N\t1\n"), "COPY items FROM STDIN")
	if err != nil || tag.String() != "COPY 2" {
		t.Fatalf("text COPY FROM: %v %v", tag, err)
	}
	var out bytes.Buffer
	tag, err = c.PgConn().CopyTo(ctx, &out, "COPY items TO STDOUT (FORMAT csv)")
	if err != nil || tag.String() != "COPY 5" {
		t.Fatalf("COPY TO: %v %v", tag, err)
	}
	want := "1,granite,12.50\n2,slate,\n3,\"\",0.10\n4,basalt,21.75\n5,,1.00\n"
	if out.String() != want {
		t.Errorf("COPY TO:\n%s\nwant:\n%s", out.String(), want)
	}
	// A bad row fails the COPY and inserts nothing; the connection goes on.
	_, err = c.PgConn().CopyFrom(ctx, strings.NewReader("6\tx\t1\n7\ty\tnotanumber\n"), "COPY items FROM STDIN")
	if sqlState(err) != "22P02" {
		t.Fatalf("bad COPY row: %v", err)
	}
	if n := count(t, c, "SELECT count(*) FROM items"); n != 5 {
		t.Errorf("after failed COPY: %d rows", n)
	}
	if _, err := simple(c, "COPY items FROM '/etc/passwd'"); sqlState(err) != "0A000" {
		t.Errorf("COPY from a file: %v", err)
	}
}

// TestConflicts checks 40001 inside a block and the automatic retry of
// implicit transactions.
func TestConflicts(t *testing.T) {
	url := startServer(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE acct (id INT PRIMARY KEY, bal INT); INSERT INTO acct VALUES (1, 100), (2, 100)")

	mustExec(t, a, "BEGIN ISOLATION LEVEL SERIALIZABLE")
	if n := count(t, a, "SELECT bal FROM acct WHERE id = 1"); n != 100 {
		t.Fatalf("bal %d", n)
	}
	mustExec(t, b, "UPDATE acct SET bal = bal + 1 WHERE id = 1")
	_, err := simple(a, "UPDATE acct SET bal = bal + 10 WHERE id = 1")
	if err == nil {
		_, err = simple(a, "COMMIT")
	} else {
		if a.PgConn().TxStatus() != 'E' {
			t.Errorf("status after 40001 in block: %c", a.PgConn().TxStatus())
		}
		mustExec(t, a, "ROLLBACK")
	}
	if sqlState(err) != "40001" || !strings.Contains(err.Error(), "restart transaction: could not serialize access due to") {
		t.Fatalf("conflicting serializable transaction: %v", err)
	}
	if n := count(t, a, "SELECT bal FROM acct WHERE id = 1"); n != 101 {
		t.Errorf("bal after conflict %d, want 101", n)
	}

	// Concurrent implicit transactions on one row: the session retries
	// the ones that lose, so every client statement succeeds.
	const workers, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		c := connect(t, url, nil)
		mustExec(t, c, "SET default_transaction_isolation = serializable")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := simple(c, "UPDATE acct SET bal = bal + 1 WHERE id = 2"); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("implicit transaction not retried: %v", err)
	}
	if n := count(t, a, "SELECT bal FROM acct WHERE id = 2"); n != 100+workers*each {
		t.Errorf("bal %d, want %d", n, 100+workers*each)
	}
}

func TestSQLCursors(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	if _, err := simple(c, "DECLARE c CURSOR FOR SELECT 1"); sqlState(err) != "25P01" {
		t.Errorf("DECLARE outside a block: %v", err)
	}
	mustExec(t, c, "BEGIN")
	tags, err := simple(c, "DECLARE c CURSOR FOR SELECT g FROM generate_series(1, 10) AS g")
	if err != nil || tags[0] != "DECLARE CURSOR" {
		t.Fatalf("DECLARE: %v %v", tags, err)
	}
	fetch := func(sql string) (string, string) {
		t.Helper()
		res, err := c.PgConn().Exec(ctx, sql).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var vals []string
		for _, r := range res[0].Rows {
			vals = append(vals, string(r[0]))
		}
		return strings.Join(vals, ","), res[0].CommandTag.String()
	}
	for _, tc := range []struct{ sql, rows, tag string }{
		{"FETCH 3 FROM c", "1,2,3", "FETCH 3"},
		{"FETCH c", "4", "FETCH 1"},
		{"MOVE 2 IN c", "", "MOVE 2"},
		{"FETCH RELATIVE 2 FROM c", "8", "FETCH 1"},
		{"FETCH ALL FROM c", "9,10", "FETCH 2"},
		{"FETCH NEXT FROM c", "", "FETCH 0"},
	} {
		rows, tag := fetch(tc.sql)
		if rows != tc.rows || tag != tc.tag {
			t.Errorf("%s: rows %q tag %q, want %q %q", tc.sql, rows, tag, tc.rows, tc.tag)
		}
	}
	if _, err := simple(c, "FETCH PRIOR FROM c"); sqlState(err) != "0A000" {
		t.Errorf("FETCH PRIOR: %v", err)
	}
	mustExec(t, c, "ROLLBACK; BEGIN; DECLARE c CURSOR FOR SELECT 1; DECLARE d CURSOR FOR SELECT 2")
	if _, err := simple(c, "DECLARE c CURSOR FOR SELECT 3"); sqlState(err) != "42P03" {
		t.Errorf("duplicate cursor: %v", err)
	}
	mustExec(t, c, "ROLLBACK; BEGIN; DECLARE c CURSOR FOR SELECT 1")
	if tags, err := simple(c, "CLOSE c"); err != nil || tags[0] != "CLOSE CURSOR" {
		t.Errorf("CLOSE: %v %v", tags, err)
	}
	if _, err := simple(c, "FETCH c"); sqlState(err) != "34000" {
		t.Errorf("FETCH after CLOSE: %v", err)
	}
	mustExec(t, c, "ROLLBACK")
	// Cursors end with their transaction.
	mustExec(t, c, "BEGIN; DECLARE e CURSOR FOR SELECT 1; COMMIT; BEGIN")
	if _, err := simple(c, "FETCH e"); sqlState(err) != "34000" {
		t.Errorf("cursor survived COMMIT: %v", err)
	}
	mustExec(t, c, "ROLLBACK")
}

func TestPrepareExecute(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE pe (a INT PRIMARY KEY, b TEXT)")
	tags, err := simple(c, "PREPARE ins (int, text) AS INSERT INTO pe VALUES ($1, $2); EXECUTE ins(1, 'one'); EXECUTE ins(2 + 1, 'three')")
	if err != nil || strings.Join(tags, ",") != "PREPARE,INSERT 0 1,INSERT 0 1" {
		t.Fatalf("PREPARE/EXECUTE: %v %v", tags, err)
	}
	mustExec(t, c, "PREPARE sel AS SELECT b FROM pe WHERE a = $1")
	res, err := c.PgConn().Exec(ctx, "EXECUTE sel(3)").ReadAll()
	if err != nil || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "three" || res[0].CommandTag.String() != "SELECT 1" {
		t.Fatalf("EXECUTE sel: %+v %v", res, err)
	}
	for _, tc := range []struct{ sql, code string }{
		{"PREPARE sel AS SELECT 1", "42P05"},
		{"EXECUTE nosuch", "26000"},
		{"EXECUTE sel", "42601"},
		{"EXECUTE ins('x', 'y')", "22P02"},
		{"DEALLOCATE nosuch", "26000"},
	} {
		if _, err := simple(c, tc.sql); sqlState(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.sql, err, tc.code)
		}
	}
	if tags, err := simple(c, "DEALLOCATE sel; DEALLOCATE ALL"); err != nil || strings.Join(tags, ",") != "DEALLOCATE,DEALLOCATE ALL" {
		t.Errorf("DEALLOCATE: %v %v", tags, err)
	}
	if _, err := simple(c, "EXECUTE ins(9, 'x')"); sqlState(err) != "26000" {
		t.Errorf("EXECUTE after DEALLOCATE ALL: %v", err)
	}
	// DISCARD ALL drops prepared statements and settings, not in a block.
	mustExec(t, c, "PREPARE p AS SELECT 1; SET application_name = 'gone'")
	if tags, err := simple(c, "DISCARD ALL"); err != nil || tags[0] != "DISCARD ALL" {
		t.Fatalf("DISCARD ALL: %v %v", tags, err)
	}
	if _, err := simple(c, "EXECUTE p"); sqlState(err) != "26000" {
		t.Errorf("prepared statement survived DISCARD ALL: %v", err)
	}
	if got := show(t, c, "application_name"); got != "" {
		t.Errorf("application_name after DISCARD ALL: %q", got)
	}
	mustExec(t, c, "BEGIN")
	if _, err := simple(c, "DISCARD ALL"); sqlState(err) != "25001" {
		t.Errorf("DISCARD ALL in a block: %v", err)
	}
	mustExec(t, c, "ROLLBACK")
	if tags, err := simple(c, "LISTEN chan; UNLISTEN *"); err != nil || strings.Join(tags, ",") != "LISTEN,UNLISTEN" {
		t.Errorf("LISTEN: %v %v", tags, err)
	}

	// Row descriptions name the table and column a value comes from.
	sd, err := c.PgConn().Prepare(ctx, "", "SELECT b, a, a + 1 AS c FROM pe", nil)
	if err != nil {
		t.Fatal(err)
	}
	oid := count(t, c, "SELECT 'pe'::regclass::oid::int8")
	if f := sd.Fields; uint32(oid) != f[0].TableOID || f[0].TableAttributeNumber != 2 || f[1].TableAttributeNumber != 1 || f[2].TableOID != 0 || f[2].TableAttributeNumber != 0 {
		t.Errorf("fields %+v, table OID %d", sd.Fields, oid)
	}
}

func TestLoginChecks(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	mustExec(t, c, "CREATE ROLE nologin")
	_, err := pgx.Connect(context.Background(), strings.Replace(url, "postgres@", "nologin@", 1))
	if sqlState(err) != "28000" || !strings.Contains(err.Error(), `role "nologin" is not permitted to log in`) {
		t.Errorf("role without LOGIN: %v", err)
	}
	_, err = pgx.Connect(context.Background(), strings.Replace(url, "postgres@", "nobody@", 1))
	if sqlState(err) != "28000" {
		t.Errorf("unknown role: %v", err)
	}
}

func TestVacuum(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	mustExec(t, c, "CREATE TABLE vt (a INT PRIMARY KEY)")
	for sql, tag := range map[string]string{"VACUUM ANALYZE vt": "VACUUM", "ANALYZE vt": "ANALYZE", "VACUUM": "VACUUM"} {
		if tags, err := simple(c, sql); err != nil || tags[0] != tag {
			t.Errorf("%s: %v %v", sql, tags, err)
		}
	}
	// Several statements of one Query are an implicit block too.
	if _, err := simple(c, "SELECT 1; VACUUM vt"); sqlState(err) != "25001" {
		t.Errorf("VACUUM in a multi-statement query: %v", err)
	}
	if _, err := simple(c, "VACUUM nosuch"); sqlState(err) != "42P01" {
		t.Errorf("VACUUM of a missing table: %v", err)
	}
	mustExec(t, c, "BEGIN")
	if _, err := simple(c, "VACUUM vt"); sqlState(err) != "25001" {
		t.Errorf("VACUUM in a block: %v", err)
	}
	mustExec(t, c, "ROLLBACK")
}
