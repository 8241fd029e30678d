package builtins

import (
	"strings"
	"sync"

	"github.com/cairn-db/cairn/sql/types"
)

// Resolved is the outcome of overload resolution for one call site.
type Resolved struct {
	Overload *Overload
	// ArgTypes are the types the binder must coerce each argument to
	// (pseudo-types replaced; variadic arguments expanded), so Fn sees
	// values of exactly these types.
	ArgTypes []*types.T
	// Return is the call's result type.
	Return *types.T
	// Order, for a call with named arguments (ResolveFuncNamed), gives
	// for each parameter the index of the call argument that supplies
	// it, or -1 when the parameter takes Overload.Defaults' value; nil
	// means the arguments are already positional.
	Order []int

	fn Fn // Overload.Bind(ArgTypes), when the overload has Bind
}

// Func is the body to call for this call site: Overload.Fn, or what
// Overload.Bind made for its argument types.
func (r *Resolved) Func() Fn {
	if r.fn != nil {
		return r.fn
	}
	return r.Overload.Fn
}

// Eval applies the overload to args, which must already have ArgTypes;
// for Strict overloads a NULL argument yields NULL without calling Fn.
func (r *Resolved) Eval(ctx EvalContext, args []types.Datum) (types.Datum, error) {
	if r.Overload.Class != Normal {
		return nil, errInternal("%s is not a scalar function; the executor drives it", r.Overload.Signature())
	}
	if r.Overload.Strict {
		for _, a := range args {
			if types.IsNull(a) {
				return types.DNull, nil
			}
		}
	}
	return r.Func()(ctx, args)
}

// ResolveFunc picks the overload of function name for arguments of the
// given types (types.Unknown for untyped literals) by Postgres's rules
// (the "Function" section of "Type Conversion" in its manual):
//
//  1. an overload whose parameters equal the argument types exactly wins;
//  2. otherwise keep the overloads every argument coerces to implicitly
//     (an unknown literal coerces to anything);
//  3. keep those with the most exact matches, then those taking the
//     preferred type of the argument's category at the most positions;
//  4. for unknown arguments, prefer the string category if any candidate
//     takes it there, else the one category all candidates take, and the
//     preferred type in it;
//  5. if the known arguments share one type, assume the unknowns have it.
//
// None left is 42883 "function f(integer) does not exist"; several are
// 42725 "function f(unknown) is not unique".
func ResolveFunc(name string, args []*types.T) (*Resolved, error) {
	name = strings.ToLower(name)
	r, n := resolve(functions[name], args, false)
	switch {
	case n == 0:
		return nil, errNoFunction(name, args)
	case r == nil:
		return nil, errFunctionNotUnique(name, args)
	}
	return finish(r, args)
}

// LookupBinaryOp resolves `left op right`. As in Postgres, when one side
// is an unknown literal it is first assumed to have the other side's type
// ('a' || 1 aside, this is what makes `col = 'literal'` pick col's type).
func LookupBinaryOp(op string, left, right *types.T) (*Resolved, error) {
	k := binaryOpKey{op, left, right}
	binaryOpMemo.mu.Lock()
	r, ok := binaryOpMemo.m[k]
	binaryOpMemo.mu.Unlock()
	if ok {
		return r, nil
	}
	r, err := lookupBinaryOp(op, left, right)
	if err != nil {
		return nil, err
	}
	binaryOpMemo.mu.Lock()
	if len(binaryOpMemo.m) >= maxBinaryOpMemo {
		clear(binaryOpMemo.m)
	}
	binaryOpMemo.m[k] = r
	binaryOpMemo.mu.Unlock()
	return r, nil
}

// binaryOpMemo keeps LookupBinaryOp's answers: resolution walks every
// overload of the operator, 3% of the CPU of a point SELECT. The answer
// depends on the operator and the two types only (the operator table is
// fixed and types are immutable), and a Resolved is never changed once
// made, so it is shared. Keyed by type identity: types built per
// statement (varchar(n), descriptor column types) only miss; the bound
// keeps those from growing it without limit.
var binaryOpMemo = struct {
	mu sync.Mutex
	m  map[binaryOpKey]*Resolved
}{m: map[binaryOpKey]*Resolved{}}

const maxBinaryOpMemo = 4096

type binaryOpKey struct {
	op          string
	left, right *types.T
}

func lookupBinaryOp(op string, left, right *types.T) (*Resolved, error) {
	args := []*types.T{left, right}
	r, n := resolve(binaryOps[op], args, true)
	switch {
	case n == 0:
		return nil, errNoBinaryOp(op, left, right)
	case r == nil:
		return nil, errBinaryOpNotUnique(op, left, right)
	}
	return finish(r, args)
}

