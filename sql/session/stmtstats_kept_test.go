package session_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/session"
)

// statementCount is the node's statement histogram's count of kind.
func statementCount(t *testing.T, s *server.Server, kind string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	prefix := `cairn_sql_statement_duration_seconds_count{type="` + kind + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// TestPreparedStatsKept: the Executes of a prepared statement record
// pg_stat_statements through the entry the statement keeps (keptStat):
// the node's map is looked up once, not once per Execute, and the entry
// counts every call and row as before, on the fast path and off it. The
// server's statement histogram observes every Execute through the
// observer the entry keeps (keptStat.obs), asked for once, not once per
// Execute (twentieth session).
func TestPreparedStatsKept(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE kept (id int8 PRIMARY KEY, v int8)")
	mustExec(t, a, "INSERT INTO kept SELECT g, g FROM generate_series(1, 10) g")
	pc := a.PgConn()
	for _, tc := range []struct {
		name, sql string
		off       bool // the fast path turned off
		rows      int64
		kind      string
	}{
		{"fast", "SELECT v FROM kept WHERE id = $1", false, 1, "select"},
		{"general", "SELECT v, id FROM kept WHERE id = $1", true, 1, "select"},
		{"update", "UPDATE kept SET v = id WHERE id = $1", false, 1, "update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.off {
				defer session.SetFastReadOff()()
			}
			if _, err := pc.Prepare(ctx, tc.name, tc.sql, nil); err != nil {
				t.Fatal(err)
			}
			const n = 50
			before, obsBefore := session.StatementLookups(), session.ObserverLookups()
			histBefore := statementCount(t, srv, tc.kind)
			for i := range n {
				if res := pc.ExecPrepared(ctx, tc.name, [][]byte{[]byte(fmt.Sprint(i%10 + 1))}, nil, nil).Read(); res.Err != nil {
					t.Fatal(res.Err)
				}
			}
			// The first Execute looks the entry up; other sessions'
			// statements (none expected) would add theirs.
			if got := session.StatementLookups() - before; got > 5 {
				t.Errorf("%d look-ups for %d Executes, want at most 5", got, n)
			}
			if got := session.ObserverLookups() - obsBefore; got > 5 {
				t.Errorf("%d observer look-ups for %d Executes, want at most 5", got, n)
			}
			if got := statementCount(t, srv, tc.kind) - histBefore; got < n {
				t.Errorf("the statement histogram observed %d %s statements of %d Executes", got, tc.kind, n)
			}
			var calls, rows int64
			if err := a.QueryRow(ctx, "SELECT calls, rows FROM pg_stat_statements WHERE query = $1", tc.sql).Scan(&calls, &rows); err != nil {
				t.Fatal(err)
			}
			if calls != n || rows != n*tc.rows {
				t.Errorf("pg_stat_statements: %d calls, %d rows; want %d, %d", calls, rows, n, n*tc.rows)
			}
		})
	}
}

// TestQueryStatsKept: the Queries of one shape (the simple protocol's
// statements that differ only in their constants) record
// pg_stat_statements through the entry the shape keeps
// (shapeEntry.stat), as a prepared statement's Executes do: the node's
// map and the histogram's observer are looked up once, not once per
// Query (twenty-third session), and every call and row is counted, on
// the fast path (queryFast), off it, and for an UPDATE.
func TestQueryStatsKept(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE keptq (id int8 PRIMARY KEY, v int8)")
	mustExec(t, a, "INSERT INTO keptq SELECT g, g FROM generate_series(1, 10) g")
	pc := a.PgConn()
	for _, tc := range []struct {
		name, sql, norm string
		off             bool // the fast path turned off
		kind            string
	}{
		{"fast", "SELECT v FROM keptq WHERE id = %d", "SELECT v FROM keptq WHERE id = $1", false, "select"},
		{"general", "SELECT v, id FROM keptq WHERE id = %d", "SELECT v, id FROM keptq WHERE id = $1", true, "select"},
		{"update", "UPDATE keptq SET v = id WHERE id = %d", "UPDATE keptq SET v = id WHERE id = $1", false, "update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.off {
				defer session.SetFastReadOff()()
			}
			const n = 50
			before, obsBefore := session.StatementLookups(), session.ObserverLookups()
			histBefore := statementCount(t, srv, tc.kind)
			for i := range n {
				if _, err := pc.Exec(ctx, fmt.Sprintf(tc.sql, i%10+1)).ReadAll(); err != nil {
					t.Fatal(err)
				}
			}
			if got := session.StatementLookups() - before; got > 5 {
				t.Errorf("%d look-ups for %d Queries, want at most 5", got, n)
			}
			if got := session.ObserverLookups() - obsBefore; got > 5 {
				t.Errorf("%d observer look-ups for %d Queries, want at most 5", got, n)
			}
			if got := statementCount(t, srv, tc.kind) - histBefore; got < n {
				t.Errorf("the statement histogram observed %d %s statements of %d Queries", got, tc.kind, n)
			}
			var calls, rows int64
			if err := a.QueryRow(ctx, "SELECT calls, rows FROM pg_stat_statements WHERE query = $1", tc.norm).Scan(&calls, &rows); err != nil {
				t.Fatal(err)
			}
			if calls != n || rows != n {
				t.Errorf("pg_stat_statements: %d calls, %d rows; want %d, %d", calls, rows, n, n)
			}
		})
	}
}
