package sem_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// The datadriven files under testdata/ use this mini-language. Each input
// is one SQL expression, parsed as the target of `SELECT <expr>` (so error
// positions count from the S of SELECT, as psql shows them).
//
//	build [want=<type>] [clause=<name>] [agg] [window] [params=<type>,...] [assign=<col>]
//	<expr>
//	----
//	<String()> :: <type>          the typed, folded tree
//	$1 :: <type>                  then one line per parameter, its inferred type
//	error <SQLSTATE> [at <pos>]: <message> [HINT: <hint>]
//
// want coerces the result (want=boolean is a WHERE clause); clause names
// the clause in messages (default WHERE); agg/window allow aggregate and
// window calls; params declares parameter types (? for unknown);
// assign=<col> builds an INSERT value for column <col> of the test table
// (BuildAssign).
//
//	eval [args=(<value>,...)]
//	<expr>
//	----
//	<value as Postgres prints it, NULL for NULL>
//	error <SQLSTATE>: <message>
//
// eval builds (with want unset) and evaluates the expression, with args
// the parameter values, as text for the types their uses inferred; `norm` is like
// build but prints NormalizeBool of the tree.
//
// Both see the columns of the test table, whose one row eval reads:
//
//	i int4 = 5        b int8 = NULL        n numeric = 2.50    t text = 'abc'
//	f float8 = 1.5    d date = 2024-01-31  arr int4[] = {1,2,NULL}
//	j jsonb = {"a": 1, "b": [1, 2]}       flag bool = NULL    v varchar(3) = 'xy'
//	ts timestamptz = 2024-01-31 10:00:00+00
//
// Cases were checked against PostgreSQL 15 with the same table.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "build", "norm":
				return runBuild(t, d)
			case "eval":
				return runEval(t, d)
			}
			t.Fatalf("unknown command %s", d.Cmd)
			return ""
		})
	})
}

type column struct {
	name string
	typ  *types.T
	val  string // text form; "NULL" for NULL
}

var columns = []column{
	{"i", types.Int4, "5"},
	{"b", types.Int8, "NULL"},
	{"n", types.Numeric, "2.50"},
	{"t", types.Text, "abc"},
	{"f", types.Float8, "1.5"},
	{"d", types.Date, "2024-01-31"},
	{"arr", types.MustArray(types.Int4), "{1,2,NULL}"},
	{"j", types.JSONB, `{"a": 1, "b": [1, 2]}`},
	{"flag", types.Bool, "NULL"},
	{"v", mustVarChar(3), "xy"},
	{"ts", types.TimestampTZ, "2024-01-31 10:00:00+00"},
}

func mustVarChar(n int32) *types.T {
	t, err := types.MakeVarChar(n)
	if err != nil {
		panic(err)
	}
	return t
}

// testScope resolves the test table's columns, plain or qualified by "r".
type testScope struct{}

func (testScope) Resolve(fields []string) (sem.ColumnID, *types.T, string, error) {
	name := fields[len(fields)-1]
	if len(fields) == 2 && fields[0] != "r" || len(fields) > 2 {
		return 0, nil, "", sem.ErrMissingFrom(fields[len(fields)-2])
	}
	for i, c := range columns {
		if c.name == name {
			return sem.ColumnID(i), c.typ, strings.Join(fields, "."), nil
		}
	}
	if name == "dup" {
		return 0, nil, "", sem.ErrAmbiguousColumn(name)
	}
	return 0, nil, "", sem.ErrUndefinedColumn(fields...)
}

func testRow(t testing.TB) []types.Datum {
	row := make([]types.Datum, len(columns))
	for i, c := range columns {
		if c.val == "NULL" {
			row[i] = types.DNull
			continue
		}
		d, err := types.ParseDatum(nil, c.typ, c.val)
		if err != nil {
			t.Fatal(err)
		}
		row[i] = d
	}
	return row
}

// parseExpr parses `SELECT <expr>` and returns the statement and the
// expression's node.
func parseExpr(sql string) (*parser.Statement, *pg_query.Node, error) {
	stmts, err := parser.Parse("SELECT " + sql)
	if err != nil {
		return nil, nil, err
	}
	if len(stmts) != 1 {
		return nil, nil, fmt.Errorf("want one statement, got %d", len(stmts))
	}
	sel := stmts[0].AST.Stmt.GetSelectStmt()
	if sel == nil || len(sel.TargetList) != 1 || sel.FromClause != nil {
		return nil, nil, fmt.Errorf("not a single expression")
	}
	return &stmts[0], sel.TargetList[0].GetResTarget().Val, nil
}

