package server

import (
	"bytes"
	"context"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/rpc"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/store"
)

// splitConfig adds the split queue's settings to a store's config: the
// thresholds from --tablet-split-size and --tablet-split-qps, the SQL
// layer's rule for what a split must not divide (rowenc.SplitUnit: the
// system span and shared colocation groups stay whole), and that a
// split by load waits for a second node (splitByLoadUseful) and, on a
// node without a region, for a tablet whose requests do not hold its
// lease here (store.RequestLoad.HeldBy).
func (s *Server) splitConfig(c store.Config) store.Config {
	c.SplitSize = s.cfg.TabletSplitSize
	c.SplitQPS = s.cfg.TabletSplitQPS
	c.SplitUnit = s.splitUnit
	c.SplitByLoadUseful = s.splitByLoadUseful
	if r := s.repl; r != nil && r.load != nil && rpc.Region(s.cfg.Locality) == "" {
		// A node without a region is a locality of its own: a tablet
		// whose requests come mostly through it keeps its lease here,
		// and so would both halves of a split by load.
		c.SplitHeldByLoad = func(tablet uint64) bool { return r.load.HeldBy(tablet, r.id) && s.aloneInDomain(tablet) }
	}
	return c
}

// aloneInDomain reports whether no other tablet on this node holds a part
// of tablet's lease domain (rowenc.LeaseDomain: its index): the lease
// balancer lets a node's requests draw only such a tablet's lease (store's
// LeaseBalancer.locality), so only its load split would stay on this
// node. The split queue asks only about a tablet over the load threshold
// whose requests come through this node.
func (s *Server) aloneInDomain(tablet uint64) bool {
	z := s.repl.zones
	if z == nil {
		return true
	}
	name := z.domain(tablet)
	if name == "" {
		return true
	}
	n := 0
	for _, d := range s.store.Tablets() {
		if rowenc.LeaseDomain(d.StartKey, d.EndKey) == name {
			if n++; n > 1 {
				return false
			}
		}
	}
	return true
}

// splitByLoadUseful reports whether the node table names a node, besides
// this one, that is not decommissioned: one that could take the lease of
// one half of a tablet split by load. On a cluster of one (a plain
// `cairn start`, or --unreplicated) both halves stay on this node's raft
// loop and disk, and the split only turns the transactions that span both
// halves from one-phase commits into two-phase ones (store.Config,
// splitqueue.go). The split queue asks each time a tablet is over the
// threshold, so load splits begin once a second node joins.
func (s *Server) splitByLoadUseful() bool {
	r := s.repl
	return r != nil && r.registry != nil && len(r.registry.IDs()) > 1
}

// splitUnit is rowenc.SplitUnit, except that a distributed table's group
// (its zone record says zone.Config.BucketSplits) splits between any two
// of its buckets: a grown shard splits, and the rows of one bucket of
// every table colocated in the group stay in one tablet
// (rowenc.BucketUnit); or, when the group's tables have local GIN
// indexes (zone.Config.BucketBlocks), between any two of its blocks.
func (s *Server) splitUnit(key []byte) (kvpb.Span, bool) {
	unit, ok := rowenc.SplitUnit(key)
	if !ok || s.repl == nil || s.repl.zones == nil || bytes.Compare(key, keys.TableDataMin) < 0 {
		return unit, ok
	}
	if cfg, found := s.repl.zones.cache.Lookup(key); found && (cfg.BucketSplits || cfg.OneTable) {
		if cfg.BucketBlocks > 0 {
			// A local GIN index's entries sit at their block's start.
			return rowenc.BlockUnit(key, cfg.BucketBlocks)
		}
		return rowenc.BucketUnit(key)
	}
	return unit, ok
}

// startSplitQueue runs the store's split queue until ctx ends.
func (s *Server) startSplitQueue(ctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.store.RunSplitQueue(ctx)
	}()
}
