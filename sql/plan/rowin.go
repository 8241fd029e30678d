package plan

import (
	"fmt"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// rewriteRowIn rewrites the conjuncts of a WHERE, HAVING or ON clause of
// the form (a, b) IN (SELECT x, y ...) into
//
//	EXISTS (SELECT 1 FROM (SELECT x, y ...) AS s(c1, c2) WHERE c1 = a AND c2 = b)
//
// which sem can bind (its IN takes one column). The two differ only when
// IN would be NULL (no equal row, some comparison NULL), where EXISTS is
// false: as a conjunct of a filter both reject the row, so only
// conjuncts are rewritten. It returns cond itself when there is nothing
// to rewrite, else a rewritten copy (the parse tree is never modified).
func rewriteRowIn(cond *pg_query.Node) *pg_query.Node {
	if cond == nil || !hasRowIn(cond) {
		return cond
	}
	cond = proto.Clone(cond).(*pg_query.Node)
	conj := []*pg_query.Node{cond}
	if be := cond.GetBoolExpr(); be != nil && be.Boolop == pg_query.BoolExprType_AND_EXPR {
		conj = be.Args
	}
	for _, c := range conj {
		sl := c.GetSubLink()
		if !isRowIn(sl) {
			continue
		}
		row := sl.Testexpr.GetRowExpr()
		var aliases, eqs []*pg_query.Node
		for i, a := range row.Args {
			name := fmt.Sprintf("?column%d?", i+1) // no user column can be named so unquoted
			aliases = append(aliases, pg_query.MakeStrNode(name))
			eqs = append(eqs, pg_query.MakeAExprNode(pg_query.A_Expr_Kind_AEXPR_OP,
				[]*pg_query.Node{pg_query.MakeStrNode("=")},
				pg_query.MakeColumnRefNode([]*pg_query.Node{pg_query.MakeStrNode(name)}, sl.Location), a, sl.Location))
		}
		where := eqs[0]
		if len(eqs) > 1 {
			where = pg_query.MakeBoolExprNode(pg_query.BoolExprType_AND_EXPR, eqs, sl.Location)
		}
		sub := &pg_query.SelectStmt{
			TargetList: []*pg_query.Node{pg_query.MakeResTargetNodeWithVal(pg_query.MakeAConstIntNode(1, sl.Location), sl.Location)},
			FromClause: []*pg_query.Node{{Node: &pg_query.Node_RangeSubselect{RangeSubselect: &pg_query.RangeSubselect{
				Subquery: sl.Subselect,
				Alias:    &pg_query.Alias{Aliasname: "ANY_subquery", Colnames: aliases},
			}}}},
			WhereClause: where,
		}
		c.Node = &pg_query.Node_SubLink{SubLink: &pg_query.SubLink{
			SubLinkType: pg_query.SubLinkType_EXISTS_SUBLINK,
			Subselect:   &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sub}},
			Location:    sl.Location,
		}}
	}
	return cond
}

// isRowIn: (a, b, ...) IN (SELECT ...), i.e. = ANY with a row on the left.
func isRowIn(sl *pg_query.SubLink) bool {
	if sl == nil || sl.SubLinkType != pg_query.SubLinkType_ANY_SUBLINK || sl.Testexpr.GetRowExpr() == nil {
		return false
	}
	if len(sl.OperName) > 0 && strVal(sl.OperName[len(sl.OperName)-1]) != "=" {
		return false
	}
	return len(sl.Testexpr.GetRowExpr().Args) > 1
}

func hasRowIn(cond *pg_query.Node) bool {
	conj := []*pg_query.Node{cond}
	if be := cond.GetBoolExpr(); be != nil && be.Boolop == pg_query.BoolExprType_AND_EXPR {
		conj = be.Args
	}
	for _, c := range conj {
		if isRowIn(c.GetSubLink()) {
			return true
		}
	}
	return false
}
