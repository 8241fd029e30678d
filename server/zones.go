package server

// Placement settings per table group (package zone; ALTER ... CONFIGURE
// ZONE): a clustered node keeps a zone.Cache of the zone records,
// refreshed every zoneRefresh, and gives the replicate queue and the
// lease balancer each tablet's settings by the tablet's start key (and
// the lease balancer each tablet's domain, the index it starts in).

import (
	"cmp"
	"context"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/membership"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/tablet"
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
	every := cmp.Or(s.cfg.ZoneRefreshInterval, zoneRefresh)
	go func() {
		defer close(z.done)
		for {
			rctx, c := context.WithTimeout(ctx, 5*zoneRefresh)
			if err := z.cache.Refresh(rctx, s.backgroundScan); err != nil && ctx.Err() == nil {
				s.log.Debug("cairn: refreshing zone records", "err", err)
			}
			c()
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
		}
	}()
}

// backgroundScan is the zone.Scanner of a node's own periodic readers
// (the zone caches here and in the GC queue): it never pushes a
// transaction whose intents it meets (kv.DB.ScanCommitted), so that a
// DDL writing a zone record (create_reference_table, CONFIGURE ZONE)
// does not lose its commit to the nodes' rereads every second. Only an
// intent older than backgroundPushAfter is pushed, which clears an
// abandoned one.
func (s *Server) backgroundScan(ctx context.Context, start, end []byte, maxRows int64) ([]kvpb.KeyValue, error) {
	return s.db.ScanCommitted(ctx, start, end, maxRows, backgroundPushAfter)
}

// backgroundPushAfter is twice the transaction liveness threshold: a
// transaction that started that long ago is most likely gone (a push
// aborts it if its record has not been heartbeaten for the threshold)
// or committed with its intents left to readers to resolve.
const backgroundPushAfter = 2 * tablet.DefaultTxnLivenessThreshold

func (z *zones) close() {
	if z.stop != nil {
		z.stop()
		<-z.done
	}
}
