package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// GROUPING SETS, ROLLUP, CUBE and grouping().
//
// A query with grouping sets is bound as if it grouped by every grouping
// expression (one grouper, so the select list, HAVING and ORDER BY map
// onto one GroupBy's columns as usual); that GroupBy is then replaced by
// a UNION ALL with one branch per grouping set, each a GroupBy by the
// set's columns over the shared input (materialized once as a CTE),
// projecting NULL for the grouping columns the set leaves out and the
// set's grouping() values as constants. The union's columns carry the
// replaced GroupBy's IDs, so everything above reads it unchanged.
//
// grouping(a, b) calls are replaced before binding by references to
// hidden columns of the FROM scope (one per call), which the branches
// compute: bit k (from the left) is 1 when argument k is not grouped in
// the branch's set.

// groupingFuncs are a query level's grouping() calls.
type groupingFuncs struct {
	calls []*pg_query.GroupingFunc
	ids   []sem.ColumnID
	// names are the calls as EXPLAIN prints them (GROUPING(a, b)).
	names []string
}

const groupingColPrefix = "\x00grouping"

func hasGroupingFunc(nodes ...*pg_query.Node) bool {
	found := false
	for _, n := range nodes {
		walkAST(n, func(x *pg_query.Node) bool {
			switch x.Node.(type) {
			case *pg_query.Node_GroupingFunc:
				found = true
			case *pg_query.Node_SubLink:
				return false // a subquery's calls are its own level's
			}
			return !found
		})
	}
	return found
}

// rewriteGroupingFuncs returns a copy of ss whose select list, HAVING and
// ORDER BY read grouping() calls as columns of the FROM scope.
func rewriteGroupingFuncs(ss *pg_query.SelectStmt) (*pg_query.SelectStmt, *groupingFuncs) {
	ss = proto.Clone(ss).(*pg_query.SelectStmt)
	gf := &groupingFuncs{}
	nodes := append([]*pg_query.Node{ss.HavingClause}, ss.TargetList...)
	nodes = append(nodes, ss.SortClause...)
	for _, n := range nodes {
		// A select-list entry that is just the call is named "grouping".
		top, rt := n, n.GetResTarget()
		if rt != nil && rt.Name == "" {
			top = rt.Val
		} else {
			rt = &pg_query.ResTarget{}
		}
		walkAST(n, func(x *pg_query.Node) bool {
			switch v := x.Node.(type) {
			case *pg_query.Node_SubLink:
				return false
			case *pg_query.Node_GroupingFunc:
				if x == top {
					rt.Name = "grouping" // as FigureColname names the call
				}
				name := fmt.Sprintf("%s%d", groupingColPrefix, len(gf.calls))
				gf.calls = append(gf.calls, v.GroupingFunc)
				x.Node = &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
					Fields: []*pg_query.Node{pg_query.MakeStrNode(name)}, Location: v.GroupingFunc.Location}}
				return false
			}
			return true
		})
	}
	return ss, gf
}

// addToScope makes the calls' columns resolvable in s (hidden, out of *).
func (gf *groupingFuncs) addToScope(b *builder, s *scope) {
	for i := range gf.calls {
		id := b.newCol()
		gf.ids = append(gf.ids, id)
		s.add(scopeCol{id: id, name: fmt.Sprintf("%s%d", groupingColPrefix, i), t: types.Int4, hidden: true, noStar: true})
	}
}

// groupingSets is a GROUP BY clause with grouping sets, expanded: every
// distinct grouping expression once, and each set as indexes into them.
type groupingSets struct {
	items []sem.Expr
	keys  map[string]int
	sets  [][]int
}

func (gs *groupingSets) index(e sem.Expr) int {
	k := e.String()
	if i, ok := gs.keys[k]; ok {
		return i
	}
	gs.keys[k] = len(gs.items)
	gs.items = append(gs.items, e)
	return len(gs.items) - 1
}

