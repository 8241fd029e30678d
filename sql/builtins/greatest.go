package builtins

import (
	"github.com/cairn-db/cairn/sql/types"
)

// GREATEST, LEAST, COALESCE and NULLIF are syntax, evaluated by the
// executor, but their typing and the value choice live here so they agree
// with the operators.

// ResolveGreatest returns the type GREATEST/LEAST (what names which, for
// errors) over arguments of the given types yields: Postgres's common type
// (types.CommonType), each argument to be cast to it.
func ResolveGreatest(what string, args []*types.T) (*types.T, error) {
	return types.CommonType(what, args...)
}

// Greatest returns the largest (least: the smallest) non-NULL value of
// args, which share one type; NULL only when all are NULL, as in Postgres.
func Greatest(args []types.Datum, least bool) types.Datum {
	var best types.Datum = types.DNull
	for _, a := range args {
		if types.IsNull(a) {
			continue
		}
		if types.IsNull(best) {
			best = a
			continue
		}
		c := types.Compare(a, best)
		if least && c < 0 || !least && c > 0 {
			best = a
		}
	}
	return best
}
