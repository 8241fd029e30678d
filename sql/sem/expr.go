package sem

import (
	"strings"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/types"
)

// Expr is a typed scalar expression. Trees are immutable once built
// (invariant 1): rewriting functions (Map, Fold, NormalizeBool) return new
// nodes and share unchanged subtrees.
type Expr interface {
	// Type is the expression's result type; never nil and never unknown
	// once Build has returned.
	Type() *types.T
	// String prints the expression as Postgres's EXPLAIN does.
	String() string
	expr()
}

// ColumnID names a column of the scope an expression was built in. The
// binder allocates them; sem only carries them.
type ColumnID int32

// Const is a constant value of type T (types.DNull for a typed NULL).
type Const struct {
	Datum types.Datum
	T     *types.T
}

// Param is the prepared-statement parameter $Index (1-based).
type Param struct {
	Index int
	T     *types.T
}

// ColRef reads column ID of the current row. Name is what String prints
// (the binder qualifies it, "t.a", when EXPLAIN needs the qualifier).
type ColRef struct {
	ID   ColumnID
	T    *types.T
	Name string
}

// FuncCall applies a resolved function to arguments already coerced to
// Fn.ArgTypes.
type FuncCall struct {
	Fn   *builtins.Resolved
	Args []Expr
}

// BinOp applies a resolved binary operator (arithmetic, ||, jsonb, LIKE,
// regex, containment); its operands are coerced to Fn.ArgTypes.
type BinOp struct {
	Op          string
	Fn          *builtins.Resolved
	Left, Right Expr
}

// UnaryOp applies a resolved prefix operator.
type UnaryOp struct {
	Op  string
	Fn  *builtins.Resolved
	Arg Expr
}

// CmpOp is a comparison operator.
type CmpOp string

// The comparison operators. IsDistinctFrom and IsNotDistinctFrom never
// yield NULL.
const (
	EQ                CmpOp = "="
	NE                CmpOp = "<>"
	LT                CmpOp = "<"
	LE                CmpOp = "<="
	GT                CmpOp = ">"
	GE                CmpOp = ">="
	IsDistinctFrom    CmpOp = "IS DISTINCT FROM"
	IsNotDistinctFrom CmpOp = "IS NOT DISTINCT FROM"
)

// Negate returns the operator whose result is NOT of op's for non-NULL
// inputs (and NULL stays NULL, so it is safe under three-valued logic).
func (op CmpOp) Negate() CmpOp {
	switch op {
	case EQ:
		return NE
	case NE:
		return EQ
	case LT:
		return GE
	case GE:
		return LT
	case GT:
		return LE
	case LE:
		return GT
	case IsDistinctFrom:
		return IsNotDistinctFrom
	}
	return IsDistinctFrom
}

// Cmp compares two values. Fn is the resolved comparison operator (= for
// the DISTINCT forms); both sides are coerced to its argument types.
type Cmp struct {
	Op          CmpOp
	Fn          *builtins.Resolved
	Left, Right Expr
}

// And is the n-ary conjunction of boolean Args, with SQL's three-valued
// logic (false wins over NULL).
type And struct{ Args []Expr }

// Or is the n-ary disjunction (true wins over NULL).
type Or struct{ Args []Expr }

// Not negates a boolean (NOT NULL is NULL).
type Not struct{ Arg Expr }

// IsNull is `Arg IS NULL`, or `Arg IS NOT NULL` when Negated.
type IsNull struct {
	Arg     Expr
	Negated bool
}

// BoolTestKind is which IS [NOT] TRUE/FALSE/UNKNOWN test a BoolTest is.
type BoolTestKind uint8

// The boolean tests.
const (
	IsTrue BoolTestKind = iota
	IsNotTrue
	IsFalse
	IsNotFalse
	IsUnknown
	IsNotUnknown
)

var boolTestNames = [...]string{"IS TRUE", "IS NOT TRUE", "IS FALSE", "IS NOT FALSE", "IS UNKNOWN", "IS NOT UNKNOWN"}

