package store

// Lease placement (issue #4: "rebalancing replicas and leaders", "leader
// preferences by region"). Every node runs a LeaseBalancer over its own
// raft groups: for each tablet whose lease it holds it decides whether the
// lease belongs elsewhere and, if so, transfers leadership
// (raftnode.Node.TransferLeader, which drains the replica's proposals
// first; leader = leaseholder). As CockroachDB and YugabyteDB operators
// know them:
//
//   - By default leases are balanced by count over the nodes (CockroachDB's
//     lease-count rebalancing, YugabyteDB's leader balancing): a node holding
//     more than one lease above the least loaded candidate of a tablet it
//     leads hands that tablet to it. A node's own count is exact (it sees
//     every lease it holds); another's is its last report (Reported: its
//     liveness record, up to a heartbeat old), or the leases this node
//     sees it hold if more. Without a report the two are compared over the
//     groups both are voters of (pairCounts), both exact in this node's
//     view. Never against all of this node's own: with more nodes than
//     replicas a node sees only part of another's leases, so every node
//     found itself the fullest and leases churned for ever on an idle
//     cluster (TestLeaseBalancerSettlesOnMoreNodesThanReplicas).
//   - Preferences (CockroachDB's lease_preferences, YugabyteDB's preferred
//     zones) come first: an ordered list of regions; a lease held outside
//     the most preferred region that has a candidate moves there, and
//     within that region leases are balanced by count as above. A lease
//     whose holder is the only voter in the best region it can have is
//     pinned: it never moves for balance, and counts like any other.
//   - `none` turns placement off: leases stay where elections put them.
//   - Per domain first (issue 16): the tablets of one index (the buckets
//     of a hash-sharded index, the tablets a table was split into; the
//     domain comes from a tablet's start key, Domain) are balanced among
//     themselves before the totals are, so a sharded index's write load
//     stays on every node. A node holding more than one lease of a domain
//     above a candidate's count in that domain hands one to it (the
//     candidate with the fewest of the domain's leases, then the fewest
//     in all). A move for the totals alone only goes to a node holding
//     fewer of the tablet's domain than this node, so it never makes any
//     domain's spread wider: domain moves strictly narrow their domain,
//     total moves narrow the totals and widen no domain, so the two never
//     undo each other. CockroachDB reaches the same end with its
//     load-based lease rebalancing (the hot buckets are where the QPS is);
//     counting per index needs no load to be seen first, and a sharded
//     index's buckets take equal shares of its writes by construction.
//   - Two hops (twoHop): with more nodes than replicas, a node two or
//     more above another in a domain may be a voter of no tablet with
//     it, and every holder that could reach it only one above: pairwise
//     moves stop there for good. Such a node hands a lease to a
//     candidate one below it that, by its report, leads a tablet of the
//     domain with the node short of leases; the two swap counts (no
//     spread widens) and the candidate's next pass makes the move that
//     narrows it.
//
//   - Follow the workload (issue #22; CockroachDB's load-based lease
//     rebalancing by request locality): with Load set and no region
//     preference (the default or `spread`, from the node or the zone),
//     a tablet's recent requests by gateway region (RequestLoad, counted
//     by the leaseholder) stand in for a preference, judged over the
//     last one or two windows if they hold loadShortRequests, else over
//     the last loadSpanWindows (a minute: a slow client draws its leases
//     as a busy one does; RequestLoad.Counts). When at least
//     loadMinRequests came in and one region other than the holder's sent
//     at least loadMoveShare of them, the lease prefers that region; while
//     the holder's own region sends more than half, it prefers the
//     holder's region (so it is balanced by count only within it). The
//     gap between the two shares is the hysteresis: a lease moved toward
//     its requests stays while they keep coming from there. Otherwise
//     (load even, or too little of it) leases are balanced by count as
//     above. Explicit region preferences and `none` are never overridden,
//     and a region without a caught-up candidate falls back to counts.
//     A node without a region is a locality of its own (locality), with
//     a higher minimum (loadMinNodeRequests, for both rules): on a
//     cluster without regions a busy tablet's lease follows the gateway
//     that sends most of its requests, so they are served where they
//     arrive instead of each paying a forwarding RPC.
//
// A candidate is another voter that is caught up (raftnode's
// GroupInfo.CaughtUp: heard from recently, replicating, within
// raftnode.MaxTransferLag of the commit index), eligible (Eligible: not
// dead, decommissioning or fenced by its clock), and not a recent failed
// target (a transfer to it that did not end with it leading: avoided for
// avoidFor).
//
// The policy is the node's (--lease-preferences) unless the tablet's zone
// sets lease preferences (ZonePrefs; ALTER ... CONFIGURE ZONE): then the
// zone's apply to that tablet (an empty list: balanced by count).
//
// Hysteresis: a node moves only leases it has held for MinHold, and only
// to a node with at least two fewer (so a move never makes the counts
// swap). Rate: at most maxTransfersPerPass moves per node per pass (each
// new leaseholder waits out the maximum clock offset before serving).
// Each node moves only leases it holds, so two nodes never fight over one.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/raftnode"
)

// LeasePreferences say where tablet leases should be. The zero value is
// the default: balanced by count over the nodes.
type LeasePreferences struct {
	// Regions, in order of preference.
	Regions []string
	// Spread is the default said explicitly (`spread`): balanced by count.
	Spread bool
	// None leaves leases where elections put them (`none`).
	None bool
}

// IsZero reports that nothing was said (the default: balanced).
func (p LeasePreferences) IsZero() bool { return !p.Spread && !p.None && len(p.Regions) == 0 }

