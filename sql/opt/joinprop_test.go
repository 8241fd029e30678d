package opt

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestJoinPlanningPreservesResults checks invariant 1 on random joins of
// t and u under random ON and WHERE conditions: a small reference
// interpreter runs the plan before and after Optimize over fixed table
// contents, and the two must yield the same multiset of rows. It covers
// pushdown into and out of every join kind, join keys, lookup joins
// (swapped or not), index joins and spans together.
func TestJoinPlanningPreservesResults(t *testing.T) {
	kinds := []plan.JoinKind{plan.InnerJoin, plan.LeftJoin, plan.RightJoin, plan.FullJoin, plan.SemiJoin, plan.AntiJoin}
	lookups := 0
	rapid.Check(t, func(rt *rapid.T) {
		for range 6 {
			if checkJoin(t, rt, rapid.SampledFrom(kinds).Draw(rt, "kind")) {
				lookups++
			}
		}
	})
	// The cost model must have chosen lookup joins in a fair share of the
	// cases, or this test would not be checking them.
	if lookups < 20 {
		t.Errorf("only %d lookup joins planned", lookups)
	}
}

// checkJoin runs one random join before and after Optimize and reports
// whether the optimized plan has a lookup join.
func checkJoin(t *testing.T, rt *rapid.T, kind plan.JoinKind) bool {
	{
		on := genJoinPred(rt, "on", kind)
		if rapid.Bool().Draw(rt, "keyed") {
			// Most real joins are on keys: give lookup joins a chance.
			on = strings.TrimPrefix(on+" AND "+rapid.SampledFrom([]string{"t.a = u.x", "t.b = u.x", "u.y = t.a", "t.c = u.z"}).Draw(rt, "key"), " AND ")
		}
		where := genJoinPred(rt, "where", kind)
		tFirst := rapid.Bool().Draw(rt, "tFirst")
		costs := rapid.SampledFrom([]Costs{DefaultCosts, HDDCosts, ObjectStoreCosts}).Draw(rt, "costs")
		build := func() (*plan.Plan, error) {
			b := newBuilder(t)
			var l, r plan.Node
			if tFirst {
				l, r = b.scan("t"), b.scan("u")
			} else {
				l, r = b.scan("u"), b.scan("t")
			}
			var root plan.Node = b.join(kind, l, r, on)
			if where != "" {
				root = b.filter(root, where)
			}
			return &plan.Plan{Root: root}, nil
		}
		before, _ := build()
		after, _ := build()
		if err := OptimizeWith(t.Context(), after, costs); err != nil {
			rt.Fatal(err)
		}
		want := runPlan(rt, before.Root)
		got := runPlan(rt, after.Root)
		if want != got {
			rt.Fatalf("%s join ON %s WHERE %s (t first %v, %s):\nbefore %s\nafter  %s\nplan:\n%s", kindName(kind), on, where, tFirst, costs.Name, want, got, format(after.Root))
		}
		return strings.Contains(format(after.Root), "lookup-join")
	}
}

// genJoinPred makes a conjunction over t and u (only t's or u's columns
// above a semi or anti join, whose output is its left side: the WHERE of
// those joins reads no right column; both orders of the sides are drawn,
// so the WHERE reads only columns both orders keep: none, or constants).
func genJoinPred(rt *rapid.T, label string, kind plan.JoinKind) string {
	ints := []string{"t.a", "t.b", "t.d", "u.x", "u.y"}
	texts := []string{"t.c", "u.z"}
	if label == "where" && (kind == plan.SemiJoin || kind == plan.AntiJoin) {
		return ""
	}
	var term func(depth int) string
	term = func(depth int) string {
		switch rapid.IntRange(0, 6).Draw(rt, label+"kind") {
		case 0, 1:
			return fmt.Sprintf("%s %s %s", rapid.SampledFrom(ints).Draw(rt, label+"col"),
				rapid.SampledFrom([]string{"=", "<", ">=", "<>"}).Draw(rt, label+"op"),
				rapid.SampledFrom([]string{"0", "1", "2", "5", "NULL::int8"}).Draw(rt, label+"val"))
		case 2:
			return fmt.Sprintf("%s = %s", rapid.SampledFrom(ints[:3]).Draw(rt, label+"l"), rapid.SampledFrom(ints[3:]).Draw(rt, label+"r"))
		case 3:
			return fmt.Sprintf("%s = %s", texts[0], texts[1])
		case 4:
			return fmt.Sprintf("%s = '%s'", rapid.SampledFrom(texts).Draw(rt, label+"tc"), rapid.SampledFrom([]string{"x", "y", "q"}).Draw(rt, label+"tv"))
		case 5:
			return rapid.SampledFrom(append(ints, texts...)).Draw(rt, label+"nc") + rapid.SampledFrom([]string{" IS NULL", " IS NOT NULL"}).Draw(rt, label+"n")
		default:
			if depth > 0 {
				return "t.a = u.x"
			}
			return fmt.Sprintf("(%s OR %s)", term(1), term(1))
		}
	}
	n := rapid.IntRange(0, 3).Draw(rt, label+"terms")
	var ts []string
	for range n {
		ts = append(ts, term(0))
	}
	return strings.Join(ts, " AND ")
}

