package sem

import (
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/types"
)

// Fold replaces every subexpression whose inputs are all constants and
// whose result cannot change during the statement's lifetime by its
// value: immutable functions and operators, casts that do not depend on
// the session time zone, and the SQL constructs over them. Stable calls
// (now()) and volatile ones (random()) stay, as do placeholders, and so
// does anything whose evaluation fails: the error belongs to the row that
// reaches it (CASE WHEN false THEN 1/0 END never fails), so folding never
// changes a result (invariant 3). tc is the session context for casts.
func Fold(tc *types.Context, e Expr) Expr {
	ctx := &EvalContext{Fn: &builtins.FixedContext{TypesCtx: tc}}
	return Map(e, func(x Expr) Expr {
		if !foldable(x) {
			return x
		}
		d, err := Eval(ctx, x, nil)
		if err != nil {
			return x
		}
		return &Const{Datum: d, T: x.Type()}
	})
}

// foldable reports whether x is immutable and all its children are
// constants.
func foldable(x Expr) bool {
	switch v := x.(type) {
	case *Const, *Param, *ColRef, *SubqueryRef, *AggCall, *AggRef, *WindowRef:
		return false
	case *FuncCall:
		if !immutable(v.Fn) {
			return false
		}
	case *BinOp:
		if !immutable(v.Fn) {
			return false
		}
	case *UnaryOp:
		if !immutable(v.Fn) {
			return false
		}
	case *Cast:
		if zoneDependent(v.Expr.Type(), v.To) {
			return false
		}
	}
	for _, c := range children(x) {
		if _, ok := c.(*Const); !ok {
			return false
		}
	}
	return true
}

func immutable(r *builtins.Resolved) bool {
	return r.Overload.Volatility == builtins.Immutable && r.Overload.Class == builtins.Normal
}

// zoneDependent reports whether a cast reads the session time zone (any
// cast involving timestamptz but the identity), which makes it stable in
// Postgres, not immutable.
func zoneDependent(from, to *types.T) bool {
	if from.Family == types.ArrayFamily && to.Family == types.ArrayFamily {
		return zoneDependent(from.Elem, to.Elem)
	}
	return (from.Family == types.TimestampTZFamily) != (to.Family == types.TimestampTZFamily)
}

// NormalizeBool puts a boolean expression in the shape the optimizer
// expects: nested ANDs and ORs flattened, NOT pushed down to the leaves
// (De Morgan; comparisons, IS NULL and IS TRUE-style tests negated in
// place), and constant TRUE/FALSE arms simplified away. The result is
// equal to e under three-valued logic for every row (invariant 3).
func NormalizeBool(e Expr) Expr {
	return Map(e, func(x Expr) Expr {
		switch v := x.(type) {
		case *Not:
			return negate(v.Arg)
		case *And:
			return flatten(v.Args, false)
		case *Or:
			return flatten(v.Args, true)
		}
		return x
	})
}

// negate returns an expression equal to NOT e, pushing the negation into
// e where that is exact under three-valued logic.
func negate(e Expr) Expr {
	switch v := e.(type) {
	case *Not:
		return v.Arg
	case *Const:
		if b, ok := v.Datum.(types.DBool); ok {
			return &Const{Datum: !b, T: types.Bool}
		}
		return v // NULL
	case *And:
		args := make([]Expr, len(v.Args))
		for i, a := range v.Args {
			args[i] = negate(a)
		}
		return flatten(args, true)
	case *Or:
		args := make([]Expr, len(v.Args))
		for i, a := range v.Args {
			args[i] = negate(a)
		}
		return flatten(args, false)
	case *IsNull:
		return &IsNull{Arg: v.Arg, Negated: !v.Negated}
	case *BoolTest:
		// IS TRUE <-> IS NOT TRUE, and so on: the kinds come in pairs.
		return &BoolTest{Kind: v.Kind ^ 1, Arg: v.Arg}
	case *Cmp:
		// NOT (a < b) is (a >= b) for non-NULL values and NULL otherwise,
		// as is a >= b; the DISTINCT forms never yield NULL.
		op := v.Op.Negate()
		name := string(op)
		if op == IsDistinctFrom || op == IsNotDistinctFrom {
			return &Cmp{Op: op, Fn: v.Fn, Left: v.Left, Right: v.Right}
		}
		r, err := builtins.LookupBinaryOp(name, v.Fn.ArgTypes[0], v.Fn.ArgTypes[1])
		if err != nil || !sameArgs(r, v.Fn) {
			return &Not{Arg: e}
		}
		return &Cmp{Op: op, Fn: r, Left: v.Left, Right: v.Right}
	}
	return &Not{Arg: e}
}

func sameArgs(a, b *builtins.Resolved) bool {
	for i := range a.ArgTypes {
		if !a.ArgTypes[i].Identical(b.ArgTypes[i]) {
			return false
		}
	}
	return len(a.ArgTypes) == len(b.ArgTypes)
}

// flatten builds an AND (or, with or, an OR) of args, splicing in nested
// ones of the same kind and simplifying constants: a FALSE arm decides an
// AND, TRUE arms vanish from it (dually for OR).
func flatten(args []Expr, or bool) Expr {
	decide := types.DBool(or)
	var out []Expr
	for _, a := range args {
		var nested []Expr
		switch v := a.(type) {
		case *And:
			if !or {
				nested = v.Args
			}
		case *Or:
			if or {
				nested = v.Args
			}
		case *Const:
			if b, ok := v.Datum.(types.DBool); ok {
				if b == decide {
					return &Const{Datum: decide, T: types.Bool}
				}
				continue
			}
		}
		if nested != nil {
			out = append(out, nested...)
		} else {
			out = append(out, a)
		}
	}
	switch len(out) {
	case 0:
		return &Const{Datum: !decide, T: types.Bool}
	case 1:
		return out[0]
	}
	if or {
		return &Or{Args: out}
	}
	return &And{Args: out}
}
