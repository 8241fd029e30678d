package server

// Placement settings per table group (package zone; ALTER ... CONFIGURE
// ZONE): a clustered node keeps a zone.Cache of the zone records,
// refreshed every zoneRefresh, and gives the replicate queue and the
// lease balancer each tablet's settings by the tablet's start key (and
// the lease balancer each tablet's domain, the index it starts in).

import (
	"context"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/membership"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/zone"
)

// zoneRefresh is how often a node rereads the zone records: a CONFIGURE
// ZONE takes effect on every node within about this long.
const zoneRefresh = time.Second

// zones is a clustered node's view of the zone records.
type zones struct {
	cache zone.Cache
	st    *store.Store
	done  chan struct{}
	stop  context.CancelFunc
}

// lookup returns the settings of tablet id's group, if its zone has any.
func (z *zones) lookup(id uint64) (zone.Config, bool) {
	r := z.st.Replica(kvpb.TabletID(id))
	if r == nil {
		return zone.Config{}, false
	}
	return z.cache.Lookup(r.Desc().StartKey)
}

// replicas is membership.Config.ZoneReplicas: a zone with global reads
// (a Citus reference table's, and only theirs) has a voter on every node,
// so that every node reads it from its own replica; num_replicas does not
// apply to it.
func (z *zones) replicas(id uint64) int {
	c, _ := z.lookup(id)
	if c.GlobalReads {
		return membership.EveryNode
	}
	return c.NumReplicas
}

// prefs is store.LeaseBalancerConfig.ZonePrefs.
func (z *zones) prefs(id uint64) (store.LeasePreferences, bool) {
	c, ok := z.lookup(id)
	if !ok || !c.PrefsSet {
		return store.LeasePreferences{}, false
	}
	return store.LeasePreferences{Regions: c.LeasePreferences}, true
}

// domain is store.LeaseBalancerConfig.Domain: the index (or table
// group) tablet id holds, whose tablets' leases are balanced among
// themselves ("": none, or the tablet is not here).
func (z *zones) domain(id uint64) string {
	r := z.st.Replica(kvpb.TabletID(id))
	if r == nil {
		return ""
	}
	d := r.Desc()
	return rowenc.LeaseDomain(d.StartKey, d.EndKey)
}

// start refreshes the cache until stopped.
func (z *zones) start(s *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	z.stop, z.done = cancel, make(chan struct{})
	go func() {
		defer close(z.done)
		for {
			rctx, c := context.WithTimeout(ctx, 5*zoneRefresh)
			if err := z.cache.Refresh(rctx, s.db.Scan); err != nil && ctx.Err() == nil {
				s.log.Debug("cairn: refreshing zone records", "err", err)
			}
			c()
			select {
			case <-ctx.Done():
				return
			case <-time.After(zoneRefresh):
			}
		}
	}()
}

func (z *zones) close() {
	if z.stop != nil {
		z.stop()
		<-z.done
	}
}
