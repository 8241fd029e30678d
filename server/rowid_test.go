package server

import (
	"context"
	"net"
	"testing"

	"github.com/cairn-db/cairn/sql/builtins"
)

// TestUniqueRowIDCarriesTheNodeID: a node of a cluster hands out
// unique_rowid() values whose low 10 bits are its node ID, whatever the
// process's random bits were, so that no two nodes (up to 1,024) can
// generate the same key.
func TestUniqueRowIDCarriesTheNodeID(t *testing.T) {
	builtins.SetUniqueRowIDNode(1023) // no node's ID here
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}})
	conn := connect(t, s)
	defer conn.Close(context.Background())
	var bits int64
	if err := conn.QueryRow(context.Background(), "SELECT unique_rowid() % 1024").Scan(&bits); err != nil {
		t.Fatal(err)
	}
	if uint64(bits) != s.repl.id {
		t.Fatalf("unique_rowid()'s node bits are %d on node %d", bits, s.repl.id)
	}
}
