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
)

// TestFastPointRead: an Execute of a kept point SELECT in an implicit
// transaction takes the fast path (fastread.go; the node's
// cairn_sql_fast_point_reads_total counts it) and answers what the
// general path answers (the same statement with the fast path turned
// off), byte for byte: every column type, NULLs, a missing row, text,
// binary and mixed result formats, parameters and constants in the
// select list, a key of two columns. What must not take it: an explicit
// transaction, a result a DDL changed (0A000 from the general path), a
// NULL key.
func TestFastPointRead(t *testing.T) {
	ctx := context.Background()
	srv, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, `CREATE TABLE ty (id int8 PRIMARY KEY, b bool, i2 int2, i4 int4, f4 float4, f8 float8,
		n numeric, s text, vc varchar(5), by bytea, d date, tm time, ts timestamp, tz timestamptz,
		iv interval, u uuid, j jsonb, ai int8[], at text[])`)
	mustExec(t, a, `INSERT INTO ty VALUES (1, true, -2, 40000, 1.5, -2.25e10, 12345.678, 'héllo', 'abc',
		'\x00ff', '2024-02-29', '12:34:56.789', '2024-01-02 03:04:05.6', '2024-01-02 03:04:05+02',
		'1 day 02:03:04', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, null]}', '{1,NULL,3}', '{"a b",NULL}')`)
	mustExec(t, a, "INSERT INTO ty (id) VALUES (2)")
	mustExec(t, a, "CREATE TABLE two (a int4, b text, v text, PRIMARY KEY (a, b))")
	mustExec(t, a, "INSERT INTO two VALUES (1, 'x', 'one-x'), (1, 'y', NULL)")
	fast := func() float64 { return metric(t, srv, "cairn_sql_fast_point_reads_total") }
	pc := a.PgConn()

	const nTy = 19
	binAll, mixed := []int16{1}, make([]int16, nTy)
	for i := range mixed {
		mixed[i] = int16(i % 2)
	}
	type run struct {
		rows [][][]byte
		tag  string
		err  string
	}
	exec := func(name string, params [][]byte, formats []int16) run {
		t.Helper()
		res := pc.ExecPrepared(ctx, name, params, nil, formats).Read()
		r := run{rows: res.Rows, tag: res.CommandTag.String()}
		if res.Err != nil {
			r.err = fmt.Sprint(res.Err)
		}
		return r
	}
	for i, tc := range []struct {
		name, sql string
		params    [][]byte
		formats   []int16
	}{
		{"all types, text", "SELECT * FROM ty WHERE id = $1", [][]byte{[]byte("1")}, nil},
		{"all types, binary", "SELECT * FROM ty WHERE id = $1", [][]byte{[]byte("1")}, binAll},
		{"all types, mixed", "SELECT * FROM ty WHERE id = $1", [][]byte{[]byte("1")}, mixed},
		{"NULLs, text", "SELECT * FROM ty WHERE id = $1", [][]byte{[]byte("2")}, nil},
		{"NULLs, binary", "SELECT * FROM ty WHERE id = $1", [][]byte{[]byte("2")}, binAll},
		{"missing row", "SELECT * FROM ty WHERE id = $1", [][]byte{[]byte("3")}, nil},
		{"params and constants", "SELECT s, 'k', $2::int8, id, $2::int8 FROM ty WHERE id = $1", [][]byte{[]byte("1"), []byte("77")}, nil},
		{"params and constants, binary", "SELECT s, 'k', $2::int8, id FROM ty WHERE id = $1", [][]byte{[]byte("1"), []byte("77")}, binAll},
		{"two key columns", "SELECT v, a FROM two WHERE a = $1 AND b = $2", [][]byte{[]byte("1"), []byte("x")}, nil},
		{"two key columns, NULL value", "SELECT v FROM two WHERE b = $2 AND a = $1", [][]byte{[]byte("1"), []byte("y")}, binAll},
		{"two key columns, missing", "SELECT v FROM two WHERE a = $1 AND b = $2", [][]byte{[]byte("2"), []byte("x")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("s%d", i)
			if _, err := pc.Prepare(ctx, name, tc.sql, nil); err != nil {
				t.Fatal(err)
			}
			restore := session.SetFastReadOff()
			if r := exec(name, tc.params, tc.formats); r.err != "" { // plans, keeps the plan and its point shape
				t.Fatalf("first Execute: %s", r.err)
			}
			f0 := fast()
			general := exec(name, tc.params, tc.formats)
			restore()
			if general.err != "" {
				t.Fatalf("general path: %s", general.err)
			}
			if n := fast() - f0; n != 0 {
				t.Fatalf("turned off: %v fast reads", n)
			}
			got := exec(name, tc.params, tc.formats)
			if n := fast() - f0; n != 1 {
				t.Fatalf("%v fast reads, want 1 (%+v)", n, got)
			}
			if !reflect.DeepEqual(got, general) {
				t.Errorf("fast path:\n%q\ngeneral path:\n%q", got, general)
			}
		})
	}

	// Not taken.
	if _, err := pc.Prepare(ctx, "q", "SELECT * FROM ty WHERE id = $1", nil); err != nil {
		t.Fatal(err)
	}
	one := [][]byte{[]byte("1")}
	exec("q", one, nil)
	none := func(what string, f func()) {
		t.Helper()
		f0 := fast()
		f()
		if n := fast() - f0; n != 0 {
			t.Errorf("%s: %v fast reads, want none", what, n)
		}
	}
	none("explicit transaction", func() {
		mustExec(t, a, "BEGIN")
		if r := exec("q", one, nil); r.err != "" || len(r.rows) != 1 {
			t.Errorf("in a transaction: %+v", r)
		}
		mustExec(t, a, "COMMIT")
	})
	none("NULL key", func() {
		if r := exec("q", [][]byte{nil}, nil); r.err != "" || len(r.rows) != 0 || r.tag != "SELECT 0" {
			t.Errorf("NULL key: %+v", r)
		}
	})
	none("statement_timeout", func() {
		mustExec(t, a, "SET statement_timeout = '10ms'")
		defer mustExec(t, a, "RESET statement_timeout")
		var reads atomic.Int32
		restore := session.SetImplicitReadHook(func() { reads.Add(1); time.Sleep(100 * time.Millisecond) })
		defer restore()
		if r := exec("q", one, nil); !strings.Contains(r.err, "57014") {
			t.Errorf("past statement_timeout: %+v, want 57014", r)
		}
		// Not read again by the general path under a fresh timeout.
		if n := reads.Load(); n != 1 {
			t.Errorf("past statement_timeout: %d reads, want 1", n)
		}
	})
	none("result changed", func() {
		mustExec(t, a, "ALTER TABLE ty ADD COLUMN extra int")
		if r := exec("q", one, nil); r.err == "" || !strings.Contains(r.err, "0A000") {
			t.Errorf("after ADD COLUMN: %+v, want 0A000", r)
		}
	})
}

