package sem_test

import (
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// fakeSubqueries plans every subquery as one int4 column (id = order of
// planning) and supplies fixed values for them.
type fakeSubqueries struct {
	n      int
	values map[int]types.Datum
	cols   map[int][]types.Datum
}

func (f *fakeSubqueries) Plan(*pg_query.Node, sem.SubqueryKind) (int, []*types.T, error) {
	f.n++
	return f.n, []*types.T{types.Int4}, nil
}
func (f *fakeSubqueries) Value(id int) (types.Datum, error)    { return f.values[id], nil }
func (f *fakeSubqueries) Column(id int) ([]types.Datum, error) { return f.cols[id], nil }

func TestSubqueryPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		sql    string
		values map[int]types.Datum
		cols   map[int][]types.Datum
		str    string
		want   string
	}{
		{sql: "(SELECT 1) + i", values: map[int]types.Datum{1: types.DInt(2)}, str: "((SubPlan 1) + i)", want: "7"},
		{sql: "EXISTS (SELECT 1)", values: map[int]types.Datum{1: types.DBool(false)}, str: "(EXISTS (SubPlan 1))", want: "f"},
		{sql: "i IN (SELECT 1)", cols: map[int][]types.Datum{1: {types.DInt(1), types.DNull}}, str: "(i = ANY (SubPlan 1))", want: "NULL"},
		{sql: "i IN (SELECT 1)", cols: map[int][]types.Datum{1: {types.DInt(5), types.DNull}}, str: "(i = ANY (SubPlan 1))", want: "t"},
		{sql: "i > ALL (SELECT 1)", cols: map[int][]types.Datum{1: {}}, str: "(i > ALL (SubPlan 1))", want: "t"},
		{sql: "b NOT IN (SELECT 1)", cols: map[int][]types.Datum{1: {}}, str: "(NOT (b = ANY (SubPlan 1)))", want: "t"},
	} {
		st, node, err := parseExpr(tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		f := &fakeSubqueries{values: tc.values, cols: tc.cols}
		e, err := sem.Build(sem.BuildContext{Scope: testScope{}, Subqueries: f, Position: st.Position}, node, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		if e.String() != tc.str {
			t.Errorf("%s: String() = %s, want %s", tc.sql, e, tc.str)
		}
		ctx := evalContext()
		ctx.Subqueries = f
		d, err := sem.Eval(ctx, e, testRow(t))
		if got := outcome(e, d, err); got != tc.want {
			t.Errorf("%s = %s, want %s", tc.sql, got, tc.want)
		}
	}
}

// TestAggregateExtraction is the binder's use: find the aggregate calls,
// replace them by AggRefs, and evaluate with the executor's values.
func TestAggregateExtraction(t *testing.T) {
	st, node, err := parseExpr("sum(i) + count(*) * 2 > COALESCE(max(b), 0)")
	if err != nil {
		t.Fatal(err)
	}
	e, err := sem.Build(sem.BuildContext{Scope: testScope{}, AllowAggregates: true, Clause: "HAVING", Position: st.Position}, node, types.Bool)
	if err != nil {
		t.Fatal(err)
	}
	aggs := sem.Aggregates(e)
	if len(aggs) != 3 || aggs[0].String() != "sum(i)" || aggs[1].String() != "count(*)" || aggs[2].String() != "max(b)" {
		t.Fatalf("Aggregates = %v", aggs)
	}
	if _, err := sem.Compile(e, nil); err == nil {
		t.Fatal("an AggCall compiled")
	}
	index := map[*sem.AggCall]int{}
	for i, a := range aggs {
		index[a] = i
	}
	bound := sem.Map(e, func(x sem.Expr) sem.Expr {
		if a, ok := x.(*sem.AggCall); ok {
			return &sem.AggRef{Index: index[a], T: a.Type(), Text: a.String()}
		}
		return x
	})
	if got, want := bound.String(), "((sum(i) + (count(*) * 2)) > COALESCE(max(b), '0'::bigint))"; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	ctx := evalContext()
	ctx.Aggs = []types.Datum{types.DInt(10), types.DInt(3), types.DNull}
	d, err := sem.Eval(ctx, bound, nil)
	if got := outcome(bound, d, err); got != "t" {
		t.Errorf("got %s, want t", got)
	}
	// The original tree is untouched (invariant 1).
	if len(sem.Aggregates(e)) != 3 {
		t.Error("Map modified its input")
	}
}

// TestColumnMap checks Compile's column layout: IDs map to row ordinals.
func TestColumnMap(t *testing.T) {
	e := &sem.ColRef{ID: 42, T: types.Int4, Name: "x"}
	ev, err := sem.Compile(e, map[sem.ColumnID]int{42: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := ev(evalContext(), []types.Datum{types.DInt(1), types.DInt(9)})
	if err != nil || d != types.DInt(9) {
		t.Fatalf("got %v, %v", d, err)
	}
	if _, err := sem.Compile(e, map[sem.ColumnID]int{}); err == nil {
		t.Fatal("compiled a column missing from the layout")
	}
}
