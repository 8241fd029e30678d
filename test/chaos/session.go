package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// session is one client's connections: it connects to the live nodes in
// turn (one connection per node, kept until it fails).
type session struct {
	c     *Cluster
	k     int
	conns map[int]*pgx.Conn
	cur   int
}

func newSession(c *Cluster, client int) *session {
	return &session{c: c, k: client, conns: map[int]*pgx.Conn{}}
}

// next returns a connection to the next node in turn (nil, after a short
// pause, when that node cannot be reached).
func (s *session) next(ctx context.Context) (*pgx.Conn, int) {
	live := s.c.Live()
	s.k++
	i := live[s.k%len(live)]
	s.cur = i
	if conn := s.conns[i]; conn != nil && !conn.IsClosed() {
		return conn, i
	}
	conn, err := s.c.Connect(ctx, i)
	if err != nil {
		time.Sleep(50 * time.Millisecond)
		return nil, i
	}
	s.conns[i] = conn
	return conn, i
}

// after drops the current connection when err leaves it unusable.
func (s *session) after(err error, o Outcome) {
	conn := s.conns[s.cur]
	if conn == nil || err == nil {
		return
	}
	if conn.IsClosed() || o == Unknown {
		conn.Close(context.Background())
		delete(s.conns, s.cur)
	}
}

func (s *session) close() {
	for _, conn := range s.conns {
		conn.Close(context.Background())
	}
}

// execAll runs statements on node i, in autocommit.
func execAll(ctx context.Context, c *Cluster, i int, stmts ...string) error {
	conn, err := c.ConnectWait(ctx, i, 60*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// retry calls f until it succeeds or timeout passes.
func retry(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}
