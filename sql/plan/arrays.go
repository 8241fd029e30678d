package plan

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// expandMultiUnnest rewrites unnest(a, b, ...) in FROM into ROWS
// FROM(unnest(a), unnest(b), ...), which is what PostgreSQL defines it as
// (only in FROM: in a select list, unnest takes one array): the arrays are
// zipped, the shorter ones padded with NULLs, one column each. rf itself is
// not modified (parse trees are shared through the statement cache).
func expandMultiUnnest(rf *pg_query.RangeFunction) *pg_query.RangeFunction {
	var out []*pg_query.Node
	changed := false
	for _, fn := range rf.Functions {
		items := fn.GetList().GetItems()
		var fc *pg_query.FuncCall
		if len(items) > 0 {
			fc = items[0].GetFuncCall()
		}
		if fc == nil || len(fc.Args) < 2 || funcName(fc) != "unnest" || fc.AggStar || fc.AggDistinct ||
			fc.FuncVariadic || len(fc.AggOrder) > 0 || fc.Over != nil || fc.AggFilter != nil {
			out = append(out, fn)
			continue
		}
		changed = true
		for _, a := range fc.Args {
			one := &pg_query.FuncCall{Funcname: fc.Funcname, Args: []*pg_query.Node{a}, Location: fc.Location,
				Funcformat: fc.Funcformat}
			list := []*pg_query.Node{{Node: &pg_query.Node_FuncCall{FuncCall: one}}}
			list = append(list, items[1:]...)
			out = append(out, &pg_query.Node{Node: &pg_query.Node_List{List: &pg_query.List{Items: list}}})
		}
	}
	if !changed {
		return rf
	}
	return &pg_query.RangeFunction{Lateral: rf.Lateral, Ordinality: rf.Ordinality, IsRowsfrom: true,
		Functions: out, Alias: rf.Alias, Coldeflist: rf.Coldeflist}
}
