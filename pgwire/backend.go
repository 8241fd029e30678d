package pgwire

import (
	"context"
	"io"
	"net"
	"time"
)

// Backend is the seam between the protocol server and the SQL layer. One
// Backend serves every connection of a Server, so its methods must be safe
// for concurrent use.
type Backend interface {
	// LookupRole returns the login facts for the role named name. It returns
	// an error wrapping ErrRoleNotFound when there is no such role; any other
	// error aborts the connection attempt with that error's SQLSTATE.
	LookupRole(ctx context.Context, name string) (Role, error)

	// NewSession opens the SQL session of one authenticated connection; ctx
	// bounds the setup only (it ends when NewSession returns). An
	// error (3D000 for an unknown database, for instance) is sent to the
	// client as a FATAL ErrorResponse and the connection is closed.
	NewSession(ctx context.Context, info StartupInfo) (Session, error)
}

// Role is what authentication needs to know about a role.
type Role struct {
	Name     string
	CanLogin bool
	// SCRAMVerifier is the stored password in PostgreSQL's format
	// (SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>, see pgauth), or
	// "" for a role without a password, which cannot log in unless the
	// server is insecure.
	SCRAMVerifier string
	// Superuser roles may use the superuser_reserved_connections slots.
	Superuser bool
}

// StartupInfo is what the client said in its startup packet, after
// authentication succeeded.
type StartupInfo struct {
	User     string
	Database string
	// Params holds the remaining startup parameters (application_name,
	// client_encoding, options, ...). The Session owns the map.
	Params map[string]string
	// ProcessID is the connection's BackendKeyData process id, handy for
	// pg_backend_pid() and logs.
	ProcessID uint32
	// RemoteAddr is the client's address; ConnectedAt is when the
	// connection was accepted (pg_stat_activity's client_addr and
	// backend_start).
	RemoteAddr  net.Addr
	ConnectedAt time.Time
	// Control signals this connection from other sessions
	// (pg_cancel_backend, pg_terminate_backend).
	Control ConnControl
}

// ConnControl signals one connection from outside it. Its methods are safe
// for concurrent use and may be called after the connection ended (they
// then do nothing).
type ConnControl interface {
	// CancelStatement cancels the statement running on the connection, as
	// a CancelRequest with its key would (57014 "canceling statement due
	// to user request"); an idle connection ignores it.
	CancelStatement()
	// Terminate cancels the running statement and ends the connection
	// with FATAL 57P01 "terminating connection due to administrator
	// command". The returned channel closes once the connection is gone
	// and its session closed (its transaction rolled back).
	Terminate() <-chan struct{}
}

// Idler is implemented by a Session with idle timeouts
// (idle_in_transaction_session_timeout, idle_session_timeout). pgwire
// calls Idle before every ReadyForQuery; if the client then sends nothing
// for timeout (> 0), the connection ends with err as a FATAL
// ErrorResponse, and the session is closed as for any disconnect.
type Idler interface {
	Idle() (timeout time.Duration, err error)
}

// Notification is an asynchronous notification (NOTIFY) for the client:
// pgwire sends it as a NotificationResponse.
type Notification struct {
	PID              uint32 // the notifying session's process id
	Channel, Payload string
}

// Notifier is implemented by a Session whose client may LISTEN. pgwire
// hands it wake when the session starts; the session calls wake, from
// any goroutine, after queueing notifications, and pgwire takes them
// (TakeNotifications) and sends them: at once when the connection is
// idle outside a transaction block, else just before the next
// ReadyForQuery that ends a transaction, as PostgreSQL delivers them.
type Notifier interface {
	SetNotifyWaker(wake func())
	TakeNotifications() []Notification
}

// QuickBinder is implemented by a Statement whose Bind may run without
// a statement context of its own (a cancellable context, registered for
// CancelRequest, per call): QuickBind reports that its Bind only decodes
// the values, reading nothing and waiting for nothing, so there is
// nothing a cancel could interrupt.
type QuickBinder interface {
	QuickBind() bool
}

// QuickSyncer is implemented by a Session whose Sync may run without a
// statement context of its own: QuickSync reports that the Sync about to
// run ends no KV transaction (the Executes before it opened none: an
// implicit point read, or statements that read nothing), so it reads,
// writes and waits for nothing a cancel could interrupt. A prepared
// point SELECT's round trip then makes one statement context, its
// Execute's, instead of two.
type QuickSyncer interface {
	QuickSync() bool
}