func buildContext(st *parser.Statement, d *datadriven.TestData) (sem.BuildContext, error) {
	ctx := sem.BuildContext{
		Scope:    testScope{},
		Params:   sem.NewParamTypes(),
		Clause:   "WHERE",
		Position: st.Position,
	}
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "clause":
			ctx.Clause = strings.Join(a.Vals, " ")
		case "agg":
			ctx.AllowAggregates = true
		case "window":
			ctx.AllowWindows = true
		case "params":
			var ts []*types.T
			for _, v := range a.Vals {
				if v == "?" {
					ts = append(ts, nil)
					continue
				}
				typ, err := types.LookupName(v)
				if err != nil {
					return ctx, err
				}
				ts = append(ts, typ)
			}
			ctx.Params = sem.NewParamTypes(ts...)
		}
	}
	return ctx, nil
}

func formatErr(err error) string {
	e := pgerror.Flatten(err)
	s := "error " + e.Code
	if p := sem.ErrorPosition(err); p != 0 {
		s += fmt.Sprintf(" at %d", p)
	}
	s += ": " + e.Message
	if e.Detail != "" {
		s += "\nDETAIL: " + e.Detail
	}
	if e.Hint != "" {
		s += "\nHINT: " + e.Hint
	}
	return s + "\n"
}

func build(t *testing.T, d *datadriven.TestData) (sem.BuildContext, sem.Expr, error) {
	st, node, err := parseExpr(d.Input)
	if err != nil {
		return sem.BuildContext{}, nil, err
	}
	ctx, err := buildContext(st, d)
	if err != nil {
		t.Fatal(err)
	}
	var want *types.T
	if d.HasArg("want") {
		var w string
		d.ScanArgs(t, "want", &w)
		if want, err = types.LookupName(w); err != nil {
			t.Fatal(err)
		}
	}
	if d.HasArg("assign") {
		var col string
		d.ScanArgs(t, "assign", &col)
		for _, c := range columns {
			if c.name == col {
				e, err := sem.BuildAssign(ctx, node, c.typ, c.name)
				return ctx, e, err
			}
		}
		t.Fatalf("no column %s", col)
	}
	e, err := sem.Build(ctx, node, want)
	return ctx, e, err
}

func runBuild(t *testing.T, d *datadriven.TestData) string {
	ctx, e, err := build(t, d)
	if err != nil {
		return formatErr(err)
	}
	if d.Cmd == "norm" {
		e = sem.NormalizeBool(e)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s :: %s\n", e, e.Type().Name())
	pts, err := ctx.Params.Types()
	if err != nil {
		b.WriteString(formatErr(err))
	}
	for i, pt := range pts {
		fmt.Fprintf(&b, "$%d :: %s\n", i+1, pt.Name())
	}
	return b.String()
}

func evalContext() *sem.EvalContext {
	now := time.Date(2024, 1, 31, 10, 0, 0, 0, time.UTC)
	return &sem.EvalContext{Fn: &builtins.FixedContext{Txn: now, Stmt: now}}
}

func runEval(t *testing.T, d *datadriven.TestData) string {
	ctx, e, err := build(t, d)
	if err != nil {
		return formatErr(err)
	}
	ectx := evalContext()
	if d.HasArg("args") {
		pts, err := ctx.Params.Types()
		if err != nil {
			return formatErr(err)
		}
		var vals []string
		d.ScanArgs(t, "args", &vals)
		for i, v := range vals {
			if v == "NULL" {
				ectx.Params = append(ectx.Params, types.DNull)
				continue
			}
			pd, err := types.ParseDatum(nil, pts[i], v)
			if err != nil {
				t.Fatal(err)
			}
			ectx.Params = append(ectx.Params, pd)
		}
	}
	v, err := sem.Eval(ectx, e, testRow(t))
	if err != nil {
		return formatErr(err)
	}
	// NormalizeBool must not change the result (invariant 3).
	v2, err2 := sem.Eval(ectx, sem.NormalizeBool(e), testRow(t))
	if err2 != nil || types.Format(nil, e.Type(), v2) != types.Format(nil, e.Type(), v) || types.IsNull(v) != types.IsNull(v2) {
		t.Errorf("NormalizeBool changed %s: %v vs %v (%v)", d.Input, v, v2, err2)
	}
	if types.IsNull(v) {
		return "NULL\n"
	}
	return types.Format(nil, e.Type(), v) + "\n"
}
