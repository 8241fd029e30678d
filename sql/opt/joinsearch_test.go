package opt

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
)

// joinQuery builds the plan of a join of n scans of the fixture table u
// (x PRIMARY KEY, y, z; index u_y), relations r1..rn, as the binder
// builds it:
//
//   - shape chain: r1.y = r2.x, ..., r(n-1).y = rn.x and r1.x = 3;
//     cycle: the chain and rn.y = r1.x; star: ri.y = r1.x for every i > 1
//     and r1.x = 3 (r1 is the hub);
//   - written: ordered (r1, r2, ...) or shuffled (a fixed permutation);
//   - syntax comma: FROM r.., r.., ... WHERE <every predicate> (joins
//     without conditions under a Filter, as the binder makes them);
//     explicit: r.. JOIN r.. ON <the predicates its inputs complete> JOIN
//     ... (a CROSS JOIN where they complete none), the filter in WHERE.
//
// It returns the plan's root and, for each column ID, the relation
// number.
func joinQuery(t *testing.T, shape string, n int, shuffled, explicit bool) (plan.Node, map[sem.ColumnID]int) {
	b := newBuilder(t)
	relOf := map[sem.ColumnID]int{}
	scans := make([]*plan.Scan, n+1)
	for i := 1; i <= n; i++ {
		scans[i] = b.scan("u")
		for _, c := range scans[i].Cols {
			relOf[c.ID] = i
			b.names[fmt.Sprintf("r%d.%s", i, c.Name)] = c
		}
	}
	var preds []string
	switch shape {
	case "chain", "cycle":
		for i := 1; i < n; i++ {
			preds = append(preds, fmt.Sprintf("r%d.y = r%d.x", i, i+1))
		}
		if shape == "cycle" {
			preds = append(preds, fmt.Sprintf("r%d.y = r1.x", n))
		}
	case "star":
		for i := 2; i <= n; i++ {
			preds = append(preds, fmt.Sprintf("r%d.y = r1.x", i))
		}
	default:
		t.Fatalf("unknown shape %q", shape)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i + 1
	}
	if shuffled {
		rand.New(rand.NewSource(1)).Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	var root plan.Node = scans[order[0]]
	have := map[int]bool{order[0]: true}
	used := make([]bool, len(preds))
	for _, k := range order[1:] {
		have[k] = true
		j := &plan.Join{Kind: plan.InnerJoin, Left: root, Right: scans[k], Explicit: explicit}
		if explicit {
			var on []sem.Expr
			for i, p := range preds {
				e := b.expr(p)
				all := true
				for id := range refs(e) {
					all = all && have[relOf[id]]
				}
				if !used[i] && all {
					used[i] = true
					on = append(on, e)
				}
			}
			j.On = and(on)
		}
		root = j
	}
	where := []sem.Expr{b.expr("r1.x = 3")}
	if !explicit {
		for _, p := range preds {
			where = append(where, b.expr(p))
		}
	}
	return &plan.Filter{Input: root, Pred: and(where)}, relOf
}

// joinOrder prints the join tree of an optimized plan: rK for a read of
// relation K, (L R) for a join, (L ->rK) for a lookup join into rK; it
// also counts the joins without an equality key (cross products, or
// joins on a non-equality condition).
func joinOrder(n plan.Node, relOf map[sem.ColumnID]int) (string, int) {
	switch v := n.(type) {
	case *plan.Join:
		l, lc := joinOrder(v.Left, relOf)
		r, rc := joinOrder(v.Right, relOf)
		c := lc + rc
		if len(v.LeftEq) == 0 {
			c++
		}
		return "(" + l + " " + r + ")", c
	case *plan.LookupJoin:
		in, c := joinOrder(v.Input, relOf)
		return fmt.Sprintf("(%s ->r%d)", in, relOf[v.Cols[0].ID]), c
	case *plan.Scan, *plan.IndexJoin:
		return fmt.Sprintf("r%d", relOf[n.Columns()[0].ID]), 0
	}
	cs := children(n)
	if len(cs) != 1 {
		return fmt.Sprintf("?%T", n), 0
	}
	return joinOrder(*cs[0], relOf)
}

// TestJoinSearch runs testdata/joinorder:
//
//	joins shape=chain|star|cycle n=N [shuffled] [explicit]
//	      [join_collapse_limit=K] [from_collapse_limit=K] [geqo=off]
//	      [geqo_threshold=K]
//	----
//
// optimizes joinQuery's plan under those limits (PostgreSQL's defaults
// otherwise), without statistics, and prints each join search made (its
// items, exhaustive or greedy, the candidate joins it costed: the measure
// of its work), the number of joins without an equality key, and the
// join tree.
func TestJoinSearch(t *testing.T) {
	datadriven.RunTest(t, "testdata/joinorder", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "joins" {
			t.Fatalf("unknown command %s", d.Cmd)
		}
		var shape string
		var n int
		d.ScanArgs(t, "shape", &shape)
		d.ScanArgs(t, "n", &n)
		lim := DefaultJoinLimits
		d.MaybeScanArgs(t, "join_collapse_limit", &lim.JoinCollapse)
		d.MaybeScanArgs(t, "from_collapse_limit", &lim.FromCollapse)
		d.MaybeScanArgs(t, "geqo_threshold", &lim.GeqoThreshold)
		if d.HasArg("geqo") {
			var v string
			d.ScanArgs(t, "geqo", &v)
			lim.Geqo = v != "off"
		}
		root, relOf := joinQuery(t, shape, n, d.HasArg("shuffled"), d.HasArg("explicit"))
		p := &plan.Plan{Root: root}
		o, err := newOptimizer(DefaultCosts, nil, lim).run(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for _, s := range o.searches {
			kind := "exhaustive"
			if s.greedy {
				kind = "greedy"
			}
			fmt.Fprintf(&sb, "search: %d items, %s, %d candidates\n", s.items, kind, s.considered)
		}
		order, cross := joinOrder(p.Root, relOf)
		fmt.Fprintf(&sb, "joins without a key: %d\n%s\n", cross, order)
		return sb.String()
	})
}

// TestJoinSearchConnected checks, for chain, star and cycle graphs of 10,
// 24 and 64 relations written in a shuffled order, under the default
// limits and with the greedy search forced or (where it fits) avoided,
// that every relation is joined once, that no join lacks an equality key
// (the graphs are connected, so none needs a cross product), and that the
// work is bounded: the greedy search costs at most one candidate per
// predicate per round, the exhaustive one at most one per relation per
// subset it keeps.
func TestJoinSearchConnected(t *testing.T) {
	for _, shape := range []string{"chain", "star", "cycle"} {
		for _, n := range []int{10, 24, 64} {
			for _, geqo := range []bool{true, false} {
				name := fmt.Sprintf("%s/%d/geqo=%v", shape, n, geqo)
				t.Run(name, func(t *testing.T) {
					lim := DefaultJoinLimits
					lim.Geqo = geqo
					if geqo {
						lim.GeqoThreshold = 2
					}
					root, relOf := joinQuery(t, shape, n, true, false)
					p := &plan.Plan{Root: root}
					o, err := newOptimizer(DefaultCosts, nil, lim).run(context.Background(), p)
					if err != nil {
						t.Fatal(err)
					}
					order, cross := joinOrder(p.Root, relOf)
					if cross != 0 {
						t.Errorf("%d joins without a key: %s", cross, order)
					}
					seen := map[string]int{}
					for _, f := range strings.FieldsFunc(order, func(r rune) bool { return strings.ContainsRune("() ->", r) }) {
						seen[f]++
					}
					for i := 1; i <= n; i++ {
						if seen[fmt.Sprintf("r%d", i)] != 1 {
							t.Errorf("r%d joined %d times: %s", i, seen[fmt.Sprintf("r%d", i)], order)
						}
					}
					if len(o.searches) != 1 || o.searches[0].items != n {
						t.Fatalf("searches %+v, want one over %d items", o.searches, n)
					}
					s := o.searches[0]
					preds := n - 1
					if shape == "cycle" {
						preds = n
					}
					bound := n * preds // greedy: n-1 rounds, one candidate per predicate
					if !geqo {
						// Exhaustive, or greedy after the exhaustive
						// search passed its budget.
						bound += maxDPStates * n
					}
					if s.considered > bound || s.considered == 0 {
						t.Errorf("%d candidates, bound %d", s.considered, bound)
					}
					if geqo && !s.greedy {
						t.Errorf("geqo_threshold 2: want the greedy search")
					}
				})
			}
		}
	}
}

// TestJoinSearchCancelled checks that a search stops when its statement's
// context is cancelled.
func TestJoinSearchCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, geqo := range []bool{true, false} {
		root, _ := joinQuery(t, "star", 64, true, false)
		lim := DefaultJoinLimits
		lim.Geqo = geqo
		_, err := newOptimizer(DefaultCosts, nil, lim).run(ctx, &plan.Plan{Root: root})
		if err != context.Canceled {
			t.Errorf("geqo=%v: got %v, want context.Canceled", geqo, err)
		}
	}
}

