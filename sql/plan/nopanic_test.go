package plan_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/test/logic"
)

// TestNoPanicOnLogicTests binds every query and DML statement of the logic
// tests over a catalog grown from their CREATE TABLE statements: errors are
// fine (the fake catalog knows no defaults, views or sequences), panics are
// not. It also renders every plan that binds.
func TestNoPanicOnLogicTests(t *testing.T) {
	files, err := filepath.Glob("../../test/logic/testdata/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no logic test files: %v", err)
	}
	bound, failed := 0, 0
	for _, path := range files {
		f, err := logic.ParseFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cat := testCatalog(t)
		nextID := catalog.ID(1000)
		for _, rec := range f.Records {
			if rec.SQL == "" {
				continue
			}
			stmts, err := parser.Parse(rec.SQL)
			if err != nil {
				continue
			}
			for i := range stmts {
				st := &stmts[i]
				switch n := st.AST.Stmt.Node.(type) {
				case *pg_query.Node_CreateStmt:
					if tb := tableFromAST(n.CreateStmt, nextID); tb != nil {
						nextID++
						cat.rels["public."+tb.Name] = plan.Relation{Table: tb}
					}
					continue
				case *pg_query.Node_DropStmt:
					for _, o := range n.DropStmt.Objects {
						if l := o.GetList(); l != nil && len(l.Items) > 0 {
							delete(cat.rels, "public."+l.Items[len(l.Items)-1].GetString_().GetSval())
						}
					}
					continue
				case *pg_query.Node_SelectStmt, *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt:
				case *pg_query.Node_ExplainStmt:
					st.AST.Stmt = n.ExplainStmt.Query
				default:
					continue
				}
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("%s:%d: panic binding %q: %v\n%s", filepath.Base(path), rec.Line, st.SQL, r, debug.Stack())
						}
					}()
					env := &plan.Env{Catalog: cat, Types: &types.Context{}, Params: sem.NewParamTypes()}
					before := proto.Clone(st.AST)
					p, err := plan.Build(context.Background(), env, st)
					// Invariant 3: prepared statements bind the same tree
					// again, so Build must leave it as it was.
					if !proto.Equal(before, st.AST) {
						t.Errorf("%s:%d: Build modified the parse tree of %q", filepath.Base(path), rec.Line, st.SQL)
					}
					if err != nil {
						failed++
						if os.Getenv("PLAN_LOG_ERRORS") != "" {
							t.Logf("%s:%d: %q: %v", filepath.Base(path), rec.Line, st.SQL, err)
						}
						return
					}
					bound++
					_ = plan.Explain(p, func(plan.Node) string { return "" })
				}()
			}
		}
	}
	t.Logf("bound %d statements, %d errors", bound, failed)
	if bound < 100 {
		t.Errorf("only %d statements bound: the harness is not exercising the binder", bound)
	}
}

// tableFromAST makes a descriptor of a CREATE TABLE's columns and
// primary key (a hidden rowid when none), enough for binding.
func tableFromAST(cs *pg_query.CreateStmt, id catalog.ID) *catalog.Table {
	tb := &catalog.Table{ID: id, Name: cs.Relation.Relname, DatabaseID: catalog.PostgresDatabaseID, SchemaID: catalog.PublicSchemaID}
	var pkCols []string
	for _, e := range cs.TableElts {
		switch x := e.Node.(type) {
		case *pg_query.Node_ColumnDef:
			cd := x.ColumnDef
			typ, err := sem.TypeFromAST(nil, cd.TypeName)
			if err != nil {
				typ = types.Text
			}
			c := catalog.Column{ID: rowenc.ColumnID(len(tb.Columns) + 1), Name: cd.Colname, Type: typ, Nullable: true}
			for _, cn := range cd.Constraints {
				con := cn.GetConstraint()
				switch con.Contype {
				case pg_query.ConstrType_CONSTR_PRIMARY:
					pkCols = append(pkCols, cd.Colname)
					c.Nullable = false
				case pg_query.ConstrType_CONSTR_GENERATED:
					c.ComputedExpr, c.Stored = "NULL", true
				}
			}
			tb.Columns = append(tb.Columns, c)
		case *pg_query.Node_Constraint:
			if x.Constraint.Contype == pg_query.ConstrType_CONSTR_PRIMARY {
				for _, k := range x.Constraint.Keys {
					pkCols = append(pkCols, k.GetString_().GetSval())
				}
			}
		}
	}
	pk := catalog.Index{ID: catalog.PrimaryIndexID, Name: tb.Name + "_pkey", Unique: true,
		Kind: catalog.IndexBTree, State: catalog.IndexPublic}
	for _, name := range pkCols {
		if c := tb.ColumnByName(name); c != nil {
			pk.KeyColumnIDs = append(pk.KeyColumnIDs, c.ID)
		}
	}
	if len(pk.KeyColumnIDs) == 0 {
		id := rowenc.ColumnID(len(tb.Columns) + 1)
		tb.Columns = append(tb.Columns, catalog.Column{ID: id, Name: "rowid", Type: types.Int8, Hidden: true})
		pk.KeyColumnIDs = []rowenc.ColumnID{id}
	}
	pk.KeyDirections = make([]rowenc.Order, len(pk.KeyColumnIDs))
	tb.PrimaryIndex = pk
	return tb
}
