package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/raftnode"
)

func TestParseLeasePreferences(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{in: "", want: ""},
		{in: "spread", want: "spread"},
		{in: "none", want: "none"},
		{in: "region=us-west", want: "region=us-west"},
		{in: " region=eu , region=us-east ", want: "region=eu,region=us-east"},
		{in: "us-west", want: "want region=NAME", err: true},
		{in: "zone=a", want: "want region=NAME", err: true},
		{in: "region=", want: "want region=NAME", err: true},
		{in: "region=eu,region=eu", want: "given twice", err: true},
		{in: "none,region=eu", want: "want region=NAME", err: true},
	} {
		p, err := ParseLeasePreferences(tc.in)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseLeasePreferences(%q) = %v, %v; want an error with %q", tc.in, p, err, tc.want)
			}
			continue
		}
		if err != nil || p.String() != tc.want || p.IsZero() != (tc.in == "") {
			t.Errorf("ParseLeasePreferences(%q) = %q, %v", tc.in, p.String(), err)
		}
	}
}

// fakeLeaseNode is a node's groups as a balancer sees them; transfers
// are recorded, and applied to the groups when apply is set.
type fakeLeaseNode struct {
	self   uint64
	groups []raftnode.GroupInfo
	moved  map[uint64]int // target → transfers
	apply  bool
	// refuse makes transfers of these tablets fail (not drained).
	refuse map[uint64]bool
	tried  []uint64 // tablets
}

func (f *fakeLeaseNode) Groups() []raftnode.GroupInfo { return f.groups }

func (f *fakeLeaseNode) TransferLeader(tablet, to uint64) error {
	f.tried = append(f.tried, tablet)
	if f.refuse[tablet] {
		return errors.New("not drained")
	}
	f.moved[to]++
	if f.apply {
		for i := range f.groups {
			if f.groups[i].TabletID == tablet {
				f.groups[i].Lease, f.groups[i].Leader, f.groups[i].Active, f.groups[i].CaughtUp = 0, to, nil, nil
			}
		}
	}
	return nil
}

// leaseGroups makes groups of voters 1, 2, 3: led[n] of them led by node
// n, those led by self (node 1) with caughtUp as their caught-up voters.
func leaseGroups(led map[uint64]int, caughtUp []uint64) []raftnode.GroupInfo {
	var out []raftnode.GroupInfo
	id := uint64(1)
	for n := uint64(1); n <= 3; n++ {
		for range led[n] {
			g := raftnode.GroupInfo{TabletID: id, Leader: n, Voters: []uint64{1, 2, 3}}
			if n == 1 {
				g.Lease, g.Active, g.CaughtUp = 1, []uint64{1, 2, 3}, caughtUp
			}
			out = append(out, g)
			id++
		}
	}
	return out
}

// TestLeaseBalancerDecisions: one pass of node 1's balancer over groups
// of voters 1 (us-west), 2 (us-east) and 3 (eu), after the leases were
// held long enough.
func TestLeaseBalancerDecisions(t *testing.T) {
	regions := map[uint64]string{1: "us-west", 2: "us-east", 3: "eu"}
	for _, tc := range []struct {
		name     string
		led      map[uint64]int
		caughtUp []uint64
		prefs    string
		zone     func(uint64) (LeasePreferences, bool)
		regions  map[uint64]string
		eligible func(uint64) bool
		want     map[uint64]int // transfers per target
	}{
		{name: "default balances by count", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3}, want: map[uint64]int{2: 3, 3: 3}},
		{name: "spread is the default", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3}, prefs: "spread", want: map[uint64]int{2: 3, 3: 3}},
		{name: "within one: stays", led: map[uint64]int{1: 4, 2: 3, 3: 3}, caughtUp: []uint64{2, 3}, want: map[uint64]int{}},
		{name: "two above the least loaded: one move", led: map[uint64]int{1: 5, 2: 3, 3: 4}, caughtUp: []uint64{2, 3}, want: map[uint64]int{2: 1}},
		{name: "rate limit per pass", led: map[uint64]int{1: 30}, caughtUp: []uint64{2, 3}, want: map[uint64]int{2: 4, 3: 4}},
		{name: "not onto a replica that is behind", led: map[uint64]int{1: 9}, caughtUp: []uint64{2}, want: map[uint64]int{2: 4}},
		{name: "not onto an ineligible node", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3}, eligible: func(n uint64) bool { return n != 3 }, want: map[uint64]int{2: 4}},
		{name: "none: nothing moves", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3}, prefs: "none", want: map[uint64]int{}},
		{name: "preference wins over counts", led: map[uint64]int{1: 2, 3: 7}, caughtUp: []uint64{2, 3}, prefs: "region=eu", want: map[uint64]int{3: 2}},
		{name: "second preference when the first has no candidate", led: map[uint64]int{1: 3}, caughtUp: []uint64{2}, prefs: "region=eu,region=us-east", want: map[uint64]int{2: 3}},
		{name: "pinned by its preference", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3}, prefs: "region=us-west", want: map[uint64]int{}},
		{name: "balanced within the preferred region", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3}, prefs: "region=us-west",
			regions: map[uint64]string{1: "us-west", 2: "us-west", 3: "eu"}, want: map[uint64]int{2: 4}},
		{name: "zone preferences override the node's", led: map[uint64]int{1: 6}, caughtUp: []uint64{2, 3}, prefs: "none",
			zone: func(id uint64) (LeasePreferences, bool) {
				if id <= 2 {
					return LeasePreferences{Regions: []string{"eu"}}, true
				}
				return LeasePreferences{}, id <= 4 // 3, 4: an empty zone list, balanced
			}, want: map[uint64]int{3: 2, 2: 2}},
		{name: "a decommissioning holder sheds its leases", led: map[uint64]int{1: 3, 2: 4, 3: 4}, caughtUp: []uint64{2, 3},
			eligible: func(n uint64) bool { return n != 1 }, want: map[uint64]int{2: 2, 3: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseLeasePreferences(tc.prefs)
			if err != nil {
				t.Fatal(err)
			}
			reg := regions
			if tc.regions != nil {
				reg = tc.regions
			}
			node := &fakeLeaseNode{self: 1, groups: leaseGroups(tc.led, tc.caughtUp), moved: map[uint64]int{}}
			b := NewLeaseBalancer(LeaseBalancerConfig{Node: node, Prefs: p, ZonePrefs: tc.zone, Eligible: tc.eligible,
				Region: func(n uint64) string { return reg[n] }}, 1)
			now := time.Unix(1000, 0)
			b.now = func() time.Time { return now }
			if n := b.Pass(); n != 0 {
				t.Fatalf("first pass moved %d leases held for no time", n)
			}
			now = now.Add(b.cfg.MinHold)
			b.Pass()
			if fmt.Sprint(node.moved) != fmt.Sprint(tc.want) {
				t.Errorf("transfers per target %v, want %v", node.moved, tc.want)
			}
		})
	}
}

