package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/jackc/pgx/v5"
)

// TestRetryPinned: the node's own start-up work repeats a transaction
// the clock refused as pinned (a slow save of its upper bound), and
// nothing else.
func TestRetryPinned(t *testing.T) {
	pinned := fmt.Errorf("bootstrap: %w: timestamp 1.0 was handed out while the clock could not pass 2", hlc.ErrPinned)
	other := errors.New("some other failure")
	cases := []struct {
		name      string
		errs      []error // fn's results in order; nil ends
		cancelled bool
		wantCalls int
		wantErr   error
	}{
		{name: "succeeds at once", errs: []error{nil}, wantCalls: 1},
		{name: "pinned twice then succeeds", errs: []error{pinned, pinned, nil}, wantCalls: 3},
		{name: "another error is not retried", errs: []error{other, nil}, wantCalls: 1, wantErr: other},
		{name: "pinned then another error", errs: []error{pinned, other, nil}, wantCalls: 2, wantErr: other},
		{name: "cancelled start stops retrying", errs: []error{pinned, nil}, cancelled: true, wantCalls: 1, wantErr: hlc.ErrPinned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			clock := hlc.NewClock(hlc.UnixNano, 0)
			if err := clock.EnsureUpperBound(&hlc.MemUpperBoundStore{}, 0); err != nil {
				t.Fatal(err)
			}
			calls := 0
			err := retryPinned(ctx, clock, func() error {
				err := tc.errs[calls]
				calls++
				return err
			})
			if calls != tc.wantCalls {
				t.Errorf("fn ran %d times, want %d", calls, tc.wantCalls)
			}
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Errorf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestSlowBoundSavesFailNoStatement: on a node whose disk takes 900 ms
// per sync, each save of the clock's upper bound is slower than the
// headroom the clock keeps (hlc invariant 5), so the clock pins for a
// while about once a second, and the gateway refuses to read at the
// timestamps it hands out then (clockmon.Guard). That is a slow disk,
// not a broken node: connections and statements in implicit and READ
// COMMITTED transactions restart past the pin (kvpb.RetryClockPinned)
// and none fails, where each used to fail with 58030.
func TestSlowBoundSavesFailNoStatement(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{Insecure: true, StoreDir: t.TempDir(), RPCAddr: addr, RPCListener: ln, Join: []string{addr}, FaultInjection: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, s)
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 10)"); err != nil {
		t.Fatal(err)
	}
	s.simfs.SetProfile(simfs.Profile{Name: "slow syncs", SyncLatency: 900 * time.Millisecond})
	pinsBefore := s.clock.PinnedReadings()
	var statements, connects int
	var slowest time.Duration
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); {
		began := time.Now()
		var v int
		if err := c.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != 10 {
			t.Fatalf("a point read after %d statements: %d, %v", statements, v, err)
		}
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t", pgx.QueryExecModeSimpleProtocol).Scan(&v); err != nil || v != 1 {
			t.Fatalf("a count after %d statements: %d, %v", statements, v, err)
		}
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err == nil {
			err = tx.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v)
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			t.Fatalf("a READ COMMITTED transaction after %d statements: %v", statements, err)
		}
		statements += 3
		slowest = max(slowest, time.Since(began))
		if statements%30 == 0 {
			// A connection reads the catalog (its role, its database).
			c2, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
			if err != nil {
				t.Fatalf("connecting after %d statements: %v", statements, err)
			}
			c2.Close(ctx)
			connects++
		}
	}
	s.simfs.SetProfile(simfs.Profile{Name: "fast"})
	t.Logf("slowest round of three statements: %s", slowest)
	// The test means something only if the clock did pin meanwhile.
	if s.clock.PinnedReadings() == pinsBefore {
		t.Fatalf("the clock never pinned in %d statements and %d connections: the test did not test", statements, connects)
	}
	t.Logf("%d statements and %d connections, none failed", statements, connects)
}
