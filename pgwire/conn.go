package pgwire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgproto3"
)

// flushThreshold is how much output a statement may buffer before pgwire
// writes it out mid-statement; it keeps memory per connection bounded for
// large results without a write per row.
const flushThreshold = 32 << 10

// ioError marks an error returned by the network (as opposed to a
// malformed message), so a dropped client ends its connection quietly.
type ioError struct{ err error }

func (e *ioError) Error() string { return e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

// netReader tags every read error as an ioError.
type netReader struct{ r io.Reader }

func (r *netReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil {
		err = &ioError{err: err}
	}
	return n, err
}

// conn is one client connection. Everything but the fields under mu is
// owned by the connection's goroutine.
type conn struct {
	srv      *Server
	raw      net.Conn // for deadlines; nc may be a TLS conn over it
	nc       net.Conn
	in       netReader
	br       *bufio.Reader
	be       *pgproto3.Backend // sends; fe receives
	fe       frontend
	log      *slog.Logger
	accepted time.Time        // when Accept returned it
	tlsCert  *tls.Certificate // what the TLS handshake presented, if any
	done     chan struct{}    // closed when serve has finished
	// serveDone is Serve's context's Done: once it is closed no new
	// message is served (the loop runs under a context without it).
	serveDone <-chan struct{}

	pid    uint32 // set by Server.register, then immutable
	secret [4]byte

	sess    Session
	stmts   map[string]Statement
	portals map[string]Portal // the named portals
	// unnamed is the unnamed portal (nil: none), outside portals: the
	// one a prepared statement's Bind and Execute use (pgbench, libpq),
	// set at every Bind and dropped at every ReadyForQuery, which as a
	// map entry cost an insert, two look-ups, an iteration and a delete
	// per Execute.
	unnamed        Portal
	ignoreTillSync bool
	pending        int   // bytes sent to be since the last flush (approximate)
	readErr        error // a failed Receive poisons the stream; see receive
	// idleErr is what ends the connection if the read deadline Idler set
	// at the last ReadyForQuery passes; nil when no idle timeout is armed.
	idleErr error
	// copyStop unhooks the COPY FROM STDIN watch on the statement's
	// context (watchCopy), if one is set.
	copyStop func() bool
	// stmt is the statement context statementContext hands out again
	// while it stays reusable (stmtCtx); nil until the first statement.
	stmt *stmtCtx
	// simpleW and extW are the connection's result writers (they hold
	// nothing but c), and out the messages sent most often: pgproto3
	// encodes a message into its buffer at Send and keeps nothing of it,
	// so one value of each serves every send. A fresh one per message
	// escaped to the heap: a writer per Execute and per Sync, a DataRow
	// per row, a CommandComplete and its tag per statement.
	simpleW, extW resultWriter
	out           struct {
		row   pgproto3.DataRow
		cc    pgproto3.CommandComplete
		ready pgproto3.ReadyForQuery
		rd    pgproto3.RowDescription
		names []byte // rd's field names
	}

	mu          sync.Mutex
	runningStmt *stmtCtx // the running statement's context, nil between statements
	copyWatch   bool     // watchCopy's deadline may still be set
	interrupted error    // errShutdown once Close began

	// notifyMu guards idleRead, which says the connection goroutine is
	// blocked reading the client's next message outside a transaction
	// block, so wakeNotify may write notifications itself;
	// betweenTxns says the last ReadyForQuery was idle (no block open)
	// and no message has been read since; only the connection goroutine
	// reads or writes it, and idleRead is set only while it holds.
	notifyMu    sync.Mutex
	idleRead    bool
	betweenTxns bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, raw: nc, nc: nc, accepted: time.Now(), done: make(chan struct{}),
		log: s.log.With("remote", nc.RemoteAddr().String())}
	c.in.r = socketReader(nc)
	c.br = bufio.NewReader(&c.in)
	c.simpleW = resultWriter{c: c}
	c.extW = resultWriter{c: c, extended: true}
	return c
}

