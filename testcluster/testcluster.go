// Package testcluster starts real Cairn nodes inside a test process: an
// engine, a clock, a store with its tablets, and a KV client in front, wired
// exactly as a node wires them. Tests above the KV layer (catalog, row
// encoding, SQL) use it instead of fakes.
//
// Today a cluster is one node; the cluster issue grows it to several nodes
// joined by an in-process transport. It is imported only by tests and test
// programs, never by production code.
package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
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
}

// Node is one started node.
type Node struct {
	Clock  *hlc.Clock
	Manual *hlc.ManualClock // nil unless Options.ManualClock
	Engine *storage.Engine
	Store  *store.Store
	DB     *kv.DB
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
	st, err := store.Open(ctx, eng, n.Clock, o.Store)
	if err != nil {
		_ = eng.Close()
		return nil, err
	}
	n.Store = st
	for _, k := range o.Splits {
		if _, _, err := st.Split(ctx, k); err != nil {
			st.Close()
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
	return n.Engine.Close()
}