// TestLeaseBalancerAvoidsFailedTarget: a transfer that did not end with
// its target leading (the target never campaigned) keeps that target out
// for avoidFor; the lease goes elsewhere meanwhile.
func TestLeaseBalancerAvoidsFailedTarget(t *testing.T) {
	node := &fakeLeaseNode{self: 1, groups: leaseGroups(map[uint64]int{1: 3, 2: 1}, []uint64{2, 3}), moved: map[uint64]int{}}
	b := NewLeaseBalancer(LeaseBalancerConfig{Node: node}, 1)
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	b.Pass()
	now = now.Add(b.cfg.MinHold)
	if n := b.Pass(); n != 1 || node.moved[3] != 1 {
		t.Fatalf("moved %d: %v; want one lease to node 3", n, node.moved)
	}
	// The lease came back at a new term (raftnode handed it on to
	// nobody else): node 3 did not take it.
	for i := range node.groups {
		node.groups[i].Lease = 2
	}
	now = now.Add(moveWait)
	b.Pass() // notes the failure; the new term's lease is held anew
	now = now.Add(b.cfg.MinHold)
	node.moved = map[uint64]int{}
	b.Pass()
	// Node 3 avoided; node 2 leads 1 against node 1's 3: one to node 2.
	if fmt.Sprint(node.moved) != fmt.Sprint(map[uint64]int{2: 1}) {
		t.Errorf("after a failed transfer to node 3: transfers %v, want one to node 2", node.moved)
	}
	now = now.Add(avoidFor)
	node.moved = map[uint64]int{}
	node.groups = leaseGroups(map[uint64]int{1: 3, 2: 2}, []uint64{2, 3})
	for i := range node.groups {
		node.groups[i].Lease = 2
	}
	b.Pass()
	if node.moved[3] != 1 {
		t.Errorf("after avoidFor: transfers %v, want one to node 3 again", node.moved)
	}
}

// TestLeaseBalancerBacksOffRefusedTablet: a tablet whose transfer was
// refused (its proposals did not drain in time) is left alone for
// refusedFor, since every drain holds its requests at the door.
func TestLeaseBalancerBacksOffRefusedTablet(t *testing.T) {
	node := &fakeLeaseNode{self: 1, groups: leaseGroups(map[uint64]int{1: 4}, []uint64{2, 3}), moved: map[uint64]int{},
		refuse: map[uint64]bool{1: true, 2: true, 3: true, 4: true}}
	b := NewLeaseBalancer(LeaseBalancerConfig{Node: node}, 1)
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	b.Pass()
	for i, tc := range []struct {
		after  time.Duration
		refuse bool
		want   string
	}{
		{b.cfg.MinHold, true, "[1 2 3 4]"}, // all refused
		{time.Second, false, "[]"},         // all left alone, though they would go now
		{refusedFor, false, "[1 2]"},       // tried again: two move, 2 against 1 and 1 stays
	} {
		now = now.Add(tc.after)
		if !tc.refuse {
			clear(node.refuse)
		}
		node.tried = nil
		b.Pass()
		if got := fmt.Sprint(node.tried); got != tc.want {
			t.Errorf("pass %d: tablets tried %s, want %s", i+2, got, tc.want)
		}
	}
}

