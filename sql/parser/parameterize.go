package parser

import (
	"math"
	"slices"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	pgparser "github.com/pganalyze/pg_query_go/v6/parser"
	"google.golang.org/protobuf/encoding/protowire"
)

// Literal is a constant Parameterize took out of a statement: an integer
// (IsInt) or the text of a plain quoted string.
type Literal struct {
	IsInt bool
	Int   int64
	Str   string
	// Pos is the constant's byte offset in the query string (at the minus
	// sign of a negative number).
	Pos int
}

// Parameterize returns, for a statement of one of the shapes below whose
// constants are integers or plain quoted strings, the statement's text
// with each such constant replaced by $1, $2, ... in order of position,
// and the constants in that order:
//
//   - a SELECT, or a DELETE without USING, whose WHERE clause is only
//     `column = constant` comparisons joined by AND;
//   - an UPDATE without FROM whose WHERE is the same, and whose SET
//     constants (each taken only when it is a SET value itself, or, an
//     integer, one operand of +, - or * whose other operand is a column)
//     are parameterized with the WHERE's;
//   - an INSERT of one VALUES row (no ON CONFLICT, no WITH), whose items
//     that are constants are parameterized.
//
// Two statements that differ only in those constants give the same text,
// which the session uses to find a plan made for the parameterized form
// (sql/session/plancache.go); whether that plan may stand for the
// statement (a quoted string is an unknown-typed literal, exactly like an
// untyped parameter; an integer literal is int4, which the session
// checks) is the caller's business. A constant in any other place stays
// in the text. Every constant parameterized is one whose parameter takes
// its type from a column (compared with it, assigned to it, or added to
// it), which is why only those places are: `$1 + $2` would infer a type
// the literals do not have. ok is false for any other statement, or text
// with a $ in it (a parameter or dollar quote).
func (s *Statement) Parameterize() (string, []Literal, bool) {
	if s.rw == nil || s.AST == nil {
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
	var consts []*pg_query.A_Const
	switch st := s.AST.GetStmt().GetNode().(type) {
	case *pg_query.Node_SelectStmt:
		sel := st.SelectStmt
		if sel.WhereClause == nil || sel.WithClause != nil || sel.IntoClause != nil || sel.Op != pg_query.SetOperation_SETOP_NONE {
			return "", nil, false
		}
		var ok bool
		if consts, ok = whereConsts(sel.WhereClause, nil); !ok {
			return "", nil, false
		}
	case *pg_query.Node_DeleteStmt:
		del := st.DeleteStmt
		if del.WhereClause == nil || del.WithClause != nil || len(del.UsingClause) > 0 {
			return "", nil, false
		}
		var ok bool
		if consts, ok = whereConsts(del.WhereClause, nil); !ok {
			return "", nil, false
		}
	case *pg_query.Node_UpdateStmt:
		up := st.UpdateStmt
		if up.WhereClause == nil || up.WithClause != nil || len(up.FromClause) > 0 {
			return "", nil, false
		}
		var ok bool
		if consts, ok = whereConsts(up.WhereClause, nil); !ok {
			return "", nil, false
		}
		for _, t := range up.TargetList {
			if len(t.GetResTarget().GetIndirection()) > 0 {
				// SET a[1] = ..., SET c.f = ...: the value's type is an
				// element's or a field's; left in the text.
				continue
			}
			if k := setConst(t.GetResTarget().GetVal()); k != nil && plainConst(text, k) {
				consts = append(consts, k)
			}
		}
	case *pg_query.Node_InsertStmt:
		ins := st.InsertStmt
		sel := ins.SelectStmt.GetSelectStmt()
		if ins.WithClause != nil || ins.OnConflictClause != nil || sel == nil || len(sel.ValuesLists) != 1 {
			return "", nil, false
		}
		for _, c := range ins.Cols {
			if len(c.GetResTarget().GetIndirection()) > 0 {
				return "", nil, false // INSERT INTO t (a[1]) ...: as SET a[1]
			}
		}
		for _, item := range sel.ValuesLists[0].GetList().GetItems() {
			if k := item.GetAConst(); k != nil && plainConst(text, k) {
				consts = append(consts, k)
			}
		}
		if len(consts) == 0 {
			return "", nil, false
		}
	default:
		return "", nil, false
	}
	type cut struct {
		from, to int
		lit      Literal
	}
	var cuts []cut
	for _, k := range consts {
		lit, n, ok := literalAt(text, int(k.Location), k)
		if !ok || int(k.Location) < from || int(k.Location)+n > end {
			return "", nil, false
		}
		lit.Pos = int(k.Location)
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

// whereConsts appends to out the constant of each conjunct of where, a
// conjunction of `column = constant` (either way round); ok is false for
// any other WHERE.
func whereConsts(where *pg_query.Node, out []*pg_query.A_Const) ([]*pg_query.A_Const, bool) {
	conds := []*pg_query.Node{where}
	if b := where.GetBoolExpr(); b != nil {
		if b.Boolop != pg_query.BoolExprType_AND_EXPR {
			return nil, false
		}
		conds = b.Args
	}
	for _, c := range conds {
		e := c.GetAExpr()
		if e == nil || e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Name[0].GetString_().GetSval() != "=" {
			return nil, false
		}
		k := e.Rexpr.GetAConst()
		if e.Lexpr.GetColumnRef() == nil || k == nil {
			k = e.Lexpr.GetAConst()
			if e.Rexpr.GetColumnRef() == nil || k == nil {
				return nil, false
			}
		}
		out = append(out, k)
	}
	return out, true
}

// setConst returns the constant of an UPDATE's SET value v that may be a
// parameter: v itself, or the integer operand of `column op constant` or
// `constant op column` for op +, - or * (pgbench's `abalance = abalance
// + 123`), whose parameter takes the column's type as the literal would
// meet it. nil: none.
func setConst(v *pg_query.Node) *pg_query.A_Const {
	if k := v.GetAConst(); k != nil {
		return k
	}
	e := v.GetAExpr()
	if e == nil || e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Lexpr == nil || e.Rexpr == nil {
		return nil
	}
	switch e.Name[0].GetString_().GetSval() {
	case "+", "-", "*":
	default:
		return nil
	}
	k := e.Rexpr.GetAConst()
	if e.Lexpr.GetColumnRef() == nil || k == nil {
		k = e.Lexpr.GetAConst()
		if e.Rexpr.GetColumnRef() == nil || k == nil {
			return nil
		}
	}
	if _, ok := k.Val.(*pg_query.A_Const_Ival); !ok {
		return nil
	}
	return k
}

// plainConst reports whether k is a constant Parameterize takes out (an
// integer or a plain quoted string; not NULL, a boolean, a number with a
// fraction or an escape string), which in SET and VALUES may otherwise stay
// in the text.
func plainConst(text string, k *pg_query.A_Const) bool {
	_, _, ok := literalAt(text, int(k.Location), k)
	return ok
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

// ScanConst is a constant token of a query string, as Shape found it.
type ScanConst struct {
	Start, End int // byte offsets of the token
	// Neg: the token follows a minus sign (at NegPos), which a constant
	// of the grammar may include.
	Neg    bool
	NegPos int
	IsInt  bool
	Int    int64
	Str    string
}

// Shape scans (never parses) a query string with PostgreSQL's own
// scanner and returns its token sequence with the integer and plain
// quoted string constants left out, and those constants. Two strings of
// the same shape differ only in those constants, and the grammar, which
// sees token kinds and never the value of a constant, parses them into
// the same tree but for the constants' values. ok is false for text with
// comments or other constant tokens (E-strings, numbers with a fraction or out
// of int4's range, bit strings, dollar quotes, parameters).
func Shape(sql string) (string, []ScanConst, bool) {
	key, consts, ok := AppendShape(nil, nil, sql)
	return string(key), consts, ok
}

// AppendShape is Shape appending the shape's key to key and its
// constants to consts, so that a caller that keeps both from one query
// to the next scans a query without allocating (a Query of pgbench's
// select-only made three objects for its shape). On false, what it
// appended is to be ignored.
func AppendShape(key []byte, consts []ScanConst, sql string) ([]byte, []ScanConst, bool) {
	var buf [32]scanToken
	toks, ok := quickTokens(sql, buf[:0])
	if !ok {
		if toks, ok = scanTokens(sql); !ok {
			return key, consts, false
		}
	}
	return appendShapeOfTokens(key, consts, sql, toks)
}

// shapeOfTokens is Shape given sql's tokens.
func shapeOfTokens(sql string, toks []scanToken) (string, []ScanConst, bool) {
	key, consts, ok := appendShapeOfTokens(nil, nil, sql, toks)
	return string(key), consts, ok
}

// appendShapeOfTokens is AppendShape given sql's tokens.
func appendShapeOfTokens(b []byte, consts []ScanConst, sql string, toks []scanToken) ([]byte, []ScanConst, bool) {
	b = slices.Grow(b, len(sql)+8)
	prevMinus := -1
	for _, t := range toks {
		start, end := t.start, t.end
		if start < 0 || end > len(sql) || start >= end {
			return b, consts, false
		}
		text := sql[start:end]
		switch t.kind {
		case pg_query.Token_SQL_COMMENT, pg_query.Token_C_COMMENT, pg_query.Token_PARAM,
			pg_query.Token_FCONST, pg_query.Token_BCONST, pg_query.Token_XCONST, pg_query.Token_USCONST:
			return b, consts, false
		case pg_query.Token_ICONST:
			v, err := strconv.ParseInt(text, 10, 64)
			if err != nil || v > math.MaxInt32 {
				return b, consts, false
			}
			c := ScanConst{Start: start, End: end, IsInt: true, Int: v}
			if prevMinus >= 0 {
				c.Neg, c.NegPos = true, prevMinus
			}
			consts = append(consts, c)
			b = append(b, " #i"...)
			prevMinus = -1
			continue
		case pg_query.Token_SCONST:
			if len(text) < 2 || text[0] != '\'' || text[len(text)-1] != '\'' {
				return b, consts, false
			}
			inner := text[1 : len(text)-1]
			if strings.Contains(strings.ReplaceAll(inner, "''", ""), "'") {
				return b, consts, false // 'a' 'b' continued across a newline
			}
			consts = append(consts, ScanConst{Start: start, End: end, Str: strings.ReplaceAll(inner, "''", "'")})
			b = append(b, " #s"...)
			prevMinus = -1
			continue
		}
		if text == "-" {
			prevMinus = start
		} else {
			prevMinus = -1
		}
		b = append(b, ' ')
		b = append(b, text...)
	}
	return b, consts, true
}

// scanToken is one token of scanTokens.
type scanToken struct {
	start, end int
	kind       pg_query.Token
}

// scanTokens runs PostgreSQL's scanner over sql and decodes the tokens
// from its protobuf answer directly (field numbers of pg_query.proto's
// ScanResult and ScanToken): decoding through pg_query.Scan's generated
// messages cost more than the scan itself.
func scanTokens(sql string) ([]scanToken, bool) {
	b, err := pgparser.ScanToProtobuf(sql)
	if err != nil {
		return nil, false
	}
	toks := make([]scanToken, 0, 16)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		if num != 2 || typ != protowire.BytesType { // ScanResult.tokens
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, false
			}
			b = b[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		var t scanToken
		for len(msg) > 0 {
			num, typ, n := protowire.ConsumeTag(msg)
			if n < 0 {
				return nil, false
			}
			msg = msg[n:]
			if typ != protowire.VarintType {
				if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
					return nil, false
				}
				msg = msg[n:]
				continue
			}
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return nil, false
			}
			msg = msg[n:]
			switch num {
			case 1:
				t.start = int(int32(v))
			case 2:
				t.end = int(int32(v))
			case 4:
				t.kind = pg_query.Token(v)
			}
		}
		toks = append(toks, t)
	}
	return toks, true
}
