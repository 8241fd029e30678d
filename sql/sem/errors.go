package sem

import (
	"errors"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Every user-facing error of this package is built here with Postgres's
// SQLSTATE and wording (invariant 4). Build attaches positions with
// withPos; evaluation errors come mostly from builtins and types.

// ErrUndefinedColumn is what a Scope returns for a name it does not know:
// 42703 `column "x" does not exist`, or `column t.x does not exist` for a
// qualified name (Postgres quotes only the bare form).
func ErrUndefinedColumn(fields ...string) error {
	if len(fields) == 1 {
		return pgerror.New(pgerrcode.UndefinedColumn, "column %q does not exist", fields[0])
	}
	return pgerror.New(pgerrcode.UndefinedColumn, "column %s does not exist", strings.Join(fields, "."))
}

// ErrMissingFrom is what a Scope returns for a qualifier that names no
// relation in scope: 42P01 `missing FROM-clause entry for table "q"`.
func ErrMissingFrom(table string) error {
	return pgerror.New(pgerrcode.UndefinedTable, "missing FROM-clause entry for table %q", table)
}

// ErrAmbiguousColumn is what a Scope returns for a name several of its
// relations have: 42702 `column reference "x" is ambiguous`.
func ErrAmbiguousColumn(name string) error {
	return pgerror.New(pgerrcode.AmbiguousColumn, "column reference %q is ambiguous", name)
}

// PositionError carries the 1-based character position of the part of the
// statement an error is about. pgwire reports ErrorPosition() as the
// ErrorResponse's position field.
type PositionError struct {
	Err error
	Pos int
}

func (e *PositionError) Error() string      { return e.Err.Error() }
func (e *PositionError) Unwrap() error      { return e.Err }
func (e *PositionError) ErrorPosition() int { return e.Pos }

// ErrorPosition returns the position an error carries, 0 when none.
func ErrorPosition(err error) int {
	var p interface{ ErrorPosition() int }
	if errors.As(err, &p) {
		return p.ErrorPosition()
	}
	return 0
}

func errWrongType(what string, want, got *types.T) error {
	return pgerror.New(pgerrcode.DatatypeMismatch, "argument of %s must be type %s, not type %s", what, want.Name(), got.Name())
}

func errAssign(col string, colType, exprType *types.T) error {
	return pgerror.New(pgerrcode.DatatypeMismatch, "column %q is of type %s but expression is of type %s", col, colType.Name(), exprType.Name()).
		WithHint("You will need to rewrite or cast the expression.")
}

func errCannotCast(from, to *types.T) error {
	return pgerror.New(pgerrcode.CannotCoerce, "cannot cast type %s to %s", from.Name(), to.Name())
}

func errAggNotAllowed(clause string) error {
	return pgerror.New(pgerrcode.GroupingError, "aggregate functions are not allowed in %s", clause)
}

func errWindowNotAllowed(clause string) error {
	return pgerror.New(pgerrcode.WindowingError, "window functions are not allowed in %s", clause)
}

func errSRFNotAllowed(clause string) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, "set-returning functions are not allowed in %s", clause)
}

func errSubqueryNotAllowed(clause string) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, "cannot use subquery in %s", clause)
}

func errWindowNeedsOver(name string) error {
	return pgerror.New(pgerrcode.WrongObjectType, "window function %s requires an OVER clause", name)
}

func errNotAggregate(what, name string) error {
	return pgerror.New(pgerrcode.WrongObjectType, "%s specified, but %s is not an aggregate function", what, name)
}

func errUnknownParamType(i int) error {
	return pgerror.New(pgerrcode.IndeterminateDatatype, "could not determine data type of parameter $%d", i)
}

func errAmbiguousParam(i int) error {
	return pgerror.New(pgerrcode.AmbiguousParameter, "could not determine data type of parameter $%d", i)
}

func errNoParam(i int) error {
	return pgerror.New(pgerrcode.UndefinedParameter, "there is no parameter $%d", i)
}

func errRowArity() error {
	return pgerror.New(pgerrcode.SyntaxError, "unequal number of entries in row expressions")
}

func errEmptyArray() error {
	return pgerror.New(pgerrcode.IndeterminateDatatype, "cannot determine type of empty array").
		WithHint("Explicitly cast to the desired type, for example ARRAY[]::integer[].")
}

func errNotSubscriptable(t *types.T) error {
	return pgerror.New(pgerrcode.DatatypeMismatch, "cannot subscript type %s because it does not support subscripting", t.Name())
}

func errOpNotBoolean(op string) error {
	return pgerror.New(pgerrcode.DatatypeMismatch, "operator %s must return type boolean", op)
}

func errAnyNeedsArray(t *types.T) error {
	return pgerror.New(pgerrcode.WrongObjectType, "op ANY/ALL (array) requires array on right side").
		WithDetail("The right side is of type %s.", t.Name())
}

func errSubqueryColumns(many bool) error {
	if many {
		return pgerror.New(pgerrcode.SyntaxError, "subquery has too many columns")
	}
	return pgerror.New(pgerrcode.SyntaxError, "subquery must return only one column")
}

// ErrScalarSubqueryRows is what the executor reports when a scalar subquery
// returns more than one row: 21000, in Postgres's words.
func ErrScalarSubqueryRows() error {
	return pgerror.New(pgerrcode.CardinalityViolation, "more than one row returned by a subquery used as an expression")
}

func errUnsupported(format string, args ...any) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, format, args...)
}

func errNotEvaluable(e Expr) error {
	return pgerror.New(pgerrcode.InternalError, "sem: %s cannot be evaluated here (the binder must replace it)", e.String())
}