// fakeCluster is the truth the nodes' balancers see: every tablet has
// voters 1, 2, 3 (or its voters entry), all caught up, and the leader of
// its map entry. A node sees only the tablets it is a voter of.
type fakeCluster struct {
	leader map[uint64]uint64   // tablet → leaseholder
	term   map[uint64]uint64   // tablet → lease term (new at each transfer)
	voters map[uint64][]uint64 // tablet → voters (nil: 1, 2, 3)
	moves  int
	// reports are the nodes' last reported lease counts (report).
	reports    map[[2]string]int
	reportedAt time.Time
	// with are, by the last reports, the voters of the tablets each node
	// leads, per domain ({node, domain} → voters).
	with map[[2]string][]uint64
}

func (c *fakeCluster) votersOf(id uint64) []uint64 {
	if v, ok := c.voters[id]; ok {
		return v
	}
	return []uint64{1, 2, 3}
}

// node is node self's view, as a LeaseNode.
func (c *fakeCluster) node(self uint64) LeaseNode { return fakeClusterNode{c, self} }

type fakeClusterNode struct {
	c    *fakeCluster
	self uint64
}

func (n fakeClusterNode) Groups() []raftnode.GroupInfo {
	var out []raftnode.GroupInfo
	for id := uint64(1); id <= uint64(len(n.c.leader)); id++ {
		g := raftnode.GroupInfo{TabletID: id, Leader: n.c.leader[id], Voters: n.c.votersOf(id)}
		if !slices.Contains(g.Voters, n.self) {
			continue
		}
		if g.Leader == n.self {
			g.Lease, g.Active = n.c.term[id], g.Voters
			for _, v := range g.Voters {
				if v != n.self {
					g.CaughtUp = append(g.CaughtUp, v)
				}
			}
		}
		out = append(out, g)
	}
	return out
}

func (n fakeClusterNode) TransferLeader(tablet, to uint64) error {
	if n.c.leader[tablet] != n.self {
		return errors.New("not the leaseholder")
	}
	n.c.leader[tablet], n.c.term[tablet] = to, n.c.term[tablet]+1
	n.c.moves++
	return nil
}

// spreads reports each domain's leases per node ("total": all of them)
// and whether every domain's and the totals are within one between nodes.
func (c *fakeCluster) spreads(domain func(uint64) string) (map[string][3]int, bool) {
	out := map[string][3]int{}
	add := func(d string, l uint64) {
		v := out[d]
		v[l-1]++
		out[d] = v
	}
	for id, l := range c.leader {
		add("total", l)
		if d := domain(id); d != "" {
			add(d, l)
		}
	}
	ok := true
	for _, v := range out {
		ok = ok && max(v[0], v[1], v[2])-min(v[0], v[1], v[2]) <= 1
	}
	return out, ok
}

// TestLeaseBalancerSpreadsDomains: three nodes' balancers, each pass of
// each after the hold time. Three nine-tablet indexes (domains a, b, c)
// each have every lease on one node (a on node 1, b on 2, c on 3), beside
// five tablets of no domain: the totals are within one, so balancing the
// totals alone moves nothing (the control, without Domain), while with
// domains every index ends with three leases per node and the totals
// stay within one, and then nothing moves any more.
func TestLeaseBalancerSpreadsDomains(t *testing.T) {
	domain := func(id uint64) string {
		switch {
		case id == 0 || id > 27:
			return ""
		case id <= 9:
			return "a"
		case id <= 18:
			return "b"
		}
		return "c"
	}
	for _, tc := range []struct {
		name    string
		domains bool
		want    string // leases per node per domain once stable
	}{
		{"totals only", false, "map[a:[9 0 0] b:[0 9 0] c:[0 0 9] total:[11 11 10]]"},
		{"per domain", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCluster{leader: map[uint64]uint64{}, term: map[uint64]uint64{}}
			for id := uint64(1); id <= 32; id++ {
				c.leader[id], c.term[id] = (id-1)/9+1, 1
				if id > 27 {
					c.leader[id] = (id-28)%3 + 1 // 1, 2, 3, 1, 2
				}
			}
			now := time.Unix(1000, 0)
			var bs []*LeaseBalancer
			for n := uint64(1); n <= 3; n++ {
				cfg := LeaseBalancerConfig{Node: c.node(n)}
				if tc.domains {
					cfg.Domain = domain
				}
				b := NewLeaseBalancer(cfg, n)
				b.now = func() time.Time { return now }
				b.Pass()
				bs = append(bs, b)
			}
			stable := -1
			for round := range 50 {
				now = now.Add(bs[0].cfg.MinHold)
				before := c.moves
				for _, b := range bs {
					b.Pass()
				}
				if c.moves == before {
					stable = round
					break
				}
			}
			if stable < 0 {
				t.Fatalf("still moving after 50 rounds (%d moves)", c.moves)
			}
			got, ok := c.spreads(domain)
			if !tc.domains {
				if fmt.Sprint(got) != tc.want || c.moves != 0 {
					t.Errorf("totals only: %v after %d moves, want %s and none", got, c.moves, tc.want)
				}
				return
			}
			if !ok {
				t.Errorf("per domain: leases per node %v after %d moves, want every domain and the totals within one", got, c.moves)
			}
			t.Logf("stable after %d rounds, %d moves: %v", stable, c.moves, got)
		})
	}
}