// LookupUnaryOp resolves a prefix operator (-x, +x, ~x, @x, |/x, ||/x).
func LookupUnaryOp(op string, operand *types.T) (*Resolved, error) {
	args := []*types.T{operand}
	r, n := resolve(unaryOps[op], args, false)
	switch {
	case n == 0:
		return nil, errNoUnaryOp(op, operand)
	case r == nil:
		return nil, errUnaryOpNotUnique(op, operand)
	}
	return finish(r, args)
}

// candidate is an overload with its parameters expanded to the call's arity.
type candidate struct {
	o      *Overload
	params []*types.T
}

// resolve returns the chosen candidate, or nil with the number of
// applicable candidates (0: none; >1: ambiguous).
func resolve(ovs []*Overload, args []*types.T, binaryOp bool) (*candidate, int) {
	var cands []candidate
	for _, o := range ovs {
		if p, ok := expand(o, len(args)); ok {
			cands = append(cands, candidate{o, p})
		}
	}
	// Step 1: exact match. For a binary operator with one unknown side,
	// the unknown takes the other side's type for this step only.
	exactArgs := args
	if binaryOp && len(args) == 2 {
		if isUnknown(args[0]) && !isUnknown(args[1]) {
			exactArgs = []*types.T{args[1], args[1]}
		} else if isUnknown(args[1]) && !isUnknown(args[0]) {
			exactArgs = []*types.T{args[0], args[0]}
		}
	}
	for i := range cands {
		if exactMatch(cands[i].params, exactArgs) {
			return &cands[i], 1
		}
	}
	// Step 2: implicit coercibility.
	cands = filter(cands, func(c candidate) bool { return coercible(c.params, args) })
	if len(cands) <= 1 {
		if len(cands) == 1 {
			return &cands[0], 1
		}
		return nil, 0
	}
	// Step 3a: most exact matches.
	cands = keepMax(cands, func(c candidate) int {
		n := 0
		for i, a := range args {
			if !isUnknown(a) && sameType(a, c.params[i]) {
				n++
			}
		}
		return n
	})
	if len(cands) == 1 {
		return &cands[0], 1
	}
	// Step 3b: exact or preferred-in-the-argument's-category.
	cands = keepMax(cands, func(c candidate) int {
		n := 0
		for i, a := range args {
			if isUnknown(a) {
				continue
			}
			ac, _ := category(a)
			pc, pref := category(c.params[i])
			if sameType(a, c.params[i]) || pref && pc == ac {
				n++
			}
		}
		return n
	})
	if len(cands) == 1 {
		return &cands[0], 1
	}
	// Step 4: categories for unknown arguments; one unresolvable position
	// skips the step, as in Postgres.
	slotCat := make([]byte, len(args))
	slotPref := make([]bool, len(args))
	resolved := true
	for i, a := range args {
		if !isUnknown(a) {
			continue
		}
		conflict := false
		for _, c := range cands {
			pc, pref := category(c.params[i])
			switch {
			case slotCat[i] == 0:
				slotCat[i], slotPref[i] = pc, pref
			case pc == slotCat[i]:
				slotPref[i] = slotPref[i] || pref
			case pc == 'S':
				slotCat[i], slotPref[i] = pc, pref
			default:
				conflict = true
			}
		}
		if conflict && slotCat[i] != 'S' {
			resolved = false
			break
		}
	}
	if resolved {
		next := filter(cands, func(c candidate) bool {
			for i, a := range args {
				if !isUnknown(a) {
					continue
				}
				pc, pref := category(c.params[i])
				if pc != slotCat[i] || slotPref[i] && !pref {
					return false
				}
			}
			return true
		})
		if len(next) > 0 {
			cands = next
		}
	}
	if len(cands) == 1 {
		return &cands[0], 1
	}
	// Step 5: unknowns assumed to be the known arguments' common type.
	var known *types.T
	same, anyUnknown := true, false
	for _, a := range args {
		if isUnknown(a) {
			anyUnknown = true
			continue
		}
		if known != nil && !sameType(known, a) {
			same = false
		}
		known = a
	}
	if anyUnknown && same && known != nil {
		assumed := make([]*types.T, len(args))
		for i, a := range args {
			assumed[i] = a
			if isUnknown(a) {
				assumed[i] = known
			}
		}
		var hit []candidate
		for _, c := range cands {
			if coercible(c.params, assumed) {
				hit = append(hit, c)
			}
		}
		if len(hit) == 1 {
			return &hit[0], 1
		}
	}
	return nil, len(cands)
}

func expand(o *Overload, n int) ([]*types.T, bool) {
	if !o.Variadic {
		return o.Args, len(o.Args) == n
	}
	if n < len(o.Args) {
		return nil, false
	}
	p := make([]*types.T, n)
	copy(p, o.Args)
	for i := len(o.Args); i < n; i++ {
		p[i] = o.Args[len(o.Args)-1]
	}
	return p, true
}

