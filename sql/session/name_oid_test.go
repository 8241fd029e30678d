package session_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestCatalogNameOIDs: the catalogs' identifier and "char" columns, and
// the functions returning identifiers, describe themselves in
// RowDescription with PostgreSQL's OIDs (name 19, "char" 18), which pgx
// and psycopg decode by.
func TestCatalogNameOIDs(t *testing.T) {
	url := startServer(t)
	c := connect(t, url, nil)
	ctx := context.Background()
	rows, err := c.Query(ctx, `SELECT relname, relkind, current_user, 'x'::name, typname[0] FROM pg_class, pg_type
		WHERE relname = 'pg_class' AND typname = '_int4'`)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{pgtype.NameOID, pgtype.QCharOID, pgtype.NameOID, pgtype.NameOID, pgtype.QCharOID}
	fds := rows.FieldDescriptions()
	for i, fd := range fds {
		if i < len(want) && fd.DataTypeOID != want[i] {
			t.Errorf("column %s: OID %d, want %d", fd.Name, fd.DataTypeOID, want[i])
		}
	}
	if len(fds) != len(want) {
		t.Fatalf("%d columns, want %d", len(fds), len(want))
	}
	if !rows.Next() {
		t.Fatalf("no row: %v", rows.Err())
	}
	var relname, relkind, user, x, first string
	if err := rows.Scan(&relname, &relkind, &user, &x, &first); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if relname != "pg_class" || relkind != "v" && relkind != "r" || user == "" || x != "x" || first != "_" {
		t.Errorf("got %q %q %q %q %q", relname, relkind, user, x, first)
	}
}
