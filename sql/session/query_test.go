package session_test

import (
	"context"
	"encoding/binary"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestExtendedProtocol(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()

	// pgx's default: Parse/Describe, then Bind with binary formats where
	// it knows the types.
	var n int64
	var s string
	if err := c.QueryRow(ctx, "SELECT $1::int8 + 1, $2::text || 'b'", int64(41), "a").Scan(&n, &s); err != nil || n != 42 || s != "ab" {
		t.Fatalf("typed params: %d %q %v", n, s, err)
	}
	// A parameter typed by its use.
	if err := c.QueryRow(ctx, "SELECT 2 * $1", 21).Scan(&n); err != nil || n != 42 {
		t.Fatalf("inferred param: %d %v", n, err)
	}
	// Several rows through the extended protocol.
	rows, err := c.Query(ctx, "SELECT g FROM generate_series(1, $1::int) AS g", 5)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for rows.Next() {
		var g int
		if err := rows.Scan(&g); err != nil {
			t.Fatal(err)
		}
		sum += g
	}
	if rows.Err() != nil || sum != 15 || rows.CommandTag().String() != "SELECT 5" {
		t.Fatalf("rows: sum %d tag %q err %v", sum, rows.CommandTag(), rows.Err())
	}

	// Text and binary parameters and results, chosen explicitly.
	pc := c.PgConn()
	res := pc.ExecParams(ctx, "SELECT $1::int8 * 2", [][]byte{[]byte("21")}, nil, []int16{0}, []int16{1}).Read()
	if res.Err != nil || len(res.Rows) != 1 || binary.BigEndian.Uint64(res.Rows[0][0]) != 42 {
		t.Fatalf("text param, binary result: %+v", res)
	}
	res = pc.ExecParams(ctx, "SELECT $1::int8 * 2", [][]byte{binary.BigEndian.AppendUint64(nil, 21)}, []uint32{20}, []int16{1}, []int16{0}).Read()
	if res.Err != nil || string(res.Rows[0][0]) != "42" {
		t.Fatalf("binary param, text result: %+v", res)
	}
	res = pc.ExecParams(ctx, "SELECT $1::int8", [][]byte{[]byte("abc")}, nil, []int16{0}, nil).Read()
	if sqlState(res.Err) != "22P02" {
		t.Errorf("bad text param: %v", res.Err)
	}
	res = pc.ExecParams(ctx, "SELECT $1::int8", [][]byte{{1, 2, 3}}, []uint32{20}, []int16{1}, nil).Read()
	if sqlState(res.Err) != "22P03" || !strings.Contains(res.Err.Error(), "incorrect binary data format in bind parameter 1") {
		t.Errorf("bad binary param: %v", res.Err)
	}
	res = pc.ExecParams(ctx, "SELECT NULL::text IS NULL, $1::text IS NULL, ''::text", [][]byte{nil}, nil, nil, nil).Read()
	if res.Err != nil || string(res.Rows[0][0]) != "t" || string(res.Rows[0][1]) != "t" || res.Rows[0][2] == nil || len(res.Rows[0][2]) != 0 {
		t.Errorf("NULL and empty: %+v", res)
	}

	// Row descriptions carry type OIDs, sizes and modifiers.
	sd, err := pc.Prepare(ctx, "", "SELECT 1::int2 AS a, 'x'::varchar(5) AS b, 1.5::numeric(5,2) AS c, now() AS d", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		oid  uint32
		size int16
		mod  int32
	}{{"a", 21, 2, -1}, {"b", 1043, -1, 9}, {"c", 1700, -1, 5<<16 | 2 + 4}, {"d", 1184, 8, -1}}
	for i, f := range sd.Fields {
		w := want[i]
		if f.Name != w.name || f.DataTypeOID != w.oid || f.DataTypeSize != w.size || f.TypeModifier != w.mod {
			t.Errorf("field %d: %+v, want %+v", i, f, w)
		}
	}
	// Two commands in one prepared statement are refused.
	if _, err := pc.Prepare(ctx, "", "SELECT 1; SELECT 2", nil); sqlState(err) != "42601" {
		t.Errorf("multi-statement prepare: %v", err)
	}
	// SHOW and SET work through the extended protocol too.
	var tz string
	if _, err := c.Exec(ctx, "SET TIME ZONE 'Asia/Tokyo'"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SHOW TimeZone").Scan(&tz); err != nil || tz != "Asia/Tokyo" {
		t.Errorf("SHOW via extended: %q %v", tz, err)
	}
	// EXPLAIN returns one text column named QUERY PLAN.
	rows, err = c.Query(ctx, "EXPLAIN SELECT * FROM generate_series(1, $1::int)", 3)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for rows.Next() {
		lines++
	}
	if rows.Err() != nil || lines == 0 || rows.FieldDescriptions()[0].Name != "QUERY PLAN" {
		t.Errorf("EXPLAIN: %d lines, %v", lines, rows.Err())
	}
}

// TestPortalSuspension drives Execute with a row limit over a raw
// connection (pgx never sets one).
func TestPortalSuspension(t *testing.T) {
	url := startServer(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{"user": "postgres", "database": "postgres"}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	readUntilReady(t, fe)
	// Outside a block the portal lives until Sync.
	fe.Send(&pgproto3.Parse{Query: "SELECT g FROM generate_series(1, 5) AS g"})
	fe.Send(&pgproto3.Bind{})
	fe.Send(&pgproto3.Execute{MaxRows: 2})
	fe.Send(&pgproto3.Execute{MaxRows: 2})
	fe.Send(&pgproto3.Execute{MaxRows: 2})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	got := readUntilReady(t, fe)
	// The tags are what PostgreSQL 15 sends for this exchange: each
	// Execute counts the rows it fetched.
	want := "ParseComplete BindComplete DataRow(1) DataRow(2) PortalSuspended DataRow(3) DataRow(4) PortalSuspended DataRow(5) CommandComplete(SELECT 1) ReadyForQuery(I)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A DECLAREd cursor is a portal too: Describe finds it (psycopg 3's
	// named cursors ask for their columns so), and after CLOSE it is gone.
	fe.Send(&pgproto3.Query{String: "BEGIN; DECLARE dc CURSOR FOR SELECT 1 AS a, 'x' AS b"})
	fe.Send(&pgproto3.Describe{ObjectType: 'P', Name: "dc"})
	fe.Send(&pgproto3.Sync{})
	fe.Send(&pgproto3.Query{String: "CLOSE dc; COMMIT"})
	fe.Send(&pgproto3.Describe{ObjectType: 'P', Name: "dc"})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	got = readUntilReady(t, fe) + " " + readUntilReady(t, fe) + " " + readUntilReady(t, fe) + " " + readUntilReady(t, fe)
	want = "CommandComplete(BEGIN) CommandComplete(DECLARE CURSOR) ReadyForQuery(T) RowDescription(a,b) ReadyForQuery(T) " +
		"CommandComplete(CLOSE CURSOR) CommandComplete(COMMIT) ReadyForQuery(I) Error(34000 portal \"dc\" does not exist) ReadyForQuery(I)"
	if got != want {
		t.Errorf("declared cursor:\ngot  %s\nwant %s", got, want)
	}
	// Any error inside a block aborts it, whichever message caused it:
	// Describe and Bind of what does not exist included (PostgreSQL 15
	// answers E, and the next statement 25P02, until ROLLBACK).
	for _, bad := range []pgproto3.FrontendMessage{
		&pgproto3.Describe{ObjectType: 'P', Name: "nosuch"},
		&pgproto3.Describe{ObjectType: 'S', Name: "nosuch"},
		&pgproto3.Bind{PreparedStatement: "nosuch"},
		&pgproto3.Execute{Portal: "nosuch"},
	} {
		fe.Send(&pgproto3.Query{String: "BEGIN"})
		fe.Send(bad)
		fe.Send(&pgproto3.Sync{})
		fe.Send(&pgproto3.Query{String: "SELECT 1"})
		fe.Send(&pgproto3.Query{String: "ROLLBACK"})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		got = readUntilReady(t, fe) + " " + readUntilReady(t, fe) + " " + readUntilReady(t, fe) + " " + readUntilReady(t, fe)
		if !strings.HasSuffix(got, "ReadyForQuery(E) Error(25P02 current transaction is aborted, commands ignored until end of transaction block) ReadyForQuery(E) CommandComplete(ROLLBACK) ReadyForQuery(I)") {
			t.Errorf("%T in a block:\ngot  %s\nwant the block aborted (E), then 25P02, then ROLLBACK", bad, got)
		}
	}
}

// readUntilReady reads backend messages up to ReadyForQuery and renders
// them compactly.
func readUntilReady(t *testing.T, fe *pgproto3.Frontend) string {
	t.Helper()
	var out []string
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			out = append(out, "ReadyForQuery("+string(m.TxStatus)+")")
			return strings.Join(out, " ")
		case *pgproto3.DataRow:
			out = append(out, "DataRow("+string(m.Values[0])+")")
		case *pgproto3.CommandComplete:
			out = append(out, "CommandComplete("+string(m.CommandTag)+")")
		case *pgproto3.ErrorResponse:
			out = append(out, "Error("+m.Code+" "+m.Message+")")
		case *pgproto3.ParseComplete:
			out = append(out, "ParseComplete")
		case *pgproto3.BindComplete:
			out = append(out, "BindComplete")
		case *pgproto3.PortalSuspended:
			out = append(out, "PortalSuspended")
		case *pgproto3.RowDescription:
			var names []string
			for _, f := range m.Fields {
				names = append(names, string(f.Name))
			}
			out = append(out, "RowDescription("+strings.Join(names, ",")+")")
		case *pgproto3.AuthenticationOk, *pgproto3.ParameterStatus, *pgproto3.BackendKeyData:
		default:
			out = append(out, "?")
		}
	}
}

