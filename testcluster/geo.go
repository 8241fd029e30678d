package testcluster

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/store"
)

// GeoOptions give a cluster simulated geography and lease placement
// (ClusterOptions.Geo).
type GeoOptions struct {
	// Localities are the nodes' localities in node order
	// ("region=us-west"); missing ones are empty.
	Localities []string
	// Latency is the round-trip time between regions.
	Latency rpc.LatencyMap
	// Leases, when not zero, runs a store.LeaseBalancer on every node.
	Leases store.LeasePreferences
	// LeaseBalancer tunes the balancers (its Interval); its Node, Region
	// and Prefs are filled in per node.
	LeaseBalancer store.LeaseBalancerConfig
	// FollowLoad makes every node count its tablets' requests by gateway
	// (store.RequestLoad, with windows of LoadWindow; 0: the default) and
	// its balancer move leases toward them, as a server with a region
	// does.
	FollowLoad bool
	LoadWindow time.Duration
}

// geography is node n's geography (nil without Geo options).
func (n *ClusterNode) geography() *rpc.Geography {
	g := n.c.opts.Geo
	if g == nil {
		return nil
	}
	loc := ""
	if int(n.ID) <= len(g.Localities) {
		loc = g.Localities[n.ID-1]
	}
	return rpc.NewGeography(n.ID, loc, g.Latency)
}

// startBalancer runs node n's lease balancer until n stops: with Geo's
// lease preferences, else with ClusterOptions.LeaseBalancer; neither set,
// leases stay where elections put them (what most tests want).
func (n *ClusterNode) startBalancer() {
	var cfg store.LeaseBalancerConfig
	if g := n.c.opts.Geo; g != nil && !g.Leases.IsZero() {
		cfg = g.LeaseBalancer
		cfg.Prefs = g.Leases
	} else if lb := n.c.opts.LeaseBalancer; lb != nil {
		cfg = *lb
	} else {
		return
	}
	cfg.Node = n.Raft
	if n.Geo != nil {
		cfg.Region = n.Geo.Region
	}
	cfg.Load = n.Load
	if cfg.Logger != nil {
		cfg.Logger = cfg.Logger.With("node", n.ID)
	}
	b := store.NewLeaseBalancer(cfg, n.ID)
	n.Balancer = b
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	n.stopBalancer = func() { cancel(); <-done }
}

// RunLeaseBalancers starts a lease balancer with cfg on every running
// node that has none (and on every node restarted later), as
// ClusterOptions.LeaseBalancer does from the start: a test can first
// place leases by hand.
func (c *Cluster) RunLeaseBalancers(cfg store.LeaseBalancerConfig) {
	c.opts.LeaseBalancer = &cfg
	for _, n := range c.Nodes {
		if n.Running() && n.stopBalancer == nil {
			n.startBalancer()
		}
	}
}

// requestLoad is node n's request counter (nil unless Geo.FollowLoad).
func (n *ClusterNode) requestLoad() *store.RequestLoad {
	if g := n.c.opts.Geo; g != nil && g.FollowLoad {
		return store.NewRequestLoad(g.LoadWindow)
	}
	return nil
}
