package server

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/sql/plan"
)

// defaultTabletStatsTTL is how long a tablet's live and total bytes are
// reused before the next request scans the tablet again. Counting is a
// scan of the tablet (nothing maintains the statistics incrementally yet),
// and the admin UI reloads every five seconds while auto-refresh is on, so
// without a cache an open browser tab would read the whole store over and
// over.
const defaultTabletStatsTTL = 10 * time.Second

// tabletStatsCache keeps each tablet's last counted mvcc.SpanStats. An
// entry counts for the span it was computed over only: a split or merge
// changes the span and so forces a new count.
type tabletStatsCache struct {
	mu      sync.Mutex
	ttl     time.Duration // 0: defaultTabletStatsTTL; negative: never reuse
	entries map[kvpb.TabletID]tabletStatsEntry
}

type tabletStatsEntry struct {
	start, end []byte
	at         time.Time
	stats      mvcc.SpanStats
}

// tabletStats returns d's live and total bytes on this node's replica, at
// most the cache's TTL old.
func (s *Server) tabletStats(d kvpb.TabletDescriptor) (mvcc.SpanStats, error) {
	c := &s.tabletStatsCache
	ttl := c.ttl
	if ttl == 0 {
		ttl = defaultTabletStatsTTL
	}
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[d.TabletID]
	c.mu.Unlock()
	if ok && ttl > 0 && now.Sub(e.at) < ttl && bytes.Equal(e.start, d.StartKey) && bytes.Equal(e.end, d.EndKey) {
		return e.stats, nil
	}
	st, err := mvcc.ComputeSpanStats(s.eng, d.StartKey, d.EndKey, nil)
	if err != nil {
		return mvcc.SpanStats{}, fmt.Errorf("live and total bytes of tablet %d: %w", d.TabletID, err)
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[kvpb.TabletID]tabletStatsEntry{}
	}
	c.entries[d.TabletID] = tabletStatsEntry{start: d.StartKey, end: d.EndKey, at: now, stats: st}
	c.mu.Unlock()
	return st, nil
}

var _ plan.SpanSizes = tabletDirectory{}

var _ plan.SpanDiskUsage = tabletDirectory{}

// SpanDiskBytes implements plan.SpanDiskUsage over this node's engine: the
// SSTs of the replicas it holds, in proportion where a file straddles a
// bound (storage.Engine.EstimateDiskUsage).
func (d tabletDirectory) SpanDiskBytes(ctx context.Context, key, endKey []byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := d.s.eng.EstimateDiskUsage(key, endKey)
	return int64(n), err
}

// SpanSizes implements plan.SpanSizes over this node's engine: the
// replicas this node holds answer for their part of the span, counted now
// (no cache: a size right after a write includes it).
func (d tabletDirectory) SpanSizes(ctx context.Context, key, endKey []byte, keep func([]byte) bool) (plan.SpanSize, error) {
	if err := ctx.Err(); err != nil {
		return plan.SpanSize{}, err
	}
	st, err := mvcc.ComputeSpanStats(d.s.eng, key, endKey, keep)
	if err != nil {
		return plan.SpanSize{}, err
	}
	return plan.SpanSize{LiveBytes: st.LiveBytes, TotalBytes: st.TotalBytes}, nil
}
