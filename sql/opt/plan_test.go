package opt

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Optimize rewrites every tree of a plan: the root, subqueries (whose
// outer references do not pin predicates) and materialized CTEs, and the
// inputs of DML statements.
func TestOptimizePlan(t *testing.T) {
	b := newBuilder(t)
	u := b.scan("u")
	exists := &sem.SubqueryRef{ID: 1, Kind: sem.ExistsSubquery, T: types.Bool}
	// Under OR, so decorrelate.go leaves it a subquery.
	cond := &sem.Or{Args: []sem.Expr{exists, b.expr("u.z = 'q'")}}
	root := &plan.Filter{Input: u, Pred: &sem.And{Args: []sem.Expr{cond, b.expr("u.y = 2")}}}
	sub := b.filter(b.scan("t", "a", "b"), "t.a = u.x AND t.b = 3")
	cte := b.filter(b.scan("h"), "k = 7")
	ds := b.scan("t", "a", "b", "c", "d")
	del := &plan.Delete{Table: b.tables["t"], Input: b.filter(ds, "t.c = 'q'")}
	for _, c := range ds.Cols {
		del.FetchCols = append(del.FetchCols, c.ID)
	}
	p := &plan.Plan{
		Root:       root,
		Subqueries: []*plan.Subquery{{ID: 1, Kind: sem.ExistsSubquery, Root: sub, Outer: []sem.ColumnID{b.col("u.x").ID}}},
		CTEs:       []plan.Node{cte, del},
	}
	if err := Optimize(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	got := format(p.Root) + "--\n" + format(p.Subqueries[0].Root) + "--\n" + format(p.CTEs[0]) + "--\n" + format(p.CTEs[1])
	want := dedent(strings.TrimLeft(`
		filter ((EXISTS (SubPlan 1)) OR (u.z = 'q'::text))
		  index-join u keys=(#1) cols=(x#1,y#2,z#3)
		    scan u@u_y cols=(x#1,y#2) spans=[/2 - /2]
		--
		scan t@t_b cols=(a#4,b#5) spans=[/3 - /3] filter=(t.a = u.x)
		--
		scan h@h_pkey cols=(k#6,j#7,v#8) spans=[/7 - /7] buckets=[`+bucketOf(t, 7)+`]
		--
		*plan.Delete
		  index-join t keys=(#9) cols=(a#9,b#10,c#11,d#12)
		    scan t@t_c cols=(a#9,c#11) spans=[/q - /q]`, "\n"))
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// Columns the optimizer adds get IDs no tree of the plan uses.
func TestNewColumnIDs(t *testing.T) {
	b := newBuilder(t)
	root := b.filter(b.scan("t", "c", "d"), "c = 'z'")
	other := b.scan("u") // IDs 3..5, in a subquery
	p := &plan.Plan{Root: root, Subqueries: []*plan.Subquery{{ID: 1, Root: other}}}
	if err := Optimize(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	ij, ok := p.Root.(*plan.IndexJoin)
	if !ok {
		t.Fatalf("want an index join, got\n%s", format(p.Root))
	}
	if ij.KeyCols[0] <= 5 {
		t.Errorf("primary key column got ID %d, already used by the plan", ij.KeyCols[0])
	}
}
