package server

// Simulated geography and lease placement of a clustered node (issue #4):
// --latency-map makes the RPC layer delay messages between regions
// (rpc/geo.go), and every clustered node runs a store.LeaseBalancer that
// balances its tablet leases over the nodes by count (each index's
// among themselves first, then the totals), or, with
// --lease-preferences region=R,..., moves them to the preferred region
// first (`none`: leases stay where elections put them). Without a region
// preference a node with a region moves leases toward the region their
// requests come from (store/load.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cairn-db/cairn/membership"
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
// leases balanced by count over the nodes unless the flag's preferences
// say otherwise, and the zones' (ALTER ... CONFIGURE ZONE USING
// lease_preferences) for their tablets. Leases go only to eligible nodes.
// Other nodes' counts come from their liveness records (membership's
// ReportedLeases): with more nodes than replicas no node sees all of
// another's leases. The same records say which nodes each node leads
// a domain's tablets with (ReportingNodes, LeadsWith), for the leases no
// holder can hand to the node short of them directly (store's twoHop).
// Its decisions go to log at Debug level (store.LeaseBalancerConfig.Logger).
func (r *replication) startLeaseBalancer(cfg Config, log *slog.Logger) {
	prefs, _ := store.ParseLeasePreferences(cfg.LeasePreferences)
	b := store.NewLeaseBalancer(store.LeaseBalancerConfig{Node: r.raft, Region: r.geo.Region, Prefs: prefs, ZonePrefs: r.zones.prefs, Eligible: r.leaseEligible,
		Domain: r.zones.domain, Reported: r.member.ReportedLeases, Peers: r.member.ReportingNodes, LeadsWith: r.member.LeadsWith, Load: r.load, Placed: r.placedAt, Logger: log.With("node", r.id)}, r.id)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	r.stopBalancer = func() { cancel(); <-done }
	r.balancer = b
}

// placedAt is store.LeaseBalancerConfig.Placed: when this node's store
// confirmed a tablet's lease placed for its index's creation.
func (r *replication) placedAt(id uint64) time.Time {
	if st := r.zones.st; st != nil {
		return st.PlacedAt(id)
	}
	return time.Time{}
}

// leaseEligible is store.LeaseBalancerConfig.Eligible: node id may take
// leases if the node table has it active (not decommissioning), the last
// membership view did not find it dead, and this node's clock monitor
// does not measure its clock beyond the tolerance (such a node fences
// itself: it would not take the lease up).
// spreadEligible is store.RaftConfig.LeaseEligible: leaseEligible once
// the node's membership and clock monitor run (the store opens before
// them; no DDL spreads leases before then).
func (r *replication) spreadEligible(id uint64) bool {
	if r.member == nil || r.clock == nil {
		return true
	}
	return r.leaseEligible(id)
}

// place is store.RaftConfig.Place: the replicate queue's placement of a
// new index's bucket (membership.Member.Place) once the node's membership
// runs; before then the voters stay where they are.
func (r *replication) place(ctx context.Context, tablet uint64, ordinal int) (uint64, bool, error) {
	if r.member == nil {
		return 0, true, nil
	}
	return r.member.Place(ctx, tablet, ordinal)
}

func (r *replication) leaseEligible(id uint64) bool {
	rec, ok := r.registry.Get(id)
	if !ok || rec.Status != membership.StatusActive || !slices.Contains(r.member.ClockPeers(), id) {
		return false
	}
	if id == r.id {
		return true
	}
	o, ok := r.clock.Offsets()[id]
	return !ok || max(o.Offset, -o.Offset)-o.Uncertainty <= clusterMaxOffset*4/5
}
