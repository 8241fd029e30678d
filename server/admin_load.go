package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// adminState is the admin UI's part of a Server.
type adminState struct {
	mu    sync.Mutex
	nodes NodeSource // nil: memberNodes

	load loadTracker
	// warnSize is the colocation warning size in bytes (<= 0: none).
	warnSize atomic.Int64
	// checkMu serializes colocation size checks (the admin loop's, a
	// test's), so a crossing is logged once.
	checkMu sync.Mutex
	// overWarn holds the colocation tablets found over the warning size
	// at the last check, so a crossing is logged once.
	overWarn map[uint64]bool

	// auth holds the HTTP sessions (admin_auth.go).
	auth webAuth
}

// Per-tablet rates are the change of the replicas' batch counters (kept
// by tablet.Replica, one atomic add per batch: nothing is added to the
// request path here) over the last loadWindow, from samples the admin
// loop takes every loadEvery.
const (
	loadEvery  = time.Second
	loadWindow = 10 * time.Second
	// colocationCheckEvery is how often colocation tablets' sizes are
	// compared with --colocation-warn-size.
	colocationCheckEvery = 10 * time.Second
)

type loadSample struct {
	at     time.Time
	counts map[uint64][2]int64
}

// loadTracker keeps the samples of the last loadWindow, oldest first.
type loadTracker struct {
	mu      sync.Mutex
	samples []loadSample
}

func (l *loadTracker) record(now time.Time, counts map[uint64][2]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, loadSample{now, counts})
	// Keep one sample at or before the window's start, so rates cover the
	// whole window.
	for len(l.samples) > 1 && now.Sub(l.samples[1].at) >= loadWindow {
		l.samples = l.samples[1:]
	}
}

// rates returns each tablet's reads and writes per second from the oldest
// sample that has it to counts, read at now. A tablet in no sample yet
// (created, or its replica added, since the last one) counts from zero
// at the newest sample, before which it had no replica here.
func (l *loadTracker) rates(now time.Time, counts map[uint64][2]int64) map[uint64][2]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[uint64][2]float64, len(counts))
	if len(l.samples) == 0 {
		return out
	}
	for id, c := range counts {
		base := l.samples[len(l.samples)-1]
		var p [2]int64
		for _, s := range l.samples {
			if pc, ok := s.counts[id]; ok {
				base, p = s, pc
				break
			}
		}
		if dt := now.Sub(base.at).Seconds(); dt > 0 {
			out[id] = [2]float64{float64(c[0]-p[0]) / dt, float64(c[1]-p[1]) / dt}
		}
	}
	return out
}

// startAdmin runs the admin loop until ctx ends: load samples every
// loadEvery, colocation sizes every colocationCheckEvery.
func (s *Server) startAdmin(ctx context.Context) {
	if s.cfg.Insecure {
		s.log.Warn("cairn: --insecure: the admin UI and HTTP API (decommissioning included) need no login", "http", s.HTTPAddr().String())
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(loadEvery)
		defer tick.Stop()
		lastCheck := time.Time{}
		for {
			now := time.Now()
			s.admin.load.record(now, s.tabletCounts(s.store.Tablets()))
			s.obs.sample(now)
			if now.Sub(lastCheck) >= colocationCheckEvery {
				lastCheck = now
				// Bounded: a catalog read that cannot finish (no quorum)
				// must not stall the load samples.
				cctx, cancel := context.WithTimeout(ctx, colocationCheckEvery/2)
				err := s.checkColocationSizes(cctx)
				cancel()
				if err != nil && ctx.Err() == nil {
					s.log.Warn("cairn: checking colocation tablet sizes", "err", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// checkColocationSizes logs a warning for each colocation tablet (of a
// colocated database, or the system catalog's) that has grown past
// --colocation-warn-size since the last check, and a note when one is
// back under it: once per crossing, not per check. Only the tablet's
// leader (as this node knows it) checks it, so a cluster logs each
// crossing once, not once per replica.
func (s *Server) checkColocationSizes(ctx context.Context) error {
	limit := s.admin.warnSize.Load()
	if limit <= 0 {
		return nil
	}
	s.admin.checkMu.Lock()
	defer s.admin.checkMu.Unlock()
	// Sizes first: only when a tablet this node leads is over the limit
	// is the catalog read to see whether it is a colocation tablet, so
	// the usual check costs no transaction.
	self := int(s.nodeID())
	big := map[uint64]uint64{}
	for _, d := range s.store.Tablets() {
		if _, _, leader := s.placement(d.TabletID); leader != self {
			continue
		}
		size, err := s.eng.EstimateDiskUsage(d.StartKey, d.EndKey)
		if err != nil {
			return fmt.Errorf("size of tablet %d: %w", d.TabletID, err)
		}
		if size > uint64(limit) {
			big[uint64(d.TabletID)] = size
		}
	}
	type hit struct {
		db     string
		tables int
		id     uint64
		size   uint64
	}
	var hits []hit
	over := map[uint64]bool{}
	if len(big) > 0 {
		dbs, err := s.databases(ctx, s.store.Tablets())
		if err != nil {
			return err
		}
		for _, db := range dbs {
			for _, id := range db.ColocationTablets {
				if size, ok := big[id]; ok {
					over[id] = true
					hits = append(hits, hit{db.Name, len(db.Tables), id, size})
				}
			}
		}
	}
	s.admin.mu.Lock()
	prev := s.admin.overWarn
	s.admin.overWarn = over
	s.admin.mu.Unlock()
	for _, h := range hits {
		if !prev[h.id] {
			s.log.Warn(fmt.Sprintf("cairn: colocation tablet %d of %s is %s, over --colocation-warn-size %s: consider moving large tables out (ALTER TABLE ... SET (colocated = false))",
				h.id, h.db, FormatBytes(h.size), FormatBytes(uint64(limit))),
				"tablet", h.id, "database", h.db, "size_bytes", h.size, "tables", h.tables)
		}
	}
	for id := range prev {
		if !over[id] {
			s.log.Info("cairn: colocation tablet back under --colocation-warn-size", "tablet", id)
		}
	}
	return nil
}

// SetColocationWarnSize changes the size past which a colocation tablet
// warns (Config.ColocationWarnSize; <= 0: never), from the next check on.
func (s *Server) SetColocationWarnSize(n int64) { s.admin.warnSize.Store(n) }

// colocationOverWarn reports how many colocation tablets the last check
// found over the warning size.
func (s *Server) colocationOverWarn() int {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return len(s.admin.overWarn)
}
