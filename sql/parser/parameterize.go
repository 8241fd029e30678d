package parser

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Literal is a constant Parameterize took out of a statement: an integer
// (IsInt) or the text of a plain quoted string.
type Literal struct {
	IsInt bool
	Int   int64
	Str   string
}

// Parameterize returns, for a SELECT whose WHERE clause is only `column
// = constant` comparisons joined by AND, the constants being integers or
// plain quoted strings, the statement's text with each such constant
// replaced by $1, $2, ... in order of position, and the constants in that
// order. Two statements that differ only in those constants give the same
// text, which the session uses to find a plan made for the parameterized
// form (sql/session/plancache.go); whether that plan may stand for the
// statement (a quoted string is an unknown-typed literal, exactly like an
// untyped parameter; an integer literal is int4, which the session
// checks) is the caller's business. ok is false for any other statement,
// or text with a $ in it (a parameter or dollar quote).
func (s *Statement) Parameterize() (string, []Literal, bool) {
	if s.rw == nil || s.AST == nil {
		return "", nil, false
	}
	sel := s.AST.GetStmt().GetSelectStmt()
	if sel == nil || sel.WhereClause == nil || sel.WithClause != nil || sel.Op != pg_query.SetOperation_SETOP_NONE {
		return "", nil, false
	}
	text := s.rw.text
	from := int(s.AST.StmtLocation)
	end := len(text)
	if s.AST.StmtLen > 0 {
		end = from + int(s.AST.StmtLen)
	}
	if from < 0 || end > len(text) || from > end || strings.IndexByte(text[from:end], '$') >= 0 {
		return "", nil, false
	}
	var conds []*pg_query.Node
	if b := sel.WhereClause.GetBoolExpr(); b != nil {
		if b.Boolop != pg_query.BoolExprType_AND_EXPR {
			return "", nil, false
		}
		conds = b.Args
	} else {
		conds = []*pg_query.Node{sel.WhereClause}
	}
	type cut struct {
		from, to int
		lit      Literal
	}
	var cuts []cut
	for _, c := range conds {
		e := c.GetAExpr()
		if e == nil || e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Name[0].GetString_().GetSval() != "=" {
			return "", nil, false
		}
		k := e.Rexpr.GetAConst()
		if e.Lexpr.GetColumnRef() == nil || k == nil {
			k = e.Lexpr.GetAConst()
			if e.Rexpr.GetColumnRef() == nil || k == nil {
				return "", nil, false
			}
		}
		lit, n, ok := literalAt(text, int(k.Location), k)
		if !ok || int(k.Location) < from || int(k.Location)+n > end {
			return "", nil, false
		}
		cuts = append(cuts, cut{int(k.Location), int(k.Location) + n, lit})
	}
	// In position order, so $1 is the leftmost.
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j].from < cuts[j-1].from; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	var b strings.Builder
	lits := make([]Literal, len(cuts))
	pos := from
	for i, c := range cuts {
		if c.from < pos {
			return "", nil, false
		}
		b.WriteString(text[pos:c.from])
		b.WriteByte('$')
		b.WriteString(itoa(i + 1))
		pos = c.to
		lits[i] = c.lit
	}
	b.WriteString(text[pos:end])
	return strings.TrimSpace(b.String()), lits, true
}

// literalAt checks that the text at pos spells the constant k, an
// integer (an optional minus sign, blanks, digits) or a plain quoted
// string (quotes, a doubled quote standing for one), and returns it with
// its length.
func literalAt(text string, pos int, k *pg_query.A_Const) (Literal, int, bool) {
	if k.Isnull || pos < 0 || pos >= len(text) {
		return Literal{}, 0, false
	}
	switch v := k.Val.(type) {
	case *pg_query.A_Const_Ival:
		i := pos
		if text[i] == '-' {
			i++
			for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r') {
				i++
			}
		}
		start := i
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			i++
		}
		if i == start || (i < len(text) && isIdentChar(text[i])) {
			return Literal{}, 0, false
		}
		return Literal{IsInt: true, Int: int64(v.Ival.GetIval())}, i - pos, true
	case *pg_query.A_Const_Sval:
		if text[pos] != '\'' {
			return Literal{}, 0, false // E'', U&'', N'' and friends
		}
		var b strings.Builder
		for i := pos + 1; i < len(text); i++ {
			if text[i] != '\'' {
				b.WriteByte(text[i])
				continue
			}
			if i+1 < len(text) && text[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			// The grammar joins 'a' 'b' across a newline into one
			// constant: the text must be all of it.
			if b.String() != v.Sval.GetSval() {
				return Literal{}, 0, false
			}
			return Literal{Str: b.String()}, i + 1 - pos, true
		}
	}
	return Literal{}, 0, false
}

func isIdentChar(c byte) bool {
	return c == '_' || c == '.' || c == '$' || c >= 0x80 || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
