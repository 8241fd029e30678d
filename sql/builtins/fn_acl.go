package builtins

import (
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// acldefault(objtype, owner) is the ACL an object of the kind has while
// its catalog row's ACL column is NULL: what pg_dump compares the real ACL
// with to decide which GRANTs and REVOKEs to dump. Cairn's catalogs show
// aclitem[] as text[] (see sql/pgcatalog), so this returns text[] in
// PostgreSQL 15's aclitem text form.
var aclDefaults = map[string]struct{ owner, public string }{
	"c": {"", ""},        // column: none beyond the table's
	"r": {"arwdDxt", ""}, // relation
	"s": {"rwU", ""},     // sequence
	"d": {"CTc", "Tc"},   // database
	"f": {"X", "X"},      // function
	"l": {"U", "U"},      // language
	"L": {"rw", ""},      // large object
	"n": {"UC", ""},      // schema
	"t": {"C", ""},       // tablespace
	"F": {"U", ""},       // foreign data wrapper
	"S": {"U", ""},       // foreign server
	"T": {"U", "U"},      // type
	"p": {"sA", ""},      // parameter (PostgreSQL 15)
}

func init() {
	registerFn("acldefault", Overload{Args: []*types.T{types.Text, types.Oid}, Return: Fixed(types.MustArray(types.Text)),
		Strict: true, Volatility: Immutable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			d, ok := aclDefaults[str(a[0])]
			if !ok {
				// An internal error in PostgreSQL too: callers pass constants.
				return nil, pgerror.New(pgerrcode.InternalError, "unrecognized objtype abbreviation: %s", str(a[0]))
			}
			owner := ""
			if tc := ctx.Types(); tc != nil && tc.Reg != nil {
				owner, _ = tc.Reg.RegName(types.RegRole, oidArg(a[1]))
			}
			if owner == "" {
				owner = types.Format(nil, types.Oid, a[1])
			}
			owner = quoteACLName(owner)
			var items []types.Datum
			if d.public != "" {
				items = append(items, types.DString("="+d.public+"/"+owner))
			}
			if d.owner != "" {
				items = append(items, types.DString(owner+"="+d.owner+"/"+owner))
			}
			return types.NewArray(types.Text, items...), nil
		}})
}

// quoteACLName quotes a role name in an aclitem as PostgreSQL's putid
// does: when it has characters other than alphanumerics and _.
func quoteACLName(s string) string {
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80) {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
	}
	return s
}