// TestLeaseBalancerSettlesOnMoreNodesThanReplicas: five nodes, tablets of
// three voters each (every one of the ten sets of three nodes, three
// times, so each node holds 18 replicas): a ten-tablet index (one
// tablet per voter set, its domain) and twenty tablets of no domain.
// Each node sees only the tablets it is a voter of, so it sees every
// other node's leases over some of their tablets only. Counting those
// against all of its own, every node found itself the fullest and handed
// leases on for ever (bench/README.md, "Five nodes"). From every start
// the balancers must stop moving leases, and then leave every node
// within two of every other, in all and in the index.
func TestLeaseBalancerSettlesOnMoreNodesThanReplicas(t *testing.T) {
	var sets [][]uint64
	for a := uint64(1); a <= 5; a++ {
		for b := a + 1; b <= 5; b++ {
			for c := b + 1; c <= 5; c++ {
				sets = append(sets, []uint64{a, b, c})
			}
		}
	}
	domain := func(id uint64) string {
		if id >= 1 && id <= 10 {
			return "bucketed"
		}
		return ""
	}
	for _, tc := range []struct {
		name  string
		start func(id uint64, voters []uint64) uint64 // the first leaseholder
	}{
		{"first voter leads", func(_ uint64, v []uint64) uint64 { return v[0] }},
		{"last voter leads", func(_ uint64, v []uint64) uint64 { return v[2] }},
		{"round robin", func(id uint64, v []uint64) uint64 { return v[id%3] }},
		{"the index on its first voters, the rest on their last", func(id uint64, v []uint64) uint64 {
			if domain(id) != "" {
				return v[0]
			}
			return v[2]
		}},
		{"seeded random 1", randomVoter(1)},
		{"seeded random 2", randomVoter(2)},
		{"seeded random 3", randomVoter(3)},
	} {
		for _, reports := range []bool{false, true} {
			name := tc.name + "/pairs only"
			if reports {
				name = tc.name + "/with reports"
			}
			t.Run(name, func(t *testing.T) {
				c := &fakeCluster{leader: map[uint64]uint64{}, term: map[uint64]uint64{}, voters: map[uint64][]uint64{}}
				for id := uint64(1); id <= 30; id++ {
					v := sets[(id-1)%10]
					c.voters[id], c.term[id], c.leader[id] = v, 1, tc.start(id, v)
				}
				now := time.Unix(1000, 0)
				var bs []*LeaseBalancer
				for n := uint64(1); n <= 5; n++ {
					cfg := LeaseBalancerConfig{Node: c.node(n), Domain: domain}
					if reports {
						cfg.Reported = c.reported
						cfg.Peers = func() []uint64 { return []uint64{1, 2, 3, 4, 5} }
						cfg.LeadsWith = c.leadsWith
					}
					b := NewLeaseBalancer(cfg, n)
					b.now = func() time.Time { return now }
					b.Pass()
					bs = append(bs, b)
				}
				// Pairs alone keep a node within two of another (a node
				// may hold one more than each node it shares leases with,
				// over the leases they share); with reports within one.
				within := 2
				if reports {
					within = 1
				}
				round, settled := c.settle(bs, &now, domain, reports)
				total, index := map[uint64]int{}, map[uint64]int{}
				for id, l := range c.leader {
					total[l]++
					if domain(id) != "" {
						index[l]++
					}
				}
				if !settled {
					t.Fatalf("still moving leases after %d rounds (%d moves; now total %v, index %v)", round, c.moves, total, index)
				}
				spread := func(m map[uint64]int) int {
					lo, hi := m[1], m[1]
					for n := uint64(2); n <= 5; n++ {
						lo, hi = min(lo, m[n]), max(hi, m[n])
					}
					return hi - lo
				}
				if spread(total) > within || spread(index) > within {
					t.Errorf("settled at leases per node %v, index %v: want each within %d", total, index, within)
				}
				t.Logf("settled after %d rounds, %d moves: total %v, index %v", round-settleQuiet, c.moves, total, index)
			})
		}
	}
}

// settleQuiet is how many rounds in a row without a move count as
// settled (every lease held past MinHold in each).
const settleQuiet = 10

// settle runs rounds of every balancer's pass, MinHold apart on the
// clock at now, until settleQuiet rounds in a row move nothing or 100
// rounds have run; with reports every node reports its leases once a
// round first (each node sees the others' moves of the round only by
// its replicas' leaders). It returns the rounds run and whether the
// leases settled.
func (c *fakeCluster) settle(bs []*LeaseBalancer, now *time.Time, domain func(uint64) string, reports bool) (int, bool) {
	still, round := 0, 0
	for ; round < 100 && still < settleQuiet; round++ {
		*now = now.Add(bs[0].cfg.MinHold)
		if reports {
			c.report(domain, *now)
		}
		before := c.moves
		for _, b := range bs {
			b.Pass()
		}
		if c.moves == before {
			still++
		} else {
			still = 0
		}
	}
	return round, still >= settleQuiet
}