func TestAdvisoryLocks(t *testing.T) {
	url := startServer(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	ctx := context.Background()
	boolOf := func(c *pgx.Conn, sql string) bool {
		t.Helper()
		var v bool
		if err := c.QueryRow(ctx, sql).Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(a, "SELECT pg_advisory_lock(7)")
	if boolOf(b, "SELECT pg_try_advisory_lock(7)") {
		t.Fatal("b took a lock a holds")
	}
	// The same session may take it again (holds are counted).
	if !boolOf(a, "SELECT pg_try_advisory_lock(7)") {
		t.Fatal("a could not re-take its own lock")
	}
	// Waiting honours statement_timeout.
	exec(b, "SET statement_timeout = '150ms'")
	_, err := b.Exec(ctx, "SELECT pg_advisory_lock(7)")
	if sqlState(err) != "57014" || !strings.Contains(err.Error(), "canceling statement due to statement timeout") {
		t.Fatalf("wait with statement_timeout: %v", err)
	}
	exec(b, "SET statement_timeout = 0; SET lock_timeout = '100ms'")
	_, err = b.Exec(ctx, "SELECT pg_advisory_lock(7)")
	if sqlState(err) != "55P03" || !strings.Contains(err.Error(), "canceling statement due to lock timeout") {
		t.Fatalf("wait with lock_timeout: %v", err)
	}
	exec(b, "SET lock_timeout = 0")
	// A waiter wakes when the last hold goes.
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(ctx, "SELECT pg_advisory_lock(7)")
		done <- err
	}()
	if !boolOf(a, "SELECT pg_advisory_unlock(7)") {
		t.Fatal("unlock 1")
	}
	select {
	case err := <-done:
		t.Fatalf("b got the lock while a still held it once: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if !boolOf(a, "SELECT pg_advisory_unlock(7)") {
		t.Fatal("unlock 2")
	}
	if boolOf(a, "SELECT pg_advisory_unlock(7)") {
		t.Fatal("unlock of a lock a no longer holds returned true")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b never got the lock")
	}
	// Shared locks share; an exclusive one waits for them.
	exec(a, "SELECT pg_advisory_lock_shared(8)")
	if !boolOf(b, "SELECT pg_try_advisory_lock_shared(8)") {
		t.Error("shared locks conflict")
	}
	c := connect(t, url, nil)
	if boolOf(c, "SELECT pg_try_advisory_lock(8)") {
		t.Error("exclusive lock taken over shared holders")
	}
	// Transaction-level locks end with the transaction.
	exec(a, "BEGIN")
	exec(a, "SELECT pg_advisory_xact_lock(9)")
	if boolOf(c, "SELECT pg_try_advisory_xact_lock(9)") {
		t.Error("xact lock taken while another transaction holds it")
	}
	exec(a, "COMMIT")
	if !boolOf(c, "SELECT pg_try_advisory_lock(9)") {
		t.Error("xact lock survived COMMIT")
	}
	// Session locks end with the session.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.Close(ctx) }()
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for !boolOf(a, "SELECT pg_try_advisory_lock(9)") {
		if time.Now().After(deadline) {
			t.Fatal("session lock survived the session")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExplainAnalyze(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	mustExec(t, c, "CREATE TABLE e (a INT PRIMARY KEY, b INT); INSERT INTO e SELECT g, g % 3 FROM generate_series(1, 30) AS g")
	res, err := c.PgConn().Exec(context.Background(), "EXPLAIN ANALYZE SELECT * FROM e WHERE b = 1").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range res[0].Rows {
		lines = append(lines, string(r[0]))
	}
	text := strings.Join(lines, "\n")
	if res[0].FieldDescriptions[0].Name != "QUERY PLAN" || !regexp.MustCompile(`(?m)^Seq Scan on e \(actual time=\d+\.\d+\.\.\d+\.\d+ rows=10 loops=1\)$`).MatchString(text) {
		t.Errorf("EXPLAIN ANALYZE:\n%s", text)
	}
	// ANALYZE runs DML for real, as in Postgres.
	mustExec(t, c, "EXPLAIN ANALYZE DELETE FROM e WHERE a > 20")
	if n := count(t, c, "SELECT count(*) FROM e"); n != 20 {
		t.Errorf("after EXPLAIN ANALYZE DELETE: %d rows", n)
	}
	// PostgreSQL's summary lines end it; SUMMARY OFF drops them.
	if !regexp.MustCompile(`\nPlanning Time: \d+\.\d{3} ms\nExecution Time: \d+\.\d{3} ms$`).MatchString(text) {
		t.Errorf("EXPLAIN ANALYZE without summary lines:\n%s", text)
	}
	res, err = c.PgConn().Exec(context.Background(), "EXPLAIN (ANALYZE, SUMMARY OFF) SELECT * FROM e WHERE b = 1").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[0].Rows {
		if l := string(r[0]); strings.HasPrefix(l, "Planning Time") || strings.HasPrefix(l, "Execution Time") {
			t.Errorf("SUMMARY OFF printed %q", l)
		}
	}
	if _, err := simple(c, "EXPLAIN (FORMAT JSON) SELECT 1"); sqlState(err) != "0A000" {
		t.Errorf("FORMAT JSON: %v", err)
	}
}

func TestParameterStatusExtended(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	// ExecParams is always the extended protocol (Parse, Bind, Execute).
	if res := c.PgConn().ExecParams(context.Background(), "SET application_name = 'ext'", nil, nil, nil, nil).Read(); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := c.PgConn().ParameterStatus("application_name"); got != "ext" {
		t.Errorf("application_name status after an extended-protocol SET: %q", got)
	}
}

// TestExtendedErrorsAbortBlock: Parse and Bind errors inside a block
// abort it, as any error does.
func TestExtendedErrorsAbortBlock(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	for _, bad := range []func() error{
		func() error { _, err := c.PgConn().Prepare(ctx, "", "SELEC 1", nil); return err },
		func() error {
			return c.PgConn().ExecParams(ctx, "SELECT $1::int", [][]byte{[]byte("x")}, nil, nil, nil).Read().Err
		},
	} {
		mustExec(t, c, "BEGIN")
		if err := bad(); err == nil {
			t.Fatal("no error")
		}
		if _, err := simple(c, "SELECT 1"); sqlState(err) != "25P02" {
			t.Errorf("after an extended-protocol error in a block: %v", err)
		}
		mustExec(t, c, "ROLLBACK")
	}
}

// TestCustomPlans: parameter values reach the optimizer, so a
// parameterized point query is a point lookup, as with a literal.
func TestCustomPlans(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE cp (k INT PRIMARY KEY, v TEXT); INSERT INTO cp SELECT g, 'v' || g FROM generate_series(1, 100) AS g")
	rows, err := c.Query(ctx, "EXPLAIN SELECT v FROM cp WHERE k = $1", 42)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "Index Scan using cp_pkey") || !strings.Contains(plan, "42") {
		t.Errorf("parameterized point query plan:\n%s", plan)
	}
	for _, tc := range []struct {
		arg  any
		want []string
	}{{42, []string{"v42"}}, {nil, nil}, {1000, nil}} {
		rows, err := c.Query(ctx, "SELECT v FROM cp WHERE k = $1", tc.arg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("k = %v: %v %v, want %v", tc.arg, got, err, tc.want)
		}
	}
	// Parameters elsewhere: LIMIT, INSERT values, a range.
	rows, err = c.Query(ctx, "SELECT k FROM cp WHERE k > $1 ORDER BY k LIMIT $2", 97, 2)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(ks) != 2 || ks[0] != 98 || ks[1] != 99 {
		t.Errorf("range with LIMIT $2: %v %v", ks, err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO cp VALUES ($1, $2)", 101, "new"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, c, "SELECT count(*) FROM cp WHERE v = 'new'"); n != 1 {
		t.Errorf("INSERT with parameters: %d", n)
	}
}