// String is p in ParseLeasePreferences's form.
func (p LeasePreferences) String() string {
	switch {
	case p.None:
		return "none"
	case p.Spread:
		return "spread"
	}
	parts := make([]string, len(p.Regions))
	for i, r := range p.Regions {
		parts[i] = "region=" + r
	}
	return strings.Join(parts, ",")
}

// ParseLeasePreferences parses `region=us-west[,region=us-east...]`
// (regions in order of preference), `spread` or "" (balanced by count,
// the default), or `none` (leases stay where elections put them).
func ParseLeasePreferences(s string) (LeasePreferences, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return LeasePreferences{}, nil
	case "spread":
		return LeasePreferences{Spread: true}, nil
	case "none":
		return LeasePreferences{None: true}, nil
	}
	var p LeasePreferences
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || strings.TrimSpace(k) != "region" || strings.TrimSpace(v) == "" {
			return LeasePreferences{}, fmt.Errorf("lease preferences %q: want region=NAME[,region=NAME...], spread or none", s)
		}
		v = strings.TrimSpace(v)
		if slices.Contains(p.Regions, v) {
			return LeasePreferences{}, fmt.Errorf("lease preferences %q: region %s given twice", s, v)
		}
		p.Regions = append(p.Regions, v)
	}
	return p, nil
}

// LeaseNode is what a LeaseBalancer needs of a node's multi-raft
// (*raftnode.Node).
type LeaseNode interface {
	Groups() []raftnode.GroupInfo
	TransferLeader(tabletID, to uint64) error
}

// LeaseBalancerConfig configures a LeaseBalancer.
type LeaseBalancerConfig struct {
	Node LeaseNode
	// Region returns a node's region ("" when unknown; nil: no regions).
	Region func(node uint64) string
	// Eligible, if set, reports whether a node may take leases: not dead,
	// decommissioning or fenced (nil: every node may).
	Eligible func(node uint64) bool
	Prefs    LeasePreferences
	// ZonePrefs, if set, returns the preferences of tablet id's zone
	// (ALTER ... CONFIGURE ZONE USING lease_preferences; package zone),
	// ok false when its zone sets none and Prefs applies.
	ZonePrefs func(tablet uint64) (p LeasePreferences, ok bool)
	// Domain, if set, names the set of tablets tablet id's leases are
	// balanced within before the totals (the index it holds:
	// rowenc.LeaseDomain of its span); "" puts it in none. The answers
	// are cached for domainRefresh, and dropped when a tablet appears
	// that the cache does not hold (a split's new tablet: the split one's
	// span changed too); asking for every tablet every pass would cost
	// O(tablets) lookups a second on an idle node.
	Domain func(tablet uint64) string
	// Reported, if set, returns node's lease count as it last reported
	// it (its liveness record), over domain's tablets ("": all its
	// leases), and when (node's clock); ok false when it reported none.
	// A node is then compared by its report plus the leases this node
	// handed it since (or the leases this node sees it hold, if more);
	// without, by the leases the two share (pairCounts), which settles
	// too but may leave a node two above another.
	Reported func(node uint64, domain string) (n int, at time.Time, ok bool)
	// Peers and LeadsWith, if both set with Reported, let a domain's
	// lease take two hops (see twoHop): Peers lists the nodes with a
	// report, LeadsWith reports whether node's last report says it leads
	// a tablet of domain that peer holds a replica of (so node can hand
	// peer one of the domain's leases itself).
	Peers     func() []uint64
	LeadsWith func(node, peer uint64, domain string) bool
	// Load, if set, is this node's request counts by gateway; leases
	// follow them when no region preference applies (see above). Pass
	// rotates its windows.
	Load *RequestLoad
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
	// Placed, if set, returns when the lease of tablet id was placed
	// for its index's creation (Store.PlacedAt; zero: not placed). Such
	// a lease is not moved for placedHold after: see placedHold.
	Placed func(tablet uint64) time.Time
	// Logger, if set, receives every pass's decisions at Debug level
	// (lease balancer pass: how long it and its steps took; lease
	// balancer tablet: each held lease with requests, what they draw it
	// to and what the pass did with it), so a lease that did not follow
	// its workload can be explained from a node's log.
	Logger *slog.Logger
}

// LeaseBalancer moves the leases of one node's groups to where the
// preferences want them.
type LeaseBalancer struct {
	cfg  LeaseBalancerConfig
	self uint64
	// held is when this node was first seen holding each lease (tablet →
	// term and time); only Pass touches it, as moves and avoid.
	held map[uint64]heldLease
	// moves are the transfers started and not yet seen to end (tablet →
	// target and start).
	moves map[uint64]leaseMove
	// avoid holds the nodes a transfer recently failed to, until when;
	// failed the tablets of those transfers (tablet → target): a target
	// later seen leading one took the lease after all, only late, and
	// is avoided no more.
	avoid  map[uint64]time.Time
	failed map[uint64]uint64
	// refused holds the tablets whose last transfer was refused (their
	// proposals did not drain in time), until when they are left alone.
	refused map[uint64]time.Time
	// peers caches Peers' answer for one pass (peersRead: asked).
	peers     []uint64
	peersRead bool
	// eligibleNow caches Eligible's answers for one pass.
	eligibleNow map[uint64]bool
	// reportedNow caches Reported's answers for one pass ({node,
	// domain ID} → count with the leases sent since, -1: none).
	reportedNow map[[2]uint64]int
	// sent are the transfers this node started within sentFor, oldest
	// first: a report does not count those made after it.
	sent []sentLease
	// domainOf caches Domain's answers since domainsAt, as small
	// numbers (tablet → domain; 0: none) that domainID assigns, so a
	// pass counts in slices rather than string-keyed maps.
	domainOf   map[uint64]int32
	domainID   map[string]int32
	domainName []string // by ID; [0] is ""
	domainsAt  time.Time
	// dom is the pass's lease counts per domain (reused).
	dom domainCounts
	// now is the clock (tests replace it).
	now func() time.Time
	// passes counts the passes Run has finished (Passes), so that a
	// test can wait for the balancers to have looked at the leases
	// rather than for some time to pass.
	passes atomic.Int64
	// transfers counts the transfers Pass started (Transfers): what a
	// test of hysteresis checks, rather than who holds a lease at two
	// instants (on a loaded machine a lease lapses, or an election
	// moves it, with no balancer's decision).
	transfers atomic.Int64
}

