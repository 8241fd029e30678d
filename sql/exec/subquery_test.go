package exec

import (
	"testing"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

func TestSubqueries(t *testing.T) {
	e := newEnv(t)
	eq, err := builtins.LookupBinaryOp("=", types.Int8, types.Int8)
	if err != nil {
		t.Fatal(err)
	}
	outer := func() *plan.Values { return e.vals("a", "1", "2", "1", "3", "2") }
	inner := func() *plan.Values { return e.vals("b", "1", "2", "2") }

	t.Run("correlated scalar, cached per binding", func(t *testing.T) {
		o, in := outer(), inner()
		// (SELECT count(*) FROM inner WHERE b <= a)
		sub := &plan.GroupBy{Input: &plan.Filter{Input: in, Pred: e.expr("b <= a", append(in.Cols, o.Cols...)...)},
			Aggs: []plan.Aggregate{e.agg("count(*)")}, Cols: []plan.Column{e.col("c", types.Int8)}}
		sq := &plan.Subquery{ID: 7, Kind: sem.ScalarSubquery, Root: sub, Outer: ids(o.Cols[0])}
		p := &plan.Project{Input: o, Exprs: []sem.Expr{ref(o.Cols[0]), &sem.SubqueryRef{ID: 7, Kind: sem.ScalarSubquery, T: types.Int8}},
			Cols: []plan.Column{o.Cols[0], e.col("c", types.Int8)}}
		st := &Stats{}
		out, err := e.run(&plan.Plan{Root: p, Subqueries: []*plan.Subquery{sq}}, st)
		if err != nil {
			t.Fatal(err)
		}
		if want := lines("1 1", "2 3", "1 1", "3 3", "2 3"); out != want {
			t.Errorf("got\n%s", out)
		}
		if l := st.Node(sub).Loops; l != 3 {
			t.Errorf("subquery ran %d times, want once per distinct a (3)", l)
		}
	})

	t.Run("uncorrelated kinds run once", func(t *testing.T) {
		o, in := outer(), inner()
		subs := []*plan.Subquery{
			{ID: 1, Kind: sem.ExistsSubquery, Root: in},
			{ID: 2, Kind: sem.AnySubquery, Root: in},
			{ID: 3, Kind: sem.ArraySubquery, Root: in},
			{ID: 4, Kind: sem.AllSubquery, Root: in},
		}
		p := &plan.Project{Input: o, Exprs: []sem.Expr{
			ref(o.Cols[0]),
			&sem.SubqueryRef{ID: 1, Kind: sem.ExistsSubquery, T: types.Bool},
			&sem.SubqueryRef{ID: 2, Kind: sem.AnySubquery, T: types.Bool, Op: sem.EQ, Fn: eq, Left: ref(o.Cols[0]), Col: types.Int8},
			&sem.SubqueryRef{ID: 3, Kind: sem.ArraySubquery, T: types.MustArray(types.Int8)},
			&sem.SubqueryRef{ID: 4, Kind: sem.AllSubquery, T: types.Bool, Op: sem.EQ, Fn: eq, Left: ref(o.Cols[0]), Col: types.Int8},
		}}
		for range p.Exprs {
			p.Cols = append(p.Cols, e.col("x", types.Int8))
		}
		st := &Stats{}
		out, err := e.run(&plan.Plan{Root: p, Subqueries: subs}, st)
		if err != nil {
			t.Fatal(err)
		}
		want := lines("1 t t {1,2,2} f", "2 t t {1,2,2} f", "1 t t {1,2,2} f", "3 t f {1,2,2} f", "2 t t {1,2,2} f")
		if out != want {
			t.Errorf("got\n%s", out)
		}
		// EXISTS stops at the first row; the others share one node but
		// each subquery runs once.
		if l := st.Node(in).Loops; l != 4 {
			t.Errorf("inner ran %d times, want 4 (once per subquery)", l)
		}
	})

	t.Run("scalar with two rows", func(t *testing.T) {
		o, in := outer(), inner()
		p := &plan.Project{Input: o, Exprs: []sem.Expr{&sem.SubqueryRef{ID: 1, Kind: sem.ScalarSubquery, T: types.Int8}}, Cols: []plan.Column{e.col("x", types.Int8)}}
		e.checkErr("21000", p, pgerrcode.CardinalityViolation, &plan.Subquery{ID: 1, Kind: sem.ScalarSubquery, Root: in})
	})

	t.Run("nested correlation and filters", func(t *testing.T) {
		o, in := outer(), inner()
		// SELECT a FROM outer WHERE EXISTS (SELECT 1 FROM inner WHERE
		//   (SELECT a * b) = 4)
		one := e.vals("z", "0")
		s2 := &plan.Project{Input: one, Exprs: []sem.Expr{e.expr("a * b", append(o.Cols, in.Cols...)...)}, Cols: []plan.Column{e.col("ab", types.Int8)}}
		s1 := &plan.Filter{Input: in, Pred: &sem.Cmp{Op: sem.EQ, Fn: eq, Left: &sem.SubqueryRef{ID: 2, Kind: sem.ScalarSubquery, T: types.Int8}, Right: cint(4)}}
		f := &plan.Filter{Input: o, Pred: &sem.SubqueryRef{ID: 1, Kind: sem.ExistsSubquery, T: types.Bool}}
		subs := []*plan.Subquery{
			{ID: 1, Kind: sem.ExistsSubquery, Root: s1, Outer: ids(o.Cols[0])},
			{ID: 2, Kind: sem.ScalarSubquery, Root: s2, Outer: ids(o.Cols[0], in.Cols[0])},
		}
		e.check("nested", f, lines("2", "2"), subs...)
	})
}

func TestCorrelatedInScanFilter(t *testing.T) {
	e := newEnv(t)
	tbl := e.createTable(tableSpec{name: "t", cols: []string{"k int8", "v int8"}, pk: []string{"k"}, packed: true},
		ints(1, 10), ints(2, 20), ints(3, 30), ints(4, 40))
	s := e.scan(tbl, nil, "k", "v")
	in := e.vals("b", "2", "4", "5")
	// SELECT k, v FROM t WHERE EXISTS (SELECT 1 FROM (VALUES ...) WHERE b = k)
	// with the predicate pushed into the scan.
	sub := &plan.Filter{Input: in, Pred: e.expr("b = k", append(in.Cols, s.Cols...)...)}
	s.Filter = &sem.SubqueryRef{ID: 1, Kind: sem.ExistsSubquery, T: types.Bool}
	e.check("exists in scan filter", s, lines("2 20", "4 40"), &plan.Subquery{ID: 1, Kind: sem.ExistsSubquery, Root: sub, Outer: ids(s.Cols[0])})

	// LATERAL over a table: for each x, the rows of t with k <= x, at most 2.
	xs := e.vals("x", "1", "3")
	s = e.scan(tbl, nil, "k")
	right := &plan.Limit{Input: &plan.Filter{Input: s, Pred: e.expr("k <= x", append(s.Cols, xs.Cols...)...)}, Limit: cint(2)}
	e.check("lateral scan", &plan.Join{Kind: plan.InnerJoin, Left: xs, Right: right, Lateral: true}, lines("1 1", "3 1", "3 2"))
}
