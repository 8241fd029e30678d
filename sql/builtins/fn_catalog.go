package builtins

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// The system information functions drivers and ORMs call on the system
// catalogs (format_type, pg_get_indexdef, obj_description, to_regclass,
// ...). Those that need the catalog read it through the session's
// types.Context.Reg, when that resolver also implements CatalogInfo
// (sql/pgcatalog's does); without one they answer as PostgreSQL does for
// an object that does not exist: NULL.

// CatalogInfo is what the catalog functions read of the catalog, as of
// the statement's transaction. OIDs are those the pg_catalog relations
// show.
type CatalogInfo interface {
	types.RegResolver
	// IndexDef is pg_get_indexdef: the CREATE INDEX statement (col 0) or
	// the name of key column col.
	IndexDef(indexOID uint32, col int) (string, bool)
	// ConstraintDef is pg_get_constraintdef.
	ConstraintDef(conOID uint32) (string, bool)
	// Description is obj_description/col_description: the comment on
	// object objOID of catalog catalogName ("pg_class", ...), on its column
	// subID when > 0.
	Description(objOID uint32, catalogName string, subID int32) (string, bool)
	// TableIsVisible is pg_table_is_visible: the relation is found by its
	// bare name on the search path. ok is false for an unknown OID.
	TableIsVisible(relOID uint32) (visible, ok bool)
	// SerialSequence is pg_get_serial_sequence: the qualified name of the
	// sequence owned by table.column ("" when none); errors carry
	// SQLSTATEs (42P01, 42703).
	SerialSequence(table, column string) (string, error)
	// ViewDef is pg_get_viewdef: a view's query.
	ViewDef(relOID uint32) (string, bool)
	// RelKind is the relation's pg_class.relkind ("r", "i", "S", "v").
	RelKind(relOID uint32) (string, bool)
}

// FuncText names a text the pg_get_function_* functions print.
type FuncText int

// The texts of UserFunctionInfo.UserFunctionText.
const (
	FuncArguments         FuncText = iota // pg_get_function_arguments
	FuncIdentityArguments                 // pg_get_function_identity_arguments
	FuncResult                            // pg_get_function_result
	FuncSQLBody                           // pg_get_function_sqlbody
	FuncDef                               // pg_get_functiondef
)

// UserFunctionInfo is implemented by a CatalogInfo that knows the
// user-defined functions (CREATE FUNCTION): ok is false when oid names
// none, null when the text is SQL NULL.
type UserFunctionInfo interface {
	UserFunctionText(oid uint32, what FuncText) (text string, null, ok bool)
	FunctionIsVisible(oid uint32) (visible, ok bool)
}

// userFunctionText answers a pg_get_function_* call on a user function;
// ok is false when the OID is not one.
func userFunctionText(ctx EvalContext, oid uint32, what FuncText) (types.Datum, bool) {
	if oid < firstNormalOID {
		return nil, false
	}
	tc := ctx.Types()
	if tc == nil {
		return nil, false
	}
	ui, ok := tc.Reg.(UserFunctionInfo)
	if !ok {
		return nil, false
	}
	text, null, ok := ui.UserFunctionText(oid, what)
	if !ok {
		return nil, false
	}
	if null {
		return types.DNull, true
	}
	return types.DString(text), true
}

// TypeVisibility is implemented by a CatalogInfo that knows user-defined
// types: pg_type_is_visible of one (ok false: no such type).
type TypeVisibility interface {
	TypeIsVisible(typeOID uint32) (visible, ok bool)
}

// PrettyViewInfo is implemented by a CatalogInfo that prints
// pg_get_viewdef(oid, true), the pretty form.
type PrettyViewInfo interface {
	ViewDefPretty(relOID uint32) (string, bool)
}