type heldLease struct {
	term  uint64
	since time.Time
}

type leaseMove struct {
	to    uint64
	since time.Time
}

type sentLease struct {
	to     uint64
	domain string
	at     time.Time
}

// sentFor is how long a transfer is remembered for Reported's counts:
// longer than a heartbeat interval (3 s by default) and the time its
// record takes to be read (a membership scan, 1 s). sentSlack is taken
// off a report's time before comparing: the reporter's clock may run
// up to the maximum offset ahead of this node's, and a lease counted
// twice only delays a move, one missed may overshoot.
const (
	sentFor   = 30 * time.Second
	sentSlack = time.Second
)

// placedHold is how long a lease placed at its index's creation
// (LeaseBalancerConfig.Placed) stays where the placement put it. The
// placement spreads a new index's bucket leases evenly (sql/ddl
// spreadLeases), but right after it the balancers judge them on stale
// views: other nodes' reports are up to a heartbeat (3 s) and a
// membership scan (1 s) old, from before the placement, so a node
// holding its even share found another with none of the domain and
// handed it one, and that node, now above, handed one on; and a bucket
// tablet that kept its ID through the splits (bucket 0) kept its cached
// pre-split domain, a domain of one, and moved for the totals alone.
// Each such move, on an index about to be read, makes its readers wait
// for the transfer (bench/README.md, "Five-node reads": four of ten
// bucket leases moved during a 10 s read run right after the CREATE).
// Past the hold the reports and domains postdate the placement, and an
// even domain draws no move (target's rules).
// server.TestBucketLeasesStayAfterCreation.
const placedHold = domainRefresh

// maxTransfersPerPass bounds the leases one node moves per pass.
const maxTransfersPerPass = 8

// domainRefresh is how long Domain's answers are kept at most. A split
// is seen sooner, by its new tablet: a new hash-sharded index's bucket 0
// keeps the ID of the tablet it was split from, whose domain was its
// table group's (a domain of one), and balanced with it the bucket's
// lease moved for the totals alone right after the CREATE had placed it
// (placedHold).
const domainRefresh = 10 * time.Second

// moveWait is how long a transfer may take before the balancer counts it
// failed (this node still holds the lease: its target did not end up
// leading; a lease that left for another node says nothing of the
// target); avoidFor is how long the
// target is then left out. A node that takes no lease (fenced by its
// clock, it drops raft's MsgTimeoutNow) would otherwise be picked again
// every pass, each time leaving the tablet without a leaseholder until
// raftnode hands it elsewhere. A target later seen leading the tablet of
// the failed transfer is forgiven at once: it takes leases, only slowly
// (a loaded machine), and left out it could not take the leases its
// region's requests draw to it (TestLeaseBalancerForgivesLateTransfer).
//
// refusedFor is how long a tablet whose transfer was refused is left
// alone: a drain holds the tablet's requests at the door for up to
// raftnode.DrainTimeout, and a tablet too busy to drain once (a bulk load
// over a slow link) would otherwise be held back every pass.
const (
	moveWait   = 5 * time.Second
	avoidFor   = 30 * time.Second
	refusedFor = 10 * time.Second
)

// NewLeaseBalancer makes a balancer for cfg.Node.
func NewLeaseBalancer(cfg LeaseBalancerConfig, self uint64) *LeaseBalancer {
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.MinHold == 0 {
		cfg.MinHold = 3 * time.Second
	}
	if cfg.Region == nil {
		cfg.Region = func(uint64) string { return "" }
	}
	return &LeaseBalancer{cfg: cfg, self: self, held: map[uint64]heldLease{}, moves: map[uint64]leaseMove{},
		avoid: map[uint64]time.Time{}, failed: map[uint64]uint64{}, refused: map[uint64]time.Time{}, reportedNow: map[[2]uint64]int{}, domainOf: map[uint64]int32{}, domainID: map[string]int32{}, now: time.Now}
}

// Run makes a pass every interval until ctx ends.
func (b *LeaseBalancer) Run(ctx context.Context) {
	if b.cfg.Prefs.None && b.cfg.ZonePrefs == nil {
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
		b.passes.Add(1)
	}
}

// Passes is how many passes Run has finished.
func (b *LeaseBalancer) Passes() int64 { return b.passes.Load() }

// Transfers is how many transfers the balancer's passes started.
func (b *LeaseBalancer) Transfers() int64 { return b.transfers.Load() }

