package store

// The GC queue (issue #14). Every node runs one over the tablets whose
// lease it holds (all of them on an unreplicated store). For each such
// tablet, when a scan is due (below), it:
//
//  1. computes the threshold: now − the tablet's GC TTL (Config.GCTTL, by
//     the tablet's start key: its zone's gc.ttlseconds), lowered to the
//     protected timestamp (Config.GCProtected: the oldest read timestamp a
//     transaction, backfill or job anywhere still reads at), and skips the
//     tablet if that does not move its threshold forward;
//  2. plans on a snapshot of its own engine (mvcc.PlanGC): the tablet's
//     total, live and garbage bytes at the threshold, and spans of at most
//     gcBatchVersions removable versions;
//  3. when the garbage is at least Config.GCFraction of the total, sends
//     one GC request per span (bounded by MaxVersions as well) through
//     Store.Send: evaluated under latches by the leaseholder, which
//     re-applies GC's rule, and replicated through raft, so every replica
//     removes the same versions and raises the same threshold.
//
// What drives it. There are no incrementally maintained MVCC statistics:
// the plan's scan is the statistic, and the queue keeps, per tablet, what
// the last plan found and when the next scan can find more:
//
//   - mvcc.GCPlan.NextDue: the lowest threshold at which more versions
//     become removable (a version is removable once the version
//     shadowing it, or it as a tombstone, is at or below the threshold),
//     so a scan is due at NextDue + TTL by the wall clock;
//   - the replica's write-batch counter: a tablet written since its last
//     scan may hold new garbage, removable at the earliest TTL after the
//     scan;
//
// and no tablet is rescanned within gcRescan(TTL) of its last scan (a
// tenth of the TTL, at least the queue's interval, at most gcMaxRescan),
// so a tablet updated constantly is scanned about ten times per TTL and
// holds at most about 1.1 TTL of history. A tablet neither written nor
// holding pending garbage is never rescanned; after a restart or a lease
// transfer every tablet is scanned once.
//
// GC changes no read at or above the threshold (mvcc invariant 7), and the
// tablet refuses reads below it (tablet invariant 10), so a stale protected
// timestamp can only make a reader fail with snapshot_too_old, never read
// a wrong answer.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/tablet"
)

const (
	// DefaultGCTTL is how long old versions stay readable unless a zone
	// says otherwise (gc.ttlseconds; CockroachDB's default).
	DefaultGCTTL = 4 * time.Hour
	// DefaultGCFraction is Config.GCFraction's default: a tablet is
	// collected once a twentieth of its bytes are removable.
	DefaultGCFraction = 0.05

	gcBatchVersions = 1000
	gcBatchBytes    = 1 << 20
	gcTimeout       = 30 * time.Second
	gcMaxRescan     = 10 * time.Minute
	// gcCompactVersions is how many versions GC removes from a tablet
	// before the queue compacts the tablet's span in this node's engine:
	// GC deletes versions with point tombstones, which every read of the
	// span steps over until a compaction drops them, so a hot row's
	// reads stay as slow as before GC until then.
	gcCompactVersions = 10000
)

// gcStats counts the queue's work (GCQueueStats).
type gcStats struct {
	scans, runs, versions, bytes, errors, repacked atomic.Int64
	// transaction cleanup (txncleanup.go)
	intentsResolved, recordsRemoved, aborted atomic.Int64
	// txnScans counts the cleanup's scans of a tablet.
	txnScans    atomic.Int64
	compactions atomic.Int64
}

// countingRepacker is the store's Config.GCRepacker as its tablets see
// it: it counts the rows GC requests evaluated here repacked (a request
// whose proposal then fails is counted too), whoever sent them (the queue
// or VACUUM). Plans use the bare one.
type countingRepacker struct {
	mvcc.Repacker
	n *atomic.Int64
}

func (c countingRepacker) Repack(th hlc.Timestamp, rowKey []byte, base mvcc.RowVersion, cols []mvcc.RowVersion) ([]byte, bool) {
	out, ok := c.Repacker.Repack(th, rowKey, base, cols)
	if ok {
		c.n.Add(1)
	}
	return out, ok
}

