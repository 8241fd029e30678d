package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/server"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// startNode starts an in-memory insecure node (a cluster of one, so the
// catalog generation is answered from memory) that stops when the test
// ends, and returns it with the URL of its postgres database.
func startNode(tb testing.TB) (*server.Server, string) {
	tb.Helper()
	s, err := server.Start(context.Background(), server.Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			tb.Errorf("stop: %v", err)
		}
	})
	return s, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
}

// startServer is startNode for tests that need only the URL.
func startServer(t *testing.T) string {
	t.Helper()
	_, url := startNode(t)
	return url
}

func connect(t *testing.T, url string, notices *[]string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if notices != nil {
		cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
			*notices = append(*notices, n.Severity+" "+n.Code+" "+n.Message)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// show runs SHOW through the simple protocol and returns its value.
func show(t *testing.T, c *pgx.Conn, name string) string {
	t.Helper()
	rr := c.PgConn().Exec(context.Background(), "SHOW "+name)
	res, err := rr.ReadAll()
	if err != nil {
		t.Fatalf("SHOW %s: %v", name, err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 {
		t.Fatalf("SHOW %s: %d results", name, len(res))
	}
	return string(res[0].Rows[0][0])
}

// simple runs sql through the simple protocol and returns the command
// tags, or the first error.
func simple(c *pgx.Conn, sql string) ([]string, error) {
	res, err := c.PgConn().Exec(context.Background(), sql).ReadAll()
	var tags []string
	for _, r := range res {
		tags = append(tags, r.CommandTag.String())
	}
	return tags, err
}

func TestSetShow(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	for _, tc := range []struct {
		set, name, want string
		code            string
	}{
		{set: "SET application_name = 'x1'", name: "application_name", want: "x1"},
		{set: "SET TIME ZONE 'Europe/Paris'", name: "timezone", want: "Europe/Paris"},
		{set: "SET TimeZone = 'nowhere/nothing'", code: "22023"},
		{set: "SET statement_timeout = 5000", name: "statement_timeout", want: "5s"},
		{set: "SET statement_timeout = '150ms'", name: "statement_timeout", want: "150ms"},
		{set: "SET statement_timeout TO DEFAULT", name: "statement_timeout", want: "0"},
		{set: "SET search_path = myschema, public", name: "search_path", want: "myschema, public"},
		{set: "SET search_path = \"MySchema\"", name: "search_path", want: `"MySchema"`},
		{set: "SET default_transaction_isolation = 'serializable'", name: "default_transaction_isolation", want: "serializable"},
		{set: "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ", name: "default_transaction_isolation", want: "repeatable read"},
		{set: "SET default_transaction_isolation = 'bogus'", code: "22023"},
		{set: "SET extra_float_digits = 3", name: "extra_float_digits", want: "3"},
		{set: "SET extra_float_digits = 4", code: "22023"},
		{set: "SET datestyle = 'iso'", name: "DateStyle", want: "ISO, MDY"},
		{set: "SET datestyle = 'iso, dmy'", code: "0A000"},
		{set: "SET datestyle = 'sql'", code: "0A000"},
		{set: "SET client_encoding = 'latin1'", code: "0A000"},
		{set: "SET client_encoding = 'utf-8'", name: "client_encoding", want: "UTF8"},
		{set: "SET client_encoding = '''utf-8'''", name: "client_encoding", want: "UTF8"},
		{set: "SET client_encoding = ' Unicode '", name: "client_encoding", want: "UTF8"},
		{set: "SET client_encoding = utf_8", name: "client_encoding", want: "UTF8"},
		{set: "SET synchronize_seqscans TO off", name: "synchronize_seqscans", want: "off"},
		{set: "SET default_table_access_method = heap", name: "default_table_access_method", want: "heap"},
		{set: "SET default_table_access_method = columnar", code: "0A000"},
		{set: "SET default_tablespace = ''", name: "default_tablespace", want: ""},
		{set: "SET default_tablespace = fast", code: "0A000"},
		{set: "SET no_such_thing = 1", code: "42704"},
		{set: "SET server_version = '1'", code: "55P02"},
		{set: "SET storage.packed_rows.enabled = off", name: "storage.packed_rows.enabled", want: "off"},
		{set: "RESET application_name", name: "application_name", want: ""},
	} {
		_, err := simple(c, tc.set)
		if tc.code != "" {
			if sqlState(err) != tc.code {
				t.Errorf("%s: got %v, want SQLSTATE %s", tc.set, err, tc.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.set, err)
			continue
		}
		if got := show(t, c, tc.name); got != tc.want {
			t.Errorf("%s: SHOW %s = %q, want %q", tc.set, tc.name, got, tc.want)
		}
	}
	if _, err := simple(c, "SHOW no_such_thing"); sqlState(err) != "42704" || !strings.Contains(err.Error(), `unrecognized configuration parameter "no_such_thing"`) {
		t.Errorf("SHOW unknown: %v", err)
	}
	// RESET ALL goes back to the startup values.
	if _, err := simple(c, "RESET ALL"); err != nil {
		t.Fatal(err)
	}
	if got := show(t, c, "TimeZone"); got != "Etc/UTC" {
		t.Errorf("after RESET ALL TimeZone = %q", got)
	}
	// SHOW ALL lists every setting with three columns.
	res, err := c.PgConn().Exec(context.Background(), "SHOW ALL").ReadAll()
	if err != nil || len(res[0].FieldDescriptions) != 3 || len(res[0].Rows) < 20 {
		t.Errorf("SHOW ALL: %v", err)
	}
	// The column of SHOW is the parameter's canonical name.
	if res, err := c.PgConn().Exec(context.Background(), "SHOW timezone").ReadAll(); err != nil || res[0].FieldDescriptions[0].Name != "TimeZone" {
		t.Errorf("SHOW timezone column: %v %v", err, res)
	}
}

func TestParameterStatus(t *testing.T) {
	url := startServer(t)
	c := connect(t, url+"&application_name=tester&timezone=America/New_York", nil)
	if got := c.PgConn().ParameterStatus("TimeZone"); got != "America/New_York" {
		t.Errorf("TimeZone at startup = %q", got)
	}
	if got := c.PgConn().ParameterStatus("application_name"); got != "tester" {
		t.Errorf("application_name at startup = %q", got)
	}
	if _, err := simple(c, "SET TIME ZONE 'Asia/Tokyo'"); err != nil {
		t.Fatal(err)
	}
	if got := c.PgConn().ParameterStatus("TimeZone"); got != "Asia/Tokyo" {
		t.Errorf("TimeZone after SET = %q", got)
	}
	// A SET rolled back is undone, and reported again.
	if _, err := simple(c, "BEGIN; SET TIME ZONE 'UTC'; ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got := show(t, c, "TimeZone"); got != "Asia/Tokyo" {
		t.Errorf("TimeZone after ROLLBACK = %q", got)
	}
	if _, err := simple(c, "SELECT 1"); err != nil && sqlState(err) == "" {
		t.Fatal(err)
	}
	if got := c.PgConn().ParameterStatus("TimeZone"); got != "Asia/Tokyo" {
		t.Errorf("TimeZone status after ROLLBACK = %q", got)
	}
	// Every other way a setting changes is reported too (the session
	// compares the reported values only after a write to its settings).
	for _, tc := range []struct {
		sql, name, want string
	}{
		// SET LOCAL ends with its transaction, committed or not.
		{"BEGIN; SET LOCAL application_name = 'local'; COMMIT", "application_name", "tester"},
		// ROLLBACK TO SAVEPOINT restores the settings of the savepoint.
		{"BEGIN; SAVEPOINT a; SET application_name = 'inner'; ROLLBACK TO SAVEPOINT a; COMMIT", "application_name", "tester"},
		{"SET application_name = 'renamed'", "application_name", "renamed"},
		// RESET ALL and DISCARD ALL return to the session's defaults,
		// the startup packet's value among them.
		{"RESET ALL", "application_name", "tester"},
		{"SET application_name = 'again'", "application_name", "again"},
		{"DISCARD ALL", "application_name", "tester"},
	} {
		if _, err := simple(c, tc.sql); err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if _, err := simple(c, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		if got := c.PgConn().ParameterStatus(tc.name); got != tc.want {
			t.Errorf("after %s: %s status = %q, want %q", tc.sql, tc.name, got, tc.want)
		}
	}
	// asyncpg's startup packet quotes the encoding (client_encoding
	// 'utf-8', quotes included); PostgreSQL reads it as UTF8.
	c3 := connect(t, url+"&client_encoding=%27utf-8%27", nil)
	if got := c3.PgConn().ParameterStatus("client_encoding"); got != "UTF8" {
		t.Errorf("client_encoding from 'utf-8' at startup = %q", got)
	}
	if _, err := pgx.Connect(context.Background(), url+"&client_encoding=latin1"); sqlState(err) != "0A000" {
		t.Errorf("client_encoding latin1 at startup: %v", err)
	}
	// Startup options (-c) apply too; unknown ones refuse the connection.
	c2 := connect(t, url+"&options=-c%20statement_timeout%3D3s", nil)
	if got := show(t, c2, "statement_timeout"); got != "3s" {
		t.Errorf("statement_timeout from options = %q", got)
	}
	if _, err := pgx.Connect(context.Background(), url+"&nosuchparam=1"); sqlState(err) != "42704" {
		t.Errorf("unknown startup parameter: %v", err)
	}
	if _, err := pgx.Connect(context.Background(), strings.Replace(url, "/postgres?", "/nodb?", 1)); sqlState(err) != "3D000" || !strings.Contains(err.Error(), `database "nodb" does not exist`) {
		t.Errorf("unknown database: %v", err)
	}
}

func TestTransactionStates(t *testing.T) {
	url := startServer(t)
	var notices []string
	c := connect(t, url, &notices)
	txStatus := func() byte { return c.PgConn().TxStatus() }

	if _, err := simple(c, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, err := simple(c, "BEGIN"); err != nil || txStatus() != 'T' {
		t.Fatalf("BEGIN: %v %c", err, txStatus())
	}
	if _, err := simple(c, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if got := show(t, c, "transaction_isolation"); got != "read committed" {
		t.Errorf("default isolation %q", got)
	}
	if _, err := simple(c, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"); err != nil {
		t.Fatal(err)
	}
	if got := show(t, c, "transaction_isolation"); got != "serializable" {
		t.Errorf("isolation after SET TRANSACTION %q", got)
	}
	// An error aborts the block; everything but COMMIT/ROLLBACK is 25P02.
	if _, err := simple(c, "SHOW nonexistent"); sqlState(err) != "42704" {
		t.Fatalf("error in block: %v", err)
	}
	if txStatus() != 'E' {
		t.Fatalf("status after error %c", txStatus())
	}
	_, err := simple(c, "SHOW TimeZone")
	if sqlState(err) != "25P02" || !strings.Contains(err.Error(), "current transaction is aborted, commands ignored until end of transaction block") {
		t.Fatalf("in aborted block: %v", err)
	}
	tags, err := simple(c, "COMMIT")
	if err != nil || len(tags) != 1 || tags[0] != "ROLLBACK" || txStatus() != 'I' {
		t.Fatalf("COMMIT of aborted block: %v %v %c", tags, err, txStatus())
	}
	if _, err := simple(c, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"WARNING 25P01 there is no transaction in progress",
		"WARNING 25001 there is already a transaction in progress",
		"WARNING 25P01 there is no transaction in progress",
	}
	if strings.Join(notices, "\n") != strings.Join(want, "\n") {
		t.Errorf("notices:\n%s\nwant:\n%s", strings.Join(notices, "\n"), strings.Join(want, "\n"))
	}
	// BEGIN's options and START TRANSACTION's tag.
	tags, err = simple(c, "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
	if err != nil || tags[0] != "START TRANSACTION" {
		t.Fatalf("START TRANSACTION: %v %v", tags, err)
	}
	if got := show(t, c, "transaction_isolation"); got != "repeatable read" {
		t.Errorf("isolation %q", got)
	}
	if got := show(t, c, "transaction_read_only"); got != "on" {
		t.Errorf("read only %q", got)
	}
	if _, err := simple(c, "END"); err != nil || txStatus() != 'I' {
		t.Fatalf("END: %v", err)
	}
	// SET LOCAL lasts until the block ends; outside a block it warns.
	notices = nil
	if _, err := simple(c, "BEGIN; SET LOCAL application_name = 'inner'"); err != nil {
		t.Fatal(err)
	}
	if got := show(t, c, "application_name"); got != "inner" {
		t.Errorf("SET LOCAL in block: %q", got)
	}
	if _, err := simple(c, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if got := show(t, c, "application_name"); got != "" {
		t.Errorf("SET LOCAL after COMMIT: %q", got)
	}
	if _, err := simple(c, "SET LOCAL application_name = 'x'"); err != nil {
		t.Fatal(err)
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "SET LOCAL can only be used in transaction blocks") {
		t.Errorf("SET LOCAL outside block notices: %v", notices)
	}
	// Savepoints outside a block are an error.
	if _, err := simple(c, "SAVEPOINT a"); sqlState(err) != "25P01" {
		t.Errorf("SAVEPOINT outside block: %v", err)
	}
	// A parse error inside a block aborts it too.
	if _, err := simple(c, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := simple(c, "SELEC 1"); sqlState(err) != "42601" || txStatus() != 'E' {
		t.Errorf("syntax error in block: %v %c", err, txStatus())
	}
	if _, err := simple(c, "ROLLBACK"); err != nil || txStatus() != 'I' {
		t.Errorf("ROLLBACK: %v", err)
	}
	// The empty query.
	res, err := c.PgConn().Exec(context.Background(), " ; ").ReadAll()
	if err != nil || len(res) != 0 && res[0].CommandTag.String() != "" {
		t.Errorf("empty query: %v %v", res, err)
	}
}

func TestSavepoints(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	mustTags := func(sql string, want ...string) {
		t.Helper()
		tags, err := simple(c, sql)
		if err != nil || strings.Join(tags, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: %v %v, want %v", sql, tags, err, want)
		}
	}
	mustTags("BEGIN; SET application_name = 'a'; SAVEPOINT s1; SET application_name = 'b'", "BEGIN", "SET", "SAVEPOINT", "SET")
	// An error after the savepoint aborts the block; ROLLBACK TO revives
	// it and restores the settings of the savepoint.
	if _, err := simple(c, "SHOW nonexistent"); sqlState(err) != "42704" {
		t.Fatal(err)
	}
	if _, err := simple(c, "SHOW application_name"); sqlState(err) != "25P02" {
		t.Fatalf("aborted: %v", err)
	}
	if _, err := simple(c, "RELEASE s1"); sqlState(err) != "25P02" {
		t.Fatalf("RELEASE in aborted block: %v", err)
	}
	if _, err := simple(c, "ROLLBACK TO nosuch"); sqlState(err) != "3B001" || !strings.Contains(err.Error(), `savepoint "nosuch" does not exist`) {
		t.Fatalf("ROLLBACK TO unknown: %v", err)
	}
	mustTags("ROLLBACK TO SAVEPOINT s1", "ROLLBACK")
	if c.PgConn().TxStatus() != 'T' {
		t.Fatalf("status after ROLLBACK TO: %c", c.PgConn().TxStatus())
	}
	if got := show(t, c, "application_name"); got != "a" {
		t.Errorf("application_name after ROLLBACK TO = %q", got)
	}
	// The savepoint survives ROLLBACK TO and RELEASE removes it.
	mustTags("SAVEPOINT s2; RELEASE SAVEPOINT s1", "SAVEPOINT", "RELEASE")
	if _, err := simple(c, "RELEASE s2"); sqlState(err) != "3B001" {
		t.Fatalf("RELEASE of a savepoint released with an older one: %v", err)
	}
	mustTags("ROLLBACK", "ROLLBACK")
	if got := show(t, c, "application_name"); got != "" {
		t.Errorf("application_name after ROLLBACK = %q", got)
	}
	if _, err := simple(c, "SAVEPOINT a"); sqlState(err) != "25P01" {
		t.Errorf("SAVEPOINT outside block: %v", err)
	}
}

func TestErrorPositions(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	for _, tc := range []struct {
		sql string
		pos int32
	}{
		{"SELECT * FORM t", 10},
		{"SELEKT 1", 1},
		{"SELECT * FROM nosuchtable", 15},
	} {
		_, err := simple(c, tc.sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Position != tc.pos {
			t.Errorf("%s: %v, want position %d", tc.sql, err, tc.pos)
		}
		// The extended protocol reports the same position at Parse.
		_, err = c.PgConn().Prepare(context.Background(), "", tc.sql, nil)
		if !errors.As(err, &pe) || pe.Position != tc.pos {
			t.Errorf("prepare %s: %v, want position %d", tc.sql, err, tc.pos)
		}
	}
}

func TestSettingFunctions(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	str := func(sql string) (string, error) {
		var v *string
		err := c.QueryRow(ctx, sql).Scan(&v)
		if v == nil {
			return "NULL", err
		}
		return *v, err
	}
	for _, tc := range []struct{ sql, want, code string }{
		{sql: "SELECT current_setting('TimeZone')", want: "Etc/UTC"},
		// asyncpg reads jit in a transaction; pgjdbc reads max_index_keys.
		{sql: "SELECT current_setting('jit') || set_config('jit', 'off', false)", want: "offoff"},
		{sql: "SELECT current_setting('max_index_keys')", want: "32"},
		{sql: "SELECT current_setting('nosuch')", code: "42704"},
		{sql: "SELECT current_setting('nosuch', true)", want: "NULL"},
		{sql: "SELECT set_config('statement_timeout', '2000', false)", want: "2s"},
		{sql: "SELECT current_setting('statement_timeout')", want: "2s"},
		{sql: "SELECT set_config('statement_timeout', NULL, false)", want: "0"},
		{sql: "SELECT set_config('server_version', '1', false)", code: "55P02"},
		{sql: "SELECT current_setting('transaction_isolation')", want: "read committed"},
		// A local value lasts only for the statement's transaction.
		{sql: "SELECT set_config('application_name', 'tmp', true)", want: "tmp"},
		{sql: "SELECT current_setting('application_name')", want: ""},
	} {
		got, err := str(tc.sql)
		if tc.code != "" {
			if sqlState(err) != tc.code {
				t.Errorf("%s: %v, want SQLSTATE %s", tc.sql, err, tc.code)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s = %q, %v; want %q", tc.sql, got, err, tc.want)
		}
	}
	// In a block, set_config(..., true) lasts until the block ends.
	mustExec(t, c, "BEGIN")
	if _, err := str("SELECT set_config('application_name', 'blk', true)"); err != nil {
		t.Fatal(err)
	}
	if got, _ := str("SELECT current_setting('application_name')"); got != "blk" {
		t.Errorf("local value inside block: %q", got)
	}
	mustExec(t, c, "COMMIT")
	if got := show(t, c, "application_name"); got != "" {
		t.Errorf("local value after COMMIT: %q", got)
	}
}

// TestRegParams binds a reg* typed parameter in text form, as SQLAlchemy's
// reflection does with CAST($1 AS regclass): the name is looked up in the
// catalog (its own tables included), inside and outside a block.
func TestRegParams(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	if _, err := simple(c, "CREATE TABLE rp (a int)"); err != nil {
		t.Fatal(err)
	}
	var want uint32
	if err := c.QueryRow(ctx, "SELECT 'rp'::regclass::oid").Scan(&want); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sql, arg string
		want     uint32
		code     string
	}{
		{sql: "SELECT CAST($1 AS regclass)::oid", arg: "pg_catalog.pg_constraint", want: 2606},
		{sql: "SELECT $1::regclass::oid", arg: "pg_class", want: 1259},
		{sql: "SELECT CAST($1::regclass AS regclass)::oid", arg: "public.rp", want: want},
		{sql: "SELECT $1::regclass::oid", arg: "no_such_table", code: "42P01"},
	} {
		for _, block := range []bool{false, true} {
			if block {
				if _, err := simple(c, "BEGIN"); err != nil {
					t.Fatal(err)
				}
			}
			var got uint32
			err := c.QueryRow(ctx, tc.sql, tc.arg).Scan(&got)
			if tc.code != "" {
				if sqlState(err) != tc.code {
					t.Errorf("%s (%s): got %v, want SQLSTATE %s", tc.sql, tc.arg, err, tc.code)
				}
			} else if err != nil || got != tc.want {
				t.Errorf("%s (%s, block %v): %d, %v; want %d", tc.sql, tc.arg, block, got, err, tc.want)
			}
			if block {
				if _, err := simple(c, "ROLLBACK"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestBeginInBlock: BEGIN with options inside an open block warns (25001)
// and applies them while no statement has run, as PostgreSQL does (psycopg2
// sends BEGIN ISOLATION LEVEL ... after its implicit BEGIN); after a
// statement a different level is 25001 and aborts the block.
func TestBeginInBlock(t *testing.T) {
	url := startServer(t)
	var notices []string
	c := connect(t, url, &notices)
	for _, sql := range []string{"BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"} {
		if _, err := simple(c, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if got := show(t, c, "transaction_isolation") + "/" + show(t, c, "transaction_read_only"); got != "repeatable read/on" {
		t.Errorf("after BEGIN in block: %s", got)
	}
	if _, err := simple(c, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := simple(c, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Errorf("same level after a statement: %v", err)
	}
	_, err := simple(c, "BEGIN ISOLATION LEVEL SERIALIZABLE")
	if sqlState(err) != "25001" || !strings.Contains(err.Error(), "must be called before any query") {
		t.Errorf("other level after a statement: %v", err)
	}
	if _, err := simple(c, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("WARNING 25001 there is already a transaction in progress\n", 3)
	if got := strings.Join(notices, "\n") + "\n"; got != want {
		t.Errorf("notices:\n%swant:\n%s", got, want)
	}
}

// TestStatementTimestamps: as in PostgreSQL, statement_timestamp() is
// the receipt of the client's message, shared by every statement of one
// Query, and an implicit transaction starts then too (now() equals it);
// a transaction block keeps its start across later messages.
func TestStatementTimestamps(t *testing.T) {
	c := connect(t, startServer(t), nil)
	ctx := context.Background()
	texts := func(sql string) []string {
		t.Helper()
		res, err := c.PgConn().Exec(ctx, sql).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var out []string
		for _, r := range res {
			for _, row := range r.Rows {
				out = append(out, string(row[0]))
			}
		}
		return out
	}
	if got := texts("SELECT statement_timestamp() = now()"); len(got) != 1 || got[0] != "t" {
		t.Errorf("implicit transaction: statement_timestamp() = now() is %v", got)
	}
	if got := texts("SELECT statement_timestamp()::text; SELECT statement_timestamp()::text"); len(got) != 2 || got[0] != got[1] {
		t.Errorf("one Query's statements: statement_timestamp() %v", got)
	}
	var viaExtended bool
	if err := c.QueryRow(ctx, "SELECT statement_timestamp() = now() AND $1::int = 1", 1).Scan(&viaExtended); err != nil || !viaExtended {
		t.Errorf("extended protocol: statement_timestamp() = now() is %v (%v)", viaExtended, err)
	}
	began := texts("BEGIN; SELECT now()::text")
	later := texts("SELECT now()::text")
	texts("COMMIT")
	if len(began) != 1 || len(later) != 1 || began[0] != later[0] {
		t.Errorf("a block's now(): %v at BEGIN, %v later", began, later)
	}
}

// TestTimeZoneFollowsSettings: a time zone set for a transaction only
// (SET LOCAL, or SET rolled back) stops printing timestamps once the
// transaction ends, and one set for the session keeps printing them.
func TestTimeZoneFollowsSettings(t *testing.T) {
	c := connect(t, startServer(t), nil)
	ctx := context.Background()
	const q = "SELECT '2026-01-01 00:00:00+00'::timestamptz::text"
	for _, tc := range []struct{ sql, want string }{
		{"SET TIME ZONE 'UTC'", "2026-01-01 00:00:00+00"},
		{"BEGIN; SET LOCAL TIME ZONE 'Asia/Tokyo'", "2026-01-01 09:00:00+09"},
		{"COMMIT", "2026-01-01 00:00:00+00"},
		{"BEGIN; SET TIME ZONE 'Asia/Tokyo'", "2026-01-01 09:00:00+09"},
		{"ROLLBACK", "2026-01-01 00:00:00+00"},
		{"BEGIN; SET TIME ZONE 'Asia/Tokyo'; COMMIT", "2026-01-01 09:00:00+09"},
	} {
		if _, err := c.PgConn().Exec(ctx, tc.sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		res, err := c.PgConn().Exec(ctx, q).ReadAll()
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
			t.Fatalf("after %s: %v %v", tc.sql, res, err)
		}
		if got := string(res[0].Rows[0][0]); got != tc.want {
			t.Errorf("after %s: %s, want %s", tc.sql, got, tc.want)
		}
	}
}