// Pass looks at every lease this node holds once and starts the transfers
// the policy calls for; it returns how many it started.
func (b *LeaseBalancer) Pass() int {
	tr := b.tracing()
	var wall time.Time
	if tr {
		wall = time.Now()
	}
	groups := b.cfg.Node.Groups()
	var groupsTook time.Duration
	if tr {
		groupsTook = time.Since(wall)
	}
	now := b.now()
	b.cfg.Load.Rotate(now)
	b.track(groups, now)
	b.eligibleNow = map[uint64]bool{}
	clear(b.reportedNow)
	b.peers, b.peersRead = nil, false
	for len(b.sent) > 0 && now.Sub(b.sent[0].at) > sentFor {
		b.sent = b.sent[1:]
	}
	// Leases counted in pairs, over the groups both nodes are voters of
	// (Pairs), each count exact in this node's view, a transfer started
	// and not yet seen to end (moves) counted as its target's, as the
	// pass that started it counted it: on a loaded machine a transfer
	// outlasts a pass (the target's election waits for its raft loop),
	// and counted as this node's the next pass found this node one lease
	// fuller than it was and handed another away, so a balanced cluster
	// moved one lease too many (testcluster.TestLeasesBalancedByDefault at
	// load 20: "count gap 2 (own 4 ...)" from a node holding 3 leases and
	// leading a fourth group whose lease it had just handed off).
	view := groups
	if len(b.moves) > 0 {
		view = slices.Clone(groups)
		for i := range view {
			if m, ok := b.moves[view[i].TabletID]; ok && view[i].Leader == b.self {
				view[i].Leader = m.to
			}
		}
	}
	pc := pairsOf(b.self, view)
	dom := b.domainCounts(view, now)
	moves, held := 0, 0
	var transferTook time.Duration
	for i, g := range groups {
		if moves >= maxTransfersPerPass {
			break
		}
		if g.Lease == 0 || len(g.Voters) < 2 {
			continue
		}
		held++
		if now.Sub(b.held[g.TabletID].since) < b.cfg.MinHold {
			b.traceTablet(tr, g, "", "held less than MinHold")
			continue
		}
		if until, ok := b.refused[g.TabletID]; ok && now.Before(until) {
			b.traceTablet(tr, g, "", "left alone after a refused transfer")
			continue
		}
		if _, ok := b.moves[g.TabletID]; ok {
			b.traceTablet(tr, g, "", "transfer in flight")
			continue
		}
		if b.cfg.Placed != nil {
			if at := b.cfg.Placed(g.TabletID); !at.IsZero() && now.Sub(at) < placedHold {
				continue
			}
		}
		p := b.prefsOf(g.TabletID)
		if p.None {
			continue
		}
		var d int32
		if dom != nil {
			d = dom.of[i]
		}
		if dom == nil || dom.size[d] < 2 {
			d = 0 // no domain, or a domain of one tablet here
		}
		if b.cfg.Load != nil && len(p.Regions) == 0 {
			// A node locality draws only a tablet alone in its domain
			// (see locality): an index spread over several tablets
			// keeps them spread over the nodes.
			if r := b.loadRegion(g.TabletID); r != "" && (d == 0 || !strings.HasPrefix(r, nodeLocality)) {
				p = LeasePreferences{Regions: []string{r}}
			}
		}
		to, why := b.target(g, p, pc, dom, d)
		if to == 0 && d != 0 {
			to, why = b.twoHop(g, p, dom, d), "two hops"
		}
		if to == 0 {
			b.traceTablet(tr, g, p.String(), "stays")
			continue
		}
		var t0 time.Time
		if tr {
			t0 = time.Now()
		}
		err := b.cfg.Node.TransferLeader(g.TabletID, to)
		if tr {
			transferTook += time.Since(t0)
			// Every transfer is logged with the rule that chose it,
			// whether or not the tablet had requests: a lease moved on
			// a balanced cluster is explained by the counts this node
			// saw (leader hints) when it moved it.
			if err != nil {
				b.traceMove(g, p.String(), why, fmt.Sprintf("transfer to %d refused after %v: %v", to, time.Since(t0).Round(time.Millisecond), err))
			} else {
				b.traceMove(g, p.String(), why, fmt.Sprintf("transfer to %d started in %v", to, time.Since(t0).Round(time.Millisecond)))
			}
		}
		if err != nil {
			b.refused[g.TabletID] = now.Add(refusedFor)
			continue
		}
		b.moves[g.TabletID] = leaseMove{to: to, since: now}
		b.transfers.Add(1)
		if b.cfg.Reported != nil {
			var name string
			if d != 0 {
				name = b.domainName[d]
			}
			b.sent = append(b.sent, sentLease{to: to, domain: name, at: now})
			// The cached counts of to are a move short now.
			delete(b.reportedNow, [2]uint64{to, 0})
			delete(b.reportedNow, [2]uint64{to, uint64(d)})
		}
		// The lease leaves this node's count against every other voter
		// of g and joins to's against this node.
		for _, v := range g.Voters {
			if v != b.self {
				pc.mine[v]--
				if d != 0 {
					dom.addMine(d, v, -1)
				}
			}
		}
		pc.theirs[to]++
		pc.own--
		if d != 0 {
			dom.add(d, to, 1)
			dom.own[d]--
		}
		moves++
	}
	if tr {
		b.cfg.Logger.Debug("lease balancer pass", "took", time.Since(wall), "groups_took", groupsTook, "transfers_took", transferTook,
			"groups", len(groups), "held", held, "moves", moves, "avoid", fmt.Sprint(b.avoid), "in_flight", len(b.moves))
	}
	return moves
}

// tracing reports whether the pass logs its decisions (Logger).
func (b *LeaseBalancer) tracing() bool {
	return b.cfg.Logger != nil && b.cfg.Logger.Enabled(context.Background(), slog.LevelDebug)
}

