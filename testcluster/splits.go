package testcluster

import "context"

// startSplitQueue runs node n's split queue until n stops
// (ClusterOptions.SplitQueue).
func (n *ClusterNode) startSplitQueue() {
	if !n.c.opts.SplitQueue {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Store.RunSplitQueue(ctx)
	}()
	n.stopSplits = func() { cancel(); <-done }
}

// StopSplitQueues stops every node's split queue (a test that checks
// the tablets once the splitting is over).
func (c *Cluster) StopSplitQueues() {
	for _, n := range c.Nodes {
		if n.stopSplits != nil {
			n.stopSplits()
			n.stopSplits = nil
		}
	}
}
