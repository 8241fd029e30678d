package exec

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestCompileRowFree: an expression that reads nothing of a row (an
// INSERT's VALUES item, a parameter or constant under a cast) compiles
// without the column-position and outer-reference maps the general path
// builds, and still evaluates as before; one that reads a column takes
// the general path.
func TestCompileRowFree(t *testing.T) {
	r := newRunner(context.Background(), &Context{Eval: &sem.EvalContext{Params: []types.Datum{types.DInt(7)}}}, &plan.Plan{})
	param := &sem.Param{Index: 1, T: types.Int8}
	col := []plan.Column{{ID: 1, Name: "a", T: types.Int8}}
	for _, tc := range []struct {
		name      string
		e         sem.Expr
		cols      []plan.Column
		row       []types.Datum
		want      string
		maxAllocs float64
	}{
		{"param", param, nil, nil, "7", 2},
		{"const", &sem.Const{Datum: types.DInt(3), T: types.Int8}, nil, nil, "3", 2},
		{"cast of a param", &sem.Cast{Expr: param, To: types.Int4}, nil, nil, "7", 3},
		{"column", &sem.ColRef{ID: 1, T: types.Int8}, col, []types.Datum{types.DInt(5)}, "5", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readsNoRow(tc.e); got != (tc.maxAllocs >= 0) {
				t.Fatalf("readsNoRow(%s) = %v", tc.e, got)
			}
			f, err := r.compile(tc.e, tc.cols)
			if err != nil {
				t.Fatal(err)
			}
			d, err := f(tc.row)
			if err != nil || d.String() != tc.want {
				t.Fatalf("got %v, %v; want %s", d, err, tc.want)
			}
			if tc.maxAllocs < 0 || raceEnabled {
				return
			}
			if n := testing.AllocsPerRun(100, func() {
				if _, err := r.compile(tc.e, tc.cols); err != nil {
					t.Fatal(err)
				}
			}); n > tc.maxAllocs {
				t.Errorf("compile(%s): %v allocations, want at most %v", tc.e, n, tc.maxAllocs)
			}
		})
	}
}

// TestCompileDMLExprsAllocs: a table with no generated column and no
// CHECK (pgbench's) costs its UPDATE's and INSERT's build nothing for
// them (a padded slice of nils, its compiled slice, the row's column
// list and a sort's closure were four objects per statement), and
// CHECKs still come in PostgreSQL's order: the table's by name, then the
// views' check options in the binder's order.
func TestCompileDMLExprsAllocs(t *testing.T) {
	r := newRunner(context.Background(), &Context{Eval: &sem.EvalContext{}}, &plan.Plan{})
	exprs := make([]sem.Expr, 2)
	if n := testing.AllocsPerRun(100, func() {
		fns, err := r.compileComputed(exprs, 4, nil)
		if err != nil || fns != nil {
			t.Fatalf("compileComputed of no expression = %v, %v", fns, err)
		}
		checks, err := r.compileChecks(nil, nil)
		if err != nil || checks != nil {
			t.Fatalf("compileChecks of no check = %v, %v", checks, err)
		}
		if hasExpr(exprs) {
			t.Fatal("hasExpr of nils")
		}
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
	tru := &sem.Const{Datum: types.DBool(true), T: types.Bool}
	checks, err := r.compileChecks([]plan.Check{
		{Name: "v2", View: "w", Expr: tru}, {Name: "c", Expr: tru}, {Name: "v1", View: "v", Expr: tru}, {Name: "a", Expr: tru},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range checks {
		got = append(got, c.name)
	}
	if want := "a c v2 v1"; strings.Join(got, " ") != want {
		t.Errorf("checks in order %q, want %q", strings.Join(got, " "), want)
	}
}
