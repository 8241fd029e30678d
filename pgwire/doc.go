// Package pgwire is Cairn's PostgreSQL wire-protocol server (protocol 3.0):
// startup and TLS negotiation, trust, client-certificate, SCRAM-SHA-256
// and clear-text password authentication under host-based rules (hba), the
// simple and extended query protocols, COPY in both directions, cancel
// requests and error reporting with SQLSTATEs. Over TLS it also offers
// SCRAM-SHA-256-PLUS (tls-server-end-point channel binding).
//
// The node (server/) creates a Server with a Backend, the SQL layer's seam:
// Backend looks up roles and opens a Session per connection; a Session runs
// statements and reports results through a ResultWriter that pgwire
// implements. pgwire parses no SQL and encodes no values: it moves
// messages, keeps prepared statements and portals per connection, and maps
// errors to ErrorResponses (sql/pgerror supplies the SQLSTATE). It uses
// pgproto3 for message encoding and for decoding all but Bind and Execute
// (receive.go frames the messages and decodes those two itself, with
// pgproto3's results and errors: pgwire.TestFrontendMatchesBackend),
// xdg-go/scram for SCRAM, and must not import the SQL layer's packages
// beyond sql/pgerror.
//
//	client ──TCP/TLS──► conn goroutine ──► Session (SimpleQuery, Prepare,
//	   ▲                 │   ▲                Statement.Bind, Portal.Execute,
//	   │                 │   └─ ResultWriter  Sync, TxnStatus)
//	   └── CancelRequest (new connection) ──► Server.cancel ──► ctx of the
//	                                           running statement
//
// Sub-packages: pgauth derives and parses SCRAM verifiers in PostgreSQL's
// format; copyfmt frames COPY text, CSV and binary data.
//
// Output is buffered and written once per Sync, per simple Query, or when
// a result passes flushThreshold, so a round trip costs one write(2). On
// Linux a plain (non-TLS) socket is read and written with raw system
// calls that wait in the netpoller as net.Conn does (rawio_linux.go):
// as blocking system calls they kept the runtime's monitor waking every
// 20 µs to take the connection's P away.
//
// Invariants:
//
//  1. One goroutine per connection owns the socket's reads and writes and
//     every call into its Session; other goroutines (cancel, Close) only
//     cancel contexts and set deadlines.
//  2. Portals live until closed or until the transaction that created them
//     ends: they survive Sync inside a transaction block (pgjdbc fetchSize,
//     asyncpg cursors) and are all closed at the first ReadyForQuery with
//     status Idle. Prepared statements live until closed or disconnect.
//  3. A protocol violation (bad length, unknown message, oversized message,
//     garbage) gets a FATAL 08P01 and closes that connection only; an error
//     from the session gets an ERROR and the connection goes on, skipping
//     extended-protocol messages until Sync.
//  4. Before authentication a client can make the server hold at most one
//     startup packet (MaxStartupPacketSize) for at most AuthTimeout; after
//     it, one message of at most MaxMessageSize plus the output buffered
//     since the last flush (about flushThreshold). Bytes that arrive before
//     the answer to SSLRequest or GSSENCRequest end the connection.
//  5. Only a CancelRequest with the connection's process id and secret
//     cancels, and only the statement running at that moment; the
//     requester learns nothing either way.
//  6. A panic in a session is recovered, reported as XX000 and closes that
//     connection; the server keeps serving the others.
//  7. Only authenticated sessions count against MaxConnections, and a role
//     without SUPERUSER never takes one of the last
//     SuperuserReservedConnections slots. Connections still authenticating
//     are at most MaxStartupConnections: a new one past it closes the
//     oldest, so no number of clients that never authenticate keeps a
//     login out.
//  8. A statement runs under one context, cancelled by CancelRequest,
//     ConnControl (pg_cancel_backend, pg_terminate_backend), Close, or the
//     client's socket found closed (checkClients); the client hears 57014
//     for a cancel, FATAL 57P01 for a termination. The one exception is
//     the Bind of a Statement that says it is quick (QuickBinder): it
//     only decodes values, so it runs under the connection's context;
//     so does a Sync the Session says is quick (QuickSyncer): it ends
//     no KV transaction.
//  9. With TLS and RefuseRemotePlaintext, a client from another host that
//     did not upgrade to TLS is refused (28000) before it can send a
//     password. A client certificate logs in only if it verified against
//     the TLS config's ClientCAs, and only as the user its CommonName
//     names (certauth.go).
//  10. When Config.HBA returns rules (a secure node only), the first rule
//     the connection matches decides its method and invariant 9's
//     refusal of plaintext gives way to the rules; a connection no rule
//     matches, or a reject rule, is refused (28000) before it sends a
//     password. The superuser postgres presenting its own client
//     certificate is the one exception, so no rules lock operators out
//     (hbaauth.go).
//  11. A statement's context ends when the statement does unless nothing
//     could see it end: no one asked for its Done channel and no context
//     derived from it, nor context.AfterFunc, is still hooked on it. Such
//     a context is the next statement's again (stmtctx.go). Work that
//     outlives its statement therefore waits on Done, not polls Err.
package pgwire
