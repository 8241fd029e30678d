package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
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

// TestSlowBoundSavesFailNoStatement: while a node's disk takes 900 ms
// per sync (episodes of 1.5 s, with 0.5 s of a fast disk between them),
// each save of the clock's upper bound is slower than the headroom the
// clock keeps (hlc invariant 5), so the clock pins, and the gateway
// refuses to read at the timestamps it hands out then (clockmon.Guard).
// That is a slow disk, not a broken node: implicit statements and new
// connections (their catalog reads) restart past the pin
// (kvpb.RetryClockPinned) and none fails, where each used to fail with
// 58030. A transaction block may be told to restart (40001, the pinned
// clock named), never 58030.
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
	pinsBefore := s.clock.PinnedReadings()
	stop := make(chan struct{})
	episodes := make(chan struct{})
	go func() {
		defer close(episodes)
		for {
			s.simfs.SetProfile(simfs.Profile{Name: "slow syncs", SyncLatency: 900 * time.Millisecond})
			select {
			case <-stop:
				s.simfs.SetProfile(simfs.Profile{Name: "fast"})
				return
			case <-time.After(1500 * time.Millisecond):
			}
			s.simfs.SetProfile(simfs.Profile{Name: "fast"})
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	var statements, connects, blocks, restarts int
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); {
		var v int
		if err := c.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != 10 {
			t.Fatalf("a point read after %d statements: %d, %v", statements, v, err)
		}
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t", pgx.QueryExecModeSimpleProtocol).Scan(&v); err != nil || v != 1 {
			t.Fatalf("a count after %d statements: %d, %v", statements, v, err)
		}
		statements += 2
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			t.Fatalf("BEGIN after %d statements: %v", statements, err)
		}
		if err = tx.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err == nil {
			err = tx.Commit(ctx)
		}
		blocks++
		if err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "40001" || !strings.Contains(pe.Message, "clock was held back") {
				t.Fatalf("a transaction block after %d statements: %v, want success or a restart for the pinned clock", statements, err)
			}
			restarts++
			_ = tx.Rollback(ctx)
		}
		if statements%20 == 0 {
			// A connection reads the catalog (its role, its database).
			c2, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
			if err != nil {
				t.Fatalf("connecting after %d statements: %v", statements, err)
			}
			c2.Close(ctx)
			connects++
		}
	}
	close(stop)
	<-episodes
	// The test means something only if the clock did pin meanwhile.
	pins := s.clock.PinnedReadings()
	if pins == pinsBefore {
		t.Fatalf("the clock never pinned in %d statements and %d connections: the test did not test", statements, connects)
	}
	// An operator sees the pins on /metrics: the counter is there, and
	// counts at least the pins seen above (it only grows).
	_, _, body := httpGet(t, s, "/metrics")
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	f := fams["cairn_clock_pinned_readings_total"]
	if f == nil || f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 1 {
		t.Fatalf("/metrics: cairn_clock_pinned_readings_total is %v, want one counter", f)
	}
	if got := f.GetMetric()[0].GetCounter().GetValue(); got < float64(pins) {
		t.Fatalf("/metrics: cairn_clock_pinned_readings_total = %v, want at least %d", got, pins)
	}
	t.Logf("%d implicit statements and %d connections, none failed; %d transaction blocks, %d told to restart", statements, connects, blocks, restarts)
}
