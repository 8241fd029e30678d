package rpc

// The fault injector: a test (the chaos harness, test/chaos) cuts this
// node off from chosen peers, as a network partition would, without root
// or firewall rules. It acts only on this node's side of each link, so a
// partition between two real processes is made by cutting on both sides.
//
// While peer N is cut:
//
//  1. no raft message leaves for N (dropped at Send and again when its
//     batch would go out, so nothing queued before the cut leaks through),
//     and none received from N is delivered;
//  2. no KV batch is sent to N: it fails as a routing error, certainly not
//     sent (the DistSender retries elsewhere);
//  3. no snapshot is sent to N and no clock ping reaches it.
//
// A nil *Faults injects nothing; production nodes have none unless started
// with fault injection enabled (server.Config.FaultInjection).

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrCut is the error of a call to a peer the fault injector cuts off.
var ErrCut = errors.New("rpc: peer cut off by the fault injector")

// Faults is a per-peer fault injector. Safe for concurrent use; the zero
// value cuts nothing.
type Faults struct {
	mu  sync.RWMutex
	cut map[uint64]bool
	// dropped counts the raft messages dropped on arrival (Serve).
	dropped atomic.Int64
}

// DroppedOnArrival is the number of raft messages from cut peers that
// Serve dropped.
func (f *Faults) DroppedOnArrival() int64 { return f.dropped.Load() }

// SetCut replaces the set of peers cut off with nodes (none: heal).
func (f *Faults) SetCut(nodes []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = map[uint64]bool{}
	for _, n := range nodes {
		f.cut[n] = true
	}
}

// Cut returns the peers cut off, in increasing order.
func (f *Faults) Cut() []uint64 {
	if f == nil {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]uint64, 0, len(f.cut))
	for n := range f.cut {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// IsCut reports whether node is cut off (false on a nil Faults).
func (f *Faults) IsCut(node uint64) bool {
	if f == nil {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cut[node]
}

// WithFaults makes Serve drop the raft messages that arrive from the peers
// f cuts off.
func WithFaults(f *Faults) ServeOption {
	return func(c *serveConfig) { c.faults = f }
}
