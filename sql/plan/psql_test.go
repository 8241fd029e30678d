package plan_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgcatalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// withVirtual adds the real pg_catalog and information_schema relations
// to the fake catalog.
type withVirtual struct{ *fakeCatalog }

func (c withVirtual) LookupRelation(ctx context.Context, schema, name string) (plan.Relation, error) {
	if schema == "" || schema == "pg_catalog" || schema == "information_schema" {
		s := schema
		if s == "" {
			s = "pg_catalog"
		}
		if vt := pgcatalog.Lookup(s, name); vt != nil {
			return plan.Relation{Virtual: vt}, nil
		}
	}
	return c.fakeCatalog.LookupRelation(ctx, schema, name)
}

// TestPsqlQueriesBind binds the catalog queries psql's backslash commands
// send (recorded from psql 15 against PostgreSQL 15): psql works only if
// every one of them does.
func TestPsqlQueriesBind(t *testing.T) {
	src, err := os.ReadFile("testdata/psql_queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	cat := withVirtual{testCatalog(t)}
	n := 0
	for _, q := range strings.Split(string(src), "\n;\n") {
		if q = strings.TrimSpace(q); q == "" || strings.HasPrefix(q, "--") {
			continue
		}
		n++
		stmts, err := parser.Parse(q)
		if err != nil {
			t.Errorf("parse: %v\n%s", err, q)
			continue
		}
		env := &plan.Env{Catalog: cat, Types: &types.Context{}, Params: sem.NewParamTypes()}
		p, err := plan.Build(context.Background(), env, &stmts[0])
		if err != nil {
			t.Errorf("%v\n%s", err, q)
			continue
		}
		if len(p.Columns) == 0 {
			t.Errorf("no columns for\n%s", q)
		}
	}
	if n < 20 {
		t.Fatalf("only %d queries in the file", n)
	}
}
