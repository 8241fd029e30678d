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
//	to_json(ROW(a, b))     → row_to_json('f1', a, 'f2', b)
//	row_to_json(ROW(a, b)) → row_to_json('f1', a, 'f2', b)
//
// where row_to_json(VARIADIC any), over names and values, prints the
// fields as PostgreSQL's row_to_json prints a record, {"f1":a,"f2":b}. Any other call
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
	// The keys are the row's column names when the binder expanded a
	// whole-row reference (to_json(t)), else f1, f2, ... as PostgreSQL
	// names an anonymous record's fields.
	key := func(i int) *pg_query.Node {
		k := "f" + strconv.Itoa(i+1)
		if len(row.Colnames) == len(row.Args) {
			if s := row.Colnames[i].GetString_(); s != nil {
				k = s.Sval
			}
		}
		return pg_query.MakeAConstStrNode(k, row.Location)
	}
	var out *pg_query.FuncCall
	switch name {
	case "to_jsonb":
		out = &pg_query.FuncCall{Funcname: []*pg_query.Node{pg_query.MakeStrNode("jsonb_build_object")}}
		for i, a := range row.Args {
			out.Args = append(out.Args, key(i), field("to_jsonb", a))
		}
	case "to_json", "row_to_json":
		out = &pg_query.FuncCall{Funcname: []*pg_query.Node{pg_query.MakeStrNode("row_to_json")}}
		for i, a := range row.Args {
			out.Args = append(out.Args, key(i), field("row_to_json", a))
		}
	default:
		return fc
	}
	out.Location, out.Funcformat = fc.Location, fc.Funcformat
	return out
}
