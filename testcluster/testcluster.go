// Package testcluster starts real Cairn nodes inside a test process: an
// engine, a clock, a store with its tablets, and a KV client in front, wired
// exactly as a node wires them. Tests above the KV layer (catalog, row
// encoding, SQL) use it instead of fakes.
//
// Start is one node (optionally with its tablets as raft groups of one
// voter); StartCluster (cluster.go) is several nodes replicating every
// tablet over gRPC on loopback. It is imported only by tests and test
// programs, never by production code.
package testcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure a node. The zero value is an in-memory node with the
// real clock and no clock-offset check.
type Options struct {
	// Dir and FS place the engine; an empty Dir with a nil FS means a fresh
	// in-memory filesystem.
	Dir string
	FS  vfs.FS
	// Splits are keys the keyspace is split at after start.
	Splits [][]byte
	// ManualClock drives the node's clock by hand (Node.Manual).
	ManualClock bool
	// MaxOffset is the clock's maximum offset (0 disables the check).
	MaxOffset time.Duration
	// Store and DB pass through to store.Open and kv.NewDB.
	Store store.Config
	DB    kv.Options
	// Raft makes every tablet a raft group of one voter (replication
	// factor 1): writes go evaluate → propose → append+sync → apply.
	Raft bool
}

// Node is one started node.
type Node struct {
	Clock  *hlc.Clock
	Manual *hlc.ManualClock // nil unless Options.ManualClock
	Engine *storage.Engine
	Store  *store.Store
	DB     *kv.DB

	stopRaft func() error
}

// StartNode starts a node and stops it when the test ends.
func StartNode(tb testing.TB, o Options) *Node {
	tb.Helper()
	n, err := Start(context.Background(), o)
	if err != nil {
		tb.Fatalf("testcluster: %v", err)
	}
	tb.Cleanup(func() {
		if err := n.Stop(); err != nil {
			tb.Errorf("testcluster: stop: %v", err)
		}
	})
	return n
}

// Start starts a node; the caller stops it. It is for programs (benchmarks,
// child processes of fault tests) that have no testing.TB.
func Start(ctx context.Context, o Options) (*Node, error) {
	n := &Node{}
	physical := hlc.UnixNano
	if o.ManualClock {
		n.Manual = hlc.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		physical = n.Manual.UnixNano
	}
	n.Clock = hlc.NewClock(physical, o.MaxOffset)
	fs := o.FS
	if fs == nil && o.Dir == "" {
		fs = vfs.NewMem()
	}
	eng, err := storage.Open(o.Dir, storage.Options{FS: fs})
	if err != nil {
		return nil, err
	}
	n.Engine = eng
	scfg := o.Store
	if o.Raft {
		rn := raftnode.NewNode(raftnode.Config{NodeID: 1}, eng, nil)
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rn.Run(rctx, 10*time.Millisecond) }()
		n.stopRaft = func() error { cancel(); return <-done }
		scfg.Raft = &store.RaftConfig{Node: rn, Peers: []uint64{1}}
	}
	st, err := store.Open(ctx, eng, n.Clock, scfg)
	if err != nil {
		if n.stopRaft != nil {
			_ = n.stopRaft()
		}
		_ = eng.Close()
		return nil, err
	}
	n.Store = st
	for _, k := range o.Splits {
		if _, _, err := st.Split(ctx, k); err != nil {
			st.Close()
			if n.stopRaft != nil {
				_ = n.stopRaft()
			}
			_ = eng.Close()
			return nil, err
		}
	}
	n.DB = kv.NewDB(st, st, n.Clock, o.DB)
	return n, nil
}

// Stop stops the KV client and the store, then closes the engine.
func (n *Node) Stop() error {
	n.DB.Close()
	n.Store.Close()
	if n.stopRaft != nil {
		if err := n.stopRaft(); err != nil {
			_ = n.Engine.Close()
			return fmt.Errorf("raft scheduler: %w", err)
		}
	}
	return n.Engine.Close()
}
