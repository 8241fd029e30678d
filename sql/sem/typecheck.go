package sem

import (
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Coercion: how the type checker makes an expression of one type serve
// where another is needed. Untyped literals are parsed into the wanted
// type at build time (so `a = '5'` compares with the int 5); untyped
// parameters take the wanted type (recorded in ParamTypes); anything else
// gets a Cast node when pg_cast allows one in the context.

// coerce applies an implicit coercion the operator or function resolution
// already proved possible.
func (b *builder) coerce(e Expr, to *types.T, loc int32) (Expr, error) {
	return b.coerceTo(e, to, types.CastImplicit, loc)
}

// coerceArg coerces e to the type a construct requires (boolean for WHERE
// and AND), with Postgres's "argument of X must be type T" on mismatch.
func (b *builder) coerceArg(e Expr, to *types.T, what string, loc int32) (Expr, error) {
	if e.Type().Family != types.UnknownFamily && !types.ImplicitCastAllowed(e.Type(), to) {
		if what == "" {
			what = "this context"
		}
		return nil, b.pos(loc, errWrongType(what, to, e.Type()))
	}
	return b.coerceTo(e, to, types.CastImplicit, loc)
}

func (b *builder) coerceTo(e Expr, to *types.T, kind types.CastKind, loc int32) (Expr, error) {
	from := e.Type()
	if from.Identical(to) {
		return e, nil
	}
	if from.Family == types.UnknownFamily {
		switch v := e.(type) {
		case *Const:
			return b.literal(v, to, loc)
		case *Param:
			if b.ctx.Params != nil {
				b.ctx.Params.set(v.Index, to)
			}
			return &Param{Index: v.Index, T: to}, nil
		}
	}
	if kind == types.CastImplicit && from.Family == to.Family && from.Oid == to.Oid {
		// Only the modifiers differ (varchar(3) where varchar is taken):
		// operators ignore them, as Postgres's do.
		return e, nil
	}
	if types.CastKindOf(from, to) < kind {
		if kind == types.CastExplicit {
			return nil, b.pos(loc, errCannotCast(from, to))
		}
		return nil, b.pos(loc, pgerror.New(pgerrcode.DatatypeMismatch, "cannot coerce type %s to %s", from.Name(), to.Name()))
	}
	return &Cast{Expr: e, To: to, Context: kind}, nil
}

// literal types an untyped literal (or NULL) as to, by to's input
// function, as Postgres does when a literal meets a typed context.
func (b *builder) literal(c *Const, to *types.T, loc int32) (Expr, error) {
	if types.IsNull(c.Datum) {
		return &Const{Datum: types.DNull, T: to}, nil
	}
	if l, ok := b.litLoc[c]; ok {
		loc = l
	}
	s, _ := c.Datum.(types.DString)
	d, err := types.ParseDatum(b.ctx.Types, to, string(s))
	if err != nil {
		return nil, b.pos(loc, err)
	}
	return &Const{Datum: d, T: to}, nil
}

func (b *builder) explicitCast(e Expr, to *types.T, loc int32) (Expr, error) {
	if to.Domain != nil && !e.Type().Identical(to) {
		inner, err := b.explicitCast(e, types.BaseType(to), loc)
		if err != nil {
			return nil, err
		}
		return b.toDomain(inner, to, true)
	}
	if c, ok := e.(*Const); ok && c.T.Family == types.UnknownFamily {
		// Parse as the unmodified type, then apply the modifiers as a cast
		// does ('abcd'::varchar(2) is 'ab', not an error).
		base := unmodified(to)
		lit, err := b.literal(c, base, loc)
		if err != nil || base.Identical(to) || types.IsNull(lit.(*Const).Datum) {
			if err == nil && !base.Identical(to) {
				lit = &Const{Datum: types.DNull, T: to}
			}
			return lit, err
		}
		d, err := types.Cast(b.ctx.Types, lit.(*Const).Datum, base, to)
		if err != nil {
			return nil, b.pos(loc, err)
		}
		return &Const{Datum: d, T: to}, nil
	}
	return b.coerceTo(e, to, types.CastExplicit, loc)
}

// BuildAssign builds the value stored into column colName of type colType
// (an INSERT value or an UPDATE SET expression): untyped literals take the
// column's type, and other types need an assignment cast (CoerceToAssign).
func BuildAssign(ctx BuildContext, node *pg_query.Node, colType *types.T, colName string) (Expr, error) {
	b := &builder{ctx: ctx}
	e, err := b.build(node)
	if err != nil {
		return nil, err
	}
	if e, err = b.assign(e, colType, colName, location(node)); err != nil {
		return nil, err
	}
	if err := b.checkParams(e); err != nil {
		return nil, err
	}
	return Fold(ctx.Types, e), nil
}

// CoerceToAssign makes an already built expression storable in column
// colName of type colType: 42804 `column "a" is of type integer but
// expression is of type text` (with Postgres's hint) when no assignment
// cast exists. A value of the column's type with other modifiers is cast
// too, so varchar(3) and numeric(5,2) limits apply.
func CoerceToAssign(e Expr, colType *types.T, colName string) (Expr, error) {
	b := &builder{}
	return b.assign(e, colType, colName, -1)
}

// CoerceToAssignIn is CoerceToAssign with the session's type context,
// which a domain's CHECK expressions may need (a cast to a user type).
func CoerceToAssignIn(tc *types.Context, e Expr, colType *types.T, colName string) (Expr, error) {
	b := &builder{ctx: BuildContext{Types: tc}}
	return b.assign(e, colType, colName, -1)
}

func (b *builder) assign(e Expr, colType *types.T, colName string, loc int32) (Expr, error) {
	if colType.Domain != nil && !e.Type().Identical(colType) {
		inner, err := b.assign(e, types.BaseType(colType), colName, loc)
		if err != nil {
			return nil, err
		}
		return b.toDomain(inner, colType, false)
	}
	from := e.Type()
	if from.Identical(colType) {
		return e, nil
	}
	if from.Family != types.UnknownFamily && !types.AssignmentCastAllowed(from, colType) {
		return nil, b.pos(loc, errAssign(colName, colType, from))
	}
	if c, ok := e.(*Const); ok && c.T.Family == types.UnknownFamily && !types.IsNull(c.Datum) {
		// Parse as the unmodified type, then apply the column's modifiers
		// with the assignment rules (22001 for a string too long).
		base := unmodified(colType)
		lit, err := b.literal(c, base, loc)
		if err != nil || base.Identical(colType) {
			return lit, err
		}
		e, from = lit, base
	}
	return b.coerceTo(e, colType, types.CastAssignment, loc)
}

func unmodified(t *types.T) *types.T {
	if t.Family == types.ArrayFamily {
		return t
	}
	if u, ok := types.OidToType(t.Oid); ok {
		return u
	}
	return t
}

// TypeFromAST resolves a type name of the AST (a CAST target, a column
// definition) with its modifiers and array bounds. Built-in names are
// found first (pg_catalog is searched first, as in PostgreSQL); other
// names, and every schema-qualified one, are user-defined types looked up
// through tc's TypeResolver (nil tc: built-in types only).
func TypeFromAST(tc *types.Context, tn *pg_query.TypeName) (*types.T, error) {
	if tn == nil {
		return nil, errUnsupported("missing type name")
	}
	var parts []string
	for _, n := range tn.Names {
		if s, ok := n.Node.(*pg_query.Node_String_); ok {
			parts = append(parts, s.String_.Sval)
		}
	}
	if len(parts) == 2 && parts[0] == "pg_catalog" {
		parts = parts[1:]
	}
	if len(parts) < 1 || len(parts) > 2 || tn.PctType || tn.Setof {
		return nil, pgerror.New(pgerrcode.UndefinedObject, "type %q does not exist", strings.Join(parts, "."))
	}
	var t *types.T
	var err error
	if len(parts) == 1 {
		t, err = types.LookupName(parts[0])
	}
	if t == nil {
		ut := tc.UserTypes()
		if ut == nil {
			if err == nil {
				err = pgerror.New(pgerrcode.UndefinedObject, "type %q does not exist", strings.Join(parts, "."))
			}
			return nil, err
		}
		schema, name := "", parts[len(parts)-1]
		if len(parts) == 2 {
			schema = parts[0]
		}
		u, found, uerr := ut.ResolveType(schema, name)
		if uerr != nil {
			return nil, uerr
		}
		if !found {
			return nil, pgerror.New(pgerrcode.UndefinedObject, "type \"%s\" does not exist", strings.Join(parts, "."))
		}
		t = u
	}
	var mods []int32
	for _, m := range tn.Typmods {
		c, ok := m.Node.(*pg_query.Node_AConst)
		if !ok {
			return nil, pgerror.New(pgerrcode.SyntaxError, "type modifiers must be simple constants or identifiers")
		}
		iv, ok := c.AConst.Val.(*pg_query.A_Const_Ival)
		if !ok {
			return nil, pgerror.New(pgerrcode.InvalidParameterValue, "invalid type modifier")
		}
		mods = append(mods, iv.Ival.Ival)
	}
	if len(mods) > 0 {
		if t, err = applyTypmods(t, mods); err != nil {
			return nil, err
		}
	}
	for range tn.ArrayBounds {
		if t.Family == types.ArrayFamily {
			break // int[][] is int[] in Postgres: dimensions are not enforced
		}
		if t, err = types.MakeArray(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func applyTypmods(t *types.T, mods []int32) (*types.T, error) {
	switch t.Family {
	case types.StringFamily:
		if len(mods) == 1 && t.Oid == types.VarChar.Oid {
			return types.MakeVarChar(mods[0])
		}
		if len(mods) == 1 && t.Oid == types.BPChar.Oid {
			return types.MakeChar(mods[0])
		}
	case types.NumericFamily:
		switch len(mods) {
		case 1:
			return types.MakeNumeric(mods[0], 0)
		case 2:
			return types.MakeNumeric(mods[0], mods[1])
		}
	case types.TimestampFamily, types.TimestampTZFamily, types.TimeFamily:
		if len(mods) == 1 {
			return types.MakeTimestamp(t, mods[0])
		}
	case types.IntervalFamily:
		// INTERVAL field restrictions (DAY TO SECOND) are accepted and
		// ignored: values keep every field.
		return t, nil
	}
	return nil, pgerror.New(pgerrcode.SyntaxError, "type modifier is not allowed for type %q", t.PGName())
}

func pgerrorOverNonWindow(name string) error {
	return pgerror.New(pgerrcode.WrongObjectType, "OVER specified, but %s is not a window function nor an aggregate function", name)
}

func typeNameOf(v any) string { return fmt.Sprintf("%T", v) }

// location returns a node's byte offset in the statement text (-1 when
// the node records none).
func location(n *pg_query.Node) int32 {
	if n == nil {
		return -1
	}
	switch v := n.Node.(type) {
	case *pg_query.Node_AConst:
		return v.AConst.Location
	case *pg_query.Node_ColumnRef:
		return v.ColumnRef.Location
	case *pg_query.Node_ParamRef:
		return v.ParamRef.Location
	case *pg_query.Node_AExpr:
		if v.AExpr.Lexpr != nil {
			if l := location(v.AExpr.Lexpr); l >= 0 && l < v.AExpr.Location {
				return l
			}
		}
		return v.AExpr.Location
	case *pg_query.Node_BoolExpr:
		return v.BoolExpr.Location
	case *pg_query.Node_NullTest:
		return v.NullTest.Location
	case *pg_query.Node_BooleanTest:
		return v.BooleanTest.Location
	case *pg_query.Node_CaseExpr:
		return v.CaseExpr.Location
	case *pg_query.Node_CoalesceExpr:
		return v.CoalesceExpr.Location
	case *pg_query.Node_MinMaxExpr:
		return v.MinMaxExpr.Location
	case *pg_query.Node_TypeCast:
		if l := location(v.TypeCast.Arg); l >= 0 && l < v.TypeCast.Location {
			return l
		}
		return v.TypeCast.Location
	case *pg_query.Node_FuncCall:
		return v.FuncCall.Location
	case *pg_query.Node_SqlvalueFunction:
		return v.SqlvalueFunction.Location
	case *pg_query.Node_AArrayExpr:
		return v.AArrayExpr.Location
	case *pg_query.Node_AIndirection:
		return location(v.AIndirection.Arg)
	case *pg_query.Node_SubLink:
		return v.SubLink.Location
	case *pg_query.Node_RowExpr:
		return v.RowExpr.Location
	case *pg_query.Node_CollateClause:
		return v.CollateClause.Location
	}
	return -1
}
