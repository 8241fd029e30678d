package sem

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/types"
)

// String methods print expressions the way Postgres's EXPLAIN (ruleutils)
// does, so plans read like Postgres's: operators and tests in parentheses,
// casts as (x)::type, constants labelled with their type unless an int4,
// a decimal-looking numeric, a boolean or an untyped literal.

// typeText is a type as expressions print it: built-in types by their
// SQL names, an enum (or an array of one) qualified by its schema, so
// that stored expression text (DEFAULT, CHECK) reads the same whatever
// the search path of the session that binds it (pg_get_expr prints the
// name bare again when the search path finds it, as PostgreSQL does).
func typeText(t *types.T) string {
	e, suffix := t, ""
	if e.Family == types.ArrayFamily && e.Elem != nil {
		e, suffix = e.Elem, "[]"
	}
	if e.Domain != nil && e.Domain.Schema != "" {
		return builtins.QuoteIdent(e.Domain.Schema) + "." + builtins.QuoteIdent(e.Domain.Name) + suffix
	}
	if e.Family == types.EnumFamily && e.Enum != nil && e.Enum.Schema != "" {
		return builtins.QuoteIdent(e.Enum.Schema) + "." + builtins.QuoteIdent(e.Enum.Name) + suffix
	}
	return t.Name()
}

func (e *Const) String() string {
	if types.IsNull(e.Datum) {
		return "NULL::" + typeText(e.T)
	}
	text := types.Format(nil, e.T, e.Datum)
	switch e.T.Family {
	case types.BoolFamily:
		if e.Datum.(types.DBool) {
			return "true"
		}
		return "false"
	case types.UnknownFamily:
		return quote(text)
	case types.IntFamily:
		if e.T.Width == 32 && !strings.HasPrefix(text, "-") {
			return text
		}
	case types.NumericFamily:
		if text != "" && text[0] >= '0' && text[0] <= '9' && strings.ContainsAny(text, ".eE") && e.T.Precision == 0 {
			return text
		}
	}
	return quote(text) + "::" + typeText(e.T)
}

// quote is Postgres's simple_quote_literal: doubled quotes, and an E”
// string when a backslash appears.
func quote(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}

func (e *Param) String() string  { return "$" + strconv.Itoa(e.Index) }
func (e *ColRef) String() string { return e.Name }

func (e *FuncCall) String() string {
	return e.Fn.Overload.Name() + "(" + joinExprs(e.Args, ", ") + ")"
}

func (e *BinOp) String() string {
	return "(" + e.Left.String() + " " + e.Op + " " + e.Right.String() + ")"
}

func (e *UnaryOp) String() string { return "(" + e.Op + " " + e.Arg.String() + ")" }

func (e *Cmp) String() string {
	if e.Op == IsNotDistinctFrom {
		// Postgres has no IS NOT DISTINCT FROM node: it is NOT over IS
		// DISTINCT FROM, and EXPLAIN prints it so.
		return "(NOT (" + e.Left.String() + " IS DISTINCT FROM " + e.Right.String() + "))"
	}
	return "(" + e.Left.String() + " " + string(e.Op) + " " + e.Right.String() + ")"
}

func (e *And) String() string { return "(" + joinExprs(e.Args, " AND ") + ")" }
func (e *Or) String() string  { return "(" + joinExprs(e.Args, " OR ") + ")" }
func (e *Not) String() string { return "(NOT " + e.Arg.String() + ")" }

func (e *IsNull) String() string {
	if e.Negated {
		return "(" + e.Arg.String() + " IS NOT NULL)"
	}
	return "(" + e.Arg.String() + " IS NULL)"
}

func (e *BoolTest) String() string {
	return "(" + e.Arg.String() + " " + boolTestNames[e.Kind] + ")"
}

func (e *Case) String() string {
	var b strings.Builder
	b.WriteString("CASE")
	if e.Operand != nil {
		b.WriteString(" " + e.Operand.String())
	}
	for _, w := range e.Whens {
		b.WriteString(" WHEN " + w.Cond.String() + " THEN " + w.Result.String())
	}
	if e.Else != nil {
		b.WriteString(" ELSE " + e.Else.String())
	}
	b.WriteString(" END")
	return b.String()
}

