package exec

import (
	"testing"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/catalog"
)

// End-to-end DML: statements bound by plan.Build and optimized by
// opt.Optimize, as the session runs them, over the tables of dml_test.go.

// sql runs one statement in its own transaction (point_dml_test.go's
// sqlPath, the fast path allowed).
func (e *dmlEnv) sql(q string) (string, int64, error) {
	e.t.Helper()
	out, n, _, err := e.sqlPath(q, false)
	return out, n, err
}

func (e *dmlEnv) mustSQL(q string) (string, int64) {
	e.t.Helper()
	out, n, err := e.sql(q)
	if err != nil {
		e.t.Fatalf("%s: %s", q, describeErr(err))
	}
	return out, n
}

func TestDMLThroughBinder(t *testing.T) {
	e := newDMLEnv(t)
	tb := tTable()
	e.create(tb)
	p, c, _ := fkTables(t, e, catalog.Cascade, catalog.Restrict)

	for _, tc := range []struct {
		sql, rows string
		n         int64
	}{
		{"INSERT INTO t (a, b, c) VALUES (1, 'x', 5), (2, 'y', 15) RETURNING a, d", "(1,10) (2,30)", 2},
		{"INSERT INTO t (a, c) VALUES (3, 25)", "", 1},
		// Reads of its own target see the table as the statement began.
		{"INSERT INTO t (a, b, c) SELECT a + 10, b || '2', c FROM t", "", 3},
		{"UPDATE t SET c = c + 1 WHERE a > 10 RETURNING a, c, d", "(11,6,12) (12,16,32) (13,26,52)", 3},
		{"UPDATE t SET b = upper(b) WHERE c > 100", "", 0},
		{"DELETE FROM t WHERE a >= 12 RETURNING b", "(y2) (dflt2)", 2},
		{"INSERT INTO t (a, b, c) VALUES (1, 'n', 7), (20, 'm', 1) ON CONFLICT (a) DO UPDATE SET c = t.c + excluded.c RETURNING a, c",
			"(1,12) (20,1)", 2},
		{"INSERT INTO t (a, b, c) VALUES (1, 'x', 7) ON CONFLICT DO NOTHING", "", 0},
		{"DELETE FROM c2", "", 1},
		{"DELETE FROM p WHERE id = 1", "", 1},
	} {
		rows, n := e.mustSQL(tc.sql)
		if rows != tc.rows || n != tc.n {
			t.Errorf("%s:\n got %q, %d\nwant %q, %d", tc.sql, rows, n, tc.rows, tc.n)
		}
	}
	if got, want := e.rows(tb.ID), "(1,x,12,24) (2,y,15,30) (3,dflt,25,50) (11,x2,6,12) (20,m,1,2)"; got != want {
		t.Errorf("t = %s, want %s", got, want)
	}
	// ON DELETE CASCADE removed c's children of 1; ON UPDATE RESTRICT.
	if got, want := e.rows(c.ID), "(3,2) (4,NULL)"; got != want {
		t.Errorf("c = %s, want %s", got, want)
	}
	_, _, err := e.sql("UPDATE p SET id = 9 WHERE id = 2")
	expectErr(t, err, pgerrcode.ForeignKeyViolation, `update or delete on table "p" violates foreign key constraint "c_pid_fkey" on table "c"`,
		`Key (id)=(2) is still referenced from table "c".`)
	_, _, err = e.sql("INSERT INTO t (a, b, c) VALUES (30, 'q', 0)")
	expectErr(t, err, pgerrcode.CheckViolation, `new row for relation "t" violates check constraint "t_c_check"`, "Failing row contains (30, q, 0, 0).")
	_, _, err = e.sql("INSERT INTO t (a, b, c) VALUES (1, 'q', 1), (1, 'r', 1) ON CONFLICT (a) DO UPDATE SET c = 1")
	expectErr(t, err, pgerrcode.CardinalityViolation, "ON CONFLICT DO UPDATE command cannot affect row a second time", "")
	_ = p
}