// report has every node report its leases (in all and per domain) at
// time at, as its liveness record does each heartbeat; reported returns
// them.
func (c *fakeCluster) report(domain func(uint64) string, at time.Time) {
	c.reports, c.reportedAt, c.with = map[[2]string]int{}, at, map[[2]string][]uint64{}
	for id, l := range c.leader {
		c.reports[[2]string{fmt.Sprint(l), ""}]++
		c.with[[2]string{fmt.Sprint(l), ""}] = append(c.with[[2]string{fmt.Sprint(l), ""}], c.votersOf(id)...)
		if d := domain(id); d != "" {
			c.reports[[2]string{fmt.Sprint(l), d}]++
			c.with[[2]string{fmt.Sprint(l), d}] = append(c.with[[2]string{fmt.Sprint(l), d}], c.votersOf(id)...)
		}
	}
}

// leadsWith is LeaseBalancerConfig.LeadsWith: by the last reports.
func (c *fakeCluster) leadsWith(node, peer uint64, d string) bool {
	return slices.Contains(c.with[[2]string{fmt.Sprint(node), d}], peer)
}

// reported is LeaseBalancerConfig.Reported: the last reports.
func (c *fakeCluster) reported(node uint64, d string) (int, time.Time, bool) {
	return c.reports[[2]string{fmt.Sprint(node), d}], c.reportedAt, c.reports != nil
}

// randomVoter picks a first leaseholder among a tablet's voters, the
// same for a seed on every run.
func randomVoter(seed uint64) func(uint64, []uint64) uint64 {
	r := rand.New(rand.NewPCG(seed, 16))
	return func(_ uint64, v []uint64) uint64 { return v[r.IntN(len(v))] }
}

// TestLeaseBalancerTwoHops: five nodes, a ten-tablet index at three
// voters a tablet (six replicas on every node), its leases [2 1 2 3 2]
// (TestReplicasSpreadPerDomain once stopped there): node 4 leads three
// tablets, all on nodes 1, 3 and 5, each holding two; node 2 holds one
// and is a voter of none of node 4's. No lease has a candidate two
// below its holder, so balancing by pairs of voters stays there (the
// control, without Peers and LeadsWith). With them node 4 hands a lease
// to a node holding one fewer that leads a tablet of node 2's, which
// then hands node 2 one: two leases a node, and then nothing moves.
func TestLeaseBalancerTwoHops(t *testing.T) {
	domain := func(id uint64) string {
		if id >= 1 && id <= 10 {
			return "bucketed"
		}
		return ""
	}
	// Tablet → voters, the leaseholder first.
	placed := [][]uint64{
		{4, 1, 3}, {4, 3, 5}, {4, 1, 5}, // node 4's: no node 2
		{1, 4, 2}, {3, 4, 2}, {5, 4, 2},
		{2, 1, 3}, {3, 2, 5}, {5, 2, 1}, {1, 3, 5},
	}
	for _, tc := range []struct {
		name    string
		twoHops bool
		want    string // leases per node, nodes 1 to 5, once settled
	}{
		{"pairs and reports only", false, "[2 1 2 3 2]"},
		{"two hops", true, "[2 2 2 2 2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCluster{leader: map[uint64]uint64{}, term: map[uint64]uint64{}, voters: map[uint64][]uint64{}}
			for i, v := range placed {
				id := uint64(i + 1)
				c.voters[id], c.term[id], c.leader[id] = slices.Sorted(slices.Values(v)), 1, v[0]
			}
			now := time.Unix(1000, 0)
			c.report(domain, now)
			var bs []*LeaseBalancer
			for n := uint64(1); n <= 5; n++ {
				cfg := LeaseBalancerConfig{Node: c.node(n), Domain: domain, Reported: c.reported}
				if tc.twoHops {
					cfg.Peers = func() []uint64 { return []uint64{1, 2, 3, 4, 5} }
					cfg.LeadsWith = c.leadsWith
				}
				b := NewLeaseBalancer(cfg, n)
				b.now = func() time.Time { return now }
				b.Pass()
				bs = append(bs, b)
			}
			round, settled := c.settle(bs, &now, domain, true)
			var leases [5]int
			for _, l := range c.leader {
				leases[l-1]++
			}
			if !settled {
				t.Fatalf("still moving leases after %d rounds (%d moves; now %v)", round, c.moves, leases)
			}
			if got := fmt.Sprint(leases); got != tc.want {
				t.Errorf("settled at leases per node %s after %d moves, want %s", got, c.moves, tc.want)
			}
			t.Logf("settled after %d rounds, %d moves: %v", round-settleQuiet, c.moves, leases)
		})
	}
}

