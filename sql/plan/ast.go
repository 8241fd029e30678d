package plan

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/parser"
)

// walkAST visits every Node below m in field declaration order (the
// order sem.Build evaluates them in), pre-order; visit returning false
// skips a node's children.
func walkAST(n *pg_query.Node, visit func(*pg_query.Node) bool) { parser.WalkAST(n, visit) }

// callsIn returns the function calls of an expression's AST in pre-order,
// not looking into subqueries: windows are those with OVER, aggs the
// aggregate calls without one. sem.Build's AggCalls come out of sem.Map in
// the same left-to-right order, which pairs each with its AST (for OVER
// and an aggregate's ORDER BY, which AggCall does not carry).
func callsIn(n *pg_query.Node) (aggs, windows []*pg_query.FuncCall) {
	walkAST(n, func(x *pg_query.Node) bool {
		switch v := x.Node.(type) {
		case *pg_query.Node_SubLink:
			return false
		case *pg_query.Node_FuncCall:
			fc := v.FuncCall
			if fc.Over != nil {
				windows = append(windows, fc)
			} else if isAggName(funcName(fc)) {
				aggs = append(aggs, fc)
			}
		}
		return true
	})
	return aggs, windows
}

func funcName(fc *pg_query.FuncCall) string {
	if len(fc.Funcname) == 0 {
		return ""
	}
	return strVal(fc.Funcname[len(fc.Funcname)-1])
}

func isAggName(name string) bool {
	ovs := builtins.Lookup(name)
	for _, o := range ovs {
		if o.Class != builtins.AggregateClass {
			return false
		}
	}
	return len(ovs) > 0
}

func isGeneratorName(name string) bool {
	ovs := builtins.Lookup(name)
	for _, o := range ovs {
		if o.Class == builtins.Generator {
			return true
		}
	}
	return false
}