// interrupt is called by Server.Close from another goroutine: it cancels
// the running statement and unblocks any read or write so the connection
// goroutine notices and says goodbye with 57P01.
func (c *conn) interrupt(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.interrupted = cause
	if c.runningStmt != nil {
		c.runningStmt.cancel(cause)
	}
	c.raw.SetReadDeadline(time.Now())
	// Leave a moment to write the goodbye, but never hang on a client
	// that stopped reading.
	c.raw.SetWriteDeadline(time.Now().Add(time.Second))
}

func (c *conn) isInterrupted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interrupted != nil
}

// cancelQuery handles a matching CancelRequest. A connection that is idle
// ignores it, as PostgreSQL does.
func (c *conn) cancelQuery() { c.cancelRunning(errQueryCanceled) }

// cancelRunning cancels the running statement, if any, with cause.
func (c *conn) cancelRunning(cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runningStmt != nil {
		c.runningStmt.cancel(cause)
		return true
	}
	return false
}

// running reports whether a statement-level call is in progress.
func (c *conn) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runningStmt != nil
}

// connControl is the ConnControl handed to the session.
type connControl struct{ c *conn }

func (cc connControl) CancelStatement() { cc.c.cancelQuery() }

func (cc connControl) Terminate() <-chan struct{} {
	cc.c.interrupt(errTerminated)
	return cc.c.done
}

// statementContext returns the context for one statement-level call into
// the session, cancelable by CancelRequest and Close; the caller ends it
// with endStatement. It is the last statement's context again when that
// one is reusable (stmtCtx), so a statement that waits on nothing
// allocates nothing here.
func (c *conn) statementContext(ctx context.Context) *stmtCtx {
	s := c.stmt
	if s == nil || s.Context != ctx {
		s = newStmtCtx(ctx)
		c.stmt = s
	}
	c.mu.Lock()
	if c.interrupted != nil {
		s.cancel(c.interrupted)
	}
	c.runningStmt = s
	c.mu.Unlock()
	return s
}

// endStatement ends the statement context statementContext returned: from
// here no CancelRequest reaches it. Unless it is reusable it is cancelled,
// which ends whatever waits on it, and the next statement gets a new one.
func (c *conn) endStatement(s *stmtCtx) {
	c.endCopyWatch()
	c.mu.Lock()
	c.runningStmt = nil
	c.mu.Unlock()
	if !s.reusable() {
		s.cancel(nil)
		c.stmt = nil
	}
}

// watchCopy makes the end of the statement's context interrupt a COPY
// FROM STDIN blocked reading the client's data (a client that stopped
// sending must not keep a cancelled or timed-out COPY alive): it sets a
// read deadline in the past, which copyIn.Next turns into the context's
// error.
func (c *conn) watchCopy(ctx context.Context) {
	c.mu.Lock()
	c.copyWatch = true
	c.mu.Unlock()
	c.copyStop = context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.copyWatch && c.interrupted == nil {
			c.raw.SetReadDeadline(time.Now())
		}
	})
}

// endCopyWatch unhooks watchCopy; if the watch fired, its deadline is
// cleared so the connection reads on.
func (c *conn) endCopyWatch() {
	if c.copyStop == nil {
		return
	}
	// Under the mutex the watch either has set its deadline already or
	// will not: clearing the flag first leaves no window for a late one.
	c.mu.Lock()
	c.copyWatch = false
	c.mu.Unlock()
	if !c.copyStop() {
		c.setIdleDeadline(time.Time{})
	}
	c.copyStop = nil
}

// serve runs the connection to its end. It never panics: a panic in a
// session is reported as XX000 and closes only this connection
// (invariant 6).
func (c *conn) serve(ctx context.Context) {
	defer close(c.done)
	defer c.nc.Close()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("pgwire: panic in connection", "panic", r, "stack", string(debug.Stack()))
			c.sendFatal(pgerror.New(pgerrcode.InternalError, "internal error: %v", r))
		}
		if c.sess != nil {
			c.closeSession()
		}
	}()
	if err := c.run(ctx); err != nil {
		c.finish(err)
	}
}

