package testcluster

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// OpenCluster starts a cluster; StartCluster wraps it for tests, and
// programs (benchmarks) that have no testing.TB call it directly; the caller closes it with Close.
// WaitLeader needs a testing.TB: programs use LeaderWithin instead.
//
// newFS makes each node's filesystem; nil means vfs.NewCrashableMem, as
// in StartCluster. A crashable filesystem copies a whole file on every
// sync (that is how it remembers what a crash keeps), which makes synced
// writes cost more as the WAL grows: a benchmark of throughput passes
// vfs.NewMem, whose syncs cost nothing, and then may Stop nodes but not
// Crash them.
func OpenCluster(o ClusterOptions, newFS func() *vfs.MemFS) (*Cluster, error) {
	if newFS == nil {
		newFS = vfs.NewCrashableMem
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Tick == 0 {
		o.Tick = 10 * time.Millisecond
	}
	if o.MaxOffset == 0 {
		o.MaxOffset = 50 * time.Millisecond
	}
	if o.ClockInterval == 0 {
		o.ClockInterval = 100 * time.Millisecond
	}
	c := &Cluster{opts: o, addrs: map[uint64]string{}, cut: map[[2]uint64]bool{}, blocked: map[[2]uint64]bool{}}
	for i := range o.Nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(fmt.Errorf("testcluster: %w", err), c.Close())
		}
		id := uint64(i + 1)
		// Nodes already started resolve addresses (their clock monitors
		// ping every peer) while later ones are added.
		c.mu.Lock()
		c.addrs[id] = ln.Addr().String()
		c.mu.Unlock()
		n := &ClusterNode{c: c, ID: id, fs: newFS()}
		n.clockOffset.Store(int64(o.ClockOffsets[id]))
		if err := n.start(ln); err != nil {
			_ = ln.Close()
			return nil, errors.Join(fmt.Errorf("testcluster: node %d: %w", id, err), c.Close())
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// Close stops every running node.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		if n.Running() {
			if err := n.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("testcluster: stop node %d: %w", n.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

// LeaderWithin waits up to timeout until some running node holds
// tablet's lease and returns it; unlike WaitLeader it reports a timeout
// as an error.
func (c *Cluster) LeaderWithin(tablet kvpb.TabletID, timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	for {
		if l := c.Leader(tablet); l != 0 {
			return l, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("testcluster: no leaseholder of tablet %d within %s", tablet, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
