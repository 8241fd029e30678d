package builtins

import (
	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// The access privilege inquiry functions (has_table_privilege and its
// kin) ask the catalog, through the session's resolver, when it
// implements PrivilegeInfo (sql/pgcatalog's does).

// PrivilegeInfo answers has_*_privilege.
type PrivilegeInfo interface {
	// HasPrivilege reports whether role holds any of privs (a comma
	// separated list, each optionally WITH GRANT OPTION) on the object of
	// kind ("table", "column" for a table's columns, "sequence", "schema",
	// "database") named obj, or with
	// OID oid when obj is "". Errors carry PostgreSQL's SQLSTATEs: an
	// unknown object (42P01, 3F000, 3D000), role (42704) or privilege
	// (22023).
	HasPrivilege(role, kind, obj string, oid uint32, privs string) (bool, error)
}

func init() {
	text, oid, b := types.Text, types.Oid, types.Bool
	for _, f := range []struct{ name, kind string }{
		{"has_table_privilege", "table"}, {"has_sequence_privilege", "sequence"},
		{"has_schema_privilege", "schema"}, {"has_database_privilege", "database"},
		// Cairn has no column privileges: a column's are its table's.
		{"has_any_column_privilege", "column"},
	} {
		// checker(kind) runs one call: user (nil: the current user), the
		// object (text name or OID) and the privilege list.
		checker := func(kind string) func(ctx EvalContext, user, obj, privs types.Datum) (types.Datum, error) {
			return func(ctx EvalContext, user, obj, privs types.Datum) (types.Datum, error) {
				pi, ok := catalogInfo(ctx).(PrivilegeInfo)
				if !ok {
					return types.DNull, pgerror.New(pgerrcode.FeatureNotSupported, "privilege inquiry needs the catalog")
				}
				role := ctx.Session().User
				if user != nil {
					if o, isOid := user.(types.DOid); isOid {
						n, found := pi.(CatalogInfo).RegName(types.RegRole, uint32(o))
						if !found {
							return types.DNull, nil
						}
						role = n
					} else {
						role = str(user)
					}
				}
				var name string
				var id uint32
				if o, isOid := obj.(types.DOid); isOid {
					id = uint32(o)
				} else {
					name = str(obj)
				}
				ok, err := pi.HasPrivilege(role, kind, name, id, str(privs))
				if err != nil {
					return types.DNull, err
				}
				return types.DBool(ok), nil
			}
		}
		check := checker(f.kind)
		two := func(ctx EvalContext, a []types.Datum) (types.Datum, error) { return check(ctx, nil, a[0], a[1]) }
		three := func(ctx EvalContext, a []types.Datum) (types.Datum, error) { return check(ctx, a[0], a[1], a[2]) }
		registerFn(f.name,
			Overload{Args: []*types.T{text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: two},
			Overload{Args: []*types.T{oid, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: two},
			Overload{Args: []*types.T{text, text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: three},
			Overload{Args: []*types.T{text, oid, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: three},
			Overload{Args: []*types.T{oid, text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: three},
			Overload{Args: []*types.T{oid, oid, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: three})
		if f.name != "has_table_privilege" {
			continue
		}
		// has_column_privilege([user,] table, column, privilege): Cairn
		// has no column privileges, so a column's are its table's.
		colCheck := checker("column")
		col3 := func(ctx EvalContext, a []types.Datum) (types.Datum, error) { return colCheck(ctx, nil, a[0], a[2]) }
		col4 := func(ctx EvalContext, a []types.Datum) (types.Datum, error) { return colCheck(ctx, a[0], a[1], a[3]) }
		registerFn("has_column_privilege",
			Overload{Args: []*types.T{text, text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: col3},
			Overload{Args: []*types.T{oid, text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: col3},
			Overload{Args: []*types.T{oid, types.Int2, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: col3},
			Overload{Args: []*types.T{text, text, text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: col4},
			Overload{Args: []*types.T{text, oid, text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: col4},
			Overload{Args: []*types.T{text, oid, types.Int2, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: col4})
	}
}