// StatementBaser is implemented by a Session that wants values in the
// context of every statement-level call (the session's lock wait
// observer): pgwire derives those contexts from StatementBase(ctx),
// called once when the session starts, so the session need not add the
// values to each statement's context (a context allocation per call).
type StatementBaser interface {
	StatementBase(ctx context.Context) context.Context
}

// CursorDescriber is implemented by a Session with SQL cursors (DECLARE):
// in PostgreSQL a declared cursor is a portal, so Describe of a portal
// pgwire does not know asks the session (psycopg 3's named cursors
// DECLARE, then Describe the portal to learn the columns).
type CursorDescriber interface {
	DescribeCursor(name string) (cols []Column, ok bool)
}

// StatementFailer is implemented by a Session that must hear of errors
// pgwire finds itself in the extended protocol (Bind, Describe, Execute or
// Close of a statement or portal that does not exist, bad format codes):
// in PostgreSQL every error aborts the transaction block, whichever
// message caused it. FailStatement must be idempotent.
type StatementFailer interface {
	FailStatement(ctx context.Context)
}

// ResultHolder is implemented by a Session that may keep the end of an
// Execute (its CommandComplete, or a result it sends only after the
// commit) back until the Sync that commits the implicit transaction, so
// that a commit failing with a retryable error can rerun the statement
// before the client has heard anything of it. pgwire calls ReleaseHeld
// before it handles any message other than Sync: replies keep the order
// of the messages, and a client that sent Flush waits for the Execute's.
type ResultHolder interface {
	ReleaseHeld(w ResultWriter) error
}

// TxnStatus is the transaction state reported in ReadyForQuery.
type TxnStatus byte

// The transaction states of ReadyForQuery.
const (
	TxnIdle   TxnStatus = 'I' // not in a transaction block
	TxnActive TxnStatus = 'T' // in a transaction block
	TxnFailed TxnStatus = 'E' // in a failed transaction block
)

// Session is the SQL session behind one connection.
//
// Concurrency: pgwire calls a Session, and the Statements and Portals it
// returns, from the connection's goroutine only, one call at a time.
// Cancellation (CancelRequest, server shutdown) arrives as cancellation of
// the ctx passed to the running call; a call that stops because of it should
// return ctx's error (or any error wrapping it), which pgwire reports as
// 57014 or 57P01.
type Session interface {
	// ParameterStatus returns the reportable run-time parameters whose
	// values differ from, or add to, the server defaults (TimeZone chosen in
	// the startup packet, is_superuser, ...). pgwire sends them once after
	// authentication; later changes go through ResultWriter.ParameterStatus.
	ParameterStatus() map[string]string

	// SimpleQuery runs every statement of a Query message in order,
	// reporting each one's outcome to w, and stops at the first error, which
	// it returns. The session decides the implicit-transaction semantics of
	// a multi-statement string, as PostgreSQL does.
	SimpleQuery(ctx context.Context, sql string, w ResultWriter) error

	// Prepare parses and describes one statement for the extended protocol.
	// paramOIDs are the types the client specified (0 = unspecified); the
	// returned Statement reports the types it settled on.
	Prepare(ctx context.Context, sql string, paramOIDs []uint32) (Statement, error)

	// Sync ends the extended protocol's implicit transaction, if any (a Sync
	// outside a transaction block commits the work of the preceding
	// Executes). A session that held back an Execute's result
	// (ResultHolder) sends it to w first. An error is reported before
	// ReadyForQuery.
	Sync(ctx context.Context, w ResultWriter) error

	// TxnStatus is called before each ReadyForQuery.
	TxnStatus() TxnStatus

	// Close releases the session when the connection ends, rolling back any
	// open transaction. It is called exactly once.
	Close()
}

// Statement is a prepared statement.
type Statement interface {
	// ParamOIDs returns one type OID per parameter placeholder. The
	// caller must not modify the slice (the statement may keep it).
	ParamOIDs() []uint32
	// Columns describes the result rows, nil for a statement returning none.
	// Format fields are ignored (they are chosen at Bind).
	Columns() []Column
	// Bind creates a portal. pgwire has already checked and normalized the
	// counts: len(p.Values) == len(ParamOIDs()), one format per value and
	// one result format per column.
	Bind(ctx context.Context, p BindParams) (Portal, error)
	// Close releases the statement; portals bound from it stay usable.
	Close()
}

