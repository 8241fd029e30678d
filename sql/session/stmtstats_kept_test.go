package session_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/sql/session"
)

// TestPreparedStatsKept: the Executes of a prepared statement record
// pg_stat_statements through the entry the statement keeps (keptStat):
// the node's map is looked up once, not once per Execute, and the entry
// counts every call and row as before, on the fast path and off it.
func TestPreparedStatsKept(t *testing.T) {
	ctx := context.Background()
	_, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE kept (id int8 PRIMARY KEY, v int8)")
	mustExec(t, a, "INSERT INTO kept SELECT g, g FROM generate_series(1, 10) g")
	pc := a.PgConn()
	for _, tc := range []struct {
		name, sql string
		off       bool // the fast path turned off
		rows      int64
	}{
		{"fast", "SELECT v FROM kept WHERE id = $1", false, 1},
		{"general", "SELECT v, id FROM kept WHERE id = $1", true, 1},
		{"update", "UPDATE kept SET v = id WHERE id = $1", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.off {
				defer session.SetFastReadOff()()
			}
			if _, err := pc.Prepare(ctx, tc.name, tc.sql, nil); err != nil {
				t.Fatal(err)
			}
			const n = 50
			before := session.StatementLookups()
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
