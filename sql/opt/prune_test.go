package opt

import (
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
)

// Column pruning (prune.go).
func TestPruneScans(t *testing.T) {
	runCases(t, []optCase{{
		name: "a scan nothing reads keeps its first primary-key column",
		build: func(b *builder) plan.Node {
			return b.groupBy(b.scan("t", "c", "a", "b"))
		},
		want: `
		group-by ()
		  scan t@t_pkey cols=(a#2)`,
	}, {
		name: "set operations read their inputs by position: nothing is pruned below them",
		build: func(b *builder) plan.Node {
			l, r := b.scan("u"), b.scan("u")
			so := &plan.SetOp{Kind: plan.Union, Left: l, Right: r, Cols: l.Cols}
			return b.project(so, "x")
		},
		want: `
		project x
		  *plan.SetOp
		    scan u@u_pkey cols=(x#1,y#2,z#3)
		    scan u@u_pkey cols=(x#4,y#5,z#6)`,
	}, {
		name: "pruning lets a secondary index cover the query",
		build: func(b *builder) plan.Node {
			return b.project(b.filter(b.scan("t"), "c = 'k'"), "a")
		},
		want: `
		project a
		  scan t@t_c cols=(a#1) spans=[/k - /k]`,
	}})
}