// tableRows are the fixed contents of the fixtures t and u (Columns order).
var tableRows = map[string][][]types.Datum{
	"t": {
		{types.DInt(1), types.DInt(1), types.DString("x"), types.DInt(0)},
		{types.DInt(2), types.DInt(2), types.DString("y"), types.DInt(1)},
		{types.DInt(3), types.DNull, types.DString("w"), types.DInt(2)},
		{types.DInt(4), types.DInt(2), types.DNull, types.DNull},
		{types.DInt(5), types.DInt(5), types.DString("z"), types.DInt(0)},
		{types.DInt(6), types.DInt(0), types.DNull, types.DInt(3)},
	},
	"u": {
		{types.DInt(1), types.DInt(1), types.DString("x")},
		{types.DInt(2), types.DNull, types.DString("y")},
		{types.DInt(3), types.DInt(2), types.DNull},
		{types.DInt(4), types.DInt(2), types.DString("x")},
		{types.DInt(5), types.DInt(6), types.DString("q")},
	},
}

// relation is an interpreted node's rows, with their column IDs.
type relation struct {
	cols []sem.ColumnID
	rows [][]types.Datum
}

// runPlan interprets n and returns its rows, as text, sorted.
func runPlan(rt *rapid.T, n plan.Node) string {
	r := interpret(rt, n)
	var out []string
	for _, row := range r.rows {
		out = append(out, fmt.Sprint(row))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func pred(rt *rapid.T, e sem.Expr, cols []sem.ColumnID, row []types.Datum) bool {
	pos := map[sem.ColumnID]int{}
	for i, c := range cols {
		pos[c] = i
	}
	return evalTrue(rt, e, pos, row)
}

func ids2(cols []plan.Column) []sem.ColumnID {
	var out []sem.ColumnID
	for _, c := range cols {
		out = append(out, c.ID)
	}
	return out
}

func interpret(rt *rapid.T, n plan.Node) relation {
	switch v := n.(type) {
	case *plan.Values:
		return relation{cols: ids2(v.Cols)}
	case *plan.Filter:
		in := interpret(rt, v.Input)
		out := relation{cols: in.cols}
		for _, row := range in.rows {
			if pred(rt, v.Pred, in.cols, row) {
				out.rows = append(out.rows, row)
			}
		}
		return out
	case *plan.Project:
		in := interpret(rt, v.Input)
		pos := map[sem.ColumnID]int{}
		for i, c := range in.cols {
			pos[c] = i
		}
		out := relation{cols: ids2(v.Cols)}
		for _, row := range in.rows {
			var o []types.Datum
			for _, e := range v.Exprs {
				f, err := sem.Compile(e, pos)
				if err != nil {
					rt.Fatal(err)
				}
				d, err := f(&sem.EvalContext{}, row)
				if err != nil {
					rt.Fatal(err)
				}
				o = append(o, d)
			}
			out.rows = append(out.rows, o)
		}
		return out
	case *plan.Scan:
		out := relation{cols: ids2(v.Cols)}
		pos := map[sem.ColumnID]int{}
		for i, c := range v.Cols {
			pos[c.ID] = i
		}
		for _, full := range tableRows[v.Table.Name] {
			if !inIndex(rt, v, full) {
				continue
			}
			row := project(full, v.TableCols)
			if evalTrue(rt, v.Filter, pos, row) {
				out.rows = append(out.rows, row)
			}
		}
		return out
	case *plan.IndexJoin:
		in := interpret(rt, v.Input)
		out := relation{cols: ids2(v.Cols)}
		for _, row := range in.rows {
			for _, full := range lookup(rt, v.Table, &v.Table.PrimaryIndex, in.cols, row, v.KeyCols) {
				o := project(full, v.TableCols)
				if pred(rt, v.Filter, out.cols, o) {
					out.rows = append(out.rows, o)
				}
			}
		}
		return out
	case *plan.LookupJoin:
		in := interpret(rt, v.Input)
		idx := v.Index
		if idx == nil {
			idx = &v.Table.PrimaryIndex
		}
		cols := append(append([]sem.ColumnID(nil), in.cols...), ids2(v.Cols)...)
		var right [][]types.Datum
		nulls := make([]types.Datum, len(v.Cols))
		for i := range nulls {
			nulls[i] = types.DNull
		}
		out := relation{cols: cols}
		if v.Kind == plan.SemiJoin || v.Kind == plan.AntiJoin {
			out.cols = in.cols
		}
		for _, row := range in.rows {
			right = nil
			for _, full := range lookup(rt, v.Table, idx, in.cols, row, v.KeyCols) {
				r := project(full, v.TableCols)
				if pred(rt, v.On, cols, append(append([]types.Datum(nil), row...), r...)) {
					right = append(right, r)
				}
			}
			emitJoined(&out, v.Kind, row, right, nulls)
		}
		return out
	case *plan.Join:
		l, r := interpret(rt, v.Left), interpret(rt, v.Right)
		cols := append(append([]sem.ColumnID(nil), l.cols...), r.cols...)
		out := relation{cols: cols}
		if v.Kind == plan.SemiJoin || v.Kind == plan.AntiJoin {
			out.cols = l.cols
		}
		lnull, rnull := nullRow(len(l.cols)), nullRow(len(r.cols))
		matchedR := make([]bool, len(r.rows))
		for _, lr := range l.rows {
			var right [][]types.Datum
			for i, rr := range r.rows {
				if pred(rt, v.On, cols, append(append([]types.Datum(nil), lr...), rr...)) {
					right = append(right, rr)
					matchedR[i] = true
				}
			}
			k := v.Kind
			if k == plan.RightJoin {
				k = plan.InnerJoin
			} else if k == plan.FullJoin {
				k = plan.LeftJoin
			}
			emitJoined(&out, k, lr, right, rnull)
		}
		if v.Kind == plan.RightJoin || v.Kind == plan.FullJoin {
			for i, rr := range r.rows {
				if !matchedR[i] {
					out.rows = append(out.rows, append(append([]types.Datum(nil), lnull...), rr...))
				}
			}
		}
		return out
	}
	rt.Fatalf("interpret: unexpected %T", n)
	return relation{}
}

func emitJoined(out *relation, kind plan.JoinKind, l []types.Datum, right [][]types.Datum, rnull []types.Datum) {
	switch kind {
	case plan.SemiJoin:
		if len(right) > 0 {
			out.rows = append(out.rows, l)
		}
	case plan.AntiJoin:
		if len(right) == 0 {
			out.rows = append(out.rows, l)
		}
	default:
		for _, r := range right {
			out.rows = append(out.rows, append(append([]types.Datum(nil), l...), r...))
		}
		if len(right) == 0 && kind == plan.LeftJoin {
			out.rows = append(out.rows, append(append([]types.Datum(nil), l...), rnull...))
		}
	}
}

func nullRow(n int) []types.Datum {
	r := make([]types.Datum, n)
	for i := range r {
		r[i] = types.DNull
	}
	return r
}

// project picks table columns (IDs 1..n are positions 0..n-1).
func project(full []types.Datum, tcols []rowenc.ColumnID) []types.Datum {
	var out []types.Datum
	for _, tc := range tcols {
		out = append(out, full[int(tc)-1])
	}
	return out
}

// inIndex reports whether a table row is read by the scan: in its spans
// and, for a partial index, accepted by the predicate.
func inIndex(rt *rapid.T, s *plan.Scan, full []types.Datum) bool {
	idx := s.Index
	if idx == nil {
		idx = &s.Table.PrimaryIndex
	}
	if idx.Predicate != "" {
		p, err := buildTableExpr(s.Table, idx.Predicate, types.Bool, func(c *catalog.Column) (sem.ColumnID, bool) {
			return sem.ColumnID(c.ID), true
		})
		if err != nil {
			rt.Fatal(err)
		}
		pos := map[sem.ColumnID]int{}
		for i := range full {
			pos[sem.ColumnID(i+1)] = i
		}
		if !evalTrue(rt, p, pos, full) {
			return false
		}
	}
	if s.Spans == nil {
		return true
	}
	var key []types.Datum
	for _, k := range idx.KeyColumnIDs {
		key = append(key, full[int(k)-1])
	}
	for _, sp := range s.Spans {
		if inSpan(key, sp, idx.KeyDirections) {
			return true
		}
	}
	return false
}

// lookup returns the table rows whose leading key columns of idx equal
// the values of keyCols in row (SQL equality: NULL matches nothing).
func lookup(rt *rapid.T, t *catalog.Table, idx *catalog.Index, cols []sem.ColumnID, row []types.Datum, keyCols []sem.ColumnID) [][]types.Datum {
	pos := map[sem.ColumnID]int{}
	for i, c := range cols {
		pos[c] = i
	}
	var out [][]types.Datum
	for _, full := range tableRows[t.Name] {
		ok := true
		for i, kc := range keyCols {
			p, found := pos[kc]
			if !found {
				rt.Fatalf("lookup key column %d not in input", kc)
			}
			a, b := row[p], full[int(idx.KeyColumnIDs[i])-1]
			if types.IsNull(a) || types.IsNull(b) || types.Compare(a, b) != 0 {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, full)
		}
	}
	return out
}
