package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/membership"
)

// TestMembershipStartRetries: a node whose membership start meets an
// ambiguous result (a peer's connection dropping while leases move after
// a failure) retries it and comes up; a refusal is final.
func TestMembershipStartRetries(t *testing.T) {
	real := startMember
	t.Cleanup(func() { startMember = real })
	for _, tc := range []struct {
		name    string
		fail    error
		times   int
		wantErr error
	}{
		{"ambiguous twice, then up", &kvpb.AmbiguousResultError{Cause: errors.New("rpc: batch to node 1: EOF")}, 2, nil},
		{"refused", fmt.Errorf("%w: node 1 was decommissioned", membership.ErrRefused), 1, membership.ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			startMember = func(ctx context.Context, m *membership.Member, db *kv.DB) error {
				calls++
				if calls <= tc.times {
					return tc.fail
				}
				return real(ctx, m, db)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			s, err := Start(context.Background(), Config{StoreDir: t.TempDir(), Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}, Logger: quiet()})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || calls != 1 {
					t.Fatalf("start: %v after %d attempts, want %v at the first", err, calls, tc.wantErr)
				}
				if s != nil {
					_ = s.Stop(context.Background())
				}
				return
			}
			if err != nil {
				t.Fatalf("start after %d attempts: %v", calls, err)
			}
			defer func() {
				if err := s.Stop(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			if calls != tc.times+1 {
				t.Fatalf("membership started after %d attempts, want %d", calls, tc.times+1)
			}
			execSQL(t, s, "CREATE TABLE up (k INT PRIMARY KEY)")
		})
	}
}
