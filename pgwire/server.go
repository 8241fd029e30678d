package pgwire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// Server accepts PostgreSQL clients and runs one goroutine per connection.
type Server struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	ln     net.Listener
	closed bool
	conns  map[*conn]struct{} // every accepted connection, for Close
	// startup are the connections not yet authenticated (invariant 7).
	startup map[*conn]struct{}
	// evicted are startup connections closed to make room (never
	// reused: a conn is not tracked again once evicted).
	evicted  map[*conn]struct{}
	byPID    map[uint32]*conn // authenticated connections, for cancel and limits
	nextPID  uint32
	wg       sync.WaitGroup // one per connection goroutine, and the client checker
	shutdown chan struct{}  // closed by Close

	// Evictions counts startup connections closed to make room for newer
	// ones (MaxStartupConnections).
	Evictions atomic.Int64
}

// NewServer returns a Server for cfg; it does not listen until Serve.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("pgwire: Config.Backend is required")
	}
	cfg = cfg.withDefaults()
	if cfg.SuperuserReservedConnections >= cfg.MaxConnections {
		return nil, fmt.Errorf("pgwire: superuser_reserved_connections (%d) must be less than max_connections (%d)",
			cfg.SuperuserReservedConnections, cfg.MaxConnections)
	}
	return &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		conns:    make(map[*conn]struct{}),
		startup:  make(map[*conn]struct{}),
		evicted:  make(map[*conn]struct{}),
		byPID:    make(map[uint32]*conn),
		shutdown: make(chan struct{}),
	}, nil
}

// Limits returns max_connections and superuser_reserved_connections as the
// server applies them (after defaults).
func (s *Server) Limits() (maxConnections, superuserReserved int) {
	return s.cfg.MaxConnections, s.cfg.SuperuserReservedConnections
}

// Serve accepts connections on ln until Close is called or ctx is done,
// then returns ErrServerClosed. Serve owns ln and closes it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	if s.ln != nil {
		s.mu.Unlock()
		return errors.New("pgwire: Serve called twice")
	}
	s.ln = ln
	s.mu.Unlock()

	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	if s.cfg.ClientCheckInterval > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.checkClients()
		}()
	}

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.shutdown:
				return ErrServerClosed
			default:
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				// Transient (EMFILE and the like surface as timeouts in
				// net); back off as net/http does rather than spin.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("pgwire: accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("pgwire: accept: %w", err)
		}
		backoff = 0
		c := s.track(nc)
		if c == nil {
			nc.Close()
			return ErrServerClosed
		}
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			c.serve(ctx)
		}()
	}
}

// ListenAndServe listens on Config.ListenAddr and serves until Close or
// ctx is done. Callers that need the bound port before serving (":0")
// should create the listener themselves and call Serve.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("pgwire: listen on %q: %w", s.cfg.ListenAddr, err)
	}
	s.log.Info("pgwire: listening", "addr", ln.Addr().String())
	return s.Serve(ctx, ln)
}

// Addr returns the listener's address, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops accepting, cancels running statements, ends every
// connection with 57P01 admin_shutdown and waits for their goroutines
// (which requires sessions to honour ctx cancellation).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.shutdown)
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	for c := range s.conns {
		c.interrupt(errShutdown)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// track registers a freshly accepted connection; nil once closed. When
// MaxStartupConnections connections are already authenticating, the
// oldest of them is closed to make room (invariant 7).
func (s *Server) track(nc net.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.startup[c] = struct{}{}
	if len(s.startup) > s.cfg.MaxStartupConnections {
		s.evictOldestLocked()
	}
	s.wg.Add(1)
	return c
}

// evictOldestLocked closes the startup connection accepted first. Its
// goroutine finds the socket closed and ends; register refuses it if it
// got that far meanwhile.
func (s *Server) evictOldestLocked() {
	var oldest *conn
	for c := range s.startup {
		if oldest == nil || c.accepted.Before(oldest.accepted) {
			oldest = c
		}
	}
	delete(s.startup, oldest)
	s.evicted[oldest] = struct{}{}
	s.Evictions.Add(1)
	oldest.log.Info("pgwire: closing an unauthenticated connection to make room", "age", time.Since(oldest.accepted))
	oldest.raw.Close()
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	delete(s.startup, c)
	delete(s.evicted, c)
	if s.byPID[c.pid] == c {
		delete(s.byPID, c.pid)
	}
}

var (
	errTooManyClients = pgerror.New(pgerrcode.TooManyConnections, "sorry, too many clients already")
	errReservedSlots  = pgerror.New(pgerrcode.TooManyConnections, "remaining connection slots are reserved for roles with the SUPERUSER attribute")
)

// register admits an authenticated connection as a session and assigns it
// its BackendKeyData. It refuses (53300) past MaxConnections, and a role
// without SUPERUSER once only the reserved slots remain (invariant 7).
func (s *Server) register(c *conn, role Role) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errShutdown
	}
	if _, gone := s.evicted[c]; gone {
		return errEvicted
	}
	delete(s.startup, c)
	n := len(s.byPID)
	if n >= s.cfg.MaxConnections {
		return errTooManyClients
	}
	if !role.Superuser && n >= s.cfg.MaxConnections-s.cfg.SuperuserReservedConnections {
		return errReservedSlots
	}
	for {
		s.nextPID++
		if _, taken := s.byPID[s.nextPID]; !taken && s.nextPID != 0 {
			break
		}
	}
	c.pid = s.nextPID
	if _, err := rand.Read(c.secret[:]); err != nil {
		// crypto/rand does not fail on supported platforms; a predictable
		// secret would let anyone cancel anyone's queries.
		panic(fmt.Sprintf("pgwire: crypto/rand: %v", err))
	}
	s.byPID[c.pid] = c
	return nil
}

// cancel handles a CancelRequest: only the matching secret cancels, and
// whether it matched is never revealed to the requester (invariant 5).
func (s *Server) cancel(pid uint32, secret []byte) {
	s.mu.Lock()
	c := s.byPID[pid]
	s.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare(c.secret[:], secret) != 1 {
		s.log.Info("pgwire: cancel request did not match a connection", "pid", pid)
		return
	}
	c.cancelQuery()
}

// checkClients polls, every ClientCheckInterval, the sockets of the
// connections running a statement, and cancels the statement of any whose
// client has gone (PostgreSQL's client_connection_check_interval): a
// vanished client's sort or lock wait must not run on to its end.
func (s *Server) checkClients() {
	t := time.NewTicker(s.cfg.ClientCheckInterval)
	defer t.Stop()
	var busy []*conn
	for {
		select {
		case <-s.shutdown:
			return
		case <-t.C:
		}
		busy = busy[:0]
		s.mu.Lock()
		for _, c := range s.byPID {
			busy = append(busy, c)
		}
		s.mu.Unlock()
		for _, c := range busy {
			if c.running() && peerClosed(c.raw) && c.cancelRunning(errClientGone) {
				c.log.Info("pgwire: client went away; cancelling its statement")
			}
		}
	}
}