// TestFastPointReadObjects: the fast path allocates fewer objects per
// Execute than the general path, whole process counted
// (runtime.MemStats.Mallocs: the in-process node and the client, whose
// share is the same in both), the lower of three rounds each,
// alternating: the general path's statement state, execution context,
// plan instance, runner, operator, Rows and cursor are not made.
func TestFastPointReadObjects(t *testing.T) {
	if session.RaceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	ctx := context.Background()
	_, url := startNode(t)
	a := connect(t, url, nil)
	mustExec(t, a, "CREATE TABLE acct (id int8 PRIMARY KEY, bal int8, note text)")
	mustExec(t, a, "INSERT INTO acct SELECT g, g * 10, 'n' || g FROM generate_series(100001, 100100) g")
	pc := a.PgConn()
	if _, err := pc.Prepare(ctx, "sel", "SELECT bal FROM acct WHERE id = $1", nil); err != nil {
		t.Fatal(err)
	}
	keys := make([][][]byte, 100)
	for i := range keys {
		keys[i] = [][]byte{[]byte(fmt.Sprint(i + 100001))}
	}
	const n = 2000
	round := func(off bool) float64 {
		if off {
			defer session.SetFastReadOff()()
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i := 0; i < n; i++ {
			if res := pc.ExecPrepared(ctx, "sel", keys[i%len(keys)], nil, nil).Read(); res.Err != nil || len(res.Rows) != 1 {
				t.Fatalf("%+v", res)
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
	t.Logf("objects per Execute: fast path %.1f, general path %.1f", fast, general)
	if general-fast < 5 {
		t.Errorf("objects per Execute: fast path %.1f, general path %.1f; want at least 5 fewer", fast, general)
	}
	// Node and client together: 18.8 before the statement's portal, the
	// Execute's writers and Bind's and Execute's decoding stopped
	// allocating (eighteenth session: portal.Close's spare, execSpare,
	// pgwire's frontend reader), 13.8 after (keys of 1 to 100). The keys
	// are now of 256 or more, as pgbench's are: 15.0 while the fetcher
	// decoded the key it does not return into a DInt (an object), 14.0
	// since it passes over it (nineteenth session, rowenc's keySkip),
	// 13.0 since the batch keeps its Scan request (twentieth session,
	// kv.Batch's scanSlot).
	if fast > 13.5 {
		t.Errorf("objects per Execute on the fast path: %.1f, want at most 13.5", fast)
	}
	// Under a statement_timeout the Execute's read runs under a context
	// with its timer; the Sync that ends the implicit transaction, with
	// no kv.Txn to commit, makes none: 29.0 objects per Execute when it
	// made a second for a commit that sends nothing, 25.0 since
	// (twentieth session).
	mustExec(t, a, "SET statement_timeout = '1min'")
	timed := math.Inf(1)
	for range 3 {
		timed = min(timed, round(false))
	}
	t.Logf("objects per Execute on the fast path under a statement_timeout: %.1f", timed)
	if timed > 26 {
		t.Errorf("objects per Execute on the fast path under a statement_timeout: %.1f, want at most 26", timed)
	}
}
