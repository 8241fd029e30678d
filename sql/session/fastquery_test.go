package session_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/session"
	"github.com/jackc/pgx/v5/pgconn"
)

// queryRun is what a client reads of one Query: each result's
// description, rows and tag, or the error.
type queryRun struct {
	fields []string
	rows   [][][]byte
	tags   []string
	err    string
}

func simpleQuery(ctx context.Context, pc *pgconn.PgConn, sql string) queryRun {
	res, err := pc.Exec(ctx, sql).ReadAll()
	var r queryRun
	for _, x := range res {
		for _, fd := range x.FieldDescriptions {
			r.fields = append(r.fields, fmt.Sprintf("%+v", fd))
		}
		r.rows = append(r.rows, x.Rows...)
		r.tags = append(r.tags, x.CommandTag.String())
	}
	if err != nil {
		r.err = err.Error()
	}
	return r
}

// TestQueryFastPointRead: a Query of a known shape whose kept plan is a
// point read takes the fast path of a prepared Execute (fastread.go,
// queryFast; cairn_sql_fast_point_reads_total counts it) once its shape
// and plan are kept, and the client reads what the general path sends
// (the same query with the fast path turned off), RowDescription
// included: every column type, NULLs, a missing row, constants in the
// select list, a negative key, a key of two integer columns. What must
// not take it: a statement in a block, a quoted key constant, a query
// of two statements, a query past statement_timeout (57014, from the
// general path), a result a DDL changed (the new column comes back).
func TestQueryFastPointRead(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, `CREATE TABLE ty (id int8 PRIMARY KEY, b bool, i2 int2, i4 int4, f4 float4, f8 float8,
		n numeric, s text, vc varchar(5), by bytea, d date, tm time, ts timestamp, tz timestamptz,
		iv interval, u uuid, j jsonb, ai int8[], at text[])`)
	mustExec(t, a, `INSERT INTO ty VALUES (1, true, -2, 40000, 1.5, -2.25e10, 12345.678, 'héllo', 'abc',
		'\x00ff', '2024-02-29', '12:34:56.789', '2024-01-02 03:04:05.6', '2024-01-02 03:04:05+02',
		'1 day 02:03:04', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, null]}', '{1,NULL,3}', '{"a b",NULL}')`)
	mustExec(t, a, "INSERT INTO ty (id) VALUES (2), (-7)")
	mustExec(t, a, "CREATE TABLE two (a int4, b int8, v text, PRIMARY KEY (a, b))")
	mustExec(t, a, "INSERT INTO two VALUES (1, 10, 'one-ten'), (1, 20, NULL)")
	fast := func() float64 { return metric(t, srv, "cairn_sql_fast_point_reads_total") }
	pc := a.PgConn()
	q := func(sql string) queryRun { t.Helper(); return simpleQuery(ctx, pc, sql) }

	for _, tc := range []struct{ name, warm, sql string }{
		{"all types", "SELECT * FROM ty WHERE id = 2", "SELECT * FROM ty WHERE id = 1"},
		{"NULLs", "SELECT * FROM ty WHERE id = 1", "SELECT * FROM ty WHERE id = 2"},
		{"missing row", "SELECT * FROM ty WHERE id = 1", "SELECT * FROM ty WHERE id = 3"},
		{"negative key", "SELECT id, b FROM ty WHERE id = 1", "SELECT id, b FROM ty WHERE id = -7"},
		{"constants in the select list", "SELECT s, 'k', 5, id FROM ty WHERE id = 2", "SELECT s, 'k', 5, id FROM ty WHERE id = 1"},
		{"two key columns", "SELECT v, a FROM two WHERE a = 1 AND b = 20", "SELECT v, a FROM two WHERE a = 1 AND b = 10"},
		{"two key columns, NULL value", "SELECT v FROM two WHERE b = 10 AND a = 1", "SELECT v FROM two WHERE b = 20 AND a = 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The first query of a shape parses and plans it, the second
			// keeps its point shape (exec.PointCache).
			for range 2 {
				if r := q(tc.warm); r.err != "" {
					t.Fatalf("%s: %s", tc.warm, r.err)
				}
			}
			restore := session.SetFastReadOff()
			f0 := fast()
			general := q(tc.sql)
			restore()
			if general.err != "" {
				t.Fatalf("general path: %s", general.err)
			}
			if n := fast() - f0; n != 0 {
				t.Fatalf("turned off: %v fast reads", n)
			}
			got := q(tc.sql)
			if n := fast() - f0; n != 1 {
				t.Fatalf("%v fast reads, want 1 (%+v)", n, got)
			}
			if !reflect.DeepEqual(got, general) {
				t.Errorf("fast path:\n%q\ngeneral path:\n%q", got, general)
			}
		})
	}

	// Not taken.
	sel := "SELECT id, s FROM ty WHERE id = 1"
	q(sel)
	q(sel)
	none := func(what string, f func()) {
		t.Helper()
		f0 := fast()
		f()
		if n := fast() - f0; n != 0 {
			t.Errorf("%s: %v fast reads, want none", what, n)
		}
	}
	none("a block", func() {
		mustExec(t, a, "BEGIN")
		if r := q(sel); r.err != "" || len(r.rows) != 1 {
			t.Errorf("in a block: %+v", r)
		}
		mustExec(t, a, "COMMIT")
	})
	none("two statements", func() {
		if r := q(sel + "; " + sel); r.err != "" || len(r.rows) != 2 {
			t.Errorf("two statements: %+v", r)
		}
	})
	none("quoted key", func() {
		for range 3 {
			if r := q("SELECT id, s FROM ty WHERE id = '1'"); r.err != "" || len(r.rows) != 1 {
				t.Errorf("quoted key: %+v", r)
			}
		}
	})
	none("statement_timeout", func() {
		mustExec(t, a, "SET statement_timeout = '10ms'")
		defer mustExec(t, a, "RESET statement_timeout")
		var reads atomic.Int32
		restore := session.SetImplicitReadHook(func() { reads.Add(1); time.Sleep(100 * time.Millisecond) })
		defer restore()
		if r := q(sel); !strings.Contains(r.err, "57014") {
			t.Errorf("past statement_timeout: %+v, want 57014", r)
		}
		// The read that ran out of time is the statement's last: it is
		// not read again, under a fresh timeout, by the general path.
		if n := reads.Load(); n != 1 {
			t.Errorf("past statement_timeout: %d reads, want 1", n)
		}
	})
	none("result changed", func() {
		mustExec(t, a, "ALTER TABLE ty ADD COLUMN extra int")
		if r := q("SELECT * FROM ty WHERE id = 1"); r.err != "" || len(r.fields) != 20 {
			t.Errorf("after ADD COLUMN: %+v, want 20 columns", r)
		}
	})
	// And the plan made again after the DDL is taken again.
	q("SELECT * FROM ty WHERE id = 1")
	f0 := fast()
	if r := q("SELECT * FROM ty WHERE id = 2"); r.err != "" || len(r.fields) != 20 || len(r.rows) != 1 {
		t.Errorf("after ADD COLUMN, again: %+v", r)
	}
	if n := fast() - f0; n != 1 {
		t.Errorf("after ADD COLUMN, again: %v fast reads, want 1", n)
	}
}