// PackedVersion passes a census through (mvcc.RowFormats), when the
// store's repacker can take one.
func (c countingRepacker) PackedVersion(key, value []byte) (owner []byte, version uint32, ok bool) {
	if rf, is := c.Repacker.(mvcc.RowFormats); is {
		return rf.PackedVersion(key, value)
	}
	return nil, 0, false
}

func (s *Store) evalRepacker() mvcc.Repacker {
	if s.cfg.GCRepacker == nil {
		return nil
	}
	return countingRepacker{Repacker: s.cfg.GCRepacker, n: &s.gc.stats.repacked}
}

// GCQueueStats are the GC queue's counters on this store, and the sizes
// its last scans found.
type GCQueueStats struct {
	// Scans counts tablet plans; Runs the tablets GC was sent for;
	// Versions and Bytes what the GC requests removed; Errors failed plans
	// and requests; Repacked the rows GC requests evaluated on this store
	// folded into one packed row (the queue's and VACUUM's).
	Scans, Runs, Versions, Bytes, Errors, Repacked int64
	// TxnCleanup counts the transaction cleanup's work (txncleanup.go).
	TxnCleanup TxnCleanupStats
	// Compactions counts the tablet spans compacted after GC removed
	// gcCompactVersions versions from them.
	Compactions int64
	// LiveBytes and TotalBytes sum, over the tablets this store leads, the
	// sizes their last scan found (mvcc.GCPlan).
	LiveBytes, TotalBytes int64
}

// gcTabletState is what the queue remembers of one tablet.
type gcTabletState struct {
	scanned time.Time
	writes  int64
	// nextDue is the last plan's NextDue: more is removable once the
	// threshold, now − TTL, reaches it (the TTL as it is at the check: a
	// zone may change it).
	nextDue    hlc.Timestamp
	live, tot  int64
	generation int64
	// cleaned is when the transaction cleanup last ran over the tablet;
	// clean that it found nothing there, with the tablet at cleanWrites
	// writes: until it takes another, the cleanup is skipped (with
	// 20,000 idle tablets a scan of each every 30 s was a few percent of
	// an idle node's CPU; issue 16, bench/ddl).
	cleaned     time.Time
	clean       bool
	cleanWrites int64
	// uncompacted counts the versions GC removed since the queue last
	// compacted the tablet's span (gcCompactVersions).
	uncompacted int64
}

// gcQueue is one store's GC queue state.
type gcQueue struct {
	mu      sync.Mutex
	tablets map[kvpb.TabletID]*gcTabletState
}

// GCQueueStats returns the GC queue's counters.
func (s *Store) GCQueueStats() GCQueueStats {
	st := GCQueueStats{Scans: s.gc.stats.scans.Load(), Runs: s.gc.stats.runs.Load(),
		Versions: s.gc.stats.versions.Load(), Bytes: s.gc.stats.bytes.Load(), Errors: s.gc.stats.errors.Load(),
		Repacked: s.gc.stats.repacked.Load(), Compactions: s.gc.stats.compactions.Load(),
		TxnCleanup: TxnCleanupStats{IntentsResolved: s.gc.stats.intentsResolved.Load(),
			RecordsRemoved: s.gc.stats.recordsRemoved.Load(), Aborted: s.gc.stats.aborted.Load()}}
	s.gc.q.mu.Lock()
	defer s.gc.q.mu.Unlock()
	for id, t := range s.gc.q.tablets {
		if s.leads(id) {
			st.LiveBytes += t.live
			st.TotalBytes += t.tot
		}
	}
	return st
}

// gcTTL is the GC TTL of the tablet starting at start.
func (s *Store) gcTTL(start []byte) time.Duration {
	if s.cfg.GCTTL != nil {
		if ttl := s.cfg.GCTTL(start); ttl > 0 {
			return ttl
		}
	}
	return DefaultGCTTL
}

