package server

// Simulated geography and lease placement of a clustered node (issue #4):
// --latency-map makes the RPC layer delay messages between regions
// (rpc/geo.go), and --lease-preferences runs a store.LeaseBalancer that
// moves this node's tablet leases to the preferred region, or spreads
// them over the nodes.

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/store"
)

// validateGeo checks the geography flags: they need a cluster.
func validateGeo(cfg Config) error {
	if _, err := rpc.ParseLatencyMap(cfg.LatencyMap); err != nil {
		return fmt.Errorf("--latency-map: %w", err)
	}
	if _, err := store.ParseLeasePreferences(cfg.LeasePreferences); err != nil {
		return fmt.Errorf("--lease-preferences: %w", err)
	}
	if len(cfg.Join) == 0 {
		if cfg.LatencyMap != "" {
			return errors.New("--latency-map needs --join: a single node has no other region to reach")
		}
		if cfg.LeasePreferences != "" {
			return errors.New("--lease-preferences needs --join: a single node holds every lease")
		}
	}
	return nil
}

// newGeography is node id's geography from the (validated) flags.
func newGeography(cfg Config, id uint64) *rpc.Geography {
	lat, _ := rpc.ParseLatencyMap(cfg.LatencyMap)
	return rpc.NewGeography(id, cfg.Locality, lat)
}

// startLeaseBalancer runs the lease balancer until the replication stops:
// the flag's preferences, and the zones' (ALTER ... CONFIGURE ZONE USING
// lease_preferences) for their tablets.
func (r *replication) startLeaseBalancer(cfg Config) {
	prefs, _ := store.ParseLeasePreferences(cfg.LeasePreferences)
	b := store.NewLeaseBalancer(store.LeaseBalancerConfig{Node: r.raft, Region: r.geo.Region, Prefs: prefs, ZonePrefs: r.zones.prefs}, r.id)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	r.stopBalancer = func() { cancel(); <-done }
}