// TestLeaseBalancerCountsSentSinceReport: node 2 reported 3 leases over
// tablets node 1 holds no replica of, node 3 reported 9; node 1 leads 9.
// Node 1 hands node 2 leases until it is within one of node 2's report
// plus what it sent since: three, not four (counting only what it sees
// node 2 hold, the report would stay at 3 until the next heartbeat and
// node 2 would end two above node 1). Passes later, with no new report,
// nothing more moves; a report older than the transfers counts them
// anew.
func TestLeaseBalancerCountsSentSinceReport(t *testing.T) {
	node := &fakeLeaseNode{self: 1, groups: leaseGroups(map[uint64]int{1: 9}, []uint64{2, 3}), moved: map[uint64]int{}, apply: true}
	now := time.Unix(1000, 0)
	reportedAt := now
	reports := map[uint64]int{2: 3, 3: 9}
	b := NewLeaseBalancer(LeaseBalancerConfig{Node: node, Reported: func(n uint64, d string) (int, time.Time, bool) {
		r, ok := reports[n]
		return r, reportedAt, ok && d == ""
	}}, 1)
	b.now = func() time.Time { return now }
	b.Pass()
	now = now.Add(b.cfg.MinHold)
	b.Pass()
	if fmt.Sprint(node.moved) != "map[2:3]" {
		t.Fatalf("transfers per target %v, want three to node 2", node.moved)
	}
	for range 3 {
		now = now.Add(b.cfg.MinHold)
		b.Pass()
	}
	if fmt.Sprint(node.moved) != "map[2:3]" {
		t.Fatalf("with the same reports later: transfers per target %v, want still three to node 2", node.moved)
	}
	// Node 2's new report counts the three: 6 against node 1's 6.
	reports[2], reportedAt = 6, now
	now = now.Add(b.cfg.MinHold)
	b.Pass()
	if fmt.Sprint(node.moved) != "map[2:3]" {
		t.Errorf("after node 2's next report: transfers per target %v, want still three to node 2", node.moved)
	}
}

// TestLeaseBalancerFollowsLoad: one pass of node 1's (us-west) balancer
// with request counts by gateway (node 1 us-west, 2 us-east, 3 eu) on the
// tablets it leads.
func TestLeaseBalancerFollowsLoad(t *testing.T) {
	regions := map[uint64]string{1: "us-west", 2: "us-east", 3: "eu"}
	// each gives every tablet node 1 leads the same requests per gateway.
	each := func(byGateway map[uint64]int) map[uint64]map[uint64]int {
		out := map[uint64]map[uint64]int{}
		for id := uint64(1); id <= 30; id++ {
			out[id] = byGateway
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		led      map[uint64]int
		caughtUp []uint64
		prefs    string
		zone     func(uint64) (LeasePreferences, bool)
		load     map[uint64]map[uint64]int // tablet → gateway → requests
		want     map[uint64]int            // transfers per target
		// noRegions: no node has a region (each is a locality of its
		// own, with loadMinNodeRequests).
		noRegions bool
		domain    func(uint64) string
	}{
		{name: "to the region its requests come from", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			load: map[uint64]map[uint64]int{1: {3: 20, 1: 2}}, want: map[uint64]int{3: 1}},
		{name: "too few requests: by count", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			load: map[uint64]map[uint64]int{1: {3: 9}}, want: map[uint64]int{}},
		{name: "a region preference wins", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3}, prefs: "region=us-west",
			load: map[uint64]map[uint64]int{1: {3: 20}}, want: map[uint64]int{}},
		{name: "none wins", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3}, prefs: "none",
			load: map[uint64]map[uint64]int{1: {3: 20}}, want: map[uint64]int{}},
		{name: "a zone's region preference wins", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			zone: func(uint64) (LeasePreferences, bool) { return LeasePreferences{Regions: []string{"us-east"}}, true },
			load: map[uint64]map[uint64]int{1: {3: 20}}, want: map[uint64]int{2: 1}},
		{name: "no caught-up voter there: by count", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2},
			load: map[uint64]map[uint64]int{1: {3: 20}}, want: map[uint64]int{}},
		{name: "even load: balanced by count", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3},
			load: each(map[uint64]int{1: 10, 2: 10, 3: 10}), want: map[uint64]int{2: 3, 3: 3}},
		{name: "requests from the holder's region keep it there", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3},
			load: each(map[uint64]int{1: 20}), want: map[uint64]int{}},
		{name: "hysteresis: 55% elsewhere does not move it", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			load: map[uint64]map[uint64]int{1: {3: 11, 1: 9}}, want: map[uint64]int{}},
		{name: "the holder's majority keeps it against counts", led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3},
			load: each(map[uint64]int{1: 11, 3: 9}), want: map[uint64]int{}},
		{name: "no regions: a busy tablet follows its gateway", noRegions: true, led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			load: map[uint64]map[uint64]int{1: {3: loadMinNodeRequests}}, want: map[uint64]int{3: 1}},
		{name: "no regions: under the node minimum, by count", noRegions: true, led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			load: map[uint64]map[uint64]int{1: {3: loadMinNodeRequests - 1}}, want: map[uint64]int{}},
		{name: "no regions: the holder's busy gateway keeps it against counts", noRegions: true, led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3},
			load: each(map[uint64]int{1: 600, 3: 400}), want: map[uint64]int{}},
		{name: "no regions: the holder's few requests do not keep it", noRegions: true, led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3},
			load: each(map[uint64]int{1: 20}), want: map[uint64]int{2: 3, 3: 3}},
		{name: "no regions: gateways even, by count", noRegions: true, led: map[uint64]int{1: 9}, caughtUp: []uint64{2, 3},
			load: each(map[uint64]int{1: 400, 2: 400, 3: 400}), want: map[uint64]int{2: 3, 3: 3}},
		{name: "no regions: an index's tablets stay spread", noRegions: true, led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			domain: func(uint64) string { return "idx" },
			load:   map[uint64]map[uint64]int{1: {3: loadMinNodeRequests}}, want: map[uint64]int{}},
		{name: "no regions: a tablet alone in its domain follows", noRegions: true, led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			domain: func(id uint64) string { return map[bool]string{true: "a", false: "b"}[id == 1] },
			load:   map[uint64]map[uint64]int{1: {3: loadMinNodeRequests}}, want: map[uint64]int{3: 1}},
		{name: "an index's tablets still follow a region", led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3},
			domain: func(uint64) string { return "idx" },
			load:   map[uint64]map[uint64]int{1: {3: 20}}, want: map[uint64]int{3: 1}},
		{name: "no regions: a preference list names no node", noRegions: true, led: map[uint64]int{1: 1, 2: 1, 3: 1}, caughtUp: []uint64{2, 3}, prefs: "region=us-west",
			load: map[uint64]map[uint64]int{1: {3: loadMinNodeRequests}}, want: map[uint64]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseLeasePreferences(tc.prefs)
			if err != nil {
				t.Fatal(err)
			}
			load := NewRequestLoad(time.Hour)
			for tablet, byGateway := range tc.load {
				for gw, n := range byGateway {
					for range n {
						load.Record(tablet, gw)
					}
				}
			}
			node := &fakeLeaseNode{self: 1, groups: leaseGroups(tc.led, tc.caughtUp), moved: map[uint64]int{}}
			region := func(n uint64) string { return regions[n] }
			if tc.noRegions {
				region = nil
			}
			b := NewLeaseBalancer(LeaseBalancerConfig{Node: node, Prefs: p, ZonePrefs: tc.zone, Load: load,
				Region: region, Domain: tc.domain}, 1)
			now := time.Unix(1000, 0)
			b.now = func() time.Time { return now }
			b.Pass()
			now = now.Add(b.cfg.MinHold)
			b.Pass()
			if fmt.Sprint(node.moved) != fmt.Sprint(tc.want) {
				t.Errorf("transfers per target %v, want %v", node.moved, tc.want)
			}
		})
	}
}

