package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/tablet"
)

// The closed-timestamp closer (tablet/closedts.go; docs/architecture.md,
// "Reference tables: global reads"): for every tablet this store holds
// the lease of whose zone asks for global reads, close a timestamp Lead
// ahead of the clock every Interval, so that its followers serve reads at
// the present time from their own replicas.
// With Publish set, every other tablet it leads is closed Target behind
// the clock without a raft entry, and the closings go to the followers'
// nodes through Publish (the side transport), so that their replicas
// serve historical reads (AS OF SYSTEM TIME; docs/architecture.md, "AS OF
// SYSTEM TIME").

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
	// Publish, if set, turns on trailing closed timestamps for every
	// other tablet this store leads (tablet/closedts.go, "Trailing
	// closed timestamps"): each interval they are closed at the clock −
	// Target without a raft entry, and Publish gets the closings, to
	// send to the other nodes (the side transport), which hand them to
	// their stores' SideClosed.
	Publish func(ctx context.Context, closings []SideClosing)
	// Target is how far behind the clock the trailing closings are
	// (default tablet.TrailingTarget).
	Target time.Duration
	// HasFollowers, if set, reports whether a tablet has replicas on
	// other nodes: one without is not closed (nobody would read under it,
	// and closing takes latches over the whole tablet).
	HasFollowers func(kvpb.TabletID) bool
}

// SideClosing is one tablet's trailing closing: closed at TS, in force on
// a replica that applied raft entry Index.
type SideClosing struct {
	Tablet kvpb.TabletID
	TS     hlc.Timestamp
	Index  uint64
}

// SideClosed hands closings received from another node's closer to this
// store's replicas of those tablets (the ones it does not have are
// skipped).
func (s *Store) SideClosed(closings []SideClosing) {
	for _, c := range closings {
		if r := s.Replica(c.Tablet); r != nil {
			r.SideClosed(c.TS, c.Index)
		}
	}
}

// EncodeSideClosings is the side transport's message: the closings as
// varints.
func EncodeSideClosings(cs []SideClosing) []byte {
	b := binary.AppendUvarint(nil, uint64(len(cs)))
	for _, c := range cs {
		b = binary.AppendUvarint(b, uint64(c.Tablet))
		b = binary.AppendVarint(b, c.TS.WallTime)
		b = binary.AppendVarint(b, int64(c.TS.Logical))
		b = binary.AppendUvarint(b, c.Index)
	}
	return b
}

// DecodeSideClosings reads EncodeSideClosings' message.
func DecodeSideClosings(b []byte) ([]SideClosing, error) {
	bad := fmt.Errorf("store: malformed side-transport message of %d bytes", len(b))
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, bad
	}
	b = b[k:]
	out := make([]SideClosing, 0, n)
	for range n {
		var c SideClosing
		id, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, bad
		}
		b = b[k:]
		wall, k := binary.Varint(b)
		if k <= 0 {
			return nil, bad
		}
		b = b[k:]
		logical, k := binary.Varint(b)
		if k <= 0 {
			return nil, bad
		}
		b = b[k:]
		idx, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, bad
		}
		b = b[k:]
		c.Tablet, c.TS, c.Index = kvpb.TabletID(id), hlc.Timestamp{WallTime: wall, Logical: int32(logical)}, idx
		out = append(out, c)
	}
	return out, nil
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
	trailing := map[kvpb.TabletID]*trailState{}
	round := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if now.Sub(looked) >= time.Second {
				ids, looked = s.tabletsIn(cfg.GlobalSpans()), now
			}
		}
		global := make(map[kvpb.TabletID]bool, len(ids))
		for _, id := range ids {
			global[id] = true
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
		if cfg.Publish != nil {
			round++
			s.closeTrailing(ctx, cfg, global, trailing, round)
		}
	}
}

// CloserStats are the trailing closer's counts since the store opened:
// what one node pays for follower reads, per interval and per tablet it
// leads (bench/closer reads them from /metrics).
type CloserStats struct {
	// Rounds are the closer's trailing rounds; Tablets the tablets those
	// rounds looked at (every tablet the store holds), Closed the
	// closings they published.
	Rounds, Tablets, Closed int64
	// Nanos is the wall time the rounds took, publishing included (the
	// encoding; the sends run on their own goroutines).
	Nanos int64
	// LeaseSkips are the tablets a round skipped because their lease did
	// not hold without waiting (tablet.ErrLeaseNotNow).
	LeaseSkips int64
}

type closerCounters struct {
	rounds, tablets, closed, nanos, leaseSkips atomic.Int64
}

// CloserStats returns the trailing closer's counts.
func (s *Store) CloserStats() CloserStats {
	c := &s.closer
	return CloserStats{Rounds: c.rounds.Load(), Tablets: c.tablets.Load(), Closed: c.closed.Load(), Nanos: c.nanos.Load(), LeaseSkips: c.leaseSkips.Load()}
}

// trailState is what the closer remembers of a tablet it closes
// trailing.
type trailState struct {
	seen int // the round it was last seen in
}

// closeTrailing closes every tablet this store leads that is not a
// global-reads one at the clock − Target and publishes the closings.
func (s *Store) closeTrailing(ctx context.Context, cfg ClosedTSConfig, global map[kvpb.TabletID]bool, state map[kvpb.TabletID]*trailState, round int) {
	target := cfg.Target
	if target <= 0 {
		target = tablet.TrailingTarget
	}
	start := time.Now()
	var out []SideClosing
	descs := s.Tablets()
	defer func() {
		s.closer.rounds.Add(1)
		s.closer.tablets.Add(int64(len(descs)))
		s.closer.closed.Add(int64(len(out)))
		s.closer.nanos.Add(int64(time.Since(start)))
	}()
	for _, d := range descs {
		id := d.TabletID
		r := s.Replica(id)
		if r == nil || global[id] || !r.HoldsLease() || (cfg.HasFollowers != nil && !cfg.HasFollowers(id)) {
			continue
		}
		st := state[id]
		if st == nil {
			st = &trailState{}
			state[id] = st
		}
		// Closing never waits for or holds back a write
		// (tablet.CloseTrailing), so a written tablet is closed every
		// round too.
		st.seen = round
		cctx, cancel := context.WithTimeout(ctx, cfg.Interval)
		c, idx, err := r.CloseTrailing(cctx, target)
		cancel()
		if errors.Is(err, tablet.ErrLeaseNotNow) {
			s.closer.leaseSkips.Add(1)
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				cfg.Logger.Debug("cairn: closing a trailing timestamp", "tablet", id, "err", err)
			}
			continue
		}
		if !c.IsEmpty() {
			out = append(out, SideClosing{Tablet: id, TS: c, Index: idx})
		}
	}
	for id, st := range state {
		if st.seen != round {
			delete(state, id) // no longer led here
		}
	}
	if len(out) > 0 {
		cfg.Publish(ctx, out)
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
