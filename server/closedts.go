package server

// Global reads for reference tables (tablet/closedts.go; docs/architecture.md,
// "Reference tables: global reads"): a clustered node closes, as
// leaseholder, the tablets whose zone asks for global reads, and its KV
// router sends a transaction's reads of a tablet it has a closed replica
// of to that replica first.

import (
	"context"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/store"
)

// startCloser runs the store's closer until stopCloser.
func (r *replication) startCloser(s *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.store.RunCloser(ctx, store.ClosedTSConfig{
			GlobalSpans: r.zones.cache.GlobalSpans,
			Lead:        store.CloseLead(clusterMaxOffset),
			Logger:      s.log,
		})
	}()
	r.stopCloser = func() {
		cancel()
		<-done
	}
}

// followerReads is kv.LeaseholderConfig.FollowerReads: this node has a
// replica of tablet that does not hold the lease and has applied a
// closed timestamp.
func followerReads(st *store.Store) func(kvpb.TabletID) bool {
	return func(id kvpb.TabletID) bool {
		rep := st.Replica(id)
		return rep != nil && !rep.HoldsLease() && !rep.ClosedTimestamp().IsEmpty()
	}
}
