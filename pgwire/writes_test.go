package pgwire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// countingListener hands out connections that count their Write calls.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, writes: l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1) // before the bytes can reach the client
	return c.Conn.Write(p)
}

// TestOneWritePerRoundTrip: pgwire buffers a round trip's replies and
// writes them once, at the Sync or the end of the simple Query (package
// doc), in the simple protocol and in the extended one with and without
// a Describe.
func TestOneWritePerRoundTrip(t *testing.T) {
	var writes atomic.Int64
	srv, err := NewServer(Config{Backend: newTestBackend(), Insecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), countingListener{Listener: ln, writes: &writes}) }()
	defer func() {
		srv.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	}()
	ts := &testServer{Server: srv, addr: ln.Addr().String()}
	conn := ts.connect(t)
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, // Bind, Execute, Sync
		pgx.QueryExecModeDescribeExec,   // Parse, Describe, Sync; then Bind, Describe, Execute, Sync
		pgx.QueryExecModeExec,           // Parse, Bind, Describe, Execute, Sync
		pgx.QueryExecModeSimpleProtocol, // Query
	} {
		t.Run(mode.String(), func(t *testing.T) {
			var got int64
			// The first runs prepare the statement (pgx's cache).
			if err := conn.QueryRow(ctx, "select $1::int8", mode, int64(1)).Scan(&got); err != nil {
				t.Fatal(err)
			}
			roundTrips := int64(1)
			if mode == pgx.QueryExecModeDescribeExec {
				roundTrips = 2
			}
			const n = 20
			before := writes.Load()
			for i := int64(0); i < n; i++ {
				if err := conn.QueryRow(ctx, "select $1::int8", mode, i).Scan(&got); err != nil || got != i {
					t.Fatalf("echo %d = %d, %v", i, got, err)
				}
			}
			if w := writes.Load() - before; w != n*roundTrips {
				t.Fatalf("%d statements of %d round trips each made %d writes, want one per round trip", n, roundTrips, w)
			}
		})
	}
}
