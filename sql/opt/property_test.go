package opt

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestScanPlanningPreservesResults checks invariant 1 on random filters
// over t (a, b, c, d): for every row of a small grid (NULLs included), the
// row passes the optimized access (its spans, read in each index's key
// order with its directions and NULL placement, its filters, the index
// join's filter) exactly when it passes the original filter, evaluated by
// sem. Whatever index the cost model picks, no row is lost or invented.
func TestScanPlanningPreservesResults(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// Several filters per check: the default 100 checks are then
		// enough to reach every index, direction and bound shape.
		for range 8 {
			checkFilter(t, rt, genFilter(rt))
		}
	})
}

func checkFilter(t *testing.T, rt *rapid.T, text string) {
	b := newBuilder(t)
	s := b.scan("t")
	pred := b.expr(text)
	p := &plan.Plan{Root: &plan.Filter{Input: s, Pred: pred}}
	if err := Optimize(t.Context(), p); err != nil {
		rt.Fatal(err)
	}
	pos := map[sem.ColumnID]int{1: 0, 2: 1, 3: 2, 4: 3}
	vals := []types.Datum{types.DNull, types.DInt(0), types.DInt(1), types.DInt(2), types.DInt(3)}
	for _, a := range vals[1:] {
		for _, bv := range vals {
			for _, d := range vals {
				row := []types.Datum{a, bv, types.DString("x"), d}
				want := evalTrue(rt, pred, pos, row)
				if have := passes(rt, p.Root, pos, row); have != want {
					rt.Fatalf("filter %s, row %v: optimized plan says %v, filter says %v; plan:\n%s", text, row, have, want, format(p.Root))
				}
			}
		}
	}
}

func genFilter(rt *rapid.T) string {
	col := func() string { return rapid.SampledFrom([]string{"a", "b", "d"}).Draw(rt, "col") }
	val := func() string {
		return rapid.SampledFrom([]string{"-1", "0", "1", "2", "3", "4", "NULL::int8", "2::int2"}).Draw(rt, "val")
	}
	var term func(depth int) string
	term = func(depth int) string {
		switch rapid.IntRange(0, 7).Draw(rt, "kind") {
		case 0:
			return fmt.Sprintf("%s %s %s", col(), rapid.SampledFrom([]string{"=", "<", "<=", ">", ">=", "<>"}).Draw(rt, "op"), val())
		case 1:
			return fmt.Sprintf("%s %s %s", val(), rapid.SampledFrom([]string{"=", "<", ">="}).Draw(rt, "op"), col())
		case 2:
			n := rapid.IntRange(1, 3).Draw(rt, "n")
			var vs []string
			for range n {
				vs = append(vs, val())
			}
			not := rapid.SampledFrom([]string{"", "NOT "}).Draw(rt, "not")
			return fmt.Sprintf("%s %sIN (%s)", col(), not, strings.Join(vs, ", "))
		case 3:
			return col() + rapid.SampledFrom([]string{" IS NULL", " IS NOT NULL"}).Draw(rt, "isnull")
		case 4:
			return fmt.Sprintf("%s BETWEEN %s AND %s", col(), val(), val())
		case 5:
			if rapid.Bool().Draw(rt, "any") {
				return fmt.Sprintf("%s %s ('{%s, %s}'::int8[])", col(), rapid.SampledFrom([]string{"= ANY", "= ALL", "< ANY"}).Draw(rt, "anyop"),
					rapid.SampledFrom([]string{"1", "3", "NULL"}).Draw(rt, "e1"), rapid.SampledFrom([]string{"0", "2", "NULL"}).Draw(rt, "e2"))
			}
			return fmt.Sprintf("%s IS NOT DISTINCT FROM %s", col(), val())
		case 6:
			if depth > 0 {
				return col() + " = 1"
			}
			return fmt.Sprintf("(%s OR %s)", term(depth+1), term(depth+1))
		default:
			return fmt.Sprintf("%s = %s", col(), col())
		}
	}
	n := rapid.IntRange(1, 4).Draw(rt, "terms")
	var ts []string
	for range n {
		ts = append(ts, term(0))
	}
	return strings.Join(ts, " AND ")
}

func evalTrue(rt *rapid.T, e sem.Expr, pos map[sem.ColumnID]int, row []types.Datum) bool {
	if e == nil {
		return true
	}
	f, err := sem.Compile(e, pos)
	if err != nil {
		rt.Fatal(err)
	}
	d, err := f(&sem.EvalContext{}, row)
	if err != nil {
		rt.Fatal(err)
	}
	return d == types.DBool(true)
}

// passes reports whether row comes out of the optimized access n.
func passes(rt *rapid.T, n plan.Node, pos map[sem.ColumnID]int, row []types.Datum) bool {
	switch v := n.(type) {
	case *plan.Values:
		return false
	case *plan.Filter:
		return passes(rt, v.Input, pos, row) && evalTrue(rt, v.Pred, pos, row)
	case *plan.IndexJoin:
		return passes(rt, v.Input, pos, row) && evalTrue(rt, v.Filter, pos, row)
	case *plan.Scan:
		idx := v.Index
		if idx == nil {
			idx = &v.Table.PrimaryIndex
		}
		// Table column IDs 1..4 are row positions 0..3; an added primary
		// key column reads a.
		p := map[sem.ColumnID]int{}
		for i, c := range v.Cols {
			p[c.ID] = int(v.TableCols[i]) - 1
		}
		if !evalTrue(rt, v.Filter, p, row) {
			return false
		}
		if idx.Predicate != "" {
			// A partial index holds only the rows its predicate accepts.
			pred, err := buildTableExpr(v.Table, idx.Predicate, types.Bool, func(c *catalog.Column) (sem.ColumnID, bool) {
				return sem.ColumnID(c.ID), true
			})
			if err != nil {
				rt.Fatal(err)
			}
			if !evalTrue(rt, pred, map[sem.ColumnID]int{1: 0, 2: 1, 3: 2, 4: 3}, row) {
				return false
			}
		}
		if v.Spans == nil {
			return true
		}
		var key []types.Datum
		for _, k := range idx.KeyColumnIDs {
			key = append(key, row[int(k)-1])
		}
		for _, sp := range v.Spans {
			if inSpan(key, sp, idx.KeyDirections) {
				return true
			}
		}
		return false
	}
	rt.Fatalf("unexpected node %T", n)
	return false
}

// inSpan applies plan.Span's definition to a key, comparing in index
// order (direction and NULL placement per column).
func inSpan(key []types.Datum, sp plan.Span, orders []rowenc.Order) bool {
	cmp := func(bound []types.Datum) int {
		for i, bv := range bound {
			if c := cmpIndex(key[i], bv, orders[i]); c != 0 {
				return c
			}
		}
		return 0
	}
	if sp.Start != nil {
		if c := cmp(sp.Start); c < 0 || (c == 0 && sp.StartExclusive) {
			return false
		}
	}
	if sp.End != nil {
		if c := cmp(sp.End); c > 0 || (c == 0 && !sp.EndInclusive) {
			return false
		}
	}
	return true
}

func cmpIndex(a, b types.Datum, o rowenc.Order) int {
	an, bn := types.IsNull(a), types.IsNull(b)
	switch {
	case an && bn:
		return 0
	case an || bn:
		c := 1 // NULL after values
		if o&rowenc.NullsFirst != 0 {
			c = -1
		}
		if bn {
			c = -c
		}
		return c
	}
	c := types.Compare(a, b)
	if o&rowenc.Descending != 0 {
		c = -c
	}
	return c
}
