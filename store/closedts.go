package store

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// The closed-timestamp closer (tablet/closedts.go; docs/architecture.md,
// "Reference tables: global reads"): for every tablet this store holds
// the lease of whose zone asks for global reads, close a timestamp Lead
// ahead of the clock every Interval, so that its followers serve reads at
// the present time from their own replicas.

// ClosedTSConfig configures RunCloser.
type ClosedTSConfig struct {
	// GlobalSpans returns the spans whose zones ask for global reads
	// (usually none: then the closer costs nothing).
	GlobalSpans func() []kvpb.Span
	// Interval is how often the tablets are closed (default
	// DefaultCloseInterval).
	Interval time.Duration
	// Lead is how far ahead of the physical clock a tablet is closed.
	// A follower serves a read once the closed timestamp is at or above
	// the reader's uncertainty limit (its clock plus the maximum offset),
	// so Lead must exceed the maximum offset plus Interval plus the time
	// a closing entry takes to reach a follower; writes to the tablet
	// wait about Lead before they are answered.
	Lead time.Duration
	// Logger receives failures to close (nil: discarded).
	Logger *slog.Logger
}

// DefaultCloseInterval is how often a global-reads tablet is closed.
const DefaultCloseInterval = 200 * time.Millisecond

// CloseLead is the lead a node with maximum clock offset maxOffset
// closes its global-reads tablets at: the offset, two closing intervals
// and a margin for the entry to reach the followers over the slowest
// simulated link (145 ms round trip) under load.
func CloseLead(maxOffset time.Duration) time.Duration {
	return maxOffset + 2*DefaultCloseInterval + 300*time.Millisecond
}

// RunCloser closes the global-reads tablets this store leads until ctx
// ends. Which tablets those are is looked up again every second (a zone
// change takes effect within that, on top of the zone cache's refresh).
func (s *Store) RunCloser(ctx context.Context, cfg ClosedTSConfig) {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultCloseInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	var ids []kvpb.TabletID
	var looked time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(looked) >= time.Second {
				ids, looked = s.tabletsIn(cfg.GlobalSpans()), now
			}
		}
		for _, id := range ids {
			r := s.Replica(id)
			if r == nil || !r.HoldsLease() {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, cfg.Interval)
			if _, err := r.CloseTimestamp(cctx, cfg.Lead); err != nil && ctx.Err() == nil {
				cfg.Logger.Debug("cairn: closing a timestamp", "tablet", id, "err", err)
			}
			cancel()
		}
	}
}

// tabletsIn lists the tablets of this store that overlap spans.
func (s *Store) tabletsIn(spans []kvpb.Span) []kvpb.TabletID {
	if len(spans) == 0 {
		return nil
	}
	var out []kvpb.TabletID
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id, r := range s.mu.replicas {
		d := r.Desc()
		for _, sp := range spans {
			if bytes.Compare(d.StartKey, sp.EndKey) < 0 && bytes.Compare(sp.Key, d.EndKey) < 0 {
				out = append(out, id)
				break
			}
		}
	}
	return out
}