// closeSession releases portals, statements and the session, shielding the
// rest of teardown from a panicking Close.
func (c *conn) closeSession() {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("pgwire: panic closing session", "panic", r)
		}
	}()
	sess := c.sess
	c.sess = nil
	c.closePortals()
	for name, s := range c.stmts {
		delete(c.stmts, name)
		s.Close()
	}
	sess.Close()
}

// errShuttingDown ends a connection when the server shuts down.
func errShuttingDown() error {
	return pgerror.New(pgerrcode.AdminShutdown, "terminating connection due to administrator command")
}

// finish reports the error that ended the connection, if the client can
// still hear it and it is worth telling.
func (c *conn) finish(err error) {
	switch {
	case c.isInterrupted() || pgerror.Code(err) == pgerrcode.AdminShutdown:
		c.sendFatal(errShuttingDown())
	case isIOError(err):
		c.log.Debug("pgwire: connection closed", "err", err)
	default:
		c.log.Info("pgwire: closing connection", "err", err)
		c.sendFatal(err)
	}
}

func (c *conn) sendFatal(err error) {
	msg, merr := errorResponse(err, true).Encode(nil)
	if merr != nil {
		return
	}
	c.raw.SetWriteDeadline(time.Now().Add(time.Second))
	if c.be != nil {
		// Anything already buffered goes first, in order.
		c.be.Flush()
	}
	c.nc.Write(msg)
}

// run performs startup, authentication and the message loop. An error it
// returns ends the connection (see finish).
func (c *conn) run(ctx context.Context) error {
	cfg := &c.srv.cfg
	c.raw.SetDeadline(time.Now().Add(cfg.AuthTimeout))
	st, err := c.readStartup()
	if err != nil {
		return err
	}
	if st.cancel != nil {
		c.srv.cancel(st.cancel.ProcessID, st.cancel.SecretKey)
		return nil
	}
	c.be = pgproto3.NewBackend(c.br, socketWriter(c.nc))
	c.be.SetMaxBodyLen(cfg.MaxMessageSize)
	c.fe = frontend{br: c.br, maxBody: cfg.MaxMessageSize}
	if st.minor > 0 || len(st.unrecognized) > 0 {
		c.be.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0, UnrecognizedOptions: st.unrecognized})
	}
	user, database := st.params["user"], st.params["database"]
	c.log = c.log.With("user", user, "database", database)
	// The socket deadline bounds the client; this bounds the backend's
	// role lookup and session setup by the same AuthTimeout.
	authCtx, cancelAuth := context.WithTimeout(ctx, cfg.AuthTimeout)
	defer cancelAuth()
	role, err := c.authenticate(authCtx, user, database)
	if err != nil {
		return err
	}
	if err := c.srv.register(c, role); err != nil {
		return err
	}
	info := StartupInfo{User: user, Database: database, Params: st.params, ProcessID: c.pid,
		RemoteAddr: c.raw.RemoteAddr(), ConnectedAt: c.accepted, Control: connControl{c}}
	delete(info.Params, "user")
	delete(info.Params, "database")
	sess, err := cfg.Backend.NewSession(authCtx, info)
	if err != nil {
		return err
	}
	c.sess = sess
	if n, ok := sess.(Notifier); ok {
		n.SetNotifyWaker(c.wakeNotify)
	}
	status := cfg.defaultParameterStatus(user, info.Params)
	for k, v := range sess.ParameterStatus() {
		status[k] = v
	}
	for _, k := range sortedKeys(status) {
		c.be.Send(&pgproto3.ParameterStatus{Name: k, Value: status[k]})
	}
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret[:]})
	c.raw.SetDeadline(time.Time{})
	c.log.Debug("pgwire: session started", "pid", c.pid)
	c.stmts = make(map[string]Statement)
	c.portals = make(map[string]Portal)
	if err := c.readyForQuery(); err != nil {
		return err
	}
	// Statements are cancelled through c.interrupt, which Server.Close
	// calls for every connection (and Serve calls Close when its ctx
	// ends), never by ctx itself: a statement context derived from the
	// server's cancellable one registered in, and removed from, that
	// context's shared child set three times per extended-protocol
	// round trip (2.2-3.5% of the node's CPU under pgbench -S -M prepared).
	c.serveDone = ctx.Done()
	ctx = context.WithoutCancel(ctx)
	if b, ok := sess.(StatementBaser); ok {
		ctx = b.StatementBase(ctx)
	}
	return c.loop(ctx)
}

