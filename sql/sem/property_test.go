package sem_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Random expressions over three int4 parameters ($1..$3) and one boolean
// ($4), written as SQL text so the generator exercises Build too.
func genInt(t *rapid.T, depth int) string {
	if depth <= 0 || rapid.IntRange(0, 3).Draw(t, "leaf") == 0 {
		return rapid.SampledFrom([]string{"$1", "$2", "$3", "0", "1", "-7", "NULL::int", "2147483647"}).Draw(t, "int")
	}
	a, b := genInt(t, depth-1), genInt(t, depth-1)
	switch rapid.IntRange(0, 7).Draw(t, "intop") {
	case 0:
		return fmt.Sprintf("(%s + %s)", a, b)
	case 1:
		return fmt.Sprintf("(%s * %s)", a, b)
	case 2:
		return fmt.Sprintf("(%s / %s)", a, b)
	case 3:
		return fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", genBool(t, depth-1), a, b)
	case 4:
		return fmt.Sprintf("COALESCE(%s, %s)", a, b)
	case 5:
		return fmt.Sprintf("NULLIF(%s, %s)", a, b)
	case 6:
		return fmt.Sprintf("GREATEST(%s, %s)", a, b)
	}
	return fmt.Sprintf("(- %s)", a)
}

func genBool(t *rapid.T, depth int) string {
	if depth <= 0 || rapid.IntRange(0, 3).Draw(t, "bleaf") == 0 {
		return rapid.SampledFrom([]string{"$4", "true", "false", "NULL::bool"}).Draw(t, "bool")
	}
	a, b := genInt(t, depth-1), genInt(t, depth-1)
	switch rapid.IntRange(0, 8).Draw(t, "boolop") {
	case 0:
		return fmt.Sprintf("(%s AND %s)", genBool(t, depth-1), genBool(t, depth-1))
	case 1:
		return fmt.Sprintf("(%s OR %s)", genBool(t, depth-1), genBool(t, depth-1))
	case 2:
		return fmt.Sprintf("(NOT %s)", genBool(t, depth-1))
	case 3:
		return fmt.Sprintf("(%s %s %s)", a, rapid.SampledFrom([]string{"=", "<>", "<", "<=", ">", ">="}).Draw(t, "cmp"), b)
	case 4:
		return fmt.Sprintf("(%s IN (%s, %s))", a, b, genInt(t, depth-1))
	case 5:
		return fmt.Sprintf("(%s IS NULL)", a)
	case 6:
		return fmt.Sprintf("(%s IS DISTINCT FROM %s)", a, b)
	case 7:
		return fmt.Sprintf("(%s BETWEEN %s AND 3)", a, b)
	}
	return fmt.Sprintf("(%s IS NOT TRUE)", genBool(t, depth-1))
}

// outcome is a result as a comparable string: the value, or the error's
// SQLSTATE.
func outcome(e sem.Expr, d types.Datum, err error) string {
	if err != nil {
		return "error " + pgerror.Code(err)
	}
	if types.IsNull(d) {
		return "NULL"
	}
	return types.Format(nil, e.Type(), d)
}

// TestFoldPreservesResults checks invariant 3: binding the parameters as
// constants and folding (and normalizing) gives what evaluating the
// unfolded tree with the parameter values gives, errors included, except
// that folding may drop an error a skipped operand would have raised.
func TestFoldPreservesResults(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sql := genBool(t, 4)
		if rapid.Bool().Draw(t, "int") {
			sql = genInt(t, 4)
		}
		st, node, err := parseExpr(sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		ctx := sem.BuildContext{Params: sem.NewParamTypes(types.Int4, types.Int4, types.Int4, types.Bool), Position: st.Position}
		e, err := sem.Build(ctx, node, nil)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		params := []types.Datum{
			intOrNull(rapid.IntRange(-3, 3).Draw(t, "p1")),
			intOrNull(rapid.IntRange(-3, 3).Draw(t, "p2")),
			intOrNull(rapid.IntRange(-3, 3).Draw(t, "p3")),
			[]types.Datum{types.DBool(true), types.DBool(false), types.DNull}[rapid.IntRange(0, 2).Draw(t, "p4")],
		}
		ectx := evalContext()
		ectx.Params = params
		v, err := sem.Eval(ectx, e, nil)
		want := outcome(e, v, err)

		bound := sem.Map(e, func(x sem.Expr) sem.Expr {
			if p, ok := x.(*sem.Param); ok {
				return &sem.Const{Datum: params[p.Index-1], T: p.T}
			}
			return x
		})
		folded := sem.Fold(nil, bound)
		v2, err2 := sem.Eval(evalContext(), folded, nil)
		// Folding (and normalizing, which folds constant arms) may remove an
		// error, never add or change one: x OR true
		// folds to true without evaluating x, as PostgreSQL's planner does
		// (SELECT false AND 1/0 = 1 is false there), while evaluating the
		// unfolded tree left to right meets x's error first.
		if got := outcome(folded, v2, err2); got != want && !(err != nil && err2 == nil) {
			t.Fatalf("%s with %v: unfolded %s, folded %s (%s)", sql, params, want, got, folded)
		}
		norm := sem.NormalizeBool(e)
		v3, err3 := sem.Eval(ectx, norm, nil)
		if got := outcome(norm, v3, err3); got != want && !(err != nil && err3 == nil) {
			t.Fatalf("%s with %v: %s, normalized %s (%s)", sql, params, want, got, norm)
		}
	})
}

func intOrNull(i int) types.Datum {
	if i == -3 {
		return types.DNull
	}
	return types.DInt(i)
}

// FuzzBuild feeds arbitrary expression text through the parser, Build,
// NormalizeBool and Eval: none may panic.
func FuzzBuild(f *testing.F) {
	for _, s := range []string{"1 + 2", "i = '5'", "CASE WHEN i > 0 THEN t ELSE 'x' END", "arr[i] IN (1, NULL)",
		"(i, t) < (1, 'a')", "j -> 'a' ->> 0", "COALESCE(b, i) BETWEEN SYMMETRIC 1 AND 2", "NOT (flag OR i IS NULL)",
		"ARRAY[]::int[]", "$1 + $2", "sum(i)", "d + interval '1 day'", "'abc'::varchar(2)", "i = ANY('{1,2}')"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		st, node, err := parseExpr(sql)
		if err != nil {
			return
		}
		ctx := sem.BuildContext{Scope: testScope{}, Params: sem.NewParamTypes(), Position: st.Position, AllowAggregates: true}
		e, err := sem.Build(ctx, node, nil)
		if err != nil {
			return
		}
		_ = e.String()
		_, _ = sem.Eval(evalContext(), sem.NormalizeBool(e), testRow(t))
	})
}

// BenchmarkEval measures per-row evaluation of a compiled filter, the
// executor's hot path.
func BenchmarkEval(b *testing.B) {
	st, node, err := parseExpr("i > 3 AND (t LIKE 'a%' OR n * 2 > 1.5) AND COALESCE(b, 0) = 0")
	if err != nil {
		b.Fatal(err)
	}
	e, err := sem.Build(sem.BuildContext{Scope: testScope{}, Position: st.Position}, node, types.Bool)
	if err != nil {
		b.Fatal(err)
	}
	ev, err := sem.Compile(e, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, row := evalContext(), testRow(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev(ctx, row); err != nil {
			b.Fatal(err)
		}
	}
}