// traceTablet logs what the pass did with g's lease (held here) and why,
// for tablets with requests (the others are balanced by count and would
// fill the log): its requests by gateway, the preferences it was judged
// under (want: a region from its requests, or the configured ones), its
// caught-up voters.
func (b *LeaseBalancer) traceTablet(tr bool, g raftnode.GroupInfo, want, what string) {
	if !tr {
		return
	}
	recent := b.cfg.Load.Counts(g.TabletID, loadShortRequests)
	if len(recent) == 0 {
		return
	}
	b.cfg.Logger.Debug("lease balancer tablet", "tablet", g.TabletID, "recent", fmt.Sprint(recent), "want", want,
		"caught_up", fmt.Sprint(g.CaughtUp), "decision", what)
}

// traceMove logs a transfer the pass started (or tried), with the rule
// that chose its target (why) and the tablet's requests if any.
func (b *LeaseBalancer) traceMove(g raftnode.GroupInfo, want, why, what string) {
	b.cfg.Logger.Debug("lease balancer move", "tablet", g.TabletID, "recent", fmt.Sprint(b.cfg.Load.Counts(g.TabletID, loadShortRequests)),
		"want", want, "why", why, "caught_up", fmt.Sprint(g.CaughtUp), "decision", what)
}

// pairCounts are this node's leases against each other node's, counted
// over the groups both are voters of. Both counts are exact in this
// node's view: it holds a replica of every such group and sees its
// leader. A node's leases over all groups are not: with more nodes than
// replicas this node sees another's leases only over the groups it
// shares with it, and against all of its own it would find itself the
// fullest, hand a lease on, and so would every node (the churn of
// bench/README.md, "Five nodes"). With every node a voter of every group
// (as many nodes as replicas) the pairs are the totals.
type pairCounts struct {
	// mine[v] is this node's leases of groups v is a voter of; theirs[v]
	// is v's leases of groups this node is a voter of.
	mine, theirs map[uint64]int
	// own is this node's leases in all.
	own int
}

// gap is how many more of the leases this node and v share it holds.
func (c pairCounts) gap(v uint64) int { return c.mine[v] - c.theirs[v] }

// pairsOf counts self's leases in pairs over groups (leader hints for
// the others'), every voter of a group self votes in counted even with
// none.
func pairsOf(self uint64, groups []raftnode.GroupInfo) pairCounts {
	c := pairCounts{mine: map[uint64]int{}, theirs: map[uint64]int{}}
	for _, g := range groups {
		if !slices.Contains(g.Voters, self) {
			continue
		}
		for _, v := range g.Voters {
			if v == self {
				continue
			}
			if g.Leader == self {
				c.mine[v]++
			} else if _, ok := c.mine[v]; !ok {
				c.mine[v] = 0
			}
		}
		if g.Leader == self {
			c.own++
		}
		if g.Leader != 0 && g.Leader != self && slices.Contains(g.Voters, g.Leader) {
			c.theirs[g.Leader]++
		}
	}
	return c
}

// domainCounts are each node's lease counts per domain in one pass.
type domainCounts struct {
	// nodes are the nodes seen, in column order (a few: a linear
	// search beats a map).
	nodes []uint64
	// count[d*len(nodes)+c] is nodes[c]'s count of domain d's leases
	// over the groups this node is a voter of; mine[d*len(nodes)+c] is
	// this node's count of them over the groups nodes[c] is a voter of
	// (pairCounts, per domain).
	count, mine []int32
	// size is each domain's number of tablets here; own is this node's
	// leases of each.
	size, own []int32
	// of is each group's domain, in the order of the pass's groups.
	of []int32
}

func (c *domainCounts) col(node uint64) int { return slices.Index(c.nodes, node) }

func (c *domainCounts) get(d int32, node uint64) int {
	i := c.col(node)
	if i < 0 {
		return 0
	}
	return int(c.count[int(d)*len(c.nodes)+i])
}

func (c *domainCounts) add(d int32, node uint64, n int) {
	if i := c.col(node); i >= 0 {
		c.count[int(d)*len(c.nodes)+i] += int32(n)
	}
}

// gap is how many more of domain d's leases this node holds than node,
// over the groups both are voters of.
func (c *domainCounts) gap(d int32, node uint64) int {
	i := c.col(node)
	if i < 0 {
		return 0
	}
	return int(c.mine[int(d)*len(c.nodes)+i] - c.count[int(d)*len(c.nodes)+i])
}

// shared is this node's count of domain d's leases over the groups node
// is a voter of.
func (c *domainCounts) shared(d int32, node uint64) int {
	i := c.col(node)
	if i < 0 {
		return 0
	}
	return int(c.mine[int(d)*len(c.nodes)+i])
}

func (c *domainCounts) addMine(d int32, node uint64, n int) {
	if i := c.col(node); i >= 0 {
		c.mine[int(d)*len(c.nodes)+i] += int32(n)
	}
}

