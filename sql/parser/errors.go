package parser

import (
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// SQLSTATE codes the parser reports.
const (
	// CodeSyntaxError (42601): the text is not valid SQL, or a dialect
	// construct is malformed. Every error of the Postgres grammar is
	// reported with it; libpg_query does not expose finer codes.
	CodeSyntaxError = pgerrcode.SyntaxError
	// CodeCharacterNotInRepertoire (22021): the text is not valid UTF-8
	// or contains a NUL byte, which Postgres reports the same way.
	CodeCharacterNotInRepertoire = pgerrcode.CharacterNotInRepertoire
)

// SyntaxError is the one error type Parse and Rewrite return for bad input.
// Position follows Postgres: a 1-based character (not byte) offset into the
// text the client sent, or 0 when no position applies. Positions of errors
// found after the dialect rewrite are mapped back through it, so they always
// point into what the user typed (invariant 4).
//
// It unwraps to a *pgerror.Error with the same code and message, so
// pgerror.Code classifies it like any other SQL error; pgwire takes the
// position from the SyntaxError itself.
type SyntaxError struct {
	Code     string
	Message  string
	Position int
}

// Error implements error; like pgerror it prints only the message, since
// the position travels in its own ErrorResponse field.
func (e *SyntaxError) Error() string { return e.Message }

// SQLState returns the SQLSTATE code of the error.
func (e *SyntaxError) SQLState() string { return e.Code }

// Unwrap exposes the error to pgerror.Code and pgerror.Flatten.
func (e *SyntaxError) Unwrap() error { return pgerror.New(e.Code, "%s", e.Message) }
