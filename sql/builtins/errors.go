package builtins

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Every user-facing error of this package is built here, with Postgres's
// wording and SQLSTATE (invariant 4).

// Resolution errors.

func errNoFunction(name string, args []*types.T) error {
	return pgerror.New(pgerrcode.UndefinedFunction, "function %s(%s) does not exist", name, typeList(args)).
		WithHint("No function matches the given name and argument types. You might need to add explicit type casts.")
}

func errFunctionNotUnique(name string, args []*types.T) error {
	return pgerror.New(pgerrcode.AmbiguousFunction, "function %s(%s) is not unique", name, typeList(args)).
		WithHint("Could not choose a best candidate function. You might need to add explicit type casts.")
}

func errNoBinaryOp(op string, l, r *types.T) error {
	return pgerror.New(pgerrcode.UndefinedFunction, "operator does not exist: %s %s %s", typeName(l), op, typeName(r)).
		WithHint("No operator matches the given name and argument types. You might need to add explicit type casts.")
}

func errBinaryOpNotUnique(op string, l, r *types.T) error {
	return pgerror.New(pgerrcode.AmbiguousFunction, "operator is not unique: %s %s %s", typeName(l), op, typeName(r)).
		WithHint("Could not choose a best candidate operator. You might need to add explicit type casts.")
}

func errNoUnaryOp(op string, t *types.T) error {
	return pgerror.New(pgerrcode.UndefinedFunction, "operator does not exist: %s %s", op, typeName(t)).
		WithHint("No operator matches the given name and argument type. You might need to add an explicit type cast.")
}

func errUnaryOpNotUnique(op string, t *types.T) error {
	return pgerror.New(pgerrcode.AmbiguousFunction, "operator is not unique: %s %s", op, typeName(t)).
		WithHint("Could not choose a best candidate operator. You might need to add an explicit type cast.")
}

func errPolymorphicUnknown() error {
	return pgerror.New(pgerrcode.DatatypeMismatch, "could not determine polymorphic type because input has type unknown")
}

func typeList(args []*types.T) string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = typeName(a)
	}
	return strings.Join(s, ", ")
}

// Arithmetic errors.

var (
	errDivByZero      = pgerror.New(pgerrcode.DivisionByZero, "division by zero")
	errFloatOverflow  = pgerror.New(pgerrcode.NumericValueOutOfRange, "value out of range: overflow")
	errFloatUnderflow = pgerror.New(pgerrcode.NumericValueOutOfRange, "value out of range: underflow")
	errNumericFormat  = pgerror.New(pgerrcode.NumericValueOutOfRange, "value overflows numeric format")
	errIntervalRange  = pgerror.New(pgerrcode.DatetimeFieldOverflow, "interval out of range")
	errTimestampRange = pgerror.New(pgerrcode.DatetimeFieldOverflow, "timestamp out of range")
	errDateRange      = pgerror.New(pgerrcode.DatetimeFieldOverflow, "date out of range")
)

// errIntRange is Postgres's per-width overflow message.
func errIntRange(width int32) error {
	name := map[int32]string{16: "smallint", 32: "integer", 64: "bigint"}[width]
	return pgerror.New(pgerrcode.NumericValueOutOfRange, "%s out of range", name)
}

func errInvalidParam(format string, args ...any) *pgerror.Error {
	return pgerror.New(pgerrcode.InvalidParameterValue, format, args...)
}

func errInvalidArg(format string, args ...any) error {
	return pgerror.New(pgerrcode.InvalidArgumentForPowerFunction, format, args...)
}

func errLog(format string, args ...any) error {
	return pgerror.New(pgerrcode.InvalidArgumentForLogarithm, format, args...)
}

// Pattern errors.

func errInvalidEscape() error {
	return pgerror.New(pgerrcode.InvalidEscapeSequence, "LIKE pattern must not end with escape character")
}

func errInvalidEscapeString() error {
	return pgerror.New(pgerrcode.InvalidEscapeSequence, "invalid escape string").
		WithHint("Escape string must be empty or one character.")
}

// errRegex words Go's regexp errors as Postgres's regex library does where
// they correspond; other RE2 complaints keep Go's wording.
func errRegex(err error) error {
	var se *syntax.Error
	if errors.As(err, &se) {
		msg := map[syntax.ErrorCode]string{
			syntax.ErrMissingParen:          "parentheses () not balanced",
			syntax.ErrUnexpectedParen:       "parentheses () not balanced",
			syntax.ErrMissingBracket:        "brackets [] not balanced",
			syntax.ErrMissingRepeatArgument: "quantifier operand invalid",
			syntax.ErrInvalidRepeatOp:       "quantifier operand invalid",
			syntax.ErrInvalidEscape:         "invalid escape \\ sequence",
			syntax.ErrTrailingBackslash:     "invalid escape \\ sequence",
			syntax.ErrInvalidCharRange:      "invalid character range",
			syntax.ErrInvalidRepeatSize:     "invalid repetition count(s)",
		}[se.Code]
		if msg != "" {
			return pgerror.New(pgerrcode.InvalidRegularExpression, "invalid regular expression: %s", msg)
		}
	}
	return pgerror.Wrapf(err, pgerrcode.InvalidRegularExpression, "invalid regular expression")
}

// Feature errors.

func errUnsupported(format string, args ...any) error {
	return pgerror.New(pgerrcode.FeatureNotSupported, format, args...)
}

func errInternal(format string, args ...any) error {
	return fmt.Errorf("builtins: "+format, args...)
}

// Window errors.

func errInvalidPrecedingFollowing(msg string) error {
	return pgerror.New(pgerrcode.InvalidPrecedingOrFollowingSize, "%s", msg)
}

func errInvalidArgWindow(msg string) error {
	code := pgerrcode.InvalidArgumentForNtileFunction
	if strings.Contains(msg, "nth_value") {
		code = pgerrcode.InvalidArgumentForNthValueFunction
	}
	return pgerror.New(code, "%s", msg)
}

func pgerrorWidthBucket(msg string) error {
	return pgerror.New(pgerrcode.InvalidArgumentForWidthBucketFunction, "%s", msg)
}

func errDatetimeFieldRange(y, m, d int64) error {
	return pgerror.New(pgerrcode.DatetimeFieldOverflow, "date field value out of range: %d-%02d-%02d", y, m, d)
}

func errNullFrameOffset(which string) error {
	return pgerror.New(pgerrcode.NullValueNotAllowedDataException, "frame %s offset must not be null", which)
}
