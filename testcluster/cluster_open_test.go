package testcluster

import (
	"context"
	"testing"
	"time"
)

// TestOpenCluster starts a cluster without a testing.TB, as benchmark
// programs do: a leaseholder appears, a write through one node is read
// through another, and Close stops every node.
func TestOpenCluster(t *testing.T) {
	c, err := OpenCluster(ClusterOptions{Nodes: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()
	if _, err := c.LeaderWithin(1, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Nodes[0].DB.Put(ctx, []byte("\x03open"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	v, ok, err := c.Nodes[2].DB.Get(ctx, []byte("\x03open"))
	if err != nil || !ok || string(v) != "v" {
		t.Fatalf("read through node 3: %q, %v, %v", v, ok, err)
	}
	closed = true
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n.Running() {
			t.Errorf("node %d still running after Close", n.ID)
		}
	}
}
