package pgwire

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSuperuserReservedConnections: once only the reserved slots remain, a
// role without SUPERUSER gets 53300 with PostgreSQL's message, a superuser
// still gets in, and past max_connections everyone gets "too many clients".
func TestSuperuserReservedConnections(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 3; c.SuperuserReservedConnections = 1 })
	ts.b.setRole(Role{Name: "alice", CanLogin: true})
	ctx := context.Background()
	connectAs := func(user string) (*pgx.Conn, error) {
		conn, err := pgx.ConnectConfig(ctx, ts.config(t, user, ""))
		if err == nil {
			t.Cleanup(func() { conn.Close(ctx) })
		}
		return conn, err
	}
	for i := 0; i < 2; i++ {
		if _, err := connectAs("alice"); err != nil {
			t.Fatalf("alice #%d: %v", i+1, err)
		}
	}
	for _, tc := range []struct {
		user, code, msg string
	}{
		{"alice", "53300", "remaining connection slots are reserved for roles with the SUPERUSER attribute"},
		{"postgres", "", ""},
		{"postgres", "53300", "sorry, too many clients already"},
		{"alice", "53300", "sorry, too many clients already"},
	} {
		_, err := connectAs(tc.user)
		if tc.code == "" {
			if err != nil {
				t.Fatalf("%s into the reserved slot: %v", tc.user, err)
			}
			continue
		}
		if pgCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("%s: got %v, want %s %q", tc.user, err, tc.code, tc.msg)
		}
	}
}

// TestReservedMustBeBelowMax: a configuration with no slot left for
// anyone but superusers is refused at NewServer, as PostgreSQL refuses to
// start with it.
func TestReservedMustBeBelowMax(t *testing.T) {
	_, err := NewServer(Config{Backend: newTestBackend(), MaxConnections: 3, SuperuserReservedConnections: 3})
	if err == nil || !strings.Contains(err.Error(), "must be less than max_connections") {
		t.Fatalf("NewServer: %v", err)
	}
}

// TestStartupFlood: connections that never send a startup packet, more of
// them than max_connections and than the startup limit, neither count
// against max_connections nor keep a real client out: the oldest are
// closed to make room for newer ones.
func TestStartupFlood(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 2; c.MaxStartupConnections = 4 })
	const flood = 10
	var idle []net.Conn
	for i := 0; i < flood; i++ {
		nc, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		idle = append(idle, nc)
	}
	ctx := context.Background()
	// Both session slots are still free for real logins.
	a, b := ts.connect(t), ts.connect(t)
	for _, c := range []*pgx.Conn{a, b} {
		var v int32
		if err := c.QueryRow(ctx, "select 7").Scan(&v); err != nil || v != 7 {
			t.Fatalf("login during the flood: %v", err)
		}
	}
	if n := ts.Evictions.Load(); n < flood-4 {
		t.Fatalf("%d startup connections evicted, want at least %d", n, flood-4)
	}
	// The first idle connection was among the evicted: the server closed it.
	idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("oldest idle connection: read %v, want EOF", err)
	}
}

// TestStartupFloodDefaults: the flood at its scale, under the
// default limits (max_connections 100, twice that for connections still
// starting up): 110 TCP connections that never authenticate, closed and
// opened again as a client reopening them would, keep no login out.
func TestStartupFloodDefaults(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	for round := range 2 {
		var idle []net.Conn
		for range 110 {
			nc, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			idle = append(idle, nc)
		}
		for i := range 3 {
			c := ts.connect(t)
			var v int32
			if err := c.QueryRow(ctx, "select 7").Scan(&v); err != nil || v != 7 {
				t.Fatalf("round %d, login %d during the flood: %v", round, i, err)
			}
			c.Close(ctx)
		}
		for _, nc := range idle {
			nc.Close()
		}
	}
}