// PrettyCatalogInfo is implemented by a CatalogInfo that honours the
// pretty flag of pg_get_indexdef(oid, col, pretty) and
// pg_get_constraintdef(oid, pretty): fewer parentheses, and the table
// unqualified when visible.
type PrettyCatalogInfo interface {
	IndexDefPretty(indexOID uint32, col int, pretty bool) (string, bool)
	ConstraintDefPretty(conOID uint32, pretty bool) (string, bool)
}

// CreateStatementInfo is what cairn_show_create_table (CockroachDB's SHOW
// CREATE TABLE, through the parser's dialect) needs of the catalog: a
// table's CREATE TABLE statement, in the syntax it was created with.
type CreateStatementInfo interface {
	CreateStatement(tableOID uint32) (string, bool)
}

// firstNormalOID is PostgreSQL's FirstNormalObjectId: OIDs below it are
// the system's own (Cairn's user descriptor IDs start there too).
const firstNormalOID = 16384

func catalogInfo(ctx EvalContext) CatalogInfo {
	if tc := ctx.Types(); tc != nil && tc.Reg != nil {
		if ci, ok := tc.Reg.(CatalogInfo); ok {
			return ci
		}
	}
	return nil
}

func oidArg(d types.Datum) uint32 { return uint32(d.(types.DOid)) }

// FormatType is format_type(oid, typmod): the type's SQL name with its
// modifier; hasTypmod false is a NULL typmod.
func FormatType(oid uint32, typmod int32, hasTypmod bool) string {
	if oid == 0 {
		return "-"
	}
	t, ok := types.OidToType(oid)
	if !ok {
		return "???"
	}
	elem := t
	if t.Family == types.ArrayFamily {
		elem = t.Elem
	}
	if !hasTypmod {
		if elem.Oid == types.BPChar.Oid {
			return arraySuffix(t, "character")
		}
		return t.Name()
	}
	c := *elem
	switch {
	case typmod < 0:
	case c.Family == types.StringFamily && typmod >= 4:
		c.Width = typmod - 4
	case c.Family == types.NumericFamily && typmod >= 4:
		c.Precision, c.Scale = (typmod-4)>>16, int32(int16((typmod-4)&0xffff))
	case c.Family == types.TimeFamily || c.Family == types.TimestampFamily || c.Family == types.TimestampTZFamily:
		c.Precision = typmod
	}
	return arraySuffix(t, c.Name())
}

func arraySuffix(t *types.T, name string) string {
	if t.Family == types.ArrayFamily {
		return name + "[]"
	}
	return name
}

var encodingNames = map[int64]string{0: "SQL_ASCII", 6: "UTF8"}