// receive reads the next message. After a read error the stream position
// is unknown, so every later receive fails with the same error.
func (c *conn) receive() (pgproto3.FrontendMessage, error) {
	if c.readErr != nil {
		return nil, c.readErr
	}
	msg, err := c.fe.receive()
	if err != nil {
		if tooBig, ok := errors.AsType[*pgproto3.ExceededMaxBodyLenErr](err); ok {
			err = protocolErrorf("message of %d bytes exceeds the maximum of %d", tooBig.ActualBodyLen, tooBig.MaxExpectedBodyLen)
		} else if !isIOError(err) {
			err = protocolErrorf("invalid message: %v", err)
		}
		c.readErr = err
		return nil, err
	}
	return msg, nil
}

// setAuthType says what the client's next password message answers
// (pgproto3.Backend needs it to encode the request).
func (c *conn) setAuthType(t uint32) error {
	c.fe.authType = t
	return c.be.SetAuthType(t)
}

// send buffers msg, accounting size so long results flush regularly.
func (c *conn) send(msg pgproto3.BackendMessage, size int) error {
	c.be.Send(msg)
	c.pending += size
	if c.pending >= flushThreshold {
		return c.flush()
	}
	return nil
}

func (c *conn) flush() error {
	c.pending = 0
	if err := c.be.Flush(); err != nil {
		return &ioError{err: fmt.Errorf("writing to client: %w", err)}
	}
	return nil
}

// readyForQuery closes every portal once no transaction block is open
// (portals live until their transaction ends, so they survive Sync inside
// BEGIN ... COMMIT: invariant 2), then reports the status and flushes.
func (c *conn) readyForQuery() error {
	status := c.sess.TxnStatus()
	if status == TxnIdle {
		c.closePortals()
	}
	// Idle before the client can see ReadyForQuery: a client that then
	// asks pg_stat_activity from another connection must find this one
	// idle already.
	var idle time.Duration
	var idleErr error
	if idler, ok := c.sess.(Idler); ok {
		idle, idleErr = idler.Idle()
	}
	// Notifications reach a client outside transaction blocks only.
	c.betweenTxns = status == TxnIdle
	if c.betweenTxns {
		c.queueNotifications()
	}
	c.out.ready.TxStatus = byte(status)
	c.be.Send(&c.out.ready)
	if err := c.flush(); err != nil {
		return err
	}
	if idle > 0 {
		c.setIdleDeadline(time.Now().Add(idle))
		c.idleErr = idleErr
	} else if c.idleErr != nil {
		c.disarmIdle()
	}
	return nil
}

// disarmIdle clears the idle timeout once the client has spoken.
func (c *conn) disarmIdle() {
	c.idleErr = nil
	c.setIdleDeadline(time.Time{})
}

// setIdleDeadline sets the read deadline of the idle timeout, unless
// interrupt has set its own (which must win: it ends the connection).
func (c *conn) setIdleDeadline(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.interrupted == nil {
		c.raw.SetReadDeadline(t)
	}
}

