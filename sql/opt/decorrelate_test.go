package opt

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestDecorrelate: a correlated EXISTS or NOT EXISTS conjunct becomes a
// semi or anti join whose hash keys are the correlated equalities (an
// outer expression computed as a column of its own), and the subquery
// leaves the plan; subqueries the rewrite cannot take keep the subquery
// path.
func TestDecorrelate(t *testing.T) {
	type built struct {
		root plan.Node
		sub  *plan.Subquery
	}
	exists := func(kind sem.SubqueryKind, not bool) sem.Expr {
		var e sem.Expr = &sem.SubqueryRef{ID: 1, Kind: kind, T: types.Bool}
		if not {
			e = &sem.Not{Arg: e}
		}
		return e
	}
	cases := []struct {
		name  string
		build func(b *builder) built
		want  string // in the formatted plan
		moved bool   // the subquery left the plan
	}{
		{"exists", func(b *builder) built {
			u := b.scan("u")
			sub := b.filter(b.scan("t", "a", "b"), "t.a = u.x AND t.b = 3")
			return built{&plan.Filter{Input: u, Pred: exists(sem.ExistsSubquery, false)},
				&plan.Subquery{ID: 1, Kind: sem.ExistsSubquery, Root: sub, Outer: []sem.ColumnID{b.col("u.x").ID}}}
		}, " semi", true},
		{"not exists on an expression", func(b *builder) built {
			u := b.scan("u")
			sub := b.project(b.filter(b.scan("t", "a", "b"), "t.a = u.y + 1"), "t.b")
			return built{&plan.Filter{Input: u, Pred: exists(sem.ExistsSubquery, true)},
				&plan.Subquery{ID: 1, Kind: sem.ExistsSubquery, Root: sub, Outer: []sem.ColumnID{b.col("u.y").ID}}}
		}, " anti", true},
		{"uncorrelated exists", func(b *builder) built {
			u := b.scan("u")
			sub := b.filter(b.scan("t", "a", "b"), "t.b = 3")
			return built{&plan.Filter{Input: u, Pred: exists(sem.ExistsSubquery, false)},
				&plan.Subquery{ID: 1, Kind: sem.ExistsSubquery, Root: sub}}
		}, "EXISTS (SubPlan 1)", false},
		{"outer reference below a limit", func(b *builder) built {
			u := b.scan("u")
			sub := b.limit(b.filter(b.scan("t", "a", "b"), "t.a = u.x"), "1", "")
			return built{&plan.Filter{Input: u, Pred: exists(sem.ExistsSubquery, false)},
				&plan.Subquery{ID: 1, Kind: sem.ExistsSubquery, Root: sub, Outer: []sem.ColumnID{b.col("u.x").ID}}}
		}, "EXISTS (SubPlan 1)", false},
		{"under OR", func(b *builder) built {
			u := b.scan("u")
			sub := b.filter(b.scan("t", "a", "b"), "t.a = u.x")
			pred := &sem.Or{Args: []sem.Expr{exists(sem.ExistsSubquery, false), b.expr("u.y = 2")}}
			return built{&plan.Filter{Input: u, Pred: pred},
				&plan.Subquery{ID: 1, Kind: sem.ExistsSubquery, Root: sub, Outer: []sem.ColumnID{b.col("u.x").ID}}}
		}, "EXISTS (SubPlan 1)", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBuilder(t)
			x := c.build(b)
			p := &plan.Plan{Root: x.root, Subqueries: []*plan.Subquery{x.sub}}
			if err := Optimize(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			got := format(p.Root)
			if !strings.Contains(got, c.want) {
				t.Errorf("got:\n%s\nwant %q in it", got, c.want)
			}
			if moved := len(p.Subqueries) == 0; moved != c.moved {
				t.Errorf("subquery moved: %v, want %v\n%s", moved, c.moved, got)
			}
			if c.moved && !strings.Contains(got, "eq=") && !strings.Contains(got, "lookup-join") {
				t.Errorf("no hash keys:\n%s", got)
			}
		})
	}
}
