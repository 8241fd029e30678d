package server

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestStoreKindsRefused: a store an unreplicated node made does not open
// as a member of a replicated cluster (its tablets have no raft state),
// nor a replicated member's store as an unreplicated node (it would serve
// its replicas without raft); each stays usable as what it is.
func TestStoreKindsRefused(t *testing.T) {
	ctx := context.Background()
	listen := func() (net.Listener, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln, ln.Addr().String()
	}
	stop := func(s *Server) {
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// An unreplicated store with a table.
	old := t.TempDir()
	s := start(t, Config{StoreDir: old, Insecure: true})
	execSQL(t, s, "CREATE TABLE kept (k INT PRIMARY KEY)")
	execSQL(t, s, "INSERT INTO kept VALUES (1), (2)")
	stop(s)
	ln, addr := listen()
	_, err := Start(ctx, Config{StoreDir: old, Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}, Logger: quiet()})
	if !errors.Is(err, ErrUnreplicatedStore) {
		t.Fatalf("an unreplicated store started as a cluster of one: %v, want ErrUnreplicatedStore", err)
	}
	t.Logf("refused: %v", err)
	ln, addr = listen()
	ln.Close()
	if _, err := Start(ctx, Config{StoreDir: old, Insecure: true, RPCAddr: addr, Join: []string{"127.0.0.1:1"}, Logger: quiet()}); !errors.Is(err, ErrUnreplicatedStore) {
		t.Fatalf("an unreplicated store joining a cluster: %v, want ErrUnreplicatedStore", err)
	}
	s = start(t, Config{StoreDir: old, Insecure: true})
	if n := countRows(t, s, "kept"); n != 2 {
		t.Fatalf("the refused store, reopened unreplicated, has %d rows, want 2", n)
	}
	stop(s)

	// A replicated cluster of one.
	dir := t.TempDir()
	ln, addr = listen()
	s = start(t, Config{StoreDir: dir, Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}})
	execSQL(t, s, "CREATE TABLE kept (k INT PRIMARY KEY)")
	execSQL(t, s, "INSERT INTO kept VALUES (1), (2), (3)")
	stop(s)
	if _, err := Start(ctx, Config{StoreDir: dir, Insecure: true, Logger: quiet()}); !errors.Is(err, ErrReplicatedStore) {
		t.Fatalf("a replicated store opened unreplicated: %v, want ErrReplicatedStore", err)
	} else {
		t.Logf("refused: %v", err)
	}
	s = start(t, Config{StoreDir: dir, Insecure: true, RPCAddr: addr, RPCListener: relisten(t, addr), Join: []string{addr}})
	defer stop(s)
	if n := countRows(t, s, "kept"); n != 3 {
		t.Fatalf("the refused store, reopened as the cluster of one, has %d rows, want 3", n)
	}
}
