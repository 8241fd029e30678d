package testcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestClusterDiskFailure fails the disk of the leaseholder of a 3-node
// cluster (every write and sync returns ENOSPC, as a full disk does)
// while clients write through all three gateways. The node must stop
// acknowledging as leaseholder — its raft scheduler stops on the failed
// engine, which fences it — the other two must elect a leaseholder and
// go on acknowledging writes, and after the failed node loses what it had
// not synced and restarts on a healthy disk it catches up: every
// acknowledged write is readable through every gateway and present in
// every engine.
func TestClusterDiskFailure(t *testing.T) {
	c := StartCluster(t, ClusterOptions{})
	l := c.WaitLeader(1, 10*time.Second)
	victim := c.Nodes[l-1]

	var (
		mu       sync.Mutex
		acked    []string
		ackedVia = map[uint64]int{}
		after    atomic.Bool // the disk has failed
		ackAfter = map[uint64]int{}
		stop     atomic.Bool
		wg       sync.WaitGroup
		seq      atomic.Int64
	)
	gate := make([]sync.RWMutex, len(c.Nodes))
	for _, n := range c.Nodes {
		for w := range 2 {
			wg.Go(func() {
				for !stop.Load() {
					g := &gate[n.ID-1]
					g.RLock()
					if !n.Running() {
						g.RUnlock()
						time.Sleep(10 * time.Millisecond)
						continue
					}
					k := fmt.Sprintf("\x03disk/%d-%d-%06d", n.ID, w, seq.Add(1))
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					err := n.DB.Put(ctx, []byte(k), []byte("v"))
					cancel()
					g.RUnlock()
					if err == nil {
						mu.Lock()
						acked = append(acked, k)
						ackedVia[n.ID]++
						if after.Load() {
							ackAfter[n.ID]++
						}
						mu.Unlock()
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
	}
	defer func() { stop.Store(true); wg.Wait() }()

	time.Sleep(500 * time.Millisecond)
	victim.InjectDiskError(syscall.ENOSPC)
	after.Store(true)
	waitFor(t, 5*time.Second, "the node with the full disk fences itself", func() bool {
		return victim.Raft.Fenced() != nil
	})
	t.Logf("fenced: %v", victim.Raft.Fenced())
	if err := victim.Raft.Fenced(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("the fence does not name the disk's error: %v", err)
	}
	waitFor(t, 10*time.Second, "another node takes the lease", func() bool {
		l := c.Leader(1)
		return l != 0 && l != victim.ID
	})
	// The others keep acknowledging.
	mu.Lock()
	base := map[uint64]int{}
	for id, n := range ackAfter {
		base[id] = n
	}
	mu.Unlock()
	waitFor(t, 10*time.Second, "writes through the healthy gateways go on", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range c.Nodes {
			if n != victim && ackAfter[n.ID] <= base[n.ID]+10 {
				return false
			}
		}
		return true
	})
	if term, _ := victim.Raft.Replica(1).Lease(); term != 0 {
		t.Errorf("the failed node still reports the lease of term %d", term)
	}

	// Power loss on the failed node, then a healthy disk.
	g := &gate[victim.ID-1]
	g.Lock()
	_ = victim.Crash(7) // closing a failed engine reports its error
	victim.InjectDiskError(nil)
	err := victim.Restart()
	g.Unlock()
	if err != nil {
		t.Fatalf("restart on a healthy disk: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d writes acknowledged (per gateway %v; after the failure %v)", len(acked), ackedVia, ackAfter)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		for _, k := range acked {
			if _, ok, err := n.DB.Get(ctx, []byte(k)); err != nil || !ok {
				t.Fatalf("acknowledged write %q not read through node %d: ok=%v err=%v", k, n.ID, ok, err)
			}
		}
	}
	// Every engine, the restarted one included, catches up.
	waitFor(t, 10*time.Second, "every engine holds every acknowledged write", func() bool {
		for _, n := range c.Nodes {
			for _, k := range acked {
				if v := engineVersions(n, k, k+"\x00"); !containsVersion(v) {
					return false
				}
			}
		}
		return true
	})
}

// containsVersion reports whether engineVersions listed a version.
func containsVersion(listing string) bool {
	lines := 0
	for _, c := range listing {
		if c == '\n' {
			lines++
		}
	}
	return lines > 1 // the first line names the node
}
