package server

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// memberCluster starts nodes in this process that form a cluster through
// membership (a node of one, others joining it), with liveness and the
// replicate queue fast enough for tests.
type memberCluster struct {
	t       *testing.T
	deadAft time.Duration
	mu      sync.Mutex
	nodes   map[uint64]*Server
	dirs    map[uint64]string
	addrs   map[uint64]string
}

func newMemberCluster(t *testing.T, deadAfter time.Duration) *memberCluster {
	c := &memberCluster{t: t, deadAft: deadAfter, nodes: map[uint64]*Server{}, dirs: map[uint64]string{}, addrs: map[uint64]string{}}
	t.Cleanup(func() {
		for _, s := range c.nodes {
			_ = s.Stop(context.Background())
		}
	})
	return c
}

func (c *memberCluster) config(addr string, ln net.Listener, dir string, join []string, locality string) Config {
	return Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: join, StoreDir: dir, Locality: locality,
		Logger: quiet(), DeadAfter: c.deadAft, LivenessTTL: 400 * time.Millisecond, ReplicateInterval: 100 * time.Millisecond}
}

// start starts a node on a new address and store; join nil makes it a
// cluster of one (its own address), otherwise it joins through join.
func (c *memberCluster) start(join []string, locality string) *Server {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	addr := ln.Addr().String()
	if join == nil {
		join = []string{addr}
	}
	return c.startAt(addr, ln, c.t.TempDir(), join, locality)
}

func (c *memberCluster) startAt(addr string, ln net.Listener, dir string, join []string, locality string) *Server {
	c.t.Helper()
	s, err := Start(context.Background(), c.config(addr, ln, dir, join, locality))
	if err != nil {
		c.t.Fatalf("starting a node at %s: %v", addr, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[s.repl.id] = s
	c.dirs[s.repl.id] = dir
	c.addrs[s.repl.id] = addr
	return s
}

// stop stops node id (as a crash looks to the others).
func (c *memberCluster) stop(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	s := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if err := s.Stop(context.Background()); err != nil {
		c.t.Fatalf("stopping node %d: %v", id, err)
	}
}

// placement returns, for every tablet some running node leads, its
// voters and learners as the leaseholder sees them.
func (c *memberCluster) placement() map[uint64][2][]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[uint64][2][]uint64{}
	for _, s := range c.nodes {
		for _, id := range s.repl.raft.Tablets() {
			rep := s.repl.raft.Replica(id)
			if rep == nil {
				continue
			}
			if term, _ := rep.Lease(); term == 0 {
				continue
			}
			cs := s.repl.raft.Config(id)
			v, l := slices.Clone(cs.GetVoters()), slices.Clone(cs.GetLearners())
			slices.Sort(v)
			slices.Sort(l)
			out[id] = [2][]uint64{v, l}
		}
	}
	return out
}

// waitPlacement waits until every tablet of the cluster (as node 1's or
// any node's tablet set lists them) is led and ok(voters, learners).
func (c *memberCluster) waitPlacement(what string, timeout time.Duration, ok func(voters, learners []uint64) bool) map[uint64][2][]uint64 {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[uint64][2][]uint64
	for time.Now().Before(deadline) {
		last = c.placement()
		all := map[uint64]bool{}
		c.mu.Lock()
		for _, s := range c.nodes {
			for _, d := range s.store.Tablets() {
				all[uint64(d.TabletID)] = true
			}
		}
		c.mu.Unlock()
		good := len(all) > 0
		for id := range all {
			p, led := last[id]
			if !led || !ok(p[0], p[1]) {
				good = false
			}
		}
		if good {
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("%s: not reached within %s; placement (tablet: voters, learners): %v", what, timeout, last)
	return nil
}

func sameNodes(want ...uint64) func(v, l []uint64) bool {
	return func(v, l []uint64) bool { return len(l) == 0 && slices.Equal(v, want) }
}

func countRows(t *testing.T, s *Server, table string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, s)
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("counting %s through node %d: %v", table, s.repl.id, err)
	}
	return n
}

func execSQL(t *testing.T, s *Server, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, s)
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s through node %d: %v", sql, s.repl.id, err)
	}
}

// split splits the keyspace at key through node s.
func split(t *testing.T, s *Server, key string) {
	t.Helper()
	ba := &kvpb.BatchRequest{}
	ba.Add(&kvpb.SplitRequest{SplitKey: []byte(key)})
	if _, err := s.db.Send(context.Background(), ba); err != nil {
		t.Fatalf("split at %q through node %d: %v", key, s.repl.id, err)
	}
}

// TestJoinUpReplicates starts one node, writes through it, then joins two
// more: every tablet ends with voters on all three (replication factor
// 3), the rows read back through each node, and a write through a
// joined node reads back through the first.
func TestJoinUpReplicates(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	n1 := c.start(nil, "region=a")
	execSQL(t, n1, "CREATE TABLE t (k INT PRIMARY KEY, v TEXT)")
	execSQL(t, n1, "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 100) AS g")
	split(t, n1, "\x03f")
	split(t, n1, "\x03t")
	c.waitPlacement("one voter", 10*time.Second, sameNodes(1))
	join := []string{c.addrs[1]}
	n2 := c.start(join, "region=b")
	n3 := c.start(join, "region=c")
	if n2.repl.id != 2 || n3.repl.id != 3 {
		t.Fatalf("joined nodes got IDs %d and %d, want 2 and 3", n2.repl.id, n3.repl.id)
	}
	split(t, n2, "\x03p")
	p := c.waitPlacement("three voters", 30*time.Second, sameNodes(1, 2, 3))
	if len(p) < 4 {
		t.Fatalf("placement %v: want at least the 4 tablets of 3 splits", p)
	}
	t.Logf("placement: %v", p)
	for _, s := range []*Server{n1, n2, n3} {
		if n := countRows(t, s, "t"); n != 100 {
			t.Fatalf("node %d sees %d rows, want 100", s.repl.id, n)
		}
	}
	execSQL(t, n3, "INSERT INTO t VALUES (101, 'through node 3')")
	if n := countRows(t, n1, "t"); n != 101 {
		t.Fatalf("node 1 sees %d rows after a write through node 3, want 101", n)
	}
	// The first node goes: the two that joined hold a quorum of every
	// tablet and all its rows.
	c.stop(1)
	execSQL(t, n2, "INSERT INTO t VALUES (102, 'without node 1')")
	if n := countRows(t, n3, "t"); n != 102 {
		t.Fatalf("node 3 sees %d rows without node 1, want 102", n)
	}
}