// TestQueryFastPointReadObjects: a Query of a kept point SELECT on the
// fast path allocates fewer objects than by the general path, whole
// process counted (runtime.MemStats.Mallocs: the in-process node and
// the client, whose share is the same in both), the lower of three
// rounds each, alternating: the statement group, the autocommit's
// writer, the statement state's, the plan instance, the executor's
// runner, operator and Rows and the cursor are not made.
func TestQueryFastPointReadObjects(t *testing.T) {
	if session.RaceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	ctx := context.Background()
	_, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE acct (id int8 PRIMARY KEY, bal int8, note text)")
	mustExec(t, a, "INSERT INTO acct SELECT g, g * 10, 'n' || g FROM generate_series(100001, 100100) g")
	pc := a.PgConn()
	sqls := make([]string, 100)
	for i := range sqls {
		sqls[i] = fmt.Sprintf("SELECT bal FROM acct WHERE id = %d", i+100001)
	}
	const n = 2000
	round := func(off bool) float64 {
		if off {
			defer session.SetFastReadOff()()
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i := 0; i < n; i++ {
			if r := simpleQuery(ctx, pc, sqls[i%len(sqls)]); r.err != "" || len(r.rows) != 1 {
				t.Fatalf("%+v", r)
			}
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.Mallocs-m0.Mallocs) / n
	}
	round(false)
	round(true)
	fast, general := math.Inf(1), math.Inf(1)
	for range 3 {
		fast, general = min(fast, round(false)), min(general, round(true))
	}
	t.Logf("objects per Query: fast path %.1f, general path %.1f", fast, general)
	if general-fast < 8 {
		t.Errorf("objects per Query: fast path %.1f, general path %.1f; want at least 8 fewer", fast, general)
	}
}
