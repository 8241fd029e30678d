// Package pgerror attaches a PostgreSQL SQLSTATE to Go errors.
//
// Every SQL-layer package (types, rowenc, sem, exec, pgwire) creates user-facing
// errors through New so that the pgwire server can report the exact code
// clients branch on (pgx, psycopg, ORMs). It imports nothing from Cairn and
// must stay that way: it sits below every SQL package.
//
// Invariants:
//
//  1. Code(err) finds the SQLSTATE through any amount of fmt.Errorf("%w")
//     wrapping; the outermost *Error in the chain wins.
//  2. An error with no *Error in its chain is an internal error (XX000): a bug
//     or an unclassified failure, never a user mistake.
//  3. Codes are pgerrcode constants; this package never invents codes.
package pgerror

import (
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
)

// Error is an error with a SQLSTATE, shaped like a Postgres ErrorResponse.
type Error struct {
	Code    string // SQLSTATE, e.g. pgerrcode.NumericValueOutOfRange
	Message string // primary message, lower case, no trailing period
	Detail  string // optional secondary message
	Hint    string // optional suggestion
	// Where is the context the error happened in (PostgreSQL's CONTEXT
	// line: "COPY t, line 3, column a: ..."), innermost first.
	Where string
	// The object the error is about, for clients that branch on it
	// (psycopg2's diag.constraint_name, psql's VERBOSITY verbose): set
	// where PostgreSQL sets them (constraint violations).
	SchemaName, TableName, ColumnName, ConstraintName string

	cause error // kept for errors.Is/As; never shown to clients
}

// Error implements error; it prints only the primary message, as psql does.
func (e *Error) Error() string { return e.Message }

// New returns an *Error with code and a formatted message.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrapf returns an *Error with code whose message is the formatted text
// followed by ": " and cause's message; cause stays reachable through
// errors.Is/As, but Code(result) is code (invariant 1: outermost wins).
func Wrapf(cause error, code, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return &Error{Code: code, Message: msg, cause: cause}
}

// Unwrap returns the error passed to Wrapf, if any.
func (e *Error) Unwrap() error { return e.cause }

// WithDetail returns a copy of e with Detail set.
func (e *Error) WithDetail(format string, args ...any) *Error {
	c := *e
	c.Detail = fmt.Sprintf(format, args...)
	return &c
}

// WithHint returns a copy of e with Hint set.
func (e *Error) WithHint(format string, args ...any) *Error {
	c := *e
	c.Hint = fmt.Sprintf(format, args...)
	return &c
}

// WithWhere returns a copy of e with Where (the CONTEXT field) set.
func (e *Error) WithWhere(format string, args ...any) *Error {
	c := *e
	c.Where = fmt.Sprintf(format, args...)
	return &c
}

// WithTable returns a copy of e naming the table (and its schema) the
// error is about.
func (e *Error) WithTable(schema, table string) *Error {
	c := *e
	c.SchemaName, c.TableName = schema, table
	return &c
}

// WithColumn returns a copy of e naming the column the error is about.
func (e *Error) WithColumn(name string) *Error {
	c := *e
	c.ColumnName = name
	return &c
}

// WithConstraint returns a copy of e naming the violated constraint.
func (e *Error) WithConstraint(name string) *Error {
	c := *e
	c.ConstraintName = name
	return &c
}

// Code returns err's SQLSTATE: "" for nil, the code of the outermost *Error
// in its chain, or pgerrcode.InternalError when there is none (invariant 2).
func Code(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return pgerrcode.InternalError
}

// Flatten returns the *Error to send to a client for err: the chain's *Error
// with its Message replaced by err.Error() (so wrapping context is kept), or
// an internal error carrying err's text.
func Flatten(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := errors.AsType[*Error](err); ok {
		c := *e
		c.Message = err.Error()
		return &c
	}
	return &Error{Code: pgerrcode.InternalError, Message: err.Error()}
}
