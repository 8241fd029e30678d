package sem

import (
	"strconv"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Cairn has no composite (row) type. The one place a ROW(...) constructor
// is common outside comparisons is turning it into JSON, which needs only
// its fields: rowToJSONCall rewrites
//
//	to_jsonb(ROW(a, b))    → jsonb_build_object('f1', a, 'f2', b)
//	to_json(ROW(a, b))     → row_to_json(a, b)
//	row_to_json(ROW(a, b)) → row_to_json(a, b)
//
// where row_to_json(VARIADIC any) prints the fields as PostgreSQL's
// row_to_json prints an anonymous record, {"f1":a,"f2":b}. Any other call
// is returned unchanged; the parse tree is never modified.
func rowToJSONCall(fc *pg_query.FuncCall) *pg_query.FuncCall {
	if len(fc.Args) != 1 || fc.AggStar || fc.AggDistinct || fc.FuncVariadic || fc.Over != nil ||
		len(fc.AggOrder) > 0 || fc.AggFilter != nil {
		return fc
	}
	row := fc.Args[0].GetRowExpr()
	if row == nil || len(row.Args) == 0 {
		return fc
	}
	name := opName(fc.Funcname)
	// A field that is itself a ROW(...) becomes a nested object: the same
	// function applied to it, rewritten in turn when it is built.
	field := func(fn string, a *pg_query.Node) *pg_query.Node {
		if a.GetRowExpr() == nil {
			return a
		}
		return &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: &pg_query.FuncCall{
			Funcname: []*pg_query.Node{pg_query.MakeStrNode(fn)}, Args: []*pg_query.Node{a},
			Location: location(a), Funcformat: fc.Funcformat}}}
	}
	var out *pg_query.FuncCall
	switch name {
	case "to_jsonb":
		out = &pg_query.FuncCall{Funcname: []*pg_query.Node{pg_query.MakeStrNode("jsonb_build_object")}}
		for i, a := range row.Args {
			key := pg_query.MakeAConstStrNode("f"+strconv.Itoa(i+1), row.Location)
			out.Args = append(out.Args, key, field("to_jsonb", a))
		}
	case "to_json", "row_to_json":
		out = &pg_query.FuncCall{Funcname: []*pg_query.Node{pg_query.MakeStrNode("row_to_json")}}
		for _, a := range row.Args {
			out.Args = append(out.Args, field("row_to_json", a))
		}
	default:
		return fc
	}
	out.Location, out.Funcformat = fc.Location, fc.Funcformat
	return out
}
