package session_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPreparedResultTypeChange: a prepared statement whose result columns
// a later DDL changes (SELECT * after ADD or DROP COLUMN, a column's type
// altered) fails its Execute with 0A000, as PostgreSQL's "cached plan
// must not change result type": the client decodes the rows by the
// description it got at Parse, so rows of another shape must never reach
// it. A DDL that leaves the result alone re-plans and runs.
func TestPreparedResultTypeChange(t *testing.T) {
	ctx := context.Background()
	_, url := startNode(t)
	a, b := connect(t, url, nil), connect(t, url, nil)
	mustExec(t, b, "CREATE TABLE rt (id int PRIMARY KEY, v int, w text)")
	mustExec(t, b, "INSERT INTO rt VALUES (1, 10, 'x'), (2, 20, 'y')")
	pc := a.PgConn()

	prepare := func(name, sql string) int {
		t.Helper()
		sd, err := pc.Prepare(ctx, name, sql, nil)
		if err != nil {
			t.Fatalf("prepare %s: %v", sql, err)
		}
		return len(sd.Fields)
	}
	// run executes a prepared statement with id = 1 (text formats) and
	// returns the values of its one row, or its error's SQLSTATE.
	run := func(name string) ([]string, string) {
		t.Helper()
		res := pc.ExecPrepared(ctx, name, [][]byte{[]byte("1")}, nil, nil).Read()
		if res.Err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(res.Err, &pgErr) {
				t.Fatalf("execute %s: %v", name, res.Err)
			}
			return nil, pgErr.Code
		}
		if len(res.Rows) != 1 {
			t.Fatalf("execute %s: %d rows", name, len(res.Rows))
		}
		if len(res.Rows[0]) != len(res.FieldDescriptions) {
			t.Fatalf("execute %s: a row of %d values described by %d fields", name, len(res.Rows[0]), len(res.FieldDescriptions))
		}
		var out []string
		for _, v := range res.Rows[0] {
			out = append(out, string(v))
		}
		return out, ""
	}

	if n := prepare("star", "SELECT * FROM rt WHERE id = $1"); n != 3 {
		t.Fatalf("star described %d columns, want 3", n)
	}
	prepare("some", "SELECT id, v FROM rt WHERE id = $1")
	prepare("typed", "SELECT v FROM rt WHERE id = $1")
	for _, name := range []string{"star", "some", "typed"} {
		if _, code := run(name); code != "" {
			t.Fatalf("%s before any DDL: %s", name, code)
		}
	}

	// A new column: SELECT * would return four; the others are unchanged
	// and re-plan.
	mustExec(t, b, "ALTER TABLE rt ADD COLUMN z int DEFAULT 7")
	if vals, code := run("star"); code != "0A000" {
		t.Fatalf("star after ADD COLUMN: %v %q, want 0A000", vals, code)
	}
	if vals, code := run("some"); code != "" || fmt.Sprint(vals) != "[1 10]" {
		t.Fatalf("some after ADD COLUMN: %v %q, want [1 10]", vals, code)
	}
	// The statement fails every time, not once (PostgreSQL's too, until
	// it is prepared again); a fresh one sees the new column.
	if _, code := run("star"); code != "0A000" {
		t.Fatalf("star again: %q, want 0A000", code)
	}
	if n := prepare("star2", "SELECT * FROM rt WHERE id = $1"); n != 4 {
		t.Fatalf("star2 described %d columns, want 4", n)
	}
	if vals, code := run("star2"); code != "" || fmt.Sprint(vals) != "[1 10 x 7]" {
		t.Fatalf("star2: %v %q", vals, code)
	}

	// A column dropped: star2 would return three.
	mustExec(t, b, "ALTER TABLE rt DROP COLUMN w")
	if vals, code := run("star2"); code != "0A000" {
		t.Fatalf("star2 after DROP COLUMN: %v %q, want 0A000", vals, code)
	}
	// A column's type changed: typed's one column is no longer int4.
	mustExec(t, b, "ALTER TABLE rt ALTER COLUMN v TYPE int8")
	if vals, code := run("typed"); code != "0A000" {
		t.Fatalf("typed after ALTER TYPE: %v %q, want 0A000", vals, code)
	}
	if vals, code := run("some"); code != "0A000" {
		t.Fatalf("some after ALTER TYPE: %v %q, want 0A000", vals, code)
	}
	// The connection is fine afterwards.
	if vals, code := run("star2"); code != "0A000" {
		t.Fatalf("star2 again: %v %q", vals, code)
	}
	mustExec(t, a, "SELECT 1")
}
