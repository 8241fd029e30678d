// Package localcluster starts a whole Cairn cluster inside one process:
// several server.Server nodes with in-memory stores, joined over loopback
// RPC, optionally spread over simulated regions (`cairn demo --nodes 3
// --global`, bench/colocation). It owns only that wiring; each node is an
// ordinary server.Start.
package localcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/test/proc"
)

// GlobalRegions are the regions of a --global cluster, node i (from 0) in
// GlobalRegions[i % 3]: the seed's three (seeds/colocated-tables.txt).
var GlobalRegions = []string{"us-west", "us-east", "eu"}

// GlobalLatencyMap is the seed's round-trip times between those regions.
const GlobalLatencyMap = "us-west:us-east=60ms,us-east:eu=86ms,eu:us-west=145ms"

// Options configure a cluster.
type Options struct {
	// Nodes is the number of nodes (at least 1).
	Nodes int
	// Global places the nodes in GlobalRegions with GlobalLatencyMap; it
	// needs at least 3 nodes.
	Global bool
	// LeasePreferences is server.Config.LeasePreferences for every node.
	LeasePreferences string
	// Logger receives every node's logs (nil: slog.Default()).
	Logger *slog.Logger
	// ZoneRefreshInterval is server.Config.ZoneRefreshInterval for every
	// node (0: the default).
	ZoneRefreshInterval time.Duration
}

// Cluster is a running cluster of insecure in-memory nodes.
type Cluster struct {
	Nodes []*server.Server
	// Regions are the nodes' regions ("" without Global).
	Regions []string
}

// Start starts the nodes (concurrently: a member's bootstrap needs a
// quorum of the others) and returns once every one serves SQL.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes < 1 {
		return nil, fmt.Errorf("a cluster needs at least 1 node, not %d", o.Nodes)
	}
	if o.Global && o.Nodes < len(GlobalRegions) {
		return nil, fmt.Errorf("a global cluster needs at least %d nodes (one per region), not %d", len(GlobalRegions), o.Nodes)
	}
	c := &Cluster{Regions: make([]string, o.Nodes)}
	// With CAIRN_TEST_PORTS=lo-hi every listener is in that range (engineers
	// sharing a machine each keep to their own, below the kernel's
	// ephemeral ports); without it the kernel picks free ports.
	var addrs []string
	if os.Getenv("CAIRN_TEST_PORTS") != "" {
		var err error
		if addrs, err = proc.FreeAddrs(3 * o.Nodes); err != nil {
			return nil, fmt.Errorf("ports from CAIRN_TEST_PORTS: %w", err)
		}
	}
	addr := func(i int) string {
		if addrs == nil {
			return ""
		}
		return addrs[i]
	}
	if o.Nodes == 1 && !o.Global {
		s, err := server.Start(ctx, server.Config{Insecure: true, Logger: o.Logger, LeasePreferences: o.LeasePreferences, SQLAddr: addr(0), HTTPAddr: addr(1)})
		if err != nil {
			return nil, err
		}
		c.Nodes = []*server.Server{s}
		return c, nil
	}
	lns := make([]net.Listener, o.Nodes)
	join := make([]string, o.Nodes)
	for i := range lns {
		ln, err := net.Listen("tcp", cmp.Or(addr(3*i+2), "127.0.0.1:0"))
		if err != nil {
			for _, l := range lns[:i] {
				l.Close()
			}
			return nil, fmt.Errorf("listening for RPC: %w", err)
		}
		lns[i], join[i] = ln, ln.Addr().String()
	}
	cfgs := make([]server.Config, o.Nodes)
	for i := range cfgs {
		cfgs[i] = server.Config{
			Insecure:         true,
			SQLAddr:          addr(3 * i),
			HTTPAddr:         addr(3*i + 1),
			RPCAddr:          join[i],
			RPCListener:      lns[i],
			Join:             join,
			Logger:           o.Logger,
			LeasePreferences: o.LeasePreferences,

			ZoneRefreshInterval: o.ZoneRefreshInterval,
		}
		if o.Global {
			c.Regions[i] = GlobalRegions[i%len(GlobalRegions)]
			cfgs[i].Locality = "region=" + c.Regions[i]
			cfgs[i].LatencyMap = GlobalLatencyMap
		}
	}
	c.Nodes = make([]*server.Server, o.Nodes)
	errs := make([]error, o.Nodes)
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Nodes[i], errs[i] = server.Start(ctx, cfgs[i])
			if errs[i] != nil {
				errs[i] = fmt.Errorf("node %d: %w", i+1, errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Stop(context.Background())
		return nil, err
	}
	return c, nil
}

// URL is node i's (from 0) connection URL for database db.
func (c *Cluster) URL(i int, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", c.Nodes[i].Addr(), db)
}

// Stop stops every node that started.
func (c *Cluster) Stop(ctx context.Context) error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range c.Nodes {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Stop(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %d: %w", i+1, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