// TestJoinSearchGraphs runs the two searches over graphs without plans:
// both find the chain's order from its selective end, and the exhaustive
// search gives up past its budget on a star it cannot finish.
func TestJoinSearchGraphs(t *testing.T) {
	chain := func(n int) *joinGraph {
		g := &joinGraph{rows: make([]float64, n)}
		for i := range g.rows {
			g.rows[i] = 1000
			if i > 0 {
				g.preds = append(g.preds, graphPred{rels: []int{i - 1, i}, sel: 0.001})
			}
		}
		g.rows[n-1] = 1 // the filtered end
		return g
	}
	for _, search := range []string{"dp", "greedy"} {
		g := chain(8)
		var tr *joinTree
		var err error
		if search == "dp" {
			tr, err = g.searchDP(context.Background())
		} else {
			tr, err = g.searchGreedy(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
		// Every intermediate result has one row: C_out = 6 (seven joins,
		// the last not counted).
		if c := g.cost(tr); c != 6 {
			t.Errorf("%s: cost %v of %v, want 6", search, c, tr.rels(nil))
		}
	}
	star := &joinGraph{rows: make([]float64, 24)}
	for i := range star.rows {
		star.rows[i] = 100
		if i > 0 {
			star.preds = append(star.preds, graphPred{rels: []int{0, i}, sel: 0.01})
		}
	}
	if _, err := star.searchDP(context.Background()); err != errDPBudget {
		t.Errorf("star of 24: got %v, want errDPBudget", err)
	}
	if star.considered > maxDPStates*24 {
		t.Errorf("star of 24: %d candidates before giving up", star.considered)
	}
}

// BenchmarkJoinSearch optimizes a shuffled 24- and 64-relation chain.
func BenchmarkJoinSearch(b *testing.B) {
	for _, n := range []int{24, 64} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			t := &testing.T{}
			for i := 0; i < b.N; i++ {
				root, _ := joinQuery(t, "chain", n, true, false)
				if err := Optimize(context.Background(), &plan.Plan{Root: root}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