// BoolTest is `Arg IS [NOT] TRUE|FALSE|UNKNOWN`; it never yields NULL.
type BoolTest struct {
	Kind BoolTestKind
	Arg  Expr
}

// When is one WHEN arm of a Case. In a searched CASE, Cond is boolean; in
// a simple CASE it is the value compared with the operand by Eq (whose
// left argument type the operand is cast to, OperandTo, when it differs).
type When struct {
	Cond, Result Expr
	Eq           *builtins.Resolved
	OperandTo    *types.T
}

// Case is CASE [Operand] WHEN ... [ELSE Else] END; Else nil means NULL.
// Arms are evaluated in order and only as far as needed.
type Case struct {
	Operand Expr
	Whens   []When
	Else    Expr
	T       *types.T
}

// Coalesce returns its first non-NULL argument, evaluating no further.
type Coalesce struct {
	Args []Expr
	T    *types.T
}

// NullIf is NULLIF(Left, Right): NULL when Left = Right, else Left.
type NullIf struct {
	Left, Right Expr
	Eq          *builtins.Resolved
}

// MinMax is GREATEST (Greatest) or LEAST of Args, ignoring NULLs.
type MinMax struct {
	Greatest bool
	Args     []Expr
	T        *types.T
}

// Cast converts Expr to To. Context says why: types.CastExplicit for
// CAST/::, types.CastImplicit for a coercion the type checker inserted,
// types.CastAssignment for a value stored in a column (which uses
// types.AssignmentCast: too-long strings are 22001, not truncated).
// String prints them alike, as Postgres does.
type Cast struct {
	Expr    Expr
	To      *types.T
	Context types.CastKind
}

// In is `Left IN (List...)` (`NOT IN` when Negated), with Eq comparing
// Left to each element; all elements share Eq's right type.
type In struct {
	Left    Expr
	List    []Expr
	Eq      *builtins.Resolved
	Negated bool
}

// AnyAll is `Left Op ANY (Array)` or, with All, `Left Op ALL (Array)`.
type AnyAll struct {
	Op    CmpOp
	Fn    *builtins.Resolved
	Left  Expr
	Array Expr
	All   bool
}

// RowCmp is an ordering comparison of two rows, (a, b) < (c, d),
// decided by the first pair that is not equal. Fns compare each pair.
type RowCmp struct {
	Op          CmpOp
	Fns         []*builtins.Resolved
	Left, Right []Expr
}

// ArrayExpr is ARRAY[Elems...]; the elements are coerced to T.Elem.
type ArrayExpr struct {
	Elems []Expr
	T     *types.T
}

// RowCons is ROW(Args...) used as a value: a record of type T, whose
// fields are named by the binder (f1, f2, ... for a plain ROW).
type RowCons struct {
	Args []Expr
	T    *types.T
}

// FieldSelect is (Arg).field: field Index of a record.
type FieldSelect struct {
	Arg   Expr
	Index int
}

// Subscript is Array[Index] (1-based; out of range or NULL yields NULL).
type Subscript struct {
	Array, Index Expr
}

// SubqueryKind is how a subquery's result is used.
type SubqueryKind uint8

// The subquery kinds.
const (
	// ScalarSubquery: (SELECT x): one value, NULL when empty.
	ScalarSubquery SubqueryKind = iota
	// ExistsSubquery: EXISTS (SELECT ...).
	ExistsSubquery
	// AnySubquery: Left Op ANY (SELECT x), which IN (SELECT x) is.
	AnySubquery
	// AllSubquery: Left Op ALL (SELECT x).
	AllSubquery
	// ArraySubquery: ARRAY(SELECT x).
	ArraySubquery
)

// SubqueryRef is a subquery the binder planned; sem only types it. The
// executor supplies its value through EvalContext.Subqueries. For the
// ANY/ALL kinds, Left is compared by Fn with every value of the column.
type SubqueryRef struct {
	ID   int
	Kind SubqueryKind
	T    *types.T
	Op   CmpOp
	Fn   *builtins.Resolved
	Left Expr
	// Col is the subquery column's type (ANY/ALL), cast to Fn's right
	// argument type when they differ.
	Col *types.T
}

