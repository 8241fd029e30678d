package builtins

import (
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// pg_tablespace_location: psql's \db reads it. Cairn has only the two
// tablespaces pg_tablespace lists, pg_default and pg_global, whose
// location PostgreSQL prints as the empty string (they live in the data
// directory); any other OID fails as PostgreSQL fails for a tablespace
// that is not there.
func init() {
	registerFn("pg_tablespace_location", Overload{Args: []*types.T{types.Oid}, Return: Fixed(types.Text), Strict: true,
		Volatility: Stable, Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			switch oid := uint32(a[0].(types.DOid)); oid {
			case 1663, 1664: // pg_default, pg_global
				return types.DString(""), nil
			default:
				return nil, pgerror.New(pgerrcode.UndefinedFile,
					"could not stat file \"pg_tblspc/%d\": No such file or directory", oid)
			}
		}})
}