// TestRequestLoadHeldBy: a tablet's requests hold its lease on a node
// (a locality of its own) when at least loadMinNodeRequests came and more
// than half of them through that node.
func TestRequestLoadHeldBy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		byGateway map[uint64]int
		want      bool
	}{
		{"all through node 1", map[uint64]int{1: loadMinNodeRequests}, true},
		{"too few", map[uint64]int{1: loadMinNodeRequests - 1}, false},
		{"a majority", map[uint64]int{1: 501, 2: 499}, true},
		{"half is not a majority", map[uint64]int{1: 500, 2: 500}, false},
		{"through another node", map[uint64]int{2: loadMinNodeRequests}, false},
		{"no requests", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewRequestLoad(time.Hour)
			for gw, n := range tc.byGateway {
				for range n {
					l.Record(7, gw)
				}
			}
			if got := l.HeldBy(7, 1); got != tc.want {
				t.Errorf("HeldBy(7, 1) = %v, want %v (counts %v)", got, tc.want, l.Recent(7))
			}
		})
	}
}

// TestRequestLoadWindows: counts last the current window and the one
// after it; an idle tablet's load is then its last window with requests,
// until loadMemoryWindows windows after it, and then it is forgotten.
func TestRequestLoadWindows(t *testing.T) {
	l := NewRequestLoad(time.Second)
	start := l.start
	l.Record(7, 1)
	l.Record(7, 1)
	l.Record(7, 0) // unknown gateway: not counted
	l.Rotate(start.Add(time.Second))
	l.Record(7, 2)
	if got := fmt.Sprint(l.Recent(7)); got != "[{1 2} {2 1}]" {
		t.Fatalf("after one window: %s", got)
	}
	l.Rotate(start.Add(2 * time.Second))
	if got := fmt.Sprint(l.Recent(7)); got != "[{2 1}]" {
		t.Fatalf("after two windows: %s", got)
	}
	l.Rotate(start.Add(3 * time.Second))
	l.Rotate(start.Add(4 * time.Second))
	if got := fmt.Sprint(l.Recent(7)); got != "[{2 1}]" {
		t.Fatalf("idle after four windows: %s, want the last window with requests", got)
	}
	// The memory runs from the end of that window (2s).
	l.Rotate(start.Add(2*time.Second + (loadMemoryWindows-1)*time.Second))
	if got := fmt.Sprint(l.Recent(7)); got != "[{2 1}]" {
		t.Fatalf("idle for %d windows: %s, want the last window with requests", loadMemoryWindows-1, got)
	}
	l.Rotate(start.Add(2*time.Second + loadMemoryWindows*time.Second))
	if got := l.Recent(7); got != nil {
		t.Fatalf("idle for %d windows: %v, want the tablet forgotten", loadMemoryWindows, got)
	}
	// Requests again: the windows count them, and the memory follows
	// the newest.
	l.Record(7, 3)
	l.Rotate(start.Add(3*time.Second + loadMemoryWindows*time.Second))
	l.Rotate(start.Add(4*time.Second + loadMemoryWindows*time.Second))
	if got := fmt.Sprint(l.Recent(7)); got != "[{3 1}]" {
		t.Fatalf("idle again: %s, want [{3 1}]", got)
	}
}

