package pgwire

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Errors a Backend or a caller of Server meets, grouped by when they happen.
var (
	// ErrRoleNotFound is wrapped by Backend.LookupRole for an unknown role.
	ErrRoleNotFound = errors.New("pgwire: role not found")

	// ErrServerClosed is returned by Serve after Close.
	ErrServerClosed = errors.New("pgwire: server closed")
)

// Internal classifications of why a connection ends or a query stops; they
// are context causes and never reach clients as text.
var (
	errQueryCanceled = errors.New("pgwire: query canceled by CancelRequest")
	errShutdown      = errors.New("pgwire: server shutting down")
	errTerminated    = errors.New("pgwire: connection terminated (pg_terminate_backend)")
	errClientGone    = errors.New("pgwire: client closed the connection")
	errEvicted       = errors.New("pgwire: closed to make room for a newer unauthenticated connection")
)

// protocolError is a violation of the wire protocol by the client: it is
// reported as 08P01 and ends the connection (invariant 3).
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

func protocolErrorf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

// positionError attaches a statement position to an error.
type positionError struct {
	err error
	pos int
}

func (e *positionError) Error() string      { return e.err.Error() }
func (e *positionError) Unwrap() error      { return e.err }
func (e *positionError) ErrorPosition() int { return e.pos }

// WithPosition returns err annotated with a 1-based character position in
// the statement text, reported as the ErrorResponse's position field (psql
// draws its caret from it). Any error in a chain with an ErrorPosition() int
// method is honoured, so other packages may carry positions their own way.
func WithPosition(err error, pos int) error {
	if err == nil {
		return nil
	}
	return &positionError{err: err, pos: pos}
}

// errorResponse builds the ErrorResponse for err. SQLSTATE, message, detail
// and hint come from sql/pgerror (XX000 when err carries none); severity is
// ERROR, or FATAL for errors that end the connection.
func errorResponse(err error, fatal bool) *pgproto3.ErrorResponse {
	sev := "ERROR"
	if fatal {
		sev = "FATAL"
	}
	var msg *pgproto3.ErrorResponse
	if pe, ok := errors.AsType[*protocolError](err); ok {
		msg = &pgproto3.ErrorResponse{Code: pgerrcode.ProtocolViolation, Message: pe.msg}
	} else {
		f := pgerror.Flatten(err)
		msg = &pgproto3.ErrorResponse{Code: f.Code, Message: f.Message, Detail: f.Detail, Hint: f.Hint, Where: f.Where,
			SchemaName: f.SchemaName, TableName: f.TableName, ColumnName: f.ColumnName, ConstraintName: f.ConstraintName}
	}
	msg.Severity, msg.SeverityUnlocalized = sev, sev
	if p, ok := errors.AsType[interface {
		error
		ErrorPosition() int
	}](err); ok && p.ErrorPosition() > 0 {
		msg.Position = int32(p.ErrorPosition())
	}
	return msg
}

func noticeResponse(n Notice) *pgproto3.NoticeResponse {
	sev := n.Severity
	if sev == "" {
		sev = "NOTICE"
	}
	code := n.Code
	if code == "" {
		code = pgerrcode.SuccessfulCompletion
	}
	return &pgproto3.NoticeResponse{
		Severity: sev, SeverityUnlocalized: sev, Code: code,
		Message: n.Message, Detail: n.Detail, Hint: n.Hint,
	}
}