// domainCounts counts leases per domain in pairs as this node sees
// them (leader hints, as pairsOf for the totals), refreshing the domain cache
// (dropping tablets no longer here). Nil when there are no domains or
// this node holds no lease it could move (a cluster of one).
func (b *LeaseBalancer) domainCounts(groups []raftnode.GroupInfo, now time.Time) *domainCounts {
	if b.cfg.Domain == nil || !slices.ContainsFunc(groups, func(g raftnode.GroupInfo) bool { return g.Lease != 0 && len(g.Voters) >= 2 }) {
		return nil
	}
	stale := now.Sub(b.domainsAt) >= domainRefresh || len(b.domainOf) > 2*len(groups)+64
	if !stale && len(b.domainOf) > 0 {
		// A tablet not cached is new here: a split (whose other side
		// changed its span) or a replica added; look every tablet up
		// again.
		stale = slices.ContainsFunc(groups, func(g raftnode.GroupInfo) bool {
			_, ok := b.domainOf[g.TabletID]
			return !ok
		})
	}
	if stale {
		clear(b.domainOf)
		clear(b.domainID)
		b.domainName = append(b.domainName[:0], "")
		b.domainsAt = now
	}
	c := &b.dom
	c.nodes = c.nodes[:0]
	c.of = slices.Grow(c.of[:0], len(groups))[:len(groups)]
	for i, g := range groups {
		d, ok := b.domainOf[g.TabletID]
		if !ok {
			if name := b.cfg.Domain(g.TabletID); name != "" {
				if d, ok = b.domainID[name]; !ok {
					d = int32(len(b.domainID) + 1)
					b.domainID[name] = d
					if len(b.domainName) == 0 {
						b.domainName = append(b.domainName, "")
					}
					b.domainName = append(b.domainName, name)
				}
			}
			b.domainOf[g.TabletID] = d
		}
		c.of[i] = d
		for _, v := range g.Voters {
			if !slices.Contains(c.nodes, v) {
				c.nodes = append(c.nodes, v)
			}
		}
	}
	n := len(b.domainID) + 1
	c.size = slices.Grow(c.size[:0], n)[:n]
	clear(c.size)
	c.own = slices.Grow(c.own[:0], n)[:n]
	clear(c.own)
	c.count = slices.Grow(c.count[:0], n*len(c.nodes))[:n*len(c.nodes)]
	clear(c.count)
	c.mine = slices.Grow(c.mine[:0], n*len(c.nodes))[:n*len(c.nodes)]
	clear(c.mine)
	for i, g := range groups {
		d := c.of[i]
		if d == 0 {
			continue
		}
		c.size[d]++
		if !slices.Contains(g.Voters, b.self) {
			continue
		}
		switch {
		case g.Leader == b.self:
			c.own[d]++
			for _, v := range g.Voters {
				if v != b.self {
					c.addMine(d, v, 1)
				}
			}
		case g.Leader != 0 && slices.Contains(g.Voters, g.Leader):
			c.add(d, g.Leader, 1)
		}
	}
	return c
}