// BindParams are the arguments of a Bind message, normalized. The session
// must not modify them: the format slices may be shared between Binds.
type BindParams struct {
	Values        [][]byte // nil element = SQL NULL
	Formats       []int16  // per value: 0 text, 1 binary
	ResultFormats []int16  // per result column
}

// Portal is a bound statement ready to run, possibly several times with a
// row limit (max_rows suspension).
type Portal interface {
	// Columns describes the rows Execute writes, with their formats.
	Columns() []Column
	// Execute writes up to maxRows rows (0 = no limit) to w. If rows remain,
	// it returns suspended = true without calling w.Complete, and a later
	// Execute continues where this one stopped. Otherwise it finishes the
	// statement with w.Complete (or w.EmptyQuery). Execute never sends
	// RowDescription in the extended protocol: w.BeginRows is a no-op there.
	Execute(ctx context.Context, w ResultWriter, maxRows int) (suspended bool, err error)
	// Close releases the portal.
	Close()
}

// Column describes one result column, as in RowDescription.
type Column struct {
	Name         string
	TableOID     uint32
	ColumnNumber uint16
	TypeOID      uint32
	TypeSize     int16
	TypeModifier int32
	Format       int16 // 0 text, 1 binary
}

// ResultWriter is how a Session reports results. It is implemented by
// pgwire and valid only during the call it was passed to. Its methods
// buffer output; pgwire decides when to flush.
type ResultWriter interface {
	// BeginRows announces a row-returning statement (RowDescription in the
	// simple protocol; a no-op in the extended protocol, where Describe
	// announces rows).
	BeginRows(cols []Column) error
	// WriteRow sends one DataRow; values are already encoded in the
	// columns' formats, nil = NULL. pgwire does not retain vals.
	WriteRow(vals [][]byte) error
	// Complete ends a statement with its command tag ("SELECT 3", "INSERT
	// 0 1", "COPY 10", ...).
	Complete(tag string) error
	// EmptyQuery reports a statement string with nothing to run.
	EmptyQuery() error
	// Notice sends a NoticeResponse.
	Notice(n Notice) error
	// ParameterStatus reports a changed run-time parameter (SET TimeZone).
	ParameterStatus(name, value string) error
	// CopyIn starts COPY FROM STDIN: it sends CopyInResponse and returns
	// the reader of the client's data. The session must read it to io.EOF
	// (CopyDone) or to an error before calling Complete.
	//
	// ctx is the statement's: when it ends (cancel, timeout), a read
	// blocked on the client's data returns its cause, so a client that
	// stops sending cannot keep a cancelled COPY alive.
	CopyIn(ctx context.Context, f CopyFormat) (CopyInReader, error)
	// CopyOut starts COPY TO STDOUT: it sends CopyOutResponse and returns
	// the writer of the data; Done sends CopyDone, after which the session
	// calls Complete("COPY n").
	CopyOut(f CopyFormat) (CopyOutWriter, error)
}

// CopyFormat is the format announced in CopyInResponse / CopyOutResponse.
type CopyFormat struct {
	Binary  bool    // overall format: binary COPY (else text or CSV)
	Columns []int16 // per column format code; all 1 when Binary, all 0 otherwise
}

// CopyInReader yields the payloads of the client's CopyData messages.
type CopyInReader interface {
	// Next returns the next CopyData payload, valid until the next call to
	// Next. It returns io.EOF after CopyDone, and an error with SQLSTATE
	// 57014 after CopyFail (or 08P01 for a message that does not belong in
	// COPY). Only one message is buffered at a time, so a client cannot
	// make the server hold more than MaxMessageSize bytes.
	Next() ([]byte, error)
	// Reader returns the stream as an io.Reader, for parsers that want one.
	Reader() io.Reader
}

// CopyOutWriter sends COPY TO STDOUT data.
type CopyOutWriter interface {
	// Write sends p as one CopyData message (a row, by convention).
	Write(p []byte) (int, error)
	// Done sends CopyDone.
	Done() error
}

// Notice is a NoticeResponse.
type Notice struct {
	Severity string // NOTICE, WARNING, INFO, DEBUG, LOG; "" = NOTICE
	Code     string // SQLSTATE; "" = 00000
	Message  string
	Detail   string
	Hint     string
}
