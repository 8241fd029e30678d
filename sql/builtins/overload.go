package builtins

import (
	"hash/fnv"
	"slices"
	"strings"

	"github.com/cairn-db/cairn/sql/types"
)

// Volatility is pg_proc.provolatile: whether the planner may fold a call at
// plan time (immutable), once per statement (stable) or never (volatile).
type Volatility uint8

// The volatilities, from the most foldable.
const (
	Immutable Volatility = iota
	Stable
	Volatile
)

func (v Volatility) String() string {
	return [...]string{"immutable", "stable", "volatile"}[v]
}

// Class says how the executor drives an overload.
type Class uint8

// The classes.
const (
	// Normal functions and operators: Fn maps one row's arguments to a value.
	Normal Class = iota
	// Generator (set-returning) functions: SRF yields rows of Columns.
	Generator
	// Aggregate functions: NewAggregate returns an accumulator.
	AggregateClass
	// Window-only functions: NewWindow returns a WindowFunc. Every
	// aggregate is also usable as a window function through AggregateWindow.
	WindowClass
)

// Pseudo-types usable in Overload.Args. They are never the type of a value:
// resolution replaces them by concrete types (ResolvedFunc.ArgTypes).
var (
	// AnyElement matches any non-unknown type; every AnyElement argument
	// and the element of every AnyArray argument of one call must agree.
	AnyElement = &types.T{Family: types.UnknownFamily, Oid: 2283}
	// AnyArray matches any array type, consistently with AnyElement.
	AnyArray = &types.T{Family: types.UnknownFamily, Oid: 2277}
	// Any is Postgres's "any": each argument independently any type, an
	// unknown literal becoming text.
	Any = &types.T{Family: types.UnknownFamily, Oid: 2276}
	// AnyNonArray is like Any but rejects arrays (text || anynonarray).
	AnyNonArray = &types.T{Family: types.UnknownFamily, Oid: 2776}
	// AnyCompatible and AnyCompatibleArray are Postgres 13's looser
	// polymorphism: the arguments' types (elements, for arrays) are
	// unified with types.CommonType and coerced implicitly, so
	// array_append(int[], numeric) yields numeric[]; all-unknown means text.
	AnyCompatible      = &types.T{Family: types.UnknownFamily, Oid: 5077}
	AnyCompatibleArray = &types.T{Family: types.UnknownFamily, Oid: 5078}
	// AnyEnum is AnyElement restricted to enum types (the enum
	// comparison operators, min/max, enum_first, enum_range).
	AnyEnum = &types.T{Family: types.UnknownFamily, Oid: 3500}
)

func isPseudo(t *types.T) bool {
	switch t {
	case AnyElement, AnyArray, Any, AnyNonArray, AnyCompatible, AnyCompatibleArray, AnyEnum:
		return true
	}
	return false
}

// typeName prints a type, pseudo-types included, as Postgres's error
// messages do.
func typeName(t *types.T) string {
	switch t {
	case AnyElement:
		return "anyelement"
	case AnyArray:
		return "anyarray"
	case Any:
		return `"any"`
	case AnyNonArray:
		return "anynonarray"
	case AnyCompatible:
		return "anycompatible"
	case AnyCompatibleArray:
		return "anycompatiblearray"
	case AnyEnum:
		return "anyenum"
	}
	return t.Name()
}

// ReturnFunc computes an overload's result type from its resolved argument
// types (pseudo-types already replaced).
type ReturnFunc func(args []*types.T) *types.T

// Fixed returns a ReturnFunc that always returns t.
func Fixed(t *types.T) ReturnFunc { return func([]*types.T) *types.T { return t } }

// SameAsArg returns a ReturnFunc that returns the i-th argument's type.
func SameAsArg(i int) ReturnFunc { return func(a []*types.T) *types.T { return a[i] } }

// Fn evaluates a normal function or operator. args are already coerced to
// the resolved argument types; with Strict, none is NULL. Fn must not keep
// or modify args.
type Fn func(ctx EvalContext, args []types.Datum) (types.Datum, error)

// SRF starts a set-returning function over one row's arguments.
type SRF func(ctx EvalContext, args []types.Datum) (RowIter, error)

// RowIter yields the rows of a set-returning function. Next returns false
// at the end; the returned row is owned by the caller.
type RowIter interface {
	Next() (row []types.Datum, ok bool, err error)
}

// Column is one output column of a set-returning function.
type Column struct {
	Name string
	Type *types.T
}

