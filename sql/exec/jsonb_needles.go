package exec

import (
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// jsonbNeedles returns byte strings every row a scan's filter keeps holds
// in its stored values, found from the filter's conjuncts `col @> const`
// (or `const <@ col`) over a jsonb column col of the scan: a jsonb value
// is stored as its text in one canonical form (rowenc, JSON.String), so a
// value containing const holds each of const's strings and object keys
// as its canonical encoding, and the row's stored bytes hold that run
// (rowenc.RowFetcher.SetNeedles skips, undecoded, the rows that do not).
// Numbers (1.0 equals 1), booleans and nulls give none. nil when no
// conjunct qualifies.
//
// It spares the parse of every jsonb value of the rows a containment
// filter rejects, most of the cost of a filter such as the seed's
// `payload @> '{"commits":[{"author":{"email":"test@gmail.com"}}]}'`
// (bench/distsql) when few rows match.
func jsonbNeedles(n *plan.Scan) [][]byte {
	if n.Filter == nil {
		return nil
	}
	scanCol := map[sem.ColumnID]bool{}
	for _, c := range n.Cols {
		scanCol[c.ID] = true
	}
	seen := map[string]bool{}
	var out [][]byte
	for _, e := range splitAnd(n.Filter) {
		b, ok := e.(*sem.BinOp)
		if !ok {
			continue
		}
		col, k := b.Left, b.Right
		switch b.Op {
		case "@>":
		case "<@":
			col, k = b.Right, b.Left
		default:
			continue
		}
		r, ok := col.(*sem.ColRef)
		if !ok || !scanCol[r.ID] || r.T == nil || r.T.Family != types.JSONBFamily {
			continue
		}
		c, ok := k.(*sem.Const)
		if !ok {
			continue
		}
		j, ok := c.Datum.(*types.DJSON)
		if !ok {
			continue
		}
		for _, s := range jsonStrings(j.JSON, nil) {
			needle := types.AppendJSONString(nil, s)
			if !seen[string(needle)] && len(out) < rowenc.MaxNeedles {
				seen[string(needle)] = true
				out = append(out, needle)
			}
		}
	}
	return out
}

// jsonStrings appends the strings and object keys of j, at any depth.
func jsonStrings(j types.JSON, dst []string) []string {
	switch j.Kind {
	case types.JSONString:
		dst = append(dst, j.Str)
	case types.JSONArray:
		for _, e := range j.Elems {
			dst = jsonStrings(e, dst)
		}
	case types.JSONObject:
		for _, p := range j.Pairs {
			dst = append(dst, p.Key)
			dst = jsonStrings(p.Value, dst)
		}
	}
	return dst
}
