package ddl

import (
	"context"
	"os"
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// TestPgDumpSchema replays the DDL of a pg_dump --schema-only of a
// PostgreSQL 15 database (testdata/pg_dump_schema.sql: an identity key
// added after CREATE TABLE, a serial whose sequence is created and owned
// afterwards, primary keys added by ALTER TABLE, a DEFERRABLE foreign key,
// a view, a comment, OWNER TO on every relation). The SET and SELECT
// statements are the session's and are skipped.
func TestPgDumpSchema(t *testing.T) {
	e := newTestEnv(t)
	e.describe = func(_ context.Context, sql string) ([]plan.Column, error) {
		return []plan.Column{{Name: "id", T: types.Int4}, {Name: "title", T: types.Text}}, nil
	}
	b, err := os.ReadFile("testdata/pg_dump_schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := parser.Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if s.AST.Stmt.GetVariableSetStmt() != nil || s.AST.Stmt.GetSelectStmt() != nil {
			continue
		}
		if _, err := e.exec(s.SQL); err != nil {
			t.Fatalf("%s: %v", s.SQL, err)
		}
	}
	author, book := e.table("author"), e.table("book")
	if got := describeTable(author); got != `id bigint not null identity by_default
name character varying(100) not null
email character varying(254)
created timestamp with time zone default now()
index author_pkey unique (id)
index author_email_key unique (email)
unique author_email_key
` {
		t.Errorf("author:\n%s", got)
	}
	if c := book.ColumnByName("id"); c.DefaultExpr != "nextval('public.book_id_seq'::regclass)" {
		t.Errorf("book.id default %q", c.DefaultExpr)
	}
	if fk := book.ForeignKeys; len(fk) != 1 || fk[0].Name != "book_author_id_fkey" || !fk[0].InitiallyDeferred || fk[0].ReferencedTableID != author.ID {
		t.Errorf("book foreign keys %+v", fk)
	}
	if book.ColumnByName("rowid") != nil || book.PrimaryIndex.Name != "book_pkey" || book.Comment != "books" {
		t.Errorf("book:\n%s", describeTable(book))
	}
	seq, ok := e.relation("book_id_seq").(*catalog.Sequence)
	if !ok || seq.OwnedBy == nil || seq.OwnedBy.TableID != book.ID || seq.TypeOID != types.Int4.Oid {
		t.Errorf("book_id_seq %+v", seq)
	}
	if _, ok := e.relation("cheap").(*catalog.View); !ok {
		t.Error("view cheap missing")
	}
	if s, ok := e.relation("author_id_seq").(*catalog.Sequence); !ok || author.ColumnByName("id").SequenceID != s.ID {
		t.Error("identity sequence author_id_seq missing or not the column's")
	}
}