func filter(cs []candidate, keep func(candidate) bool) []candidate {
	var out []candidate
	for _, c := range cs {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

func keepMax(cs []candidate, score func(candidate) int) []candidate {
	best := -1
	var out []candidate
	for _, c := range cs {
		switch s := score(c); {
		case s > best:
			best, out = s, []candidate{c}
		case s == best:
			out = append(out, c)
		}
	}
	return out
}

func isUnknown(t *types.T) bool { return t.Family == types.UnknownFamily && !isPseudo(t) }

// sameType ignores modifiers: varchar(3) is exactly varchar here.
func sameType(a, b *types.T) bool {
	if isPseudo(a) || isPseudo(b) {
		return false
	}
	if a.Family != b.Family || a.Oid != b.Oid {
		return false
	}
	if a.Family == types.ArrayFamily {
		return sameType(a.Elem, b.Elem)
	}
	return true
}

func exactMatch(params, args []*types.T) bool {
	for i, a := range args {
		if isUnknown(a) || !sameType(a, params[i]) {
			return false
		}
	}
	return true
}

func coercible(params, args []*types.T) bool {
	if _, ok := bindPolymorphic(params, args); !ok {
		return false
	}
	if _, ok := bindCompatible(params, args); !ok {
		return false
	}
	for i, a := range args {
		p := params[i]
		if p == AnyNonArray && a.Family == types.ArrayFamily {
			return false
		}
		if isPseudo(p) || isUnknown(a) {
			continue
		}
		if !types.ImplicitCastAllowed(a, p) {
			return false
		}
	}
	return true
}

// bindPolymorphic finds the type AnyElement stands for in this call: every
// AnyElement argument and every AnyArray argument's element must be the
// same type (no implicit casts, as in Postgres). It returns nil when only
// unknown literals are polymorphic.
func bindPolymorphic(params, args []*types.T) (*types.T, bool) {
	var elem *types.T
	bind := func(t *types.T) bool {
		if elem == nil {
			elem = t
			return true
		}
		return sameType(elem, t)
	}
	for i, a := range args {
		if isUnknown(a) {
			continue
		}
		switch params[i] {
		case AnyElement:
			if !bind(a) {
				return nil, false
			}
		case AnyEnum:
			if a.Family != types.EnumFamily || !bind(a) {
				return nil, false
			}
		case AnyArray:
			if a.Family != types.ArrayFamily || !bind(a.Elem) {
				return nil, false
			}
		}
	}
	return elem, true
}

// bindCompatible unifies the AnyCompatible arguments and AnyCompatibleArray
// elements with types.CommonType; nil when there are none.
func bindCompatible(params, args []*types.T) (*types.T, bool) {
	var ts []*types.T
	has := false
	for i, a := range args {
		switch params[i] {
		case AnyCompatible:
			has = true
			if a.Family == types.ArrayFamily {
				// An array is a fine anycompatible value, but not when
				// an array parameter sits beside it (array || array is
				// array_cat's job).
				for _, p := range params {
					if p == AnyCompatibleArray {
						return nil, false
					}
				}
			}
			ts = append(ts, a)
		case AnyCompatibleArray:
			has = true
			if isUnknown(a) {
				continue
			}
			if a.Family != types.ArrayFamily {
				return nil, false
			}
			ts = append(ts, a.Elem)
		}
	}
	if !has {
		return nil, true
	}
	t, err := types.CommonType("", ts...)
	if err != nil {
		return nil, false
	}
	return t, true
}

func finish(c *candidate, args []*types.T) (*Resolved, error) {
	elem, _ := bindPolymorphic(c.params, args)
	compat, _ := bindCompatible(c.params, args)
	at := make([]*types.T, len(args))
	for i, p := range c.params {
		switch p {
		case Any, AnyNonArray:
			at[i] = args[i]
			if isUnknown(args[i]) {
				at[i] = types.Text
			}
		case AnyCompatible:
			at[i] = compat
		case AnyCompatibleArray:
			arr, err := types.MakeArray(compat)
			if err != nil {
				return nil, err
			}
			at[i] = arr
		case AnyElement, AnyEnum:
			if elem == nil {
				return nil, errPolymorphicUnknown()
			}
			at[i] = elem
		case AnyArray:
			if elem == nil {
				return nil, errPolymorphicUnknown()
			}
			arr, err := types.MakeArray(elem)
			if err != nil {
				return nil, err
			}
			at[i] = arr
		default:
			at[i] = p
		}
	}
	r := &Resolved{Overload: c.o, ArgTypes: at, Return: c.o.Return(at)}
	if r.Return == nil {
		// The result would be a type Cairn lacks (an array of arrays).
		return nil, errUnsupported("%s(%s) would return a multidimensional array, which is not supported", c.o.Name(), typeList(at))
	}
	if c.o.Bind != nil {
		r.fn = c.o.Bind(at, args)
	}
	return r, nil
}

// category is pg_type.typcategory and typispreferred, with the
// pseudo-types of polymorphic signatures in their own category.
func category(t *types.T) (cat byte, preferred bool) {
	if isPseudo(t) {
		return 'P', false
	}
	return t.Category()
}
