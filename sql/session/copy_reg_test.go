package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestCopyRegclass: COPY FROM into a column whose text needs the catalog
// (regclass) parses in the statement's own goroutine, batch by batch in
// step with it (sql/exec/copy_parse.go). Several batches of names resolve
// through the statement's transaction, and an unknown name after them
// fails the COPY with 42P01 and writes nothing.
func TestCopyRegclass(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE refs (id int PRIMARY KEY, r regclass NOT NULL)")
	const rows = 700 // more than two of the parse stage's 256-row batches
	var in strings.Builder
	for i := range rows {
		name := "refs"
		if i%2 == 1 {
			name = "pg_catalog.pg_class"
		}
		fmt.Fprintf(&in, "%d\t%s\n", i, name)
	}
	tag, err := c.PgConn().CopyFrom(ctx, strings.NewReader(in.String()), "COPY refs FROM STDIN")
	if err != nil || tag.String() != fmt.Sprintf("COPY %d", rows) {
		t.Fatalf("COPY of regclass names: %v %v", tag, err)
	}
	var n, own int
	if err := c.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE r = 'refs'::regclass) FROM refs").Scan(&n, &own); err != nil {
		t.Fatal(err)
	}
	if n != rows || own != rows/2 {
		t.Errorf("after COPY: %d rows, %d naming refs; want %d and %d", n, own, rows, rows/2)
	}
	in.Reset()
	for i := range rows {
		name := "refs"
		if i == rows-1 {
			name = "no_such_table"
		}
		fmt.Fprintf(&in, "%d\t%s\n", rows+i, name)
	}
	if _, err := c.PgConn().CopyFrom(ctx, strings.NewReader(in.String()), "COPY refs FROM STDIN"); sqlState(err) != "42P01" {
		t.Fatalf("COPY naming an unknown table: %v, want 42P01", err)
	}
	if err := c.QueryRow(ctx, "SELECT count(*) FROM refs").Scan(&n); err != nil || n != rows {
		t.Errorf("after the failed COPY: %d rows, %v; want %d", n, err, rows)
	}
}
