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
	"time"
)

// Server accepts PostgreSQL clients and runs one goroutine per connection.
type Server struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	ln       net.Listener
	closed   bool
	conns    map[*conn]struct{} // every accepted connection, for Close
	byPID    map[uint32]*conn   // connections past BackendKeyData, for cancel
	nextPID  uint32
	wg       sync.WaitGroup // one per connection goroutine
	shutdown chan struct{}  // closed by Close
}

// NewServer returns a Server for cfg; it does not listen until Serve.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("pgwire: Config.Backend is required")
	}
	cfg = cfg.withDefaults()
	return &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		conns:    make(map[*conn]struct{}),
		byPID:    make(map[uint32]*conn),
		shutdown: make(chan struct{}),
	}, nil
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

// track registers a freshly accepted connection; nil once closed.
func (s *Server) track(nc net.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	c := newConn(s, nc, len(s.conns)+1 > s.cfg.MaxConnections)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.byPID[c.pid] == c {
		delete(s.byPID, c.pid)
	}
}

// register assigns c its BackendKeyData; false if the server is closing.
func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
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
	return true
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
