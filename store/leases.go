package store

// Lease placement (issue #4, "leader preferences by region"). Every node
// runs a LeaseBalancer over its own raft groups: for each tablet whose
// lease it holds it decides whether the lease belongs elsewhere and, if
// so, transfers leadership (raftnode.Node.TransferLeader; leader =
// leaseholder). Two policies, as CockroachDB and YugabyteDB operators know
// them:
//
//   - preferences (CockroachDB's lease_preferences, YugabyteDB's
//     preferred zones): an ordered list of regions; a lease held outside the
//     most preferred region that has a live voter of the tablet moves to a
//     voter there. Within the preferred region nothing moves.
//   - spread (leader balancing): a node holding more than one lease above
//     the least loaded voter of a tablet it leads hands that tablet to it.
//     Every node sees every group it has a replica of, with its leader, so
//     each computes the same counts.
//
// The policy is the node's (--lease-preferences) unless the tablet's zone
// sets lease preferences (ZonePrefs; ALTER ... CONFIGURE ZONE): then the
// zone's apply to that tablet.
//
// Each node moves only leases it holds, so two nodes never fight over
// one; a pass moves at most maxTransfersPerPass leases, since each new
// leaseholder waits out the maximum clock offset before serving.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cairn-db/cairn/raftnode"
)

// LeasePreferences say where tablet leases should be.
type LeasePreferences struct {
	// Regions, in order of preference; empty with Spread false: leases
	// stay where elections put them.
	Regions []string
	// Spread balances leases over the nodes instead.
	Spread bool
}

// IsZero reports no preference.
func (p LeasePreferences) IsZero() bool { return !p.Spread && len(p.Regions) == 0 }

// String is p in ParseLeasePreferences's form.
func (p LeasePreferences) String() string {
	if p.Spread {
		return "spread"
	}
	parts := make([]string, len(p.Regions))
	for i, r := range p.Regions {
		parts[i] = "region=" + r
	}
	return strings.Join(parts, ",")
}

// ParseLeasePreferences parses `region=us-west[,region=us-east...]`
// (regions in order of preference), `spread`, or "" (none).
func ParseLeasePreferences(s string) (LeasePreferences, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return LeasePreferences{}, nil
	case "spread":
		return LeasePreferences{Spread: true}, nil
	}
	var p LeasePreferences
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || strings.TrimSpace(k) != "region" || strings.TrimSpace(v) == "" {
			return LeasePreferences{}, fmt.Errorf("lease preferences %q: want region=NAME[,region=NAME...] or spread", s)
		}
		v = strings.TrimSpace(v)
		if slices.Contains(p.Regions, v) {
			return LeasePreferences{}, fmt.Errorf("lease preferences %q: region %s given twice", s, v)
		}
		p.Regions = append(p.Regions, v)
	}
	return p, nil
}

// LeaseBalancerConfig configures a LeaseBalancer.
type LeaseBalancerConfig struct {
	Node *raftnode.Node
	// Region returns a node's region ("" when unknown).
	Region func(node uint64) string
	Prefs  LeasePreferences
	// ZonePrefs, if set, returns the preferences of tablet id's zone
	// (ALTER ... CONFIGURE ZONE USING lease_preferences; package zone),
	// ok false when its zone sets none and Prefs applies.
	ZonePrefs func(tablet uint64) (p LeasePreferences, ok bool)
	// Interval between passes (0: 1s), each jittered by up to a fifth.
	Interval time.Duration
	// MinHold is how long a node keeps a lease before the balancer may
	// move it (0: 3s). Spreading counts leases from the replicas' leader
	// hints, which lag a transfer; without it two nodes each seeing
	// itself as the loaded one passed a lease back and forth every few
	// hundred milliseconds. For preferences it keeps a split's new tablet
	// where it was elected until its replicas, just opened, grant votes
	// again (raftnode refuses votes for an election timeout after opening
	// a replica), and lets a lease taken over under load serve a while.
	MinHold time.Duration
}

// LeaseBalancer moves the leases of one node's groups to where the
// preferences want them.
type LeaseBalancer struct {
	cfg  LeaseBalancerConfig
	self uint64
	// held is when this node was first seen holding each lease (tablet →
	// term and time); only Pass touches it.
	held map[uint64]heldLease
}

type heldLease struct {
	term  uint64
	since time.Time
}

// maxTransfersPerPass bounds the leases one node moves per pass.
const maxTransfersPerPass = 8