// loop serves messages until Terminate or a connection-ending error.
func (c *conn) loop(ctx context.Context) error {
	for {
		var msg pgproto3.FrontendMessage
		var err error
		if c.betweenTxns {
			c.notifyMu.Lock()
			c.idleRead = true
			if c.queueNotifications() {
				_ = c.be.Flush() // a write error shows on the next read
			}
			c.notifyMu.Unlock()
			msg, err = c.receive()
			c.notifyMu.Lock()
			c.idleRead, c.betweenTxns = false, false
			c.notifyMu.Unlock()
		} else {
			// Inside a transaction block, or past the first message
			// after ReadyForQuery (Bind's Describe, Execute and Sync):
			// idleRead is false already and only this goroutine sets
			// it, so the lock is not taken (it was three quarters of
			// the lock pairs of an extended-protocol round trip).
			msg, err = c.receive()
		}
		if err != nil {
			if c.idleErr != nil && errors.Is(err, os.ErrDeadlineExceeded) && !c.isInterrupted() {
				return c.idleErr
			}
			return err
		}
		if c.idleErr != nil {
			c.disarmIdle()
		}
		if _, ok := msg.(*pgproto3.Terminate); ok {
			return nil
		}
		select {
		case <-c.serveDone:
			// Serve's context ended: Close runs on its own goroutine
			// (Serve's AfterFunc) and may not have reached this
			// connection yet. No statement starts once shutdown has
			// begun; the client hears 57P01 as it would from Close.
			return errShuttingDown()
		default:
		}
		if c.ignoreTillSync {
			if _, ok := msg.(*pgproto3.Sync); !ok {
				continue
			}
		}
		var stmtErr error
		if h, ok := c.sess.(ResultHolder); ok {
			if _, sync := msg.(*pgproto3.Sync); !sync {
				if err := h.ReleaseHeld(&c.extW); err != nil {
					return err
				}
			}
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			stmtErr = c.simpleQuery(ctx, m.String)
		case *pgproto3.Parse:
			stmtErr = c.parse(ctx, m)
		case *pgproto3.Bind:
			stmtErr = c.bind(ctx, m)
		case *pgproto3.Describe:
			stmtErr = c.describe(m)
		case *pgproto3.Execute:
			stmtErr = c.execute(ctx, m)
		case *pgproto3.Close:
			stmtErr = c.closeMsg(m)
		case *pgproto3.Sync:
			c.ignoreTillSync = false
			stmtErr = c.sync(ctx)
		case *pgproto3.Flush:
			stmtErr = c.flush()
		case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
			// A COPY that failed early leaves the client still sending;
			// PostgreSQL accepts and drops these, and so do we.
		case *pgproto3.FunctionCall:
			stmtErr = pgerror.New(pgerrcode.FeatureNotSupported, "fastpath function calls are not supported")
		default:
			return protocolErrorf("invalid frontend message type 0x%02X", messageType(msg))
		}
		if stmtErr == nil {
			continue
		}
		if err := c.connectionError(stmtErr); err != nil {
			return err
		}
		if f, ok := c.sess.(StatementFailer); ok {
			switch msg.(type) {
			case *pgproto3.Parse, *pgproto3.Bind, *pgproto3.Describe, *pgproto3.Execute, *pgproto3.Close:
				f.FailStatement(ctx)
			}
		}
		if err := c.send(errorResponse(stmtErr, false), 0); err != nil {
			return err
		}
		switch msg.(type) {
		case *pgproto3.Query, *pgproto3.Sync:
			if err := c.readyForQuery(); err != nil {
				return err
			}
		default:
			// PostgreSQL flushes an error at once (elog.c), not at the
			// next Sync: a client that sent Parse and Flush (asyncpg
			// preparing a statement) waits for the reply before it sends
			// Sync, and the Flush itself is dropped below while
			// ignoreTillSync holds.
			c.ignoreTillSync = true
			if err := c.flush(); err != nil {
				return err
			}
		}
	}
}

