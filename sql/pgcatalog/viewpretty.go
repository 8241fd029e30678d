package pgcatalog

import (
	"strings"

	"github.com/cairn-db/cairn/sql/builtins"
)

// ViewDefPretty implements builtins.PrettyViewInfo: pg_get_viewdef(oid,
// true), what psql's \d+ prints for a view. It is the plain form with the
// WHERE and HAVING conditions printed by prettyExpr, as PostgreSQL's
// PRETTYFLAG_PAREN prints them; the other clauses keep their parentheses.
func (res *Resolver) ViewDefPretty(oid uint32) (string, bool) {
	s, ok := res.ViewDef(oid)
	if !ok {
		return s, ok
	}
	return prettyViewDef(s), true
}

// prettyViewDef rewrites the WHERE and HAVING lines of a deparsed view
// (ViewDef prints each clause on its own line).
func prettyViewDef(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		for _, kw := range []string{"  WHERE ", " HAVING "} {
			if body, ok := strings.CutPrefix(l, kw); ok {
				body, semi := strings.CutSuffix(body, ";")
				l = kw + prettyExpr(body)
				if semi {
					l += ";"
				}
				lines[i] = l
			}
		}
	}
	return strings.Join(lines, "\n")
}

var _ builtins.PrettyViewInfo = (*Resolver)(nil)