// track notes when each lease was taken up, and which transfers ended
// with their target leading or failed.
func (b *LeaseBalancer) track(groups []raftnode.GroupInfo, now time.Time) {
	seen := make(map[uint64]bool, len(groups))
	for _, g := range groups {
		seen[g.TabletID] = true
		if g.Lease == 0 {
			if _, ok := b.held[g.TabletID]; ok {
				// The lease left: its counts here judged it as
				// leaseholder, and are stale when it comes back.
				b.cfg.Load.Forget(g.TabletID)
			}
			delete(b.held, g.TabletID)
		} else if h, ok := b.held[g.TabletID]; !ok || h.term != g.Lease {
			b.held[g.TabletID] = heldLease{term: g.Lease, since: now}
		}
		if to, ok := b.failed[g.TabletID]; ok && g.Leader == to {
			// The transfer ended after moveWait (a slow machine: the
			// target's raft loop or its first round held up): the
			// target takes leases, and avoiding it would keep the
			// leases its region's requests draw away from it for
			// avoidFor.
			delete(b.avoid, to)
			delete(b.failed, g.TabletID)
			if b.tracing() {
				b.cfg.Logger.Debug("lease balancer transfer ended late", "tablet", g.TabletID, "to", to)
			}
		}
		m, ok := b.moves[g.TabletID]
		switch {
		case !ok:
		case g.Leader == m.to:
			delete(b.moves, g.TabletID)
		case g.Leader != 0 && g.Leader != b.self:
			// Another node leads, not the target: the target took the
			// lease and lost it before a pass saw it lead (it stopped:
			// every restart of testcluster.TestLeasesBalancedByDefault),
			// or an election moved it. Neither says the target refuses
			// leases; counted failed, the node came back avoided for
			// avoidFor.
			delete(b.moves, g.TabletID)
		case now.Sub(m.since) >= moveWait:
			if b.tracing() {
				b.cfg.Logger.Debug("lease balancer transfer failed", "tablet", g.TabletID, "to", m.to, "leader", g.Leader,
					"after", now.Sub(m.since), "avoid_for", avoidFor)
			}
			b.avoid[m.to] = now.Add(avoidFor)
			b.failed[g.TabletID] = m.to
			delete(b.moves, g.TabletID)
		}
	}
	for id := range b.moves {
		if !seen[id] {
			delete(b.moves, id)
		}
	}
	for n, until := range b.avoid {
		if !now.Before(until) {
			delete(b.avoid, n)
		}
	}
	for id, to := range b.failed {
		if _, ok := b.avoid[to]; !ok || !seen[id] {
			delete(b.failed, id)
		}
	}
	for id, until := range b.refused {
		if !now.Before(until) {
			delete(b.refused, id)
		}
	}
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

// rank is a node's region's place in regions (len: not preferred).
func (b *LeaseBalancer) rank(regions []string, node uint64) int {
	if i := slices.Index(regions, b.locality(node)); i >= 0 {
		return i
	}
	return len(regions)
}

// eligible reports whether node may take a lease now.
func (b *LeaseBalancer) eligible(node uint64) bool {
	if _, ok := b.avoid[node]; ok {
		return false
	}
	if b.cfg.Eligible == nil {
		return true
	}
	ok, seen := b.eligibleNow[node]
	if !seen {
		ok = b.cfg.Eligible(node)
		b.eligibleNow[node] = ok
	}
	return ok
}

// target is where g's lease (held here) should go under p, or 0: a
// candidate of the best region the preferences can have. Within this
// node's own region the lease moves only to balance, each candidate
// compared with this node over the groups both are voters of (pc, dom):
// to the candidate this node holds the most more of g's domain d's
// leases than, if at least two more; else to the candidate it holds the
// most more leases in all than, if at least two more and it also holds
// more of d's than that candidate (or if this node may not hold leases
// itself).
func (b *LeaseBalancer) target(g raftnode.GroupInfo, p LeasePreferences, pc pairCounts, dom *domainCounts, d int32) (uint64, string) {
	var cands []uint64
	for _, v := range g.CaughtUp {
		if v != b.self && b.eligible(v) {
			cands = append(cands, v)
		}
	}
	if len(cands) == 0 {
		return 0, ""
	}
	mine := b.rank(p.Regions, b.self)
	best := mine
	for _, v := range cands {
		best = min(best, b.rank(p.Regions, v))
	}
	// dg is how many more of d's leases this node holds than v (0 for
	// every node without a domain, or in a domain of one tablet); tg
	// the same in all (gap).
	dg := func(v uint64) int {
		if d == 0 {
			return 0
		}
		return b.gap(v, d, int(dom.own[d]), dom.get(d, v), dom.gap(d, v))
	}
	tg := func(v uint64) int { return b.gap(v, 0, pc.own, pc.theirs[v], pc.gap(v)) }
	// to: the widest gap in d's leases, then in all, then the lowest
	// ID; byCount: the widest gap in all among those this node holds
	// more of d's leases than (any, without a domain).
	to, byCount := uint64(0), uint64(0)
	for _, v := range cands {
		if b.rank(p.Regions, v) != best {
			continue
		}
		if to == 0 || dg(v) > dg(to) || dg(v) == dg(to) && (tg(v) > tg(to) || tg(v) == tg(to) && v < to) {
			to = v
		}
		if d != 0 && dg(v) <= 0 {
			continue
		}
		if byCount == 0 || tg(v) > tg(byCount) || tg(v) == tg(byCount) && v < byCount {
			byCount = v
		}
	}
	switch {
	case to == 0:
		// Pinned: no candidate in a region as preferred as this node's.
		return 0, ""
	case best < mine:
		// A more preferred region has a candidate.
		return to, "preferred region"
	case b.cfg.Eligible != nil && !b.eligible(b.self):
		// Decommissioning: shed leases whatever the counts.
		return to, "not eligible itself"
	case dg(to) > 1:
		// The domain's leases are uneven.
		return to, fmt.Sprintf("domain gap %d", dg(to))
	case byCount != 0 && tg(byCount) > 1:
		return byCount, fmt.Sprintf("count gap %d (own %d, pair: mine %d theirs %d)", tg(byCount), pc.own, pc.mine[byCount], pc.theirs[byCount])
	}
	return 0, ""
}

// twoHop is where g's lease (held here, of domain d) goes when no
// candidate holds two fewer of d's leases than this node but another
// node does (U, by its report) that this node cannot hand one to: it
// is a voter of none of the d tablets this node leads. Balancing by
// pairs of voters stops there for good (five nodes at three replicas:
// leases [2 1 2 3 2] of ten buckets, node 4's three tablets all on
// nodes 1, 3 and 5; TestLeaseBalancerTwoHops). The lease then goes to
// a candidate X holding exactly one fewer whose report says it leads a
// d tablet U is a voter of: the counts of this node and X swap, so no
// spread widens, and X, now two above U, hands U a lease by the
// ordinary rule (target) in its next pass. CockroachDB's allocator
// reaches the same end by moving a replica with its lease; a lease hop
// moves no data. Only balance by count (no region preference) makes
// such moves, and only with reports: the counts of a node this node
// shares no tablet with are known only from them. 0: none.
func (b *LeaseBalancer) twoHop(g raftnode.GroupInfo, p LeasePreferences, dom *domainCounts, d int32) uint64 {
	if len(p.Regions) > 0 || b.cfg.Reported == nil || b.cfg.Peers == nil || b.cfg.LeadsWith == nil {
		return 0
	}
	if b.cfg.Eligible != nil && !b.eligible(b.self) {
		return 0
	}
	own := int(dom.own[d])
	if own < 2 {
		return 0 // no node can hold two fewer
	}
	if !b.peersRead {
		b.peers, b.peersRead = b.cfg.Peers(), true
	}
	var under []uint64
	for _, u := range b.peers {
		if u == b.self || dom.shared(d, u) > 0 || !b.eligible(u) {
			// u is a voter of a d tablet this node leads: the
			// ordinary rule hands it one (once that lease was held
			// long enough, if not now).
			continue
		}
		if n, ok := b.reported(u, d); ok && own-max(n, dom.get(d, u)) >= 2 {
			under = append(under, u)
		}
	}
	if len(under) == 0 {
		return 0
	}
	name := b.domainName[d]
	var to uint64
	for _, x := range g.CaughtUp {
		if x == b.self || !b.eligible(x) || to != 0 && x > to {
			continue
		}
		n, ok := b.reported(x, d)
		if !ok || own-max(n, dom.get(d, x)) != 1 {
			continue
		}
		if slices.ContainsFunc(under, func(u uint64) bool { return b.cfg.LeadsWith(x, u, name) }) {
			to = x
		}
	}
	return to
}

// reported is node v's count of domain d's leases (0: all) by its report
// (Reported) plus the leases this node sent it since; ok false without a
// report.
func (b *LeaseBalancer) reported(v uint64, d int32) (int, bool) {
	key := [2]uint64{v, uint64(d)}
	n, cached := b.reportedNow[key]
	if !cached {
		name := ""
		if d != 0 {
			name = b.domainName[d]
		}
		r, at, ok := b.cfg.Reported(v, name)
		n = -1
		if ok {
			n = r
			since := at.Add(-sentSlack)
			for _, s := range b.sent {
				if s.to == v && (d == 0 || s.domain == name) && s.at.After(since) {
					n++
				}
			}
		}
		b.reportedNow[key] = n
	}
	return n, n >= 0
}

// gap is how many more leases (of domain d; 0: all) this node holds than
// node v. With v's report (Reported) it is own, this node's count,
// against the report plus the leases this node sent v since it, or
// against seen, the leases this node sees v hold, if more: a report is
// up to a heartbeat old, seen is fresh but a part. Without a report it
// is pair, the gap over the leases both are voters of.
func (b *LeaseBalancer) gap(v uint64, d int32, own, seen, pair int) int {
	if b.cfg.Reported == nil {
		return pair
	}
	if n, ok := b.reported(v, d); ok {
		return own - max(n, seen)
	}
	return pair
}

// Following the workload (see the doc comment at the top): a locality
// other than the holder's that sent at least loadMoveShare of a tablet's
// recent requests, with at least loadMinRequests of them, draws the
// lease; the holder's locality keeps it while it sends more than half.
// A node's locality is its region, or the node itself when it has none
// (locality): then both rules need loadMinNodeRequests.
//
// loadShortRequests is how many requests the last one or two windows
// must hold to be judged alone; with fewer the share is taken over the
// whole span (RequestLoad.Counts, loadSpanWindows). A share of a few more
// than loadMinRequests swings with the order the requests came in: two
// regions taking turns three requests at a time showed 6 of 10 from
// one, and the lease moved every 30 s (TestLeaseEvenLoadNoPingPong).
const (
	loadShortRequests   = 40
	loadMinRequests     = 10
	loadMinNodeRequests = 1000
	loadMoveShare       = 0.6
)

// nodeLocality prefixes the locality of a node without a region; no
// region (a --locality value, validated as key=value text) starts with
// a NUL byte, so a preference list never names one by accident.
const nodeLocality = "\x00node:"

// locality is node's place for following the workload and for ranking a
// preference list: its region, else the node itself. Decision (issue
// #22): on a cluster without regions the requests of one gateway draw a
// tablet's leases to that gateway, as a region's draw them to the
// region: with pgbench through node 1 of three on loopback every read
// but a third paid a forwarding RPC to the leaseholder (select-only at
// RF 3 0.21x of RF 1, bench/README.md "Issue 22, 3 nodes"). The higher
// minimum (loadMinNodeRequests, 50 to 100 a second over the one or two
// windows counted) keeps the balance by count for everything but a busy
// tablet, where the hop is paid by every request: a few statements
// through one node (a schema change, a test's polling, an operator's
// shell) do not gather leases on it. Requests spread over the gateways
// (a client-side load balancer) send no node a majority, so the leases
// stay balanced by count. A tablet whose domain (an index) has other
// tablets here is not drawn to a node: spreading an index's tablets over
// the nodes spreads its load over their CPUs and disks (issue 16: the
// buckets of a hash-sharded index), which a single gateway's requests
// would undo; a tablet alone in its domain loses nothing by following,
// its load is on one node either way.
func (b *LeaseBalancer) locality(node uint64) string {
	if r := b.cfg.Region(node); r != "" {
		return r
	}
	return nodeLocality + strconv.FormatUint(node, 10)
}

// loadRegion is the locality (locality: a region, or a node without one)
// tablet's recent requests say its lease should be in ("": none, balance
// by count).
func (b *LeaseBalancer) loadRegion(tablet uint64) string {
	// A region's share is judged over enough requests (Counts): the
	// last one or two windows if they hold loadShortRequests, else all
	// of loadSpanWindows, so a minute of a slow client's requests draws
	// the lease as a busy client's ten seconds do. A node locality's
	// minimum is a rate (loadMinNodeRequests over one or two windows:
	// only a busy tablet follows a gateway), so its requests are not
	// gathered over more windows.
	var counts []GatewayCount
	if strings.HasPrefix(b.locality(b.self), nodeLocality) {
		counts = b.cfg.Load.Recent(tablet)
	} else {
		counts = b.cfg.Load.Counts(tablet, loadShortRequests)
	}
	if len(counts) == 0 {
		return ""
	}
	type regionCount struct {
		region string
		n      int
	}
	var byRegion []regionCount
	total := 0
	for _, c := range counts {
		total += c.N
		r := b.locality(c.Node)
		i := slices.IndexFunc(byRegion, func(rc regionCount) bool { return rc.region == r })
		if i < 0 {
			byRegion = append(byRegion, regionCount{region: r})
			i = len(byRegion) - 1
		}
		byRegion[i].n += c.N
	}
	minimum := func(r string) int {
		if strings.HasPrefix(r, nodeLocality) {
			return loadMinNodeRequests
		}
		return 0
	}
	mine := b.locality(b.self)
	for _, rc := range byRegion {
		if rc.region == mine && 2*rc.n > total && total >= minimum(mine) {
			return mine
		}
	}
	for _, rc := range byRegion {
		if rc.region != mine && float64(rc.n) >= loadMoveShare*float64(total) && total >= max(loadMinRequests, minimum(rc.region)) {
			return rc.region
		}
	}
	return ""
}
