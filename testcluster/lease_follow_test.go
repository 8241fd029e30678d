package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/store"
)

// TestLeasesFollowTheWorkload: three nodes in us-west, us-east and eu with
// every lease in eu; requests for five of seven tablets come only through
// the us-west node, and their leases move to it (the balancers follow the
// requests' region), while the two idle tablets are balanced by count; as
// long as the requests keep coming from us-west the leases stay there,
// although node 1 then holds four more than the others, which the balance
// by count alone would not allow.
func TestLeasesFollowTheWorkload(t *testing.T) {
	leasesFollowNode1(t, &GeoOptions{Localities: []string{"region=us-west", "region=us-east", "region=eu"}, FollowLoad: true, LoadWindow: 2 * time.Second}, 1, "us-west")
}

// TestLeasesFollowTheGatewayWithoutRegions: the same on three nodes
// without regions (issue 22: pgbench through node 1 of a three-node
// cluster on loopback): each node is a locality of its own, so the busy
// tablets' leases, all on node 3, move to node 1, whose requests they
// serve, and stay there while the requests come; the idle tablets are
// balanced by count.
func TestLeasesFollowTheGatewayWithoutRegions(t *testing.T) {
	// A round of 50 requests per hot tablet: the node minimum (1,000 over
	// the last one or two windows) comes within a window at any speed this
	// test runs at.
	leasesFollowNode1(t, &GeoOptions{FollowLoad: true, LoadWindow: 2 * time.Second}, 50, "node 1")
}

// leasesFollowNode1 is both tests: seven tablets with every lease on node
// 3; requests for five of them come only through node 1 (rounds requests
// per hot tablet per load), and their leases must move to node 1 within a
// minute, the two idle tablets be balanced by count meanwhile or after,
// and the hot leases stay on node 1 while the requests keep coming,
// though counts alone would move them. where names node 1 in failures.
func leasesFollowNode1(t *testing.T, geo *GeoOptions, rounds int, where string) {
	c := StartCluster(t, ClusterOptions{Geo: geo})
	// The requests are a client's: only those draw leases
	// (kv.WithClientRequests).
	ctx := kv.WithClientRequests(context.Background())
	l := c.WaitLeader(1, 10*time.Second)
	splitAt(t, c, l, "abcdef")
	const tablets = 7
	gatherLeases(t, c, 3, tablets)
	hotKeys := []string{"\x03a-key", "\x03b-key", "\x03c-key", "\x03d-key", "\x03e-key"}
	var hot []uint64
	for _, k := range hotKeys {
		desc, err := c.Nodes[0].Store.LookupTablet(ctx, []byte(k), false)
		if err != nil {
			t.Fatal(err)
		}
		hot = append(hot, uint64(desc.TabletID))
	}
	// onNode1 reports whether every hot tablet's lease is on node 1 (or
	// moving: held nowhere).
	onNode1 := func(moving bool) bool {
		h := holders(c)
		for _, id := range hot {
			if h[id] != 1 && !(moving && h[id] == 0) {
				return false
			}
		}
		return true
	}
	c.RunLeaseBalancers(store.LeaseBalancerConfig{Interval: 200 * time.Millisecond, MinHold: time.Second})

	gw := c.Nodes[0]
	load := func() {
		t.Helper()
		for range rounds {
			for _, k := range hotKeys {
				if _, _, err := gw.DB.Get(ctx, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for !onNode1(false) {
		if time.Now().After(deadline) {
			t.Fatalf("hot tablets %v: holders %v after 60s of requests through %s", hot, holders(c), where)
		}
		load()
	}
	// The idle tablets spread by count meanwhile or after.
	waitLeases(t, c, "idle tablets balanced", func() (map[uint64]int, bool) {
		load()
		counts, held := runningLeases(c)
		return counts, held == tablets && counts[2] == 1 && counts[3] == 1 && onNode1(false)
	})
	// Requests keep coming through node 1: the leases stay over several
	// hold times and passes, though counts alone would move them.
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		load()
		if !onNode1(true) {
			t.Fatalf("a hot tablet's lease left %s under requests through it: holders %v (hot %v)", where, holders(c), hot)
		}
	}
}
