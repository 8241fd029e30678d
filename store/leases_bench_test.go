package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/raftnode"
)

// BenchmarkLeaseBalancerPass: one pass of node 1's balancer over 20,000
// balanced tablets of three voters (10,000 two-tablet indexes), with and
// without domains, and with domains, reports and two hops as a server
// runs it: what an idle clustered node pays each second.
func BenchmarkLeaseBalancerPass(b *testing.B) {
	for _, mode := range []string{"domains=false", "domains=true", "domains=true/reports"} {
		domains := mode != "domains=false"
		b.Run(mode, func(b *testing.B) {
			var groups []raftnode.GroupInfo
			for id := uint64(1); id <= 20000; id++ {
				g := raftnode.GroupInfo{TabletID: id, Leader: id%3 + 1, Voters: []uint64{1, 2, 3}}
				if g.Leader == 1 {
					g.Lease, g.Active, g.CaughtUp = 1, []uint64{1, 2, 3}, []uint64{2, 3}
				}
				groups = append(groups, g)
			}
			node := &fakeLeaseNode{self: 1, groups: groups, moved: map[uint64]int{}}
			cfg := LeaseBalancerConfig{Node: node}
			if domains {
				cfg.Domain = func(id uint64) string { return fmt.Sprintf("g%d", (id+1)/2) }
			}
			if mode == "domains=true/reports" {
				// Every node reports what it leads: a third of all, and
				// of each domain what the groups above give it.
				type key struct {
					node   uint64
					domain string
				}
				counts := map[key]int{}
				for _, g := range groups {
					counts[key{g.Leader, ""}]++
					counts[key{g.Leader, cfg.Domain(g.TabletID)}]++
				}
				cfg.Reported = func(n uint64, d string) (int, time.Time, bool) {
					return counts[key{n, d}], time.Unix(1000, 0), true
				}
				cfg.Peers = func() []uint64 { return []uint64{1, 2, 3} }
				cfg.LeadsWith = func(node, peer uint64, d string) bool { return node != peer }
			}
			lb := NewLeaseBalancer(cfg, 1)
			now := time.Unix(1000, 0)
			lb.now = func() time.Time { return now }
			lb.Pass()
			now = now.Add(lb.cfg.MinHold)
			b.ResetTimer()
			for range b.N {
				lb.Pass()
			}
			if len(node.moved) != 0 {
				b.Fatalf("balanced leases moved: %v", node.moved)
			}
		})
	}
}