// GCThresholdFor returns the threshold GC may use now for the tablet
// starting at start: now − TTL, lowered to the protected timestamp.
func (s *Store) GCThresholdFor(ctx context.Context, start []byte) (hlc.Timestamp, error) {
	now := s.clock.Now()
	th := hlc.Timestamp{WallTime: now.WallTime - s.gcTTL(start).Nanoseconds()}
	if s.cfg.GCProtected != nil {
		p, err := s.cfg.GCProtected(ctx)
		if err != nil {
			return hlc.Timestamp{}, err
		}
		if !p.IsEmpty() && p.Less(th) {
			th = p
		}
	}
	return th, nil
}

// wallNow is the store clock's physical time: the queue's schedule is in
// the clock timestamps are in.
func (s *Store) wallNow() time.Time { return time.Unix(0, s.clock.PhysicalNow()) }

func gcRescan(ttl, interval time.Duration) time.Duration {
	return min(max(ttl/10, interval), gcMaxRescan)
}

// RunGCQueue collects this store's garbage (see above) every
// Config.GCInterval until ctx ends or the store closes.
func (s *Store) RunGCQueue(ctx context.Context) {
	every := s.gcInterval()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stop.Done():
			return
		case <-t.C:
		}
		s.GCPass(ctx, false)
	}
}

func (s *Store) gcInterval() time.Duration {
	if s.cfg.GCInterval > 0 {
		return s.cfg.GCInterval
	}
	return time.Second
}

// GCPass looks at every tablet this store leads once and collects those
// due (force: every one with any garbage, now). It returns the versions
// removed.
func (s *Store) GCPass(ctx context.Context, force bool) int64 {
	now := s.wallNow()
	var removed int64
	seen := map[kvpb.TabletID]bool{}
	for _, d := range s.Tablets() {
		seen[d.TabletID] = true
		r := s.Replica(d.TabletID)
		if r == nil || !s.leads(d.TabletID) {
			continue
		}
		ttl := s.gcTTL(d.StartKey)
		writes := r.Metrics().WriteBatches.Load()
		s.gc.q.mu.Lock()
		st := s.gc.q.tablets[d.TabletID]
		if st == nil || st.generation != d.Generation {
			st = &gcTabletState{generation: d.Generation}
			s.gc.q.tablets[d.TabletID] = st
		}
		cleanup := force || now.Sub(st.cleaned) >= max(s.txnCleanupAge()/2, s.gcInterval()) && !(st.clean && st.cleanWrites == writes)
		if cleanup {
			st.cleaned = now
		}
		due := force || st.scanned.IsZero()
		if !due && now.Sub(st.scanned) >= gcRescan(ttl, s.gcInterval()) {
			due = (!st.nextDue.IsEmpty() && !now.Before(time.Unix(0, st.nextDue.WallTime).Add(ttl))) ||
				(writes != st.writes && now.Sub(st.scanned) >= ttl)
		}
		s.gc.q.mu.Unlock()
		if cleanup {
			clean, err := s.cleanupTxns(ctx, d)
			if err != nil {
				if ctx.Err() != nil {
					return removed
				}
				s.gc.stats.errors.Add(1)
			}
			s.gc.q.mu.Lock()
			st.clean, st.cleanWrites = clean, writes
			s.gc.q.mu.Unlock()
		}
		if !due {
			continue
		}
		n, err := s.gcTablet(ctx, d, r, st, writes, ttl, force)
		removed += n
		if err != nil {
			if ctx.Err() != nil {
				return removed
			}
			s.gc.stats.errors.Add(1)
		}
	}
	s.gc.q.mu.Lock()
	for id := range s.gc.q.tablets {
		if !seen[id] {
			delete(s.gc.q.tablets, id)
		}
	}
	s.gc.q.mu.Unlock()
	return removed
}