// connectionError returns err if it must end the connection rather than
// just the statement: broken network, protocol violation, shutdown.
func (c *conn) connectionError(err error) error {
	if c.readErr != nil {
		return c.readErr
	}
	if c.isInterrupted() {
		return errShutdown
	}
	if isIOError(err) {
		return err
	}
	if _, ok := errors.AsType[*protocolError](err); ok {
		return err
	}
	return nil
}

// statementError turns what the session returned into what the client
// hears: a statement stopped by CancelRequest is 57014 unless the session
// classified it itself.
func statementError(sctx *stmtCtx, err error) error {
	if err == nil {
		return nil
	}
	// Whatever the cancelled work failed with on its way out (a lock
	// wait's context error, a transaction aborted under it), the client
	// asked for the cancel and hears that.
	if sctx.Cause() == errQueryCanceled && pgerror.Code(err) != pgerrcode.QueryCanceled {
		return pgerror.Wrapf(nil, pgerrcode.QueryCanceled, "canceling statement due to user request")
	}
	return err
}

func (c *conn) simpleQuery(ctx context.Context, sql string) error {
	// A simple query ends any unnamed portal, as in PostgreSQL.
	c.closePortal("")
	sctx := c.statementContext(ctx)
	err := statementError(sctx, c.sess.SimpleQuery(sctx, sql, &c.simpleW))
	c.endStatement(sctx)
	if err != nil {
		return err
	}
	return c.readyForQuery()
}

func (c *conn) sync(ctx context.Context) error {
	var err error
	if qs, ok := c.sess.(QuickSyncer); ok && qs.QuickSync() {
		// Nothing to commit: nothing a cancel could interrupt
		// (invariant 8).
		err = c.sess.Sync(ctx, &c.extW)
	} else {
		sctx := c.statementContext(ctx)
		err = statementError(sctx, c.sess.Sync(sctx, &c.extW))
		c.endStatement(sctx)
	}
	if err != nil {
		return err
	}
	return c.readyForQuery()
}

// queueNotifications buffers the session's pending notifications as
// NotificationResponse messages and reports whether there were any. The
// caller flushes; it must be the connection's goroutine, or hold
// notifyMu while the connection is idle (wakeNotify).
func (c *conn) queueNotifications() bool {
	n, ok := c.sess.(Notifier)
	if !ok {
		return false
	}
	ns := n.TakeNotifications()
	for _, m := range ns {
		c.be.Send(&pgproto3.NotificationResponse{PID: m.PID, Channel: m.Channel, Payload: m.Payload})
	}
	return len(ns) > 0
}

// wakeNotify is the session's Notifier waker: an idle connection (blocked
// reading the client's next message, outside a transaction) gets its
// notifications now; a busy one sends them before its next
// ReadyForQuery. Only the connection's goroutine writes otherwise, and
// never while idleRead is set.
func (c *conn) wakeNotify() {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	if c.idleRead && c.queueNotifications() {
		_ = c.be.Flush()
	}
}

// portal returns the portal named name.
func (c *conn) portal(name string) (Portal, bool) {
	if name == "" {
		return c.unnamed, c.unnamed != nil
	}
	p, ok := c.portals[name]
	return p, ok
}

// setPortal makes p the portal named name, closing the one it replaces.
func (c *conn) setPortal(name string, p Portal) {
	if name == "" {
		if old := c.unnamed; old != nil {
			old.Close()
		}
		c.unnamed = p
		return
	}
	if old, ok := c.portals[name]; ok {
		old.Close()
	}
	c.portals[name] = p
}

// closePortal forgets and closes the portal named name, if there is one.
func (c *conn) closePortal(name string) {
	if name == "" {
		if p := c.unnamed; p != nil {
			c.unnamed = nil
			p.Close()
		}
		return
	}
	if p, ok := c.portals[name]; ok {
		delete(c.portals, name)
		p.Close()
	}
}

// closePortals forgets and closes every portal.
func (c *conn) closePortals() {
	c.closePortal("")
	if len(c.portals) == 0 {
		return
	}
	for name, p := range c.portals {
		delete(c.portals, name)
		p.Close()
	}
}
