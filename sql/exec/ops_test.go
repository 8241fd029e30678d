package exec

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

func ids(cs ...plan.Column) []sem.ColumnID {
	out := make([]sem.ColumnID, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func (e *env) check(name string, root plan.Node, want string, subs ...*plan.Subquery) {
	e.t.Helper()
	e.t.(*testing.T).Run(name, func(t *testing.T) { // tests only: benchmarks use run
		t.Helper()
		out, err := e.run(&plan.Plan{Root: root, Subqueries: subs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out != want {
			t.Errorf("got\n%swant\n%s", out, want)
		}
	})
}

func (e *env) checkErr(name string, root plan.Node, code string, subs ...*plan.Subquery) {
	e.t.Helper()
	e.t.(*testing.T).Run(name, func(t *testing.T) { // tests only: benchmarks use run
		_, err := e.run(&plan.Plan{Root: root, Subqueries: subs}, nil)
		if got := pgerror.Code(err); got != code {
			t.Errorf("got %v (%s), want %s", err, got, code)
		}
	})
}

func TestJoins(t *testing.T) {
	e := newEnv(t)
	l := func() *plan.Values { return e.vals("a, x", "1, 'l1'", "2, 'l2'", "NULL::int8, 'lnull'", "2, 'l2b'") }
	r := func() *plan.Values { return e.vals("b, y", "2, 'r2'", "3, 'r3'", "NULL::int8, 'rnull'", "2, 'r2b'") }
	for _, tc := range []struct {
		kind plan.JoinKind
		want string
	}{
		{plan.InnerJoin, lines("2 l2 2 r2", "2 l2 2 r2b", "2 l2b 2 r2", "2 l2b 2 r2b")},
		{plan.LeftJoin, lines("1 l1 NULL NULL", "2 l2 2 r2", "2 l2 2 r2b", "NULL lnull NULL NULL", "2 l2b 2 r2", "2 l2b 2 r2b")},
		{plan.RightJoin, lines("2 l2 2 r2", "2 l2 2 r2b", "2 l2b 2 r2", "2 l2b 2 r2b", "NULL NULL 3 r3", "NULL NULL NULL rnull")},
		{plan.FullJoin, lines("1 l1 NULL NULL", "2 l2 2 r2", "2 l2 2 r2b", "NULL lnull NULL NULL", "2 l2b 2 r2", "2 l2b 2 r2b", "NULL NULL 3 r3", "NULL NULL NULL rnull")},
		{plan.SemiJoin, lines("2 l2", "2 l2b")},
		{plan.AntiJoin, lines("1 l1", "NULL lnull")},
	} {
		for _, hash := range []bool{true, false} {
			lv, rv := l(), r()
			j := &plan.Join{Kind: tc.kind, Left: lv, Right: rv, On: e.expr("a = b", append(lv.Cols, rv.Cols...)...)}
			if hash {
				j.LeftEq, j.RightEq = ids(lv.Cols[0]), ids(rv.Cols[0])
			}
			e.check("kind"+string(rune('0'+tc.kind))+map[bool]string{true: "/hash", false: "/loop"}[hash], j, tc.want)
		}
	}
	// A residual condition beside the hash keys.
	lv, rv := l(), r()
	j := &plan.Join{Kind: plan.LeftJoin, Left: lv, Right: rv, On: e.expr("a = b AND y <> 'r2'", append(lv.Cols, rv.Cols...)...), LeftEq: ids(lv.Cols[0]), RightEq: ids(rv.Cols[0])}
	e.check("residual", j, lines("1 l1 NULL NULL", "2 l2 2 r2b", "NULL lnull NULL NULL", "2 l2b 2 r2b"))
	// Cross join: no condition.
	lv, rv = e.vals("a", "1", "2"), e.vals("b", "10", "20")
	e.check("cross", &plan.Join{Left: lv, Right: rv}, lines("1 10", "1 20", "2 10", "2 20"))

	// LATERAL: the right side reads the left row.
	lv = e.vals("a", "1", "2", "3")
	inner := e.vals("b", "10", "20")
	rf := &plan.Filter{Input: inner, Pred: e.expr("b < a * 10", append(inner.Cols, lv.Cols...)...)}
	e.check("lateral inner", &plan.Join{Kind: plan.InnerJoin, Left: lv, Right: rf, Lateral: true}, lines("2 10", "3 10", "3 20"))
	e.check("lateral left", &plan.Join{Kind: plan.LeftJoin, Left: lv, Right: rf, Lateral: true}, lines("1 NULL", "2 10", "3 10", "3 20"))
	e.check("lateral anti", &plan.Join{Kind: plan.AntiJoin, Left: lv, Right: rf, Lateral: true}, lines("1"))
}

func TestGroupBy(t *testing.T) {
	e := newEnv(t)
	in := func() *plan.Values {
		return e.vals("g, v, s", "1, 10, 'a'", "2, 5, 'b'", "1, NULL::int8, 'c'", "2, 5, 'd'", "1, 30, 'e'")
	}
	v := in()
	g := &plan.GroupBy{Input: v, GroupCols: ids(v.Cols[0]), Aggs: []plan.Aggregate{
		e.agg("count(*)", v.Cols...), e.agg("count(v)", v.Cols...), e.agg("sum(v)", v.Cols...),
		e.agg("count(DISTINCT v)", v.Cols...), e.agg("sum(v) FILTER (WHERE s <> 'a')", v.Cols...),
	}}
	string_agg := e.agg("string_agg(s, ',')", v.Cols...)
	string_agg.OrderBy = []plan.SortExpr{{Expr: ref(v.Cols[2]), Desc: true}}
	g.Aggs = append(g.Aggs, string_agg)
	g.Cols = append([]plan.Column{v.Cols[0]}, e.col("c", types.Int8), e.col("cv", types.Int8), e.col("s", types.Numeric), e.col("cd", types.Int8), e.col("sf", types.Numeric), e.col("sa", types.Text))
	e.check("hash", g, lines("1 3 2 40 2 30 e,c,a", "2 2 2 10 1 10 d,b"))

	// DISTINCT with an ORDER BY inside the call.
	v = in()
	sa := e.agg("string_agg(DISTINCT s, ',')", v.Cols...)
	sa.Args = []sem.Expr{e.expr("CASE WHEN v IS NULL THEN 'n' ELSE 'x' END", v.Cols...), sa.Args[1]}
	sa.OrderBy = []plan.SortExpr{{Expr: sa.Args[0], Desc: true}}
	g = &plan.GroupBy{Input: v, GroupCols: ids(v.Cols[0]), Aggs: []plan.Aggregate{sa}, Cols: []plan.Column{v.Cols[0], e.col("sa", types.Text)}}
	e.check("distinct ordered", g, lines("1 x,n", "2 x"))

	// Streaming over sorted input.
	v = in()
	srt := &plan.Sort{Input: v, Order: []plan.Ordering{{Col: v.Cols[0].ID, Desc: true}}}
	g = &plan.GroupBy{Input: srt, GroupCols: ids(v.Cols[0]), Ordered: true, Aggs: []plan.Aggregate{e.agg("max(s)", v.Cols...)},
		Cols: []plan.Column{v.Cols[0], e.col("m", types.Text)}}
	e.check("streaming", g, lines("2 d", "1 e"))

	// Scalar aggregation of nothing: one row.
	v = in()
	empty := &plan.Filter{Input: v, Pred: e.expr("false")}
	g = &plan.GroupBy{Input: empty, Aggs: []plan.Aggregate{e.agg("count(*)", v.Cols...), e.agg("sum(v)", v.Cols...)},
		Cols: []plan.Column{e.col("c", types.Int8), e.col("s", types.Numeric)}}
	e.check("scalar empty", g, lines("0 NULL"))
	g = &plan.GroupBy{Input: empty, GroupCols: ids(v.Cols[0]), Aggs: []plan.Aggregate{e.agg("count(*)", v.Cols...)},
		Cols: []plan.Column{v.Cols[0], e.col("c", types.Int8)}}
	e.check("grouped empty", g, "")
}

func TestWindow(t *testing.T) {
	e := newEnv(t)
	v := e.vals("p, o", "1, 3", "2, 1", "1, 1", "1, 2", "2, 2", "1, 2")
	rn := e.expr("row_number() OVER ()", v.Cols...)
	rk := e.expr("rank() OVER ()", v.Cols...)
	sum := e.expr("sum(o) OVER ()", v.Cols...)
	call := func(x sem.Expr) *sem.AggCall { return sem.Aggregates(x)[0] }
	part := []sem.Expr{ref(v.Cols[0])}
	ord := []plan.SortExpr{{Expr: ref(v.Cols[1])}}
	w := &plan.Window{Input: v, Funcs: []plan.WindowFunc{
		{Fn: call(rn).Fn, Name: "row_number", PartitionBy: part, OrderBy: ord, Frame: builtinsDefaultFrame()},
		{Fn: call(rk).Fn, Name: "rank", PartitionBy: part, OrderBy: ord, Frame: builtinsDefaultFrame()},
		{Fn: call(sum).Fn, Name: "sum", Args: call(sum).Args, PartitionBy: part, OrderBy: ord, Frame: builtinsDefaultFrame()},
		{Fn: call(sum).Fn, Name: "sum", Args: call(sum).Args, Frame: builtinsDefaultFrame(), Filter: e.expr("p = 2", v.Cols...)},
	}}
	w.Cols = append(append([]plan.Column{}, v.Cols...), e.col("rn", types.Int8), e.col("rk", types.Int8), e.col("s", types.Numeric), e.col("t", types.Numeric))
	// ROWS BETWEEN $1 PRECEDING AND CURRENT ROW, $1 = 1.
	v2 := e.vals("o", "1", "2", "3", "4")
	rows := builtins.Frame{Mode: builtins.Rows, Start: builtins.Bound{Kind: builtins.OffsetPreceding}, End: builtins.Bound{Kind: builtins.CurrentRow}}
	sum2 := e.expr("sum(o) OVER ()", v2.Cols...)
	w2 := &plan.Window{Input: v2, Funcs: []plan.WindowFunc{{Fn: call(sum2).Fn, Name: "sum", Args: call(sum2).Args,
		OrderBy: []plan.SortExpr{{Expr: ref(v2.Cols[0]), Desc: true}}, Frame: rows, FrameStartOffset: &sem.Param{Index: 1, T: types.Int8}}}}
	w2.Cols = append(append([]plan.Column{}, v2.Cols...), e.col("s", types.Numeric))
	if out, err := e.run(&plan.Plan{Root: w2}, nil, types.DInt(1)); err != nil || out != lines("4 4", "3 7", "2 5", "1 3") {
		t.Errorf("rows frame: %q %v", out, err)
	}
	// Running sums with peers (RANGE default frame), ranks with ties; the
	// last function has no ORDER BY: the whole input, filtered.
	e.check("partitions", w, lines(
		"1 1 1 1 1 3", "1 2 2 2 5 3", "1 2 3 2 5 3", "1 3 4 4 8 3",
		"2 1 1 1 1 3", "2 2 2 2 3 3"))
}

func TestSortLimitDistinct(t *testing.T) {
	e := newEnv(t)
	v := e.vals("a, b", "2, 'x'", "NULL::int8, 'y'", "1, 'z'", "2, 'w'", "3, 'x'")
	e.check("sort nulls last", &plan.Sort{Input: v, Order: []plan.Ordering{{Col: v.Cols[0].ID}}}, lines("1 z", "2 x", "2 w", "3 x", "NULL y"))
	e.check("sort desc nulls first", &plan.Sort{Input: v, Order: []plan.Ordering{{Col: v.Cols[0].ID, Desc: true, NullsFirst: true}, {Col: v.Cols[1].ID}}}, lines("NULL y", "3 x", "2 w", "2 x", "1 z"))
	e.check("sort desc nulls last", &plan.Sort{Input: v, Order: []plan.Ordering{{Col: v.Cols[0].ID, Desc: true}}}, lines("3 x", "2 x", "2 w", "1 z", "NULL y"))
	srt := &plan.Sort{Input: v, Order: []plan.Ordering{{Col: v.Cols[0].ID}}}
	e.check("limit offset", &plan.Limit{Input: srt, Limit: cint(2), Offset: cint(1)}, lines("2 x", "2 w"))
	e.check("limit ties", &plan.Limit{Input: srt, Limit: cint(2), WithTies: true, Order: srt.Order}, lines("1 z", "2 x", "2 w"))
	e.check("limit null", &plan.Limit{Input: srt, Limit: &sem.Const{Datum: types.DNull, T: types.Int8}}, lines("1 z", "2 x", "2 w", "3 x", "NULL y"))
	if out, err := e.run(&plan.Plan{Root: &plan.Limit{Input: srt, Limit: &sem.Param{Index: 1, T: types.Int8}}}, nil, types.DInt(1)); err != nil || out != "1 z\n" {
		t.Errorf("limit $1: %q %v", out, err)
	}
	e.checkErr("ties null", &plan.Limit{Input: srt, Limit: &sem.Const{Datum: types.DNull, T: types.Int8}, WithTies: true, Order: srt.Order}, pgerrcode.InvalidRowCountInLimitClause)
	e.checkErr("limit negative", &plan.Limit{Input: srt, Limit: cint(-1)}, pgerrcode.InvalidRowCountInLimitClause)
	e.checkErr("offset negative", &plan.Limit{Input: srt, Offset: cint(-1)}, pgerrcode.InvalidRowCountInResultOffsetClause)
	e.check("offset past end", &plan.Limit{Input: srt, Offset: cint(9)}, "")
	e.check("distinct on", &plan.Distinct{Input: srt, On: ids(v.Cols[0])}, lines("1 z", "2 x", "3 x", "NULL y"))
	d := e.vals("a", "1", "NULL::int8", "1", "NULL::int8", "2")
	e.check("distinct", &plan.Distinct{Input: d}, lines("1", "NULL", "2"))
	e.check("max1row ok", &plan.Max1Row{Input: e.vals("a", "1")}, lines("1"))
	e.checkErr("max1row", &plan.Max1Row{Input: d}, pgerrcode.CardinalityViolation)
}

func TestSetOps(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		kind plan.SetOpKind
		all  bool
		want string
	}{
		{plan.Union, true, lines("1", "1", "1", "2", "NULL", "1", "3", "NULL")},
		{plan.Union, false, lines("1", "2", "NULL", "3")},
		{plan.Intersect, true, lines("1", "NULL")},
		{plan.Intersect, false, lines("1", "NULL")},
		{plan.Except, true, lines("1", "1", "2")},
		{plan.Except, false, lines("2")},
	} {
		l := e.vals("a", "1", "1", "1", "2", "NULL::int8")
		r := e.vals("a", "1", "3", "NULL::int8")
		e.check("setop", &plan.SetOp{Kind: tc.kind, All: tc.all, Left: l, Right: r, Cols: []plan.Column{e.col("a", types.Int8)}}, tc.want)
	}
}

func TestCTEsAndSRFs(t *testing.T) {
	e := newEnv(t)
	// WITH RECURSIVE r(n) AS (SELECT 1 UNION [ALL] SELECT n % 4 + 1 FROM r WHERE n < 10)
	for _, all := range []bool{false, true} {
		init := e.vals("n", "1")
		wt := &plan.WorkTable{ID: 0, Cols: []plan.Column{e.col("n", types.Int8)}}
		rec := &plan.Project{Input: &plan.Filter{Input: wt, Pred: e.expr("n < 3", wt.Cols...)},
			Exprs: []sem.Expr{e.expr("n + 1", wt.Cols...)}, Cols: []plan.Column{e.col("n", types.Int8)}}
		if !all {
			// n % 2 + 1 cycles 1, 2, 1, ...: only UNION's dedup ends it.
			rec.Exprs[0] = e.expr("n % 2 + 1", wt.Cols...)
		}
		want := lines("1", "2")
		if all {
			want = lines("1", "2", "3")
		}
		e.check("recursive", &plan.RecursiveCTE{ID: 0, Init: init, Recursive: rec, UnionAll: all, Cols: []plan.Column{e.col("n", types.Int8)}}, want)
	}
	// A materialized CTE read twice runs once.
	cte := e.vals("a", "1", "2")
	a := &plan.CTEScan{ID: 0, Cols: []plan.Column{e.col("a", types.Int8)}}
	b := &plan.CTEScan{ID: 0, Cols: []plan.Column{e.col("b", types.Int8)}}
	out, err := e.run(&plan.Plan{Root: &plan.Join{Left: a, Right: b}, CTEs: []plan.Node{cte}}, nil)
	if err != nil || out != lines("1 1", "1 2", "2 1", "2 2") {
		t.Errorf("cte: %q %v", out, err)
	}
	// generate_series(1, 3), generate_series(1, a) zipped, padded with NULLs.
	v := e.vals("a", "1", "2")
	gs := func(lo, hi string) plan.SetFunc {
		fn, err := builtins.ResolveFunc("generate_series", []*types.T{types.Int8, types.Int8})
		if err != nil {
			t.Fatal(err)
		}
		call := &sem.FuncCall{Fn: fn, Args: []sem.Expr{e.expr(lo, v.Cols...), e.expr(hi, v.Cols...)}}
		return plan.SetFunc{Call: call, Cols: []plan.Column{e.col("g", types.Int8)}}
	}
	ps := &plan.ProjectSet{Input: v, Funcs: []plan.SetFunc{gs("1", "3"), gs("1", "a")}}
	ps.Cols = append(append([]plan.Column{}, v.Cols...), ps.Funcs[0].Cols[0], ps.Funcs[1].Cols[0])
	e.check("project set", ps, lines("1 1 1", "1 2 NULL", "1 3 NULL", "2 1 1", "2 2 2", "2 3 NULL"))
	v = e.vals("a", "NULL::int8")
	ps = &plan.ProjectSet{Input: v, Funcs: []plan.SetFunc{gs("1", "a")}}
	ps.Cols = append(append([]plan.Column{}, ps.Input.Columns()...), ps.Funcs[0].Cols[0])
	e.check("project set strict null", ps, "")
}

type fakeVirtual struct{}

func (fakeVirtual) Schema() string { return "pg_catalog" }
func (fakeVirtual) Name() string   { return "fake" }
func (fakeVirtual) OID() uint32    { return 1 }
func (fakeVirtual) Columns() []plan.VirtualColumn {
	return []plan.VirtualColumn{{Name: "a", T: types.Int8}, {Name: "b", T: types.Text}}
}
func (fakeVirtual) Rows(ctx context.Context, env *plan.VirtualEnv) ([][]types.Datum, error) {
	if env.User != "alice" {
		return nil, errors.New("wrong env")
	}
	return [][]types.Datum{{types.DInt(1), types.DString("x")}, {types.DInt(2), types.DString("y")}}, nil
}

func TestVirtualScanAndStart(t *testing.T) {
	e := newEnv(t)
	vs := &plan.VirtualScan{Table: fakeVirtual{}, Cols: []plan.Column{e.col("b", types.Text), e.col("a", types.Int8)}, ColIdx: []int{1, 0}}
	vs.Filter = e.expr("a > 1", vs.Cols...)
	vs.Cols[1].Hidden = true
	var got []string
	var affected int64
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		rs, err := Start(ctx, &Context{Txn: txn, Eval: &sem.EvalContext{}, Virtual: &plan.VirtualEnv{User: "alice"}}, &plan.Plan{Root: vs})
		if err != nil {
			return err
		}
		defer rs.Close()
		for {
			row, err := rs.Next(ctx)
			if err != nil || row == nil {
				affected = rs.RowsAffected()
				return err
			}
			if len(row) != 1 {
				t.Errorf("hidden column returned: %v", row)
			}
			got = append(got, row[0].String())
		}
	})
	if err != nil || len(got) != 1 || got[0] != "y" || affected != 1 {
		t.Errorf("got %v %d %v", got, affected, err)
	}
}

func TestCancellation(t *testing.T) {
	e := newEnv(t)
	var rows [][]types.Datum
	for i := int64(0); i < 3000; i++ {
		rows = append(rows, ints(i, i))
	}
	tbl := e.createTable(tableSpec{name: "c", cols: []string{"k int8", "v int8"}, pk: []string{"k"}, packed: true}, rows...)
	err := e.db.Txn(context.Background(), kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		rs, err := Start(cctx, &Context{Txn: txn, Eval: &sem.EvalContext{}}, &plan.Plan{Root: e.scan(tbl, nil, "k")})
		if err != nil {
			return err
		}
		defer rs.Close()
		if row, err := rs.Next(cctx); err != nil || row == nil {
			t.Fatalf("first row: %v", err)
		}
		cancel()
		for {
			row, err := rs.Next(cctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("got %v", err)
				}
				return nil
			}
			if row == nil {
				t.Error("scan ran to the end after cancellation")
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