// AggCall is an aggregate (or, with Window set, a window function) call
// found by Build. It cannot be evaluated: the binder extracts it with
// Aggregates and replaces it (Map) by an AggRef or WindowRef.
type AggCall struct {
	Fn       *builtins.Resolved
	Name     string
	Args     []Expr
	Star     bool // count(*)
	Distinct bool
	Filter   Expr // FILTER (WHERE ...), nil when absent
	Window   bool // an OVER clause was given (its definition is the binder's)
}

// AggRef reads the Index-th aggregate result the executor computed.
type AggRef struct {
	Index int
	T     *types.T
	Text  string // what String prints, the call's text: "sum(a)"
}

// WindowRef reads the Index-th window function result.
type WindowRef struct {
	Index int
	T     *types.T
	Text  string
}

// Type implementations.

func (e *Const) Type() *types.T       { return e.T }
func (e *Param) Type() *types.T       { return e.T }
func (e *ColRef) Type() *types.T      { return e.T }
func (e *FuncCall) Type() *types.T    { return e.Fn.Return }
func (e *BinOp) Type() *types.T       { return e.Fn.Return }
func (e *UnaryOp) Type() *types.T     { return e.Fn.Return }
func (e *Cmp) Type() *types.T         { return types.Bool }
func (e *And) Type() *types.T         { return types.Bool }
func (e *Or) Type() *types.T          { return types.Bool }
func (e *Not) Type() *types.T         { return types.Bool }
func (e *IsNull) Type() *types.T      { return types.Bool }
func (e *BoolTest) Type() *types.T    { return types.Bool }
func (e *Case) Type() *types.T        { return e.T }
func (e *Coalesce) Type() *types.T    { return e.T }
func (e *NullIf) Type() *types.T      { return e.Left.Type() }
func (e *MinMax) Type() *types.T      { return e.T }
func (e *Cast) Type() *types.T        { return e.To }
func (e *In) Type() *types.T          { return types.Bool }
func (e *AnyAll) Type() *types.T      { return types.Bool }
func (e *RowCmp) Type() *types.T      { return types.Bool }
func (e *ArrayExpr) Type() *types.T   { return e.T }
func (e *Subscript) Type() *types.T   { return subscriptType(e.Array.Type()) }
func (e *RowCons) Type() *types.T     { return e.T }
func (e *FieldSelect) Type() *types.T { return e.Arg.Type().Fields[e.Index].T }
func (e *SubqueryRef) Type() *types.T { return e.T }
func (e *AggCall) Type() *types.T     { return e.Fn.Return }
func (e *AggRef) Type() *types.T      { return e.T }
func (e *WindowRef) Type() *types.T   { return e.T }

func (*Const) expr()       {}
func (*Param) expr()       {}
func (*ColRef) expr()      {}
func (*FuncCall) expr()    {}
func (*BinOp) expr()       {}
func (*UnaryOp) expr()     {}
func (*Cmp) expr()         {}
func (*And) expr()         {}
func (*Or) expr()          {}
func (*Not) expr()         {}
func (*IsNull) expr()      {}
func (*BoolTest) expr()    {}
func (*Case) expr()        {}
func (*Coalesce) expr()    {}
func (*NullIf) expr()      {}
func (*MinMax) expr()      {}
func (*Cast) expr()        {}
func (*In) expr()          {}
func (*AnyAll) expr()      {}
func (*RowCmp) expr()      {}
func (*ArrayExpr) expr()   {}
func (*Subscript) expr()   {}
func (*RowCons) expr()     {}
func (*FieldSelect) expr() {}
func (*SubqueryRef) expr() {}
func (*AggCall) expr()     {}
func (*AggRef) expr()      {}
func (*WindowRef) expr()   {}

// joinExprs prints a comma-separated argument list.
func joinExprs(es []Expr, sep string) string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(e.String())
	}
	return b.String()
}

// subscriptType is the type of an element of t: a name's elements are its
// bytes, as "char" (types.NameByte).
func subscriptType(t *types.T) *types.T {
	if t.Family != types.ArrayFamily {
		return types.Char
	}
	return t.Elem
}