// NewLeaseBalancer makes a balancer for cfg.Node.
func NewLeaseBalancer(cfg LeaseBalancerConfig, self uint64) *LeaseBalancer {
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.MinHold == 0 {
		cfg.MinHold = 3 * time.Second
	}
	return &LeaseBalancer{cfg: cfg, self: self, held: map[uint64]heldLease{}}
}

// Run makes a pass every interval until ctx ends.
func (b *LeaseBalancer) Run(ctx context.Context) {
	if b.cfg.Prefs.IsZero() && b.cfg.ZonePrefs == nil {
		return
	}
	for {
		d := b.cfg.Interval + time.Duration(rand.Int64N(int64(b.cfg.Interval)/5+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		b.Pass()
	}
}

// Pass looks at every lease this node holds once and starts the transfers
// the preferences call for; it returns how many it started.
func (b *LeaseBalancer) Pass() int {
	groups := b.cfg.Node.Groups()
	now := time.Now()
	for _, g := range groups {
		if g.Lease == 0 {
			delete(b.held, g.TabletID)
		} else if h, ok := b.held[g.TabletID]; !ok || h.term != g.Lease {
			b.held[g.TabletID] = heldLease{term: g.Lease, since: now}
		}
	}
	prefs := make(map[uint64]LeasePreferences, len(groups))
	for _, g := range groups {
		if g.Lease != 0 {
			prefs[g.TabletID] = b.prefsOf(g.TabletID)
		}
	}
	moves := b.prefer(groups, prefs)
	return moves + b.spread(groups, prefs, maxTransfersPerPass-moves)
}

// prefsOf is tablet id's preferences: its zone's, else the node's.
func (b *LeaseBalancer) prefsOf(id uint64) LeasePreferences {
	if b.cfg.ZonePrefs != nil {
		if p, ok := b.cfg.ZonePrefs(id); ok {
			return p
		}
	}
	return b.cfg.Prefs
}

// rank is a region's place in regions (len: not preferred).
func (b *LeaseBalancer) rank(regions []string, node uint64) int {
	r := b.cfg.Region(node)
	if i := slices.Index(regions, r); i >= 0 && r != "" {
		return i
	}
	return len(regions)
}

// prefer moves the leases of groups whose preferences list regions.
func (b *LeaseBalancer) prefer(groups []raftnode.GroupInfo, prefs map[uint64]LeasePreferences) int {
	moves := 0
	now := time.Now()
	for _, g := range groups {
		if g.Lease == 0 || len(g.Voters) < 2 || moves >= maxTransfersPerPass {
			continue
		}
		regions := prefs[g.TabletID].Regions
		if prefs[g.TabletID].Spread || len(regions) == 0 {
			continue
		}
		mine := b.rank(regions, b.self)
		if now.Sub(b.held[g.TabletID].since) < b.cfg.MinHold {
			continue
		}
		target, best := uint64(0), mine
		for _, v := range g.Active {
			if v == b.self {
				continue
			}
			if rk := b.rank(regions, v); rk < best {
				target, best = v, rk
			}
		}
		if target == 0 {
			continue
		}
		if b.cfg.Node.TransferLeader(g.TabletID, target) == nil {
			moves++
		}
	}
	return moves
}

// spread evens out the leases of groups whose preferences say spread,
// counting every group's leader, up to max moves.
func (b *LeaseBalancer) spread(groups []raftnode.GroupInfo, prefs map[uint64]LeasePreferences, max int) int {
	count := map[uint64]int{}
	for _, g := range groups {
		for _, v := range g.Voters {
			if _, ok := count[v]; !ok {
				count[v] = 0
			}
		}
		if g.Leader != 0 {
			count[g.Leader]++
		}
	}
	moves := 0
	now := time.Now()
	for _, g := range groups {
		if g.Lease == 0 || len(g.Voters) < 2 || moves >= max || !prefs[g.TabletID].Spread {
			continue
		}
		if now.Sub(b.held[g.TabletID].since) < b.cfg.MinHold {
			continue
		}
		target := uint64(0)
		for _, v := range g.Active {
			if v != b.self && (target == 0 || count[v] < count[target] || count[v] == count[target] && v < target) {
				target = v
			}
		}
		if target == 0 || count[b.self] <= count[target]+1 {
			continue
		}
		if b.cfg.Node.TransferLeader(g.TabletID, target) == nil {
			count[b.self]--
			count[target]++
			moves++
		}
	}
	return moves
}
