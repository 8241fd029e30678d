package plan

import (
	"context"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// ViewDef prints view v's query as PostgreSQL 15's pg_get_viewdef(oid)
// does (ruleutils with PRETTYFLAG_INDENT, wrap column 0): one output
// column per line, every column qualified by its relation, expressions
// deparsed as EXPLAIN prints them (sem's String, checked against
// PostgreSQL's), the clauses on lines of their own, a final semicolon.
//
//	SELECT emp.id,
//	   emp.name AS who
//	  FROM emp
//	 WHERE (emp.dept = 'eng'::text);
//
// Queries it does not deparse (subqueries or functions in FROM, set
// operations, WITH, windows, locking) print as the stored text, which
// means the same.
func ViewDef(ctx context.Context, cat Catalog, tctx *types.Context, v *catalog.View) string {
	fallback := v.Query + ";"
	stmts, err := parseCached(v.Query)
	if err != nil || len(stmts) != 1 || stmts[0].AST.Stmt.GetSelectStmt() == nil {
		return fallback
	}
	ss := stmts[0].AST.Stmt.GetSelectStmt()
	if ss.Op != pg_query.SetOperation_SETOP_NONE || ss.WithClause != nil || len(ss.ValuesLists) > 0 ||
		len(ss.WindowClause) > 0 || len(ss.LockingClause) > 0 || ss.IntoClause != nil || len(ss.FromClause) == 0 {
		return fallback
	}
	for _, f := range ss.FromClause {
		if !deparsableFrom(f) {
			return fallback
		}
	}
	for _, n := range append(append([]*pg_query.Node{ss.WhereClause, ss.HavingClause}, ss.TargetList...), ss.GroupClause...) {
		unsupported := false
		walkAST(n, func(x *pg_query.Node) bool {
			switch v := x.Node.(type) {
			case *pg_query.Node_SubLink, *pg_query.Node_GroupingSet:
				unsupported = true
			case *pg_query.Node_FuncCall:
				unsupported = unsupported || v.FuncCall.Over != nil || isGeneratorName(funcName(v.FuncCall))
			}
			return !unsupported
		})
		if unsupported {
			return fallback
		}
	}
	b := &builder{ctx: ctx, env: &Env{Catalog: cat, Types: tctx, Params: sem.NewParamTypes()}, stmt: &stmts[0],
		hasCollate: strings.Contains(strings.ToUpper(v.Query), "COLLATE")}
	out, err := b.viewDef(ss, v)
	if err != nil {
		return fallback
	}
	return out
}

func (b *builder) viewDef(ss *pg_query.SelectStmt, v *catalog.View) (string, error) {
	s := &scope{b: b}
	if _, err := b.buildFrom(ss.FromClause, s); err != nil {
		return "", err
	}
	// The view's rule has OLD and NEW entries besides FROM's, so
	// ruleutils always qualifies.
	s.qualify = true
	var sb strings.Builder
	sb.WriteString(" SELECT ")
	if len(ss.DistinctClause) > 0 {
		if ss.DistinctClause[0] != nil && ss.DistinctClause[0].Node != nil {
			return "", notSupported("DISTINCT ON")
		}
		sb.WriteString("DISTINCT ")
	}
	var targets []*target
	for _, tn := range ss.TargetList {
		ts, err := b.bindTarget(s, tn.GetResTarget())
		if err != nil {
			return "", err
		}
		targets = append(targets, ts...)
	}
	for i, t := range targets {
		if i > 0 {
			sb.WriteString(",\n    ")
		}
		sb.WriteString(t.e.String())
		name := t.name
		if i < len(v.Columns) {
			name = v.Columns[i].Name
		}
		// A column keeps its own name; anything else is named.
		natural := ""
		if cr, ok := t.e.(*sem.ColRef); ok {
			if c, found, _ := findByID(s, cr.ID); found {
				natural = c.name
			}
		}
		if natural != name {
			sb.WriteString(" AS " + quoteIdentIfNeeded(name))
		}
	}
	sb.WriteString("\n   FROM ")
	for i, f := range ss.FromClause {
		if i > 0 {
			sb.WriteString(",\n    ")
		}
		if err := b.viewDefFrom(&sb, s, f); err != nil {
			return "", err
		}
	}
	if ss.WhereClause != nil {
		w, err := b.expr(s, "WHERE", ss.WhereClause, types.Bool)
		if err != nil {
			return "", err
		}
		sb.WriteString("\n  WHERE " + w.String())
	}
	if len(ss.GroupClause) > 0 {
		sb.WriteString("\n  GROUP BY ")
		for i, g := range ss.GroupClause {
			e, err := b.groupItem(s, g, targets)
			if err != nil {
				return "", err
			}
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(e.String())
		}
	}
	if ss.HavingClause != nil {
		bc := b.semCtx(s, "HAVING")
		bc.AllowAggregates = true
		h, err := b.semBuild(bc, ss.HavingClause, types.Bool)
		if err != nil {
			return "", err
		}
		sb.WriteString("\n HAVING " + h.String())
	}
	if len(ss.SortClause) > 0 {
		sb.WriteString("\n  ORDER BY ")
		for i, it := range ss.SortClause {
			sbn := it.GetSortBy()
			var e sem.Expr
			if k, ok := ordinal(sbn.Node); ok && k >= 1 && k <= len(targets) {
				e = targets[k-1].e
			} else {
				bc := b.semCtx(s, "ORDER BY")
				bc.AllowAggregates = true
				var err error
				if e, err = b.semBuild(bc, sbn.Node, nil); err != nil {
					return "", err
				}
			}
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(e.String())
			switch sbn.SortbyDir {
			case pg_query.SortByDir_SORTBY_DESC:
				sb.WriteString(" DESC")
				if sbn.SortbyNulls == pg_query.SortByNulls_SORTBY_NULLS_LAST {
					sb.WriteString(" NULLS LAST")
				}
			default:
				if sbn.SortbyNulls == pg_query.SortByNulls_SORTBY_NULLS_FIRST {
					sb.WriteString(" NULLS FIRST")
				}
			}
		}
	}
	for _, l := range []struct {
		kw string
		n  *pg_query.Node
	}{{"OFFSET", ss.LimitOffset}, {"LIMIT", ss.LimitCount}} {
		if l.n == nil {
			continue
		}
		c := l.n.GetAConst()
		if c == nil || c.GetIval() == nil {
			if c != nil && c.Isnull && l.kw == "LIMIT" {
				sb.WriteString("\n LIMIT ALL")
				continue
			}
			return "", notSupported("LIMIT expression")
		}
		sb.WriteString("\n " + l.kw + " " + strconv.Itoa(int(c.GetIval().Ival)))
	}
	sb.WriteString(";")
	return sb.String(), nil
}

// deparsableFrom: tables and views, and joins of them.
func deparsableFrom(n *pg_query.Node) bool {
	if n.GetRangeVar() != nil {
		return true
	}
	if j := n.GetJoinExpr(); j != nil && j.Alias == nil {
		return deparsableFrom(j.Larg) && deparsableFrom(j.Rarg)
	}
	return false
}

// relationVisible reports whether rv's unqualified name finds the same
// relation in the search path, in which case ruleutils prints it bare.
func (b *builder) relationVisible(rv *pg_query.RangeVar) bool {
	want, err := b.env.Catalog.LookupRelation(b.ctx, rv.Schemaname, rv.Relname)
	if err != nil {
		return false
	}
	got, err := b.env.Catalog.LookupRelation(b.ctx, "", rv.Relname)
	if err != nil {
		return false
	}
	id := func(r Relation) catalog.ID {
		switch {
		case r.Table != nil:
			return r.Table.ID
		case r.View != nil:
			return r.View.ID
		case r.Sequence != nil:
			return r.Sequence.ID
		}
		return 0
	}
	return id(want) != 0 && id(want) == id(got)
}

// viewDefFrom prints one FROM item as ruleutils does: a join in
// parentheses, its right side on a new line.
func (b *builder) viewDefFrom(sb *strings.Builder, s *scope, n *pg_query.Node) error {
	if rv := n.GetRangeVar(); rv != nil {
		if rv.Schemaname != "" && !b.relationVisible(rv) {
			sb.WriteString(quoteIdentIfNeeded(rv.Schemaname) + ".")
		}
		sb.WriteString(quoteIdentIfNeeded(rv.Relname))
		if rv.Alias != nil && rv.Alias.Aliasname != rv.Relname {
			sb.WriteString(" " + quoteIdentIfNeeded(rv.Alias.Aliasname))
		}
		return nil
	}
	j := n.GetJoinExpr()
	sb.WriteString("(")
	if err := b.viewDefFrom(sb, s, j.Larg); err != nil {
		return err
	}
	kw := map[pg_query.JoinType]string{pg_query.JoinType_JOIN_INNER: "JOIN", pg_query.JoinType_JOIN_LEFT: "LEFT JOIN",
		pg_query.JoinType_JOIN_RIGHT: "RIGHT JOIN", pg_query.JoinType_JOIN_FULL: "FULL JOIN"}[j.Jointype]
	if kw == "" {
		return notSupported("join type %v", j.Jointype)
	}
	if j.IsNatural {
		kw = "NATURAL " + kw
	} else if j.Quals == nil && len(j.UsingClause) == 0 && j.Jointype == pg_query.JoinType_JOIN_INNER {
		kw = "CROSS JOIN"
	}
	sb.WriteString("\n     " + kw + " ")
	if err := b.viewDefFrom(sb, s, j.Rarg); err != nil {
		return err
	}
	switch {
	case len(j.UsingClause) > 0:
		var names []string
		for _, u := range j.UsingClause {
			names = append(names, quoteIdentIfNeeded(strVal(u)))
		}
		sb.WriteString(" USING (" + strings.Join(names, ", ") + ")")
	case j.Quals != nil:
		q, err := b.expr(s, "JOIN/ON", j.Quals, types.Bool)
		if err != nil {
			return err
		}
		sb.WriteString(" ON (" + q.String() + ")")
	}
	sb.WriteString(")")
	return nil
}