func (e *Coalesce) String() string { return "COALESCE(" + joinExprs(e.Args, ", ") + ")" }
func (e *NullIf) String() string {
	return "NULLIF(" + e.Left.String() + ", " + e.Right.String() + ")"
}

func (e *MinMax) String() string {
	if e.Greatest {
		return "GREATEST(" + joinExprs(e.Args, ", ") + ")"
	}
	return "LEAST(" + joinExprs(e.Args, ", ") + ")"
}

func (e *Cast) String() string { return "(" + e.Expr.String() + ")::" + typeText(e.To) }

func (e *In) String() string {
	op, q := "=", "ANY"
	if e.Negated {
		op, q = "<>", "ALL"
	}
	return "(" + e.Left.String() + " " + op + " " + q + " (" + listString(e.List, e.Eq.ArgTypes[1]) + "))"
}

// listString prints an IN list as Postgres shows the array it turns it
// into: an array literal when every element is a constant.
func listString(list []Expr, elem *types.T) string {
	ds := make([]types.Datum, 0, len(list))
	for _, e := range list {
		c, ok := e.(*Const)
		if !ok {
			return "ARRAY[" + joinExprs(list, ", ") + "]"
		}
		ds = append(ds, c.Datum)
	}
	at, err := types.MakeArray(elem)
	if err != nil {
		return "ARRAY[" + joinExprs(list, ", ") + "]"
	}
	return (&Const{Datum: types.NewArray(elem, ds...), T: at}).String()
}

func (e *AnyAll) String() string {
	q := "ANY"
	if e.All {
		q = "ALL"
	}
	return "(" + e.Left.String() + " " + string(e.Op) + " " + q + " (" + e.Array.String() + "))"
}

func (e *RowCmp) String() string {
	return "(ROW(" + joinExprs(e.Left, ", ") + ") " + string(e.Op) + " ROW(" + joinExprs(e.Right, ", ") + "))"
}

func (e *ArrayExpr) String() string { return "ARRAY[" + joinExprs(e.Elems, ", ") + "]" }

func (e *RowCons) String() string { return "ROW(" + joinExprs(e.Args, ", ") + ")" }

func (e *FieldSelect) String() string {
	return "(" + e.Arg.String() + ")." + builtins.QuoteIdent(e.Arg.Type().Fields[e.Index].Name)
}

func (e *Subscript) String() string {
	if _, ok := e.Array.(*ColRef); ok {
		return e.Array.String() + "[" + e.Index.String() + "]"
	}
	return "(" + e.Array.String() + ")[" + e.Index.String() + "]"
}

func (e *SubqueryRef) String() string {
	plan := fmt.Sprintf("SubPlan %d", e.ID)
	switch e.Kind {
	case ExistsSubquery:
		return "(EXISTS (" + plan + "))"
	case AnySubquery:
		return "(" + e.Left.String() + " " + string(e.Op) + " ANY (" + plan + "))"
	case AllSubquery:
		return "(" + e.Left.String() + " " + string(e.Op) + " ALL (" + plan + "))"
	case ArraySubquery:
		return "ARRAY(" + plan + ")"
	}
	return "(" + plan + ")"
}

func (e *AggCall) String() string {
	var b strings.Builder
	b.WriteString(e.Name + "(")
	switch {
	case e.Star:
		b.WriteString("*")
	case e.Distinct:
		b.WriteString("DISTINCT " + joinExprs(e.Args, ", "))
	default:
		b.WriteString(joinExprs(e.Args, ", "))
	}
	b.WriteString(")")
	if e.Filter != nil {
		b.WriteString(" FILTER (WHERE " + e.Filter.String() + ")")
	}
	if e.Window {
		b.WriteString(" OVER (?)")
	}
	return b.String()
}

func (e *AggRef) String() string    { return e.Text }
func (e *WindowRef) String() string { return e.Text }