// TestLeaseBalancerIdleLeaseStays: a tablet whose clients in the
// holder's region stopped keeps its lease there, although the balance
// by count would move it, until the load's memory runs out; then it is
// balanced by count.
func TestLeaseBalancerIdleLeaseStays(t *testing.T) {
	regions := map[uint64]string{1: "us-west", 2: "us-east", 3: "eu"}
	load := NewRequestLoad(time.Second)
	start := load.start
	for tablet := uint64(1); tablet <= 9; tablet++ {
		for range 20 {
			load.Record(tablet, 1)
		}
	}
	node := &fakeLeaseNode{self: 1, groups: leaseGroups(map[uint64]int{1: 9}, []uint64{2, 3}), moved: map[uint64]int{}}
	b := NewLeaseBalancer(LeaseBalancerConfig{Node: node, Load: load, Region: func(n uint64) string { return regions[n] }}, 1)
	now := start
	b.now = func() time.Time { return now }
	b.Pass()
	// Idle from here on. The pass after the hold retires the window with
	// the requests (at MinHold); the next windows are empty, then most of
	// the memory passes.
	retired := b.cfg.MinHold
	for _, at := range []time.Duration{retired, retired + 2*time.Second, retired + (loadMemoryWindows-1)*time.Second} {
		now = start.Add(at)
		if b.Pass(); len(node.moved) != 0 {
			t.Fatalf("idle %v: transfers %v, want none (the last requests came from the holder's region)", at, node.moved)
		}
	}
	now = start.Add(retired + loadMemoryWindows*time.Second)
	b.Pass()
	if fmt.Sprint(node.moved) != fmt.Sprint(map[uint64]int{2: 3, 3: 3}) {
		t.Fatalf("after the memory: transfers per target %v, want 3 to each of nodes 2 and 3", node.moved)
	}
}

// TestRequestLoadSplit: a split's right side starts with half of the
// left's counts, the left keeps the other half, and the right side's
// lease then stays in the region the requests come from rather than
// being balanced away by count.
func TestRequestLoadSplit(t *testing.T) {
	l := NewRequestLoad(time.Second)
	start := l.start
	for range 40 {
		l.Record(4, 1)
	}
	l.Record(4, 3)
	l.Rotate(start.Add(time.Second))
	for range 21 {
		l.Record(4, 1)
	}
	l.Split(4, 5)
	l.Split(8, 9) // no counts: nothing to give
	for _, tc := range []struct {
		tablet uint64
		want   string
	}{{4, "[{1 20} {3 1} {1 11}]"}, {5, "[{1 20} {3 1} {1 11}]"}, {9, "[]"}} {
		var got string
		if v, ok := l.tablets.Load(tc.tablet); ok {
			tl := v.(*tabletLoad)
			got = fmt.Sprint(append(append([]GatewayCount(nil), tl.prev...), tl.cur...))
		} else {
			got = "[]"
		}
		if got != tc.want {
			t.Errorf("tablet %d: windows %s, want %s", tc.tablet, got, tc.want)
		}
	}
	// The right side's lease, on node 1 with node 1 holding the most,
	// stays: its requests came from node 1's region.
	regions := map[uint64]string{1: "us-west", 2: "us-east", 3: "eu"}
	node := &fakeLeaseNode{self: 1, groups: leaseGroups(map[uint64]int{1: 9}, []uint64{2, 3}), moved: map[uint64]int{}}
	loadOf := NewRequestLoad(time.Hour)
	for range 30 {
		loadOf.Record(1, 1)
	}
	for id := uint64(2); id <= 9; id++ {
		loadOf.Split(1, id)
	}
	b := NewLeaseBalancer(LeaseBalancerConfig{Node: node, Load: loadOf, Region: func(n uint64) string { return regions[n] }}, 1)
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	b.Pass()
	now = now.Add(b.cfg.MinHold)
	if b.Pass(); len(node.moved) != 0 {
		t.Fatalf("transfers %v, want none: every tablet's requests, inherited by the splits, came from us-west", node.moved)
	}
}