func init() {
	oid, text, b, i4 := types.Oid, types.Text, types.Bool, types.Int4
	registerFn("format_type", Overload{Args: []*types.T{oid, i4}, Return: Fixed(text), Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if types.IsNull(a[0]) {
				return types.DNull, nil
			}
			// A user-defined type (an enum or its array) is named by the
			// catalog, qualified when not visible, as PostgreSQL does.
			if _, ok := types.OidToType(oidArg(a[0])); !ok {
				if ci := catalogInfo(ctx); ci != nil {
					if name, ok := ci.RegName(types.RegType, oidArg(a[0])); ok {
						return types.DString(name), nil
					}
				}
			}
			if types.IsNull(a[1]) {
				return types.DString(FormatType(oidArg(a[0]), 0, false)), nil
			}
			return types.DString(FormatType(oidArg(a[0]), int32(i64(a[1])), true)), nil
		}})
	// pg_node_tree columns are the expression's SQL text in Cairn, so
	// pg_get_expr has nothing left to decompile.
	// Its pretty form drops a pair of parentheses around the whole
	// expression, as PostgreSQL's does for an index predicate
	// (pg_index.indpred, which psql's \d shows as "predicate (...)").
	getExpr := func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		e := str(a[0])
		if tc := ctx.Types(); tc != nil {
			e = QualifyRegclassLiterals(tc.Reg, e)
			e = UnqualifyVisibleTypes(tc.Reg, e)
		}
		if len(a) > 2 && bool(a[2].(types.DBool)) {
			return types.DString(unwrapParens(e)), nil
		}
		return types.DString(e), nil
	}
	registerFn("pg_get_expr",
		Overload{Args: []*types.T{text, oid}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: getExpr},
		Overload{Args: []*types.T{text, oid, b}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: getExpr})
	registerFn("pg_encoding_to_char", Overload{Args: []*types.T{i4}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			return types.DString(encodingNames[i64(a[0])]), nil
		}})
	registerFn("pg_char_to_encoding", Overload{Args: []*types.T{text}, Return: Fixed(i4), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			for n, s := range encodingNames {
				if equalFoldASCII(s, str(a[0])) {
					return types.DInt(n), nil
				}
			}
			return types.DInt(-1), nil
		}})
	registerFn("pg_is_in_recovery", Overload{Return: Fixed(b), Volatility: Volatile,
		Fn: func(EvalContext, []types.Datum) (types.Datum, error) { return types.DBool(false), nil }})

	registerFn("pg_table_is_visible", Overload{Args: []*types.T{oid}, Return: Fixed(b), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			ci := catalogInfo(ctx)
			if ci == nil {
				return types.DNull, nil
			}
			v, ok := ci.TableIsVisible(oidArg(a[0]))
			if !ok {
				return types.DNull, nil
			}
			return types.DBool(v), nil
		}})
	// Built-in types and functions all live in pg_catalog, which is
	// always searched; a user-defined type is visible when its bare name
	// finds it on the search path (TypeVisibility).
	registerFn("pg_function_is_visible", Overload{Args: []*types.T{oid}, Return: Fixed(b), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if tc := ctx.Types(); tc != nil && oidArg(a[0]) >= firstNormalOID {
				if ui, ok := tc.Reg.(UserFunctionInfo); ok {
					if v, ok := ui.FunctionIsVisible(oidArg(a[0])); ok {
						return types.DBool(v), nil
					}
				}
			}
			return types.DBool(true), nil
		}})
	registerFn("pg_type_is_visible", Overload{Args: []*types.T{oid}, Return: Fixed(b), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if _, ok := types.OidToType(oidArg(a[0])); ok {
				return types.DBool(true), nil
			}
			if tc := ctx.Types(); tc != nil {
				if tv, ok := tc.Reg.(TypeVisibility); ok {
					if v, ok := tv.TypeIsVisible(oidArg(a[0])); ok {
						return types.DBool(v), nil
					}
				}
			}
			// Pseudo-types and OIDs naming nothing: PostgreSQL answers
			// true for the former, NULL for the latter.
			if oidArg(a[0]) < firstNormalOID {
				return types.DBool(true), nil
			}
			return types.DNull, nil
		}})
	registerFn("pg_get_userbyid", Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if tc := ctx.Types(); tc != nil && tc.Reg != nil {
				if n, ok := tc.Reg.RegName(types.RegRole, oidArg(a[0])); ok {
					return types.DString(n), nil
				}
			}
			return types.DString("unknown (OID=" + types.Format(nil, types.Oid, a[0]) + ")"), nil
		}})
	catalogText := func(f func(ci CatalogInfo, a []types.Datum) (string, bool)) Fn {
		return func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			ci := catalogInfo(ctx)
			if ci == nil {
				return types.DNull, nil
			}
			s, ok := f(ci, a)
			if !ok {
				return types.DNull, nil
			}
			return types.DString(s), nil
		}
	}
	indexDef := catalogText(func(ci CatalogInfo, a []types.Datum) (string, bool) {
		col := 0
		if len(a) > 1 {
			col = int(i64(a[1]))
		}
		if p, ok := ci.(PrettyCatalogInfo); ok && len(a) > 2 {
			return p.IndexDefPretty(oidArg(a[0]), col, bool(a[2].(types.DBool)))
		}
		s, ok := ci.IndexDef(oidArg(a[0]), col)
		if ok && col == 0 && len(a) > 2 && bool(a[2].(types.DBool)) {
			s = prettyIndexDef(ci, s)
		}
		return s, ok
	})
	registerFn("cairn_show_create_table", Overload{Args: []*types.T{types.RegClass}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			ci, ok := catalogInfo(ctx).(CreateStatementInfo)
			if !ok {
				return types.DNull, nil
			}
			s, ok := ci.CreateStatement(oidArg(a[0]))
			if !ok {
				return nil, pgerror.New(pgerrcode.WrongObjectType, "relation with OID %d is not a table", oidArg(a[0]))
			}
			return types.DString(s), nil
		}})
	registerFn("pg_get_indexdef",
		Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: indexDef},
		Overload{Args: []*types.T{oid, i4, b}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: indexDef})
	conDef := catalogText(func(ci CatalogInfo, a []types.Datum) (string, bool) {
		if p, ok := ci.(PrettyCatalogInfo); ok && len(a) > 1 {
			return p.ConstraintDefPretty(oidArg(a[0]), bool(a[1].(types.DBool)))
		}
		s, ok := ci.ConstraintDef(oidArg(a[0]))
		if ok && len(a) > 1 && bool(a[1].(types.DBool)) {
			s = prettyConstraintDef(s)
		}
		return s, ok
	})
	registerFn("pg_get_constraintdef",
		Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: conDef},
		Overload{Args: []*types.T{oid, b}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: conDef})
	viewDef := catalogText(func(ci CatalogInfo, a []types.Datum) (string, bool) {
		if p, ok := ci.(PrettyViewInfo); ok && len(a) > 1 && bool(a[1].(types.DBool)) {
			return p.ViewDefPretty(oidArg(a[0]))
		}
		return ci.ViewDef(oidArg(a[0]))
	})
	registerFn("pg_get_viewdef",
		Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: viewDef},
		Overload{Args: []*types.T{oid, b}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: viewDef})
	registerFn("obj_description",
		Overload{Args: []*types.T{oid, text}, Return: Fixed(text), Strict: true, Volatility: Stable,
			Fn: catalogText(func(ci CatalogInfo, a []types.Datum) (string, bool) {
				return ci.Description(oidArg(a[0]), str(a[1]), 0)
			})},
		Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true, Volatility: Stable,
			Fn: catalogText(func(ci CatalogInfo, a []types.Datum) (string, bool) {
				return ci.Description(oidArg(a[0]), "", 0)
			})})
	registerFn("col_description", Overload{Args: []*types.T{oid, i4}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: catalogText(func(ci CatalogInfo, a []types.Datum) (string, bool) {
			return ci.Description(oidArg(a[0]), "pg_class", int32(i64(a[1])))
		})})
	registerFn("shobj_description", Overload{Args: []*types.T{oid, text}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: catalogText(func(ci CatalogInfo, a []types.Datum) (string, bool) {
			return ci.Description(oidArg(a[0]), str(a[1]), 0)
		})})
	registerFn("pg_get_serial_sequence", Overload{Args: []*types.T{text, text}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			ci := catalogInfo(ctx)
			if ci == nil {
				return types.DNull, nil
			}
			s, err := ci.SerialSequence(str(a[0]), str(a[1]))
			if err != nil || s == "" {
				return types.DNull, err
			}
			return types.DString(s), nil
		}})
	// Cairn has no partitioned tables, statistics objects, triggers or
	// rules, so no OID names one: PostgreSQL's NULL for an OID that names
	// none.
	null := func(EvalContext, []types.Datum) (types.Datum, error) { return types.DNull, nil }
	for _, name := range []string{"pg_get_partkeydef", "pg_get_statisticsobjdef", "pg_get_statisticsobjdef_columns",
		"pg_get_triggerdef", "pg_get_ruledef"} {
		registerFn(name, Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: null})
	}
	for _, name := range []string{"pg_get_triggerdef", "pg_get_ruledef"} {
		registerFn(name, Overload{Args: []*types.T{oid, b}, Return: Fixed(text), Strict: true, Volatility: Stable, Fn: null})
	}
	// pg_partition_ancestors lists nothing for a relation that is not a
	// partition or partitioned table, which in Cairn is every relation.
	registerFn("pg_partition_ancestors", Overload{Args: []*types.T{types.RegClass}, Class: Generator, Strict: true,
		Return: Fixed(types.RegClass), Volatility: Stable,
		Columns: func([]*types.T) []Column { return []Column{{"relid", types.RegClass}} },
		SRF:     func(EvalContext, []types.Datum) (RowIter, error) { return &sliceIter{}, nil }})
	// pg_options_to_table splits reloptions-style "name=value" entries
	// (pg_dump reads a view's and a foreign table's options with it); an
	// entry without "=" has a NULL value.
	registerFn("pg_options_to_table", Overload{Args: []*types.T{types.MustArray(text)}, Class: Generator, Strict: true,
		Return: Fixed(text), Volatility: Stable,
		Columns: func([]*types.T) []Column { return []Column{{"option_name", text}, {"option_value", text}} },
		SRF: func(_ EvalContext, a []types.Datum) (RowIter, error) {
			var rows [][]types.Datum
			for _, e := range a[0].(*types.DArray).Elems {
				if types.IsNull(e) {
					continue
				}
				k, v, ok := strings.Cut(string(e.(types.DString)), "=")
				var val types.Datum = types.DNull
				if ok {
					val = types.DString(v)
				}
				rows = append(rows, []types.Datum{types.DString(k), val})
			}
			return &sliceIter{rows: rows}, nil
		}})
	registerFn("pg_relation_is_publishable", Overload{Args: []*types.T{types.RegClass}, Return: Fixed(b), Strict: true,
		Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			ci := catalogInfo(ctx)
			if ci == nil {
				return types.DNull, nil
			}
			kind, ok := ci.RelKind(oidArg(a[0]))
			if !ok {
				return types.DNull, nil
			}
			return types.DBool(kind == "r" && oidArg(a[0]) >= firstNormalOID), nil
		}})
	// Operator classes, collations, statistics objects and the like all
	// live in pg_catalog, which is always searched.
	for _, name := range []string{"pg_opclass_is_visible", "pg_opfamily_is_visible", "pg_collation_is_visible",
		"pg_conversion_is_visible", "pg_statistics_obj_is_visible", "pg_operator_is_visible"} {
		registerFn(name, Overload{Args: []*types.T{oid}, Return: Fixed(b), Strict: true, Volatility: Stable,
			Fn: func(EvalContext, []types.Datum) (types.Datum, error) { return types.DBool(true), nil }})
	}
	// The function-introspection functions read the built-in registry
	// (every function is built in).
	procText := func(what FuncText, f func(o *Overload) string) Fn {
		return func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if d, ok := userFunctionText(ctx, oidArg(a[0]), what); ok {
				return d, nil
			}
			o, ok := ByOID(oidArg(a[0]))
			if !ok || o.Name() == "" {
				return types.DNull, nil
			}
			return types.DString(f(o)), nil
		}
	}
	args := func(o *Overload) string {
		var s string
		for i, a := range o.Args {
			if i > 0 {
				s += ", "
			}
			if o.Variadic && i == len(o.Args)-1 {
				s += "VARIADIC "
			}
			s += typeName(a)
		}
		return s
	}
	registerFn("pg_get_function_arguments", Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true,
		Volatility: Stable, Fn: procText(FuncArguments, args)})
	registerFn("pg_get_function_identity_arguments", Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true,
		Volatility: Stable, Fn: procText(FuncIdentityArguments, args)})
	registerFn("pg_get_function_result", Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true,
		Volatility: Stable, Fn: procText(FuncResult, func(o *Overload) string {
			if o.Class == Generator && o.Columns != nil {
				if cols := o.Columns(o.Args); len(cols) == 1 {
					return "SETOF " + typeName(cols[0].Type)
				}
				return "SETOF record"
			}
			return typeName(returnType(o))
		})})
	// psql's \df+ reads pg_get_function_sqlbody: a user function's
	// SQL-standard body (BEGIN ATOMIC or RETURN), NULL for every other
	// function, as for PostgreSQL's internal ones.
	registerFn("pg_get_function_sqlbody", Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true,
		Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if d, ok := userFunctionText(ctx, oidArg(a[0]), FuncSQLBody); ok {
				return d, nil
			}
			return types.DNull, nil
		}})
	// pg_get_functiondef prints a built-in function as PostgreSQL prints
	// its internal ones (psql's \sf): LANGUAGE internal, the options
	// pg_proc lists, and the function's own name as its source.
	registerFn("pg_get_functiondef", Overload{Args: []*types.T{oid}, Return: Fixed(text), Strict: true,
		Volatility: Stable, Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if d, ok := userFunctionText(ctx, oidArg(a[0]), FuncDef); ok {
				return d, nil
			}
			o, ok := ByOID(oidArg(a[0]))
			if !ok || o.Name() == "" {
				return types.DNull, nil
			}
			if o.Class == AggregateClass {
				return nil, pgerror.New(pgerrcode.WrongObjectType, "\"%s\" is an aggregate function", o.Name())
			}
			ret := typeName(returnType(o))
			if o.Class == Generator && o.Columns != nil {
				ret = "SETOF record"
				if cols := o.Columns(o.Args); len(cols) == 1 {
					ret = "SETOF " + typeName(cols[0].Type)
				}
			}
			var b strings.Builder
			fmt.Fprintf(&b, "CREATE OR REPLACE FUNCTION pg_catalog.%s(%s)\n RETURNS %s\n LANGUAGE internal\n",
				QuoteIdent(o.Name()), args(o), ret)
			if o.Class == WindowClass {
				b.WriteString(" WINDOW")
			}
			switch o.Volatility {
			case Immutable:
				b.WriteString(" IMMUTABLE")
			case Stable:
				b.WriteString(" STABLE")
			}
			b.WriteString(" PARALLEL SAFE") // pg_proc.proparallel is 's' for all
			if o.Strict {
				b.WriteString(" STRICT")
			}
			fmt.Fprintf(&b, "\nAS $function$%s$function$\n", o.Name())
			return types.DString(b.String()), nil
		}})

	// to_regclass and friends: the OID of a name, NULL instead of an error
	// when it names nothing.
	for name, kind := range map[string]*types.T{"to_regclass": types.RegClass, "to_regtype": types.RegType,
		"to_regproc": types.RegProc, "to_regprocedure": types.RegProcedure, "to_regnamespace": types.RegNamespace,
		"to_regrole": types.RegRole} {
		registerFn(name, Overload{Args: []*types.T{text}, Return: Fixed(kind), Strict: true, Volatility: Stable,
			Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
				d, err := types.ParseDatum(ctx.Types(), kind, str(a[0]))
				if err != nil {
					return types.DNull, nil
				}
				return d, nil
			}})
	}

	// json_build_object and json_build_array (which SQLAlchemy's column
	// reflection calls on the catalogs) are in json_text.go.

	// has_table_privilege and the other kinds Cairn keeps privileges for
	// are in fn_privilege.go (has_column_privilege too: a column's
	// privileges are its table's). Functions are executable by PUBLIC
	// (Cairn has no GRANT on them): has_function_privilege answers true.
	yes := func(EvalContext, []types.Datum) (types.Datum, error) { return types.DBool(true), nil }
	for _, name := range []string{"has_function_privilege"} {
		registerFn(name,
			Overload{Args: []*types.T{text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: yes},
			Overload{Args: []*types.T{oid, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: yes},
			Overload{Args: []*types.T{text, text, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: yes},
			Overload{Args: []*types.T{text, oid, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: yes},
			Overload{Args: []*types.T{oid, oid, text}, Return: Fixed(b), Strict: true, Volatility: Stable, Fn: yes})
	}
}

// returnType is an overload's declared result type; a polymorphic one's
// ReturnFunc may refuse the pseudo-types themselves, and anyelement is
// what PostgreSQL declares for most of those.
func returnType(o *Overload) (t *types.T) {
	defer func() {
		if recover() != nil || t == nil {
			t = AnyElement
		}
	}()
	return o.Return(o.Args)
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// The pretty forms of pg_get_indexdef and pg_get_constraintdef (what psql's
// \d asks for) print a CHECK expression or an index predicate without the
// pair of parentheses the plain forms wrap it in: CHECK (a > 0) and
// WHERE a IS NOT NULL against CHECK ((a > 0)) and WHERE (a IS NOT NULL).

// prettyConstraintDef drops the parentheses around a CHECK expression.
func prettyConstraintDef(s string) string {
	const pre = "CHECK ("
	if strings.HasPrefix(s, pre) && strings.HasSuffix(s, ")") {
		return pre + unwrapParens(s[len(pre):len(s)-1]) + ")"
	}
	return s
}

// prettyIndexDef names the table as regclass prints it (unqualified when
// the search path finds it, as PostgreSQL's pretty form does) and drops the
// parentheses around the predicate of a partial index: the WHERE outside
// any parentheses or quotes.
func prettyIndexDef(reg types.RegResolver, s string) string {
	s = unqualifyIndexTable(reg, s)
	const where = " WHERE "
	depth, quote := 0, rune(0)
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			depth--
		case depth == 0 && strings.HasPrefix(s[i:], where):
			return s[:i+len(where)] + unwrapParens(s[i+len(where):])
		}
	}
	return s
}

// unwrapParens removes one pair of parentheses that encloses all of e.
func unwrapParens(e string) string {
	if !strings.HasPrefix(e, "(") || !strings.HasSuffix(e, ")") {
		return e
	}
	depth, quote := 0, rune(0)
	for i, r := range e {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			depth--
			if depth == 0 && i != len(e)-1 {
				return e
			}
		}
	}
	return e[1 : len(e)-1]
}

// unqualifyIndexTable replaces the schema-qualified table name of a CREATE
// INDEX statement ("... INDEX name ON schema.table USING ...") with the
// name regclass prints for that table.
func unqualifyIndexTable(reg types.RegResolver, s string) string {
	i := strings.Index(s, "INDEX ")
	if i < 0 {
		return s
	}
	i += len("INDEX ")
	// Skip the index name: a quoted identifier may hold spaces.
	i += identEnd(s[i:])
	const on = " ON "
	if !strings.HasPrefix(s[i:], on) {
		return s
	}
	start := i + len(on)
	end := start
	for end < len(s) && s[end] != ' ' {
		end += identEnd(s[end:])
		if end < len(s) && s[end] == '.' {
			end++
		}
	}
	oid, err := reg.ResolveReg(types.RegClass, s[start:end])
	if err != nil {
		return s
	}
	name, ok := reg.RegName(types.RegClass, oid)
	if !ok {
		return s
	}
	return s[:start] + name + s[end:]
}

// identEnd is the length of the (possibly double-quoted) identifier s
// starts with: up to a space or a dot outside quotes.
func identEnd(s string) int {
	if strings.HasPrefix(s, `"`) {
		for j := 1; j < len(s); j++ {
			if s[j] == '"' {
				if j+1 < len(s) && s[j+1] == '"' {
					j++
					continue
				}
				return j + 1
			}
		}
		return len(s)
	}
	if j := strings.IndexAny(s, " ."); j >= 0 {
		return j
	}
	return len(s)
}

// regclassLiteral matches a relation name cast to regclass in a stored
// expression, as a serial column's nextval('s'::regclass) default holds
// it, or the bare literal argument of nextval, currval or setval, which a
// default written as nextval('s') keeps: PostgreSQL coerces that literal
// to regclass when it stores the default, and prints it so.
var regclassLiteral = regexp.MustCompile(`'((?:[^']|'')+)'::regclass|\b((?:nextval|currval|setval)\()'((?:[^']|'')+)'([,)])`)

// QualifyRegclassLiterals prints the relation names of expr's regclass
// literals as the regclass output function would now: qualified by their
// schema when the search path does not find them, bare when it does (a
// regclass constant in PostgreSQL's stored expression is an OID, which
// ruleutils prints that way). pg_dump empties the search path and so gets
// nextval('public.t_id_seq'::regclass), which restores whatever the
// restoring session's path. DDL stores a relation of schema public
// unqualified (its default search path finds it), so an unqualified name
// that the path does not find is looked up in public. A name that still
// resolves to nothing is left as written.
func QualifyRegclassLiterals(reg types.RegResolver, expr string) string {
	if reg == nil || !strings.Contains(expr, "::regclass") && !strings.Contains(expr, "val('") {
		return expr
	}
	return regclassLiteral.ReplaceAllStringFunc(expr, func(m string) string {
		sub := regclassLiteral.FindStringSubmatch(m)
		name, call, end := sub[1], sub[2], sub[4]
		if call != "" {
			name = sub[3]
		}
		oid, ok := resolveStoredRegclass(reg, name)
		if !ok {
			return m
		}
		out, ok := reg.RegName(types.RegClass, oid)
		if !ok {
			return m
		}
		return call + QuoteLiteral(out) + "::regclass" + end
	})
}

// resolveStoredRegclass resolves a relation name quoted in a stored
// expression (quotes still doubled): through the search path, else, when
// unqualified, in public, where DDL leaves names unqualified.
func resolveStoredRegclass(reg types.RegResolver, quoted string) (uint32, bool) {
	name := strings.ReplaceAll(quoted, "''", "'")
	oid, err := reg.ResolveReg(types.RegClass, name)
	if err != nil && !strings.Contains(name, ".") {
		oid, err = reg.ResolveReg(types.RegClass, "public."+name)
	}
	return oid, err == nil
}

// sequenceReference matches what names a sequence in a stored default:
// a regclass literal, or nextval's text argument.
var sequenceReference = regexp.MustCompile(`'((?:[^']|'')+)'::regclass|nextval\('((?:[^']|'')+)'\)`)

// ReferencedRelations returns the OIDs of the relations a stored
// expression names by regclass literal or in nextval('...'), as resolved
// now (pg_depend's edges from a column default to its sequences).
func ReferencedRelations(reg types.RegResolver, expr string) []uint32 {
	if reg == nil {
		return nil
	}
	var out []uint32
	for _, m := range sequenceReference.FindAllStringSubmatch(expr, -1) {
		q := m[1]
		if q == "" {
			q = m[2]
		}
		if oid, ok := resolveStoredRegclass(reg, q); ok && !slices.Contains(out, oid) {
			out = append(out, oid)
		}
	}
	return out
}

// qualifiedCast matches a cast to a schema-qualified type name in stored
// expression text, where enum types are always qualified (sem's
// typeText).
var qualifiedCast = regexp.MustCompile(`::((?:"(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)\.(?:"(?:[^"]|"")+"|[a-z_][a-z0-9_$]*))(\[\])?`)

// UnqualifyVisibleTypes prints the user-defined types cast to in expr as
// regtype's output would: bare when the search path finds them,
// qualified otherwise (PostgreSQL's ruleutils prints an OID so). Names
// that resolve to no user type are left as written.
func UnqualifyVisibleTypes(reg types.RegResolver, expr string) string {
	if reg == nil || !strings.Contains(expr, "::") {
		return expr
	}
	return qualifiedCast.ReplaceAllStringFunc(expr, func(m string) string {
		sub := qualifiedCast.FindStringSubmatch(m)
		oid, err := reg.ResolveReg(types.RegType, sub[1])
		if err != nil {
			return m
		}
		name, ok := reg.RegName(types.RegType, oid)
		if !ok {
			return m
		}
		return "::" + name + sub[2]
	})
}