// expandGroupBy expands a GROUP BY list as PostgreSQL's
// expand_grouping_sets does: the cross product of its items' sets.
func (b *builder) expandGroupBy(s *scope, list []*pg_query.Node, targets []*target, distinct bool) (*groupingSets, error) {
	gs := &groupingSets{keys: map[string]int{}}
	result := [][]int{{}}
	for _, n := range list {
		sets, err := b.groupingItemSets(s, n, targets, gs)
		if err != nil {
			return nil, err
		}
		var next [][]int
		for _, r := range result {
			for _, e := range sets {
				next = append(next, append(append([]int(nil), r...), e...))
			}
		}
		result = next
	}
	if distinct {
		seen := map[string]bool{}
		var out [][]int
		for _, set := range result {
			k := fmt.Sprint(normSet(set))
			if !seen[k] {
				seen[k] = true
				out = append(out, set)
			}
		}
		result = out
	}
	gs.sets = result
	return gs, nil
}

func normSet(set []int) []int {
	m := map[int]bool{}
	var out []int
	for _, i := range set {
		if !m[i] {
			m[i] = true
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

// groupingItemSets is the list of sets one GROUP BY item stands for.
func (b *builder) groupingItemSets(s *scope, n *pg_query.Node, targets []*target, gs *groupingSets) ([][]int, error) {
	g := n.GetGroupingSet()
	if g == nil {
		e, err := b.groupItem(s, n, targets)
		if err != nil {
			return nil, err
		}
		return [][]int{{gs.index(e)}}, nil
	}
	// elem is one element of ROLLUP or CUBE: an expression, or a
	// parenthesized list of them that goes in and out of sets together.
	elem := func(x *pg_query.Node) ([]int, error) {
		var parts []*pg_query.Node
		if r := x.GetRowExpr(); r != nil && r.RowFormat != pg_query.CoercionForm_COERCE_EXPLICIT_CALL {
			parts = r.Args
		} else {
			parts = []*pg_query.Node{x}
		}
		var out []int
		for _, p := range parts {
			e, err := b.groupItem(s, p, targets)
			if err != nil {
				return nil, err
			}
			out = append(out, gs.index(e))
		}
		return out, nil
	}
	switch g.Kind {
	case pg_query.GroupingSetKind_GROUPING_SET_EMPTY:
		return [][]int{{}}, nil
	case pg_query.GroupingSetKind_GROUPING_SET_ROLLUP, pg_query.GroupingSetKind_GROUPING_SET_CUBE:
		var elems [][]int
		for _, c := range g.Content {
			if c.GetGroupingSet() != nil {
				return nil, b.errAt(pgerror.New(pgerrcode.SyntaxError, "syntax error in grouping set"), nodeLoc(c))
			}
			e, err := elem(c)
			if err != nil {
				return nil, err
			}
			elems = append(elems, e)
		}
		var out [][]int
		if g.Kind == pg_query.GroupingSetKind_GROUPING_SET_ROLLUP {
			for k := len(elems); k >= 0; k-- {
				var set []int
				for _, e := range elems[:k] {
					set = append(set, e...)
				}
				out = append(out, set)
			}
			return out, nil
		}
		if len(elems) > 12 {
			return nil, b.errAt(pgerror.New(pgerrcode.ProgramLimitExceeded, "CUBE is limited to 12 elements"), g.Location)
		}
		n := len(elems)
		for mask := (1 << n) - 1; mask >= 0; mask-- {
			var set []int
			for i, e := range elems {
				if mask&(1<<(n-1-i)) != 0 {
					set = append(set, e...)
				}
			}
			out = append(out, set)
		}
		return out, nil
	default: // GROUPING SETS (...)
		var out [][]int
		for _, c := range g.Content {
			if c.GetGroupingSet() != nil {
				sub, err := b.groupingItemSets(s, c, targets, gs)
				if err != nil {
					return nil, err
				}
				out = append(out, sub...)
				continue
			}
			e, err := elem(c)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
}

// bindGroupingArgs checks grouping()'s arguments and returns, per call,
// the grouping expression index of each argument.
func (b *builder) bindGroupingArgs(s *scope, gf *groupingFuncs, gs *groupingSets) ([][]int, error) {
	out := make([][]int, len(gf.calls))
	gf.names = make([]string, len(gf.calls))
	for i, c := range gf.calls {
		var args []string
		if len(c.Args) > 31 {
			return nil, b.errAt(pgerror.New(pgerrcode.TooManyArguments, "GROUPING must have fewer than 32 arguments"), c.Location)
		}
		for _, a := range c.Args {
			e, err := b.expr(s, "GROUP BY", a, nil)
			if err != nil {
				return nil, err
			}
			k, ok := gs.keys[e.String()]
			if !ok {
				return nil, b.errAt(pgerror.New(pgerrcode.GroupingError,
					"arguments to GROUPING must be grouping expressions of the associated query level"), leftLoc(a))
			}
			out[i] = append(out[i], k)
			args = append(args, e.String())
		}
		gf.names[i] = "GROUPING(" + strings.Join(args, ", ") + ")"
	}
	return out, nil
}

// groupingUnion replaces gb (grouping by every item of gs) by the union
// of one GroupBy per grouping set, with the grouping() columns after
// gb's. gb's group columns are its input's, which the materialized input
// keeps: the union's columns are fresh, and remap says what the
// expressions above, bound over gb's columns, read instead.
//
// partial lists the columns grouped by functional dependency that some set
// leaves out: PostgreSQL only counts the grouping columns common to every
// set for it, so naming one of them is 42803 (partialRef).
//
// rebuild binds the level's FROM and WHERE again: a correlated level's
// input depends on the outer row, so it cannot be a CTE (run once per
// statement); each set after the first then reads its own copy.
func (b *builder) groupingUnion(gb *GroupBy, g *grouper, gs *groupingSets, gf *groupingFuncs, gargs [][]int,
	rebuild func() (Node, error)) (n Node, remap map[sem.ColumnID]sem.Expr, partial map[sem.ColumnID]bool, err error) {
	// The group column of each grouping expression.
	itemCol := make([]sem.ColumnID, len(gs.items))
	isItemCol := map[sem.ColumnID]int{}
	for i, e := range gs.items {
		if cr, ok := e.(*sem.ColRef); ok {
			itemCol[i] = cr.ID
		} else {
			itemCol[i] = g.groupKeys[e.String()]
		}
		isItemCol[itemCol[i]] = i
	}
	// Columns grouped because a table's whole primary key is (functional
	// dependency) are in a set when the whole key is.
	fdKey := map[sem.ColumnID][]int{}
	for _, r := range g.s.rels {
		if len(r.pk) == 0 {
			continue
		}
		var key []int
		whole := true
		for _, id := range r.pk {
			i, ok := isItemCol[id]
			whole = whole && ok
			key = append(key, i)
		}
		if !whole {
			continue
		}
		for _, ci := range r.cols {
			fdKey[g.s.cols[ci].id] = key
		}
	}
	input := gb.Input
	correlated := referencesOuter(g.s) || b.readsOutside(input)
	cteID := -1
	if !correlated {
		cteID = len(b.ctes)
		b.ctes = append(b.ctes, input)
	}
	// branchInput is one set's copy of the input and its columns in the
	// input's order.
	branchInput := func(k int) (Node, []Column, error) {
		if !correlated {
			cols := freshCols(b, input.Columns())
			return &CTEScan{ID: cteID, Cols: cols}, cols, nil
		}
		if k == 0 {
			return input, input.Columns(), nil
		}
		in2, err := rebuild()
		if err != nil {
			return nil, nil, err
		}
		if g.pre != nil {
			// The computed group keys, over the copy's columns.
			m := map[sem.ColumnID]sem.Expr{}
			for i, c := range g.input.Columns() {
				m[c.ID] = colRef(in2.Columns()[i])
			}
			n := len(g.input.Columns())
			in2 = &Project{Input: in2, Exprs: append(passThrough(in2.Columns()), substituteAll(g.pre.Exprs[n:], m)...),
				Cols: append(append([]Column(nil), in2.Columns()...), freshCols(b, g.pre.Cols[n:])...)}
		}
		if len(in2.Columns()) != len(input.Columns()) {
			return nil, nil, pgerror.New(pgerrcode.InternalError, "plan: grouping set input bound again differs")
		}
		return in2, in2.Columns(), nil
	}
	outCols := freshCols(b, gb.Cols)
	remap = map[sem.ColumnID]sem.Expr{}
	partial = map[sem.ColumnID]bool{}
	for i, c := range gb.Cols {
		remap[c.ID] = colRef(outCols[i])
	}
	if gf != nil {
		for i, id := range gf.ids {
			outCols = append(outCols, Column{ID: id, Name: "grouping", T: types.Int4, Hidden: true})
			// The scope's name for the column is internal: print the call.
			remap[id] = &sem.ColRef{ID: id, T: types.Int4, Name: gf.names[i]}
		}
	}
	var branches []Node
	for k, set := range gs.sets {
		in := map[int]bool{}
		for _, i := range set {
			in[i] = true
		}
		grouped := func(id sem.ColumnID) bool {
			if i, ok := isItemCol[id]; ok {
				return in[i]
			}
			for _, k := range fdKey[id] {
				if !in[k] {
					return false
				}
			}
			return len(fdKey[id]) > 0
		}
		for _, id := range gb.GroupCols {
			if _, item := isItemCol[id]; !item && !grouped(id) {
				partial[id] = true
			}
		}
		scan, scanCols, err := branchInput(k)
		if err != nil {
			return nil, nil, nil, err
		}
		sub := map[sem.ColumnID]sem.Expr{}
		newID := map[sem.ColumnID]Column{}
		for i, c := range input.Columns() {
			sub[c.ID] = colRef(scanCols[i])
			newID[c.ID] = scanCols[i]
		}
		bg := &GroupBy{Input: scan}
		for _, id := range gb.GroupCols {
			if grouped(id) {
				c := newID[id]
				bg.GroupCols = append(bg.GroupCols, c.ID)
				bg.Cols = append(bg.Cols, c)
			}
		}
		for _, a := range gb.Aggs {
			a.Args = substituteAll(a.Args, sub)
			if a.Filter != nil {
				a.Filter = substitute(a.Filter, sub)
			}
			order := make([]SortExpr, len(a.OrderBy))
			for i, o := range a.OrderBy {
				o.Expr = substitute(o.Expr, sub)
				order[i] = o
			}
			a.OrderBy = order
			bg.Aggs = append(bg.Aggs, a)
		}
		aggCols := freshCols(b, gb.Cols[len(gb.GroupCols):])
		bg.Cols = append(bg.Cols, aggCols...)
		p := &Project{Input: bg}
		gi := 0
		for _, id := range gb.GroupCols {
			c := outColByID(gb.Cols, id)
			if grouped(id) {
				p.Exprs = append(p.Exprs, colRef(bg.Cols[gi]))
				gi++
			} else {
				p.Exprs = append(p.Exprs, &sem.Const{Datum: types.DNull, T: c.T})
			}
		}
		for _, c := range aggCols {
			p.Exprs = append(p.Exprs, colRef(c))
		}
		for _, args := range gargs {
			v := 0
			for _, k := range args {
				v <<= 1
				if !in[k] {
					v |= 1
				}
			}
			p.Exprs = append(p.Exprs, &sem.Const{Datum: types.DInt(v), T: types.Int4})
		}
		p.Cols = freshCols(b, outCols)
		branches = append(branches, p)
	}
	if len(branches) == 1 {
		p := branches[0].(*Project)
		p.Cols = outCols
		return p, remap, partial, nil
	}
	node := branches[0]
	for i := 1; i < len(branches); i++ {
		cols := outCols
		if i < len(branches)-1 {
			cols = freshCols(b, outCols)
		}
		node = &SetOp{Kind: Union, All: true, Left: node, Right: branches[i], Cols: cols}
	}
	return node, remap, partial, nil
}

// partialRef is the 42803 error of an expression above the grouping that
// names a column of partial.
func (g *grouper) partialRef(e sem.Expr, partial map[sem.ColumnID]bool) error {
	var bad sem.ColumnID
	sem.Walk(e, func(x sem.Expr) bool {
		if cr, ok := x.(*sem.ColRef); ok && partial[cr.ID] {
			bad = cr.ID
		}
		return bad == 0
	})
	if bad == 0 {
		return nil
	}
	return &groupingError{err: pgerror.New(pgerrcode.GroupingError,
		"column %q must appear in the GROUP BY clause or be used in an aggregate function", g.qualifiedName(bad)), col: bad}
}

func outColByID(cols []Column, id sem.ColumnID) Column {
	for _, c := range cols {
		if c.ID == id {
			return c
		}
	}
	return Column{}
}

func substituteAll(es []sem.Expr, m map[sem.ColumnID]sem.Expr) []sem.Expr {
	out := make([]sem.Expr, len(es))
	for i, e := range es {
		out[i] = substitute(e, m)
	}
	return out
}

// referencesOuter says whether the level has referenced a column of an
// enclosing level so far (its input may then differ per outer row).
func referencesOuter(s *scope) bool {
	return s.outer != nil && len(*s.outer) > 0
}

// rebuildFromWhere binds a level's FROM and WHERE again, in a scope of
// its own with the same enclosing levels: the same columns in the same
// order, under fresh IDs.
func (b *builder) rebuildFromWhere(ss *pg_query.SelectStmt, s *scope) (Node, error) {
	s2 := &scope{b: b, parent: s.parent, outer: s.outer, ctes: s.ctes}
	node, err := b.buildFrom(ss.FromClause, s2)
	if err != nil {
		return nil, err
	}
	s2.qualify = len(s2.rels) > 1
	if ss.WhereClause != nil {
		w, err := b.expr(s2, "WHERE", rewriteRowIn(ss.WhereClause), types.Bool)
		if err != nil {
			return nil, err
		}
		node = &Filter{Input: node, Pred: w}
	}
	return node, nil
}

// readsOutside says whether a plan subtree reads a column it does not
// produce (an enclosing query's, directly or through a subquery), so its
// rows may differ per outer row.
func (b *builder) readsOutside(n Node) bool {
	produced := map[sem.ColumnID]bool{}
	var exprs []sem.Expr
	walkPlan(n, func(x Node) {
		for _, c := range x.Columns() {
			produced[c.ID] = true
		}
		switch v := x.(type) {
		case *Scan:
			for _, c := range v.Cols {
				produced[c.ID] = true
			}
		case *Values:
			for _, r := range v.Rows {
				exprs = append(exprs, r...)
			}
		case *ProjectSet:
			for _, f := range v.Funcs {
				exprs = append(exprs, f.Call)
			}
		case *GroupBy:
			for _, a := range v.Aggs {
				exprs = append(exprs, a.Args...)
				exprs = append(exprs, a.Filter)
				for _, o := range a.OrderBy {
					exprs = append(exprs, o.Expr)
				}
			}
		case *Window:
			for _, f := range v.Funcs {
				exprs = append(exprs, f.Args...)
				exprs = append(exprs, f.Filter, f.FrameStartOffset, f.FrameEndOffset)
				exprs = append(exprs, f.PartitionBy...)
				for _, o := range f.OrderBy {
					exprs = append(exprs, o.Expr)
				}
			}
		case *Limit:
			exprs = append(exprs, v.Limit, v.Offset)
		}
		exprs = append(exprs, nodeExprs(x)...)
	})
	outside := false
	for _, e := range exprs {
		if e == nil {
			continue
		}
		sem.Walk(e, func(x sem.Expr) bool {
			switch v := x.(type) {
			case *sem.ColRef:
				outside = outside || !produced[v.ID]
			case *sem.SubqueryRef:
				if v.ID >= 1 && v.ID <= len(b.subqueries) {
					for _, o := range b.subqueries[v.ID-1].Outer {
						outside = outside || !produced[o]
					}
				}
			}
			return !outside
		})
		if outside {
			return true
		}
	}
	return false
}