// gcTablet plans tablet d and, if worth it (or forced), collects it.
func (s *Store) gcTablet(ctx context.Context, d kvpb.TabletDescriptor, r *tablet.Replica, st *gcTabletState, writes int64, ttl time.Duration, force bool) (int64, error) {
	th, err := s.GCThresholdFor(ctx, d.StartKey)
	if err != nil {
		return 0, err
	}
	snap := s.eng.NewSnapshot()
	plan, err := mvcc.PlanGCWith(snap, d.StartKey, d.EndKey, th, gcBatchVersions, gcBatchBytes, s.cfg.GCRepacker)
	snap.Close()
	s.gc.stats.scans.Add(1)
	if err != nil {
		return 0, err
	}
	s.gc.q.mu.Lock()
	st.scanned, st.writes, st.live, st.tot = s.wallNow(), writes, plan.LiveBytes, plan.TotalBytes
	st.nextDue = plan.NextDue
	s.gc.q.mu.Unlock()
	if plan.Garbage.Versions == 0 || th.LessEq(r.GCThreshold()) {
		return 0, nil
	}
	frac := s.cfg.GCFraction
	if frac <= 0 {
		frac = DefaultGCFraction
	}
	if !force && float64(plan.Garbage.Bytes) < frac*float64(plan.TotalBytes) {
		return 0, nil
	}
	s.gc.stats.runs.Add(1)
	var removed int64
	// The GC batches count as writes; a tablet no one else wrote to
	// since must not look written at the next pass.
	sent := int64(0)
	defer func() {
		s.gc.q.mu.Lock()
		st.writes += sent
		s.gc.q.mu.Unlock()
	}()
	for _, sp := range plan.Spans {
		for from := sp[0]; from != nil; {
			ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: s.clock.Now()}}
			ba.Add(&kvpb.GCRequest{Key: from, EndKey: sp[1], Threshold: th, MaxVersions: gcBatchVersions})
			gctx, cancel := context.WithTimeout(ctx, gcTimeout)
			br, err := s.Send(gctx, ba)
			cancel()
			sent++
			if err != nil {
				return removed, err
			}
			resp := br.Responses[0].(*kvpb.GCResponse)
			removed += int64(resp.Removed)
			s.gc.stats.versions.Add(int64(resp.Removed))
			s.gc.stats.bytes.Add(resp.RemovedBytes)
			s.gc.q.mu.Lock()
			st.tot -= resp.RemovedBytes
			s.gc.q.mu.Unlock()
			from = resp.ResumeKey
		}
	}
	s.gc.q.mu.Lock()
	st.uncompacted += removed
	compact := st.uncompacted >= gcCompactVersions
	if compact {
		st.uncompacted = 0
	}
	s.gc.q.mu.Unlock()
	if compact {
		if err := s.eng.Compact(ctx, d.StartKey, d.EndKey); err != nil {
			return removed, err
		}
		s.gc.stats.compactions.Add(1)
	}
	return removed, nil
}

// GCSizes are a store's MVCC sizes, measured by a scan.
type GCSizes struct {
	// LiveBytes: the newest version of each key unless a tombstone;
	// TotalBytes: every version; GarbageBytes: what GC at each tablet's
	// current threshold (now − TTL, protected) would remove.
	LiveBytes, TotalBytes, GarbageBytes int64
	Tablets                             int
}

// MeasureGC scans every tablet this store leads (mvcc.PlanGC at the
// threshold the queue would use now) and sums their sizes. It costs a scan
// of the data: for benchmarks and operators, not for the queue.
func (s *Store) MeasureGC(ctx context.Context) (GCSizes, error) {
	var out GCSizes
	for _, d := range s.Tablets() {
		if !s.leads(d.TabletID) {
			continue
		}
		th, err := s.GCThresholdFor(ctx, d.StartKey)
		if err != nil {
			return out, err
		}
		snap := s.eng.NewSnapshot()
		plan, err := mvcc.PlanGCWith(snap, d.StartKey, d.EndKey, th, gcBatchVersions, gcBatchBytes, s.cfg.GCRepacker)
		snap.Close()
		if err != nil {
			return out, err
		}
		out.LiveBytes += plan.LiveBytes
		out.TotalBytes += plan.TotalBytes
		out.GarbageBytes += plan.Garbage.Bytes
		out.Tablets++
	}
	return out, nil
}
