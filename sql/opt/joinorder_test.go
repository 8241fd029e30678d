package opt

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/stats"
)

// TestJoinOrderPreservesResults checks invariant 1 for join ordering:
// random trees of three inner joins over t, u and a second scan of t (v),
// with random conditions and random statistics, yield the same rows
// before and after Optimize, which reorders a fair share of them.
func TestJoinOrderPreservesResults(t *testing.T) {
	reordered := 0
	rapid.Check(t, func(rt *rapid.T) {
		ints := map[string][]string{"t": {"t.a", "t.b", "t.d"}, "u": {"u.x", "u.y"}, "v": {"v.a", "v.b", "v.d"}}
		eq := func(label string, l, r []string) string {
			return rapid.SampledFrom(l).Draw(rt, label+"l") + " = " + rapid.SampledFrom(r).Draw(rt, label+"r")
		}
		leafFilter := func(name string) string {
			if !rapid.Bool().Draw(rt, name+"filtered") {
				return ""
			}
			return fmt.Sprintf("%s %s %d", rapid.SampledFrom(ints[name]).Draw(rt, name+"fc"),
				rapid.SampledFrom([]string{"=", "<", ">="}).Draw(rt, name+"fop"), rapid.IntRange(0, 5).Draw(rt, name+"fv"))
		}
		on1 := eq("on1", ints["t"], ints["u"])
		on2 := eq("on2", append(ints["t"], ints["u"]...), ints["v"])
		if rapid.Bool().Draw(rt, "extra") {
			on2 += " AND " + eq("on2b", ints["t"], ints["v"])
		}
		filters := map[string]string{"t": leafFilter("t"), "u": leafFilter("u"), "v": leafFilter("v")}
		fix := fixtures()
		tstats := map[catalog.ID]*stats.Table{}
		for _, name := range []string{"t", "u"} {
			tbl := fix[name]
			ts := &stats.Table{TableID: tbl.ID, RowCount: float64(rapid.SampledFrom([]int{5, 100, 10000}).Draw(rt, name+"rows"))}
			for _, c := range tbl.Columns {
				ts.Columns = append(ts.Columns, &stats.Column{ID: c.ID, Type: c.Type,
					Distinct: float64(rapid.IntRange(1, int(ts.RowCount)).Draw(rt, name+c.Name+"ndv"))})
			}
			tstats[tbl.ID] = ts
		}
		build := func() *plan.Plan {
			b := newBuilder(t)
			tn, un := b.scan("t"), b.scan("u")
			// v is t scanned again: its columns are named v.*, and t.*
			// keep naming the first scan's.
			saved := map[string]plan.Column{}
			for k, c := range b.names {
				saved[k] = c
			}
			vn := b.scan("t")
			for _, c := range vn.Cols {
				b.names["v."+c.Name] = c
			}
			for k, c := range saved {
				b.names[k] = c
			}
			leaf := func(n plan.Node, name string) plan.Node {
				if f := filters[name]; f != "" {
					return b.filter(n, f)
				}
				return n
			}
			j1 := b.join(plan.InnerJoin, leaf(tn, "t"), leaf(un, "u"), on1)
			return &plan.Plan{Root: b.join(plan.InnerJoin, j1, leaf(vn, "v"), on2)}
		}
		before, after := build(), build()
		src := func(tbl *catalog.Table) *stats.Table { return tstats[tbl.ID] }
		if err := OptimizeStats(t.Context(), after, DefaultCosts, src, DefaultJoinLimits); err != nil {
			rt.Fatal(err)
		}
		want, got := runPlan(rt, before.Root), runPlan(rt, after.Root)
		if want != got {
			rt.Fatalf("ON %s, ON %s, filters %v:\nbefore %s\nafter  %s\nplan:\n%s", on1, on2, filters, want, got, format(after.Root))
		}
		if strings.HasPrefix(format(after.Root), "project") {
			reordered++
		}
	})
	if reordered < 10 {
		t.Errorf("only %d join trees reordered", reordered)
	}
}
