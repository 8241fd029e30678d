package session

import (
	"reflect"
	"sync"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// Custom plans. The session binds a prepared statement again at every
// Execute (but for point lookups, plancache.go), so it can do what
// PostgreSQL does for its custom plans: put the parameter values into the
// plan as constants before optimizing. The optimizer then derives index spans from them
// (WHERE id = $1 becomes a point lookup instead of a scan with a filter),
// and constant subexpressions fold. The executor still gets the values,
// for any placeholder left (none should be).

var (
	exprType    = reflect.TypeFor[sem.Expr]()
	planPkgPath = reflect.TypeFor[plan.Plan]().PkgPath()
)

// substituteParams replaces $n by its value in every expression of p.
func substituteParams(p *plan.Plan, params []types.Datum, tc *types.Context) {
	if len(params) == 0 {
		return
	}
	bind := func(e sem.Expr) sem.Expr { return bindParams(e, params, tc) }
	walkExprs(reflect.ValueOf(p), bind, make(map[uintptr]bool))
}

// bindParams returns e with $n replaced by its value and folded (e itself
// when it holds no parameter).
func bindParams(e sem.Expr, params []types.Datum, tc *types.Context) sem.Expr {
	changed := false
	m := sem.Map(e, func(e sem.Expr) sem.Expr {
		if pr, ok := e.(*sem.Param); ok && pr.Index >= 1 && pr.Index <= len(params) {
			changed = true
			return &sem.Const{Datum: params[pr.Index-1], T: pr.T}
		}
		return e
	})
	if !changed {
		return e // the binder folded it already
	}
	return sem.Fold(tc, m)
}

// walkExprs visits every settable sem.Expr reachable from v through the
// plan package's nodes (not into catalog descriptors or types) and
// replaces it with f's result when that fits the field.
func walkExprs(v reflect.Value, f func(sem.Expr) sem.Expr, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		if v.Type() == exprType {
			if v.CanSet() {
				v.Set(reflect.ValueOf(f(v.Interface().(sem.Expr))))
			}
			return
		}
		walkExprs(v.Elem(), f, seen) // a plan.Node holding a *plan.X
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Type().Implements(exprType) {
			// A concrete expression field (SetFunc.Call *sem.FuncCall).
			if v.CanSet() {
				if out := reflect.ValueOf(f(v.Interface().(sem.Expr))); out.Type().AssignableTo(v.Type()) {
					v.Set(out)
				}
			}
			return
		}
		if v.Type().Elem().PkgPath() != planPkgPath || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		walkExprs(v.Elem(), f, seen)
	case reflect.Struct:
		for _, i := range exprFields(v.Type()) {
			walkExprs(v.Field(i), f, seen)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkExprs(v.Index(i), f, seen)
		}
	}
}

// exprFields returns the exported fields of struct type t through which
// walkExprs can reach an expression: reflecting over every field of
// every node (names, types, column lists) was most of substituteParams'
// cost.
func exprFields(t reflect.Type) []int {
	if v, ok := exprFieldCache.Load(t); ok {
		return v.([]int)
	}
	var out []int
	for i := range t.NumField() {
		if fl := t.Field(i); fl.IsExported() && mayHoldExpr(fl.Type, map[reflect.Type]bool{}) {
			out = append(out, i)
		}
	}
	exprFieldCache.Store(t, out)
	return out
}

var exprFieldCache sync.Map // reflect.Type -> []int

// mayHoldExpr reports whether walkExprs can find an expression inside a
// value of type t (conservatively: any interface may). visiting breaks
// cycles of recursive types.
func mayHoldExpr(t reflect.Type, visiting map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer:
		if t.Implements(exprType) {
			return true
		}
		if t.Elem().PkgPath() != planPkgPath {
			return false
		}
		return mayHoldExpr(t.Elem(), visiting)
	case reflect.Struct:
		if visiting[t] {
			return true
		}
		visiting[t] = true
		for i := range t.NumField() {
			if fl := t.Field(i); fl.IsExported() && mayHoldExpr(fl.Type, visiting) {
				return true
			}
		}
		return false
	case reflect.Slice, reflect.Array:
		return mayHoldExpr(t.Elem(), visiting)
	}
	return false
}