// Overload is one signature of a function or operator.
type Overload struct {
	// Args are the parameter types; pseudo-types (AnyElement, AnyArray,
	// Any) are allowed. With Variadic, the last one repeats one or more
	// times and Fn receives the repeated arguments flattened.
	Args     []*types.T
	Variadic bool
	// Return computes the result type (for a Generator with one column,
	// the column's type).
	Return ReturnFunc
	Class  Class
	// Fn evaluates Normal overloads.
	Fn Fn
	// Bind, when set, makes a Normal overload's body from the call's
	// resolved argument types (and the types the call site had, unknown
	// for untyped literals), for the few functions whose result depends
	// on them rather than on the values (pg_typeof); Fn is then unused
	// and Resolved.Func returns Bind's result.
	Bind func(argTypes, callTypes []*types.T) Fn
	// ArgNames are the parameters' names (pg_proc.proargnames), which
	// calls may use (make_interval(days => 3)); nil when the function
	// takes no named arguments. Defaults are the values of the trailing
	// len(Defaults) parameters when a named call omits them
	// (pg_proc.proargdefaults).
	ArgNames []string
	Defaults []types.Datum
	// OrderedSet marks an ordered-set aggregate (percentile_cont(f)
	// WITHIN GROUP (ORDER BY x)): Args are the direct arguments followed
	// by the ORDER BY ones, and the executor calls Add with all of them,
	// rows in the WITHIN GROUP order.
	OrderedSet bool
	// SRF and Columns describe Generator overloads. A single column is
	// named after the function, as Postgres names it.
	SRF     SRF
	Columns func(args []*types.T) []Column
	// NewAggregate returns a fresh accumulator for AggregateClass.
	NewAggregate func(args []*types.T) Aggregate
	// NewWindow returns a fresh window function for WindowClass.
	NewWindow func(args []*types.T) WindowFunc
	// Strict: a NULL argument makes the result NULL without calling Fn or
	// SRF (a generator then yields no rows). Aggregates leave it false:
	// their accumulators skip NULLs themselves (invariant 5).
	Strict     bool
	Volatility Volatility
	// OID is a stable pg_proc-like identifier derived from the name and
	// signature (see signatureOID).
	OID uint32

	name string
}

// Name returns the function or operator name the overload was registered
// under.
func (o *Overload) Name() string { return o.name }

// Signature returns "name(type, type)" as \df would show the arguments.
func (o *Overload) Signature() string {
	var b strings.Builder
	b.WriteString(o.name)
	b.WriteByte('(')
	for i, a := range o.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		if o.Variadic && i == len(o.Args)-1 {
			b.WriteString("VARIADIC ")
		}
		b.WriteString(typeName(a))
	}
	b.WriteByte(')')
	return b.String()
}

// registries, filled by the init functions of the fn_*.go and ops_*.go
// files and read-only afterwards (invariant 1), so lookups need no lock.
var (
	functions = map[string][]*Overload{}
	binaryOps = map[string][]*Overload{}
	unaryOps  = map[string][]*Overload{}
	oids      = map[uint32]*Overload{}
)

// Lookup returns the overloads of a function (aggregates and window
// functions included); name is case-insensitive. The result is shared:
// do not modify it.
func Lookup(name string) []*Overload { return functions[strings.ToLower(name)] }

// Names returns every registered function name, sorted, for catalogs.
func Names() []string {
	out := make([]string, 0, len(functions))
	for n := range functions {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// ByOID returns the overload (function or operator) with the given OID.
func ByOID(oid uint32) (*Overload, bool) {
	o, ok := oids[oid]
	return o, ok
}

func register(m map[string][]*Overload, kind, name string, ovs ...Overload) {
	for i := range ovs {
		o := ovs[i]
		o.name = name
		if o.Return == nil {
			panic("builtins: " + name + " registered without a return type")
		}
		o.OID = signatureOID(kind, &o)
		if prev, dup := oids[o.OID]; dup {
			panic("builtins: OID collision between " + prev.Signature() + " and " + o.Signature())
		}
		oids[o.OID] = &o
		m[name] = append(m[name], &o)
	}
}

func registerFn(name string, ovs ...Overload)   { register(functions, "f", name, ovs...) }
func registerBinary(op string, ovs ...Overload) { register(binaryOps, "b", op, ovs...) }
func registerUnary(op string, ovs ...Overload)  { register(unaryOps, "u", op, ovs...) }

// signatureOID hashes the kind, name and argument type OIDs into
// [1<<24, 1<<31): above every OID Postgres or a user object will have for
// years, and unchanged as long as the signature is, which is what pg_proc
// readers (\df, drivers caching OIDs) rely on. Collisions panic at init.
func signatureOID(kind string, o *Overload) uint32 {
	h := fnv.New32a()
	h.Write([]byte(kind))
	h.Write([]byte(o.name))
	for _, a := range o.Args {
		var b [5]byte
		b[0] = '/'
		b[1], b[2], b[3], b[4] = byte(a.Oid>>24), byte(a.Oid>>16), byte(a.Oid>>8), byte(a.Oid)
		h.Write(b[:])
	}
	if o.Variadic {
		h.Write([]byte("..."))
	}
	return 1<<24 + h.Sum32()%(1<<31-1<<24)
}
