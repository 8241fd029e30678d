package store

// The split queue (issue #4, "splits by size and by load"). Every node
// runs one over the tablets whose lease it holds (all of them on an
// unreplicated store). Each pass, for each such tablet:
//
//   - by size: when the engine's estimate of the tablet's data
//     (EstimateDiskUsage over its span, what the admin UI shows: data
//     still in memtables counts once flushed) exceeds SplitSize, it
//     splits at the row boundary nearest the key that halves the bytes of
//     the tablet's keys and values (all versions). The estimate is taken
//     again only once the tablet has evaluated a write since the last
//     (every non-read batch counts, bulk loads included), or after
//     sizeRecheck: with 20,000 idle tablets an estimate of each every
//     second was an idle node's CPU (issue 16, bench/ddl);
//   - by load: when the tablet's batches per second over the last
//     loadWindow exceed SplitQPS, it splits at the row boundary nearest
//     the median of the request keys the replica sampled
//     (tablet.Replica.LoadSamples), if that leaves at least a fifth of
//     the samples on each side (one hot row cannot be split); but not
//     while Config.SplitByLoadUseful says no: with no other node to take
//     a half's lease, the halves are served by the same node, raft loop
//     and disk as before, and all a split buys is transactions that span
//     both halves, which commit in two phases instead of one (bench/README,
//     "bench/pgbench", issue 22: after pgbench's select-only had split
//     pgbench_accounts in 15, tpcb-like committed 96% of its transactions
//     in two phases). Nor while Config.SplitHeldByLoad says the
//     tablet's requests hold its lease on this node (a node without a
//     region, most of them through it as gateway, the tablet alone in its
//     lease domain: leases follow the workload, leases.go, locality):
//     both halves' leases would be held
//     here by the same requests, on the same raft loop and disk (issue
//     22: pgbench through node 1 of three split pgbench_accounts by load
//     while every lease followed it to node 1).
//
// A split key is a row boundary: an existing key that no shorter
// existing key prefixes (a SQL row key and its column entries share the
// row key as prefix; secondary index entries stand alone), checked by
// looking up the key's last maxFamilySuffix prefixes. Config.SplitUnit
// names spans never divided (the system span; with rowenc.SplitUnit,
// shared colocation groups): a split falls at their bounds or not at all.
//
// Splits are the raft command they always were (Store.Split): only the
// leaseholder proposes, under latches over the whole tablet, so they are
// safe against the replicate queue and lease transfers; an error (lease
// moved, a configuration change pending) backs the tablet off for
// splitBackoff, and a tablet with no possible split point for
// unsplittableRetry or until its generation changes.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
)

const (
	// DefaultSplitSize is Config.SplitSize's default.
	DefaultSplitSize = 512 << 20
	// DefaultSplitQPS is Config.SplitQPS's default (CockroachDB's). It
	// was off for a while: a scan racing a split returned some rows
	// twice, which kv.DistSender.forEachTablet now prevents (tests:
	// testcluster.TestClusterScansRacingSplits,
	// kv.TestDistSenderMatchesOneTabletLaggingDirectory).
	DefaultSplitQPS = 2500

	splitLoadWindow   = 10 * time.Second
	minRateSpan       = time.Second
	minLoadSamples    = 32
	splitBackoff      = 5 * time.Second
	splitTimeout      = 10 * time.Second
	unsplittableRetry = time.Minute
	// sizeRecheck is how long a tablet without writes keeps its last
	// size estimate while no flush or ingestion happened either. (The
	// estimate sees only SSTs: a flush moves a tablet's recent writes
	// from the memtable into it, so a flush makes it stale too.)
	sizeRecheck = time.Minute
	// maxFamilySuffix bounds the column-ID suffix of a column entry (an
	// ordered varint of a uint32 takes at most 5 bytes; 10 leaves room).
	maxFamilySuffix = 10
)

// splitStats counts the queue's work.
type splitStats struct {
	bySize, byLoad, errors atomic.Int64
}

// SplitQueueStats are the split queue's counters on this store.
type SplitQueueStats struct {
	BySize, ByLoad, Errors int64
}

// SplitQueueStats returns the split queue's counters.
func (s *Store) SplitQueueStats() SplitQueueStats {
	return SplitQueueStats{BySize: s.splits.bySize.Load(), ByLoad: s.splits.byLoad.Load(), Errors: s.splits.errors.Load()}
}

type rateSample struct {
	at    time.Time
	count int64
}

type backoff struct {
	gen   int64
	until time.Time
}

// splitQueue is one RunSplitQueue's state; only its goroutine uses it.
type splitQueue struct {
	s       *Store
	size    int64
	qps     float64
	rates   map[kvpb.TabletID][]rateSample
	backoff map[kvpb.TabletID]backoff
	// sized is, per tablet, its write count and generation at its last
	// size estimate and when that was; estimates counts the estimates.
	sized     map[kvpb.TabletID]sizeCheck
	estimates int
}

// sizeCheck is a tablet's state at its last size estimate.
type sizeCheck struct {
	writes, gen int64
	// tables is the engine's TableGeneration at the estimate.
	tables int64
	at     time.Time
}

// RunSplitQueue splits this store's tablets by size and load (see above)
// every Config.SplitInterval until ctx ends or the store closes.
func (s *Store) RunSplitQueue(ctx context.Context) {
	q := newSplitQueue(s)
	if q.size < 0 && q.qps < 0 {
		return
	}
	every := s.cfg.SplitInterval
	if every <= 0 {
		every = time.Second
	}
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
		q.pass(ctx)
	}
}

func newSplitQueue(s *Store) *splitQueue {
	q := &splitQueue{s: s, size: s.cfg.SplitSize, qps: s.cfg.SplitQPS,
		rates: map[kvpb.TabletID][]rateSample{}, backoff: map[kvpb.TabletID]backoff{}, sized: map[kvpb.TabletID]sizeCheck{}}
	if q.size == 0 {
		q.size = DefaultSplitSize
	}
	if q.qps == 0 {
		q.qps = DefaultSplitQPS
	}
	return q
}

// leads reports whether this node holds tablet id's lease (always, on an
// unreplicated store).
func (s *Store) leads(id kvpb.TabletID) bool {
	if s.cfg.Raft == nil {
		return true
	}
	rep := s.cfg.Raft.Node.Replica(uint64(id))
	if rep == nil {
		return false
	}
	term, _ := rep.Lease()
	return term != 0
}

// pass looks at every tablet once; it returns the splits it made.
func (q *splitQueue) pass(ctx context.Context) int {
	s := q.s
	now := time.Now()
	seen := map[kvpb.TabletID]bool{}
	done := 0
	for _, d := range s.Tablets() {
		r := s.Replica(d.TabletID)
		if r == nil {
			continue
		}
		seen[d.TabletID] = true
		rate := q.rate(d.TabletID, now, r.Metrics().ReadBatches.Load()+r.Metrics().WriteBatches.Load())
		if !s.leads(d.TabletID) {
			continue
		}
		if b, ok := q.backoff[d.TabletID]; ok {
			if b.gen == d.Generation && now.Before(b.until) {
				continue
			}
			delete(q.backoff, d.TabletID)
		}
		key, bySize, err := q.splitKey(d, r, rate, now)
		if err != nil {
			s.splits.errors.Add(1)
			q.backoff[d.TabletID] = backoff{gen: d.Generation, until: now.Add(splitBackoff)}
			continue
		}
		if key == nil {
			continue
		}
		// Bounded: a tablet without a quorum must not stall the queue.
		sctx, cancel := context.WithTimeout(ctx, splitTimeout)
		_, right, err := s.Split(sctx, key)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return done
			}
			s.splits.errors.Add(1)
			q.backoff[d.TabletID] = backoff{gen: d.Generation, until: now.Add(splitBackoff)}
			continue
		}
		done++
		if bySize {
			s.splits.bySize.Add(1)
		} else {
			s.splits.byLoad.Add(1)
		}
		// Both sides start a fresh rate window, so the pre-split rate
		// does not split them again.
		delete(q.rates, d.TabletID)
		delete(q.rates, right.TabletID)
		r.ResetLoadSamples()
	}
	for id := range q.rates {
		if !seen[id] {
			delete(q.rates, id)
		}
	}
	for id := range q.sized {
		if !seen[id] {
			delete(q.sized, id)
		}
	}
	return done
}

// rate records count for tablet id and returns its batches per second
// over the last splitLoadWindow (0 until it has minRateSpan of history).
func (q *splitQueue) rate(id kvpb.TabletID, now time.Time, count int64) float64 {
	h := append(q.rates[id], rateSample{now, count})
	// Keep one sample at or before the window's start.
	for len(h) > 1 && now.Sub(h[1].at) >= splitLoadWindow {
		h = h[1:]
	}
	q.rates[id] = h
	// A rate over less than minRateSpan (the first passes after a
	// split or a restart) is too noisy to act on.
	span := now.Sub(h[0].at)
	dt := span.Seconds()
	if len(h) < 2 || span < minRateSpan {
		return 0
	}
	return float64(count-h[0].count) / dt
}

// splitKey decides whether tablet d splits and where (nil: not now).
// A tablet over a threshold with no split point backs off.
func (q *splitQueue) splitKey(d kvpb.TabletDescriptor, r *tablet.Replica, rate float64, now time.Time) (key []byte, bySize bool, err error) {
	s := q.s
	over := false
	writes := r.Metrics().WriteBatches.Load()
	tables := s.eng.TableGeneration()
	if c, ok := q.sized[d.TabletID]; q.size > 0 && (!ok || c.writes != writes || c.gen != d.Generation || c.tables != tables || now.Sub(c.at) >= sizeRecheck) {
		q.estimates++
		size, err := s.eng.EstimateDiskUsage(d.StartKey, d.EndKey)
		if err != nil {
			return nil, false, err
		}
		if size <= uint64(q.size) {
			q.sized[d.TabletID] = sizeCheck{writes: writes, gen: d.Generation, tables: tables, at: now}
		} else {
			delete(q.sized, d.TabletID) // over: looked at every pass until split
			over = true
			mid, err := s.middleKey(d)
			if err != nil {
				return nil, false, err
			}
			if mid != nil {
				if key, err = s.boundaryNear(d, mid); key != nil || err != nil {
					return key, true, err
				}
			}
		}
	}
	if q.qps > 0 && rate > q.qps && (s.cfg.SplitByLoadUseful == nil || s.cfg.SplitByLoadUseful()) &&
		(s.cfg.SplitHeldByLoad == nil || !s.cfg.SplitHeldByLoad(uint64(d.TabletID))) {
		// Too few samples yet (the rate rose since the last split, which
		// cleared them): wait for more rather than back off.
		if samples := r.LoadSamples(); len(samples) >= minLoadSamples {
			over = true
			if key, err = s.loadSplitKey(d, samples); key != nil || err != nil {
				return key, false, err
			}
		}
	}
	if over {
		q.backoff[d.TabletID] = backoff{gen: d.Generation, until: time.Now().Add(unsplittableRetry)}
	}
	return nil, false, nil
}

// middleKey returns the first key at which the tablet's key and value
// bytes (all versions) reach half their total, or nil for an empty
// tablet. Two scans of the tablet: a split by size is rare.
func (s *Store) middleKey(d kvpb.TabletDescriptor) ([]byte, error) {
	snap := s.eng.NewSnapshot()
	defer snap.Close()
	walk := func(stop func(k []byte, acc int64) bool) ([]byte, int64, error) {
		it, err := snap.NewIter(storage.IterOptions{LowerBound: d.StartKey, UpperBound: d.EndKey})
		if err != nil {
			return nil, 0, err
		}
		defer it.Close()
		var acc int64
		for ok := it.SeekGE(storage.MVCCKey{Key: d.StartKey}); ok; ok = it.Next() {
			v, err := it.UnsafeValue()
			if err != nil {
				return nil, 0, err
			}
			k := it.UnsafeKey().Key
			acc += int64(len(k) + len(v))
			if stop != nil && stop(k, acc) {
				return bytes.Clone(k), acc, nil
			}
		}
		return nil, acc, it.Err()
	}
	_, total, err := walk(nil)
	if err != nil || total == 0 {
		return nil, err
	}
	mid, _, err := walk(func(_ []byte, acc int64) bool { return acc >= total/2 })
	return mid, err
}

// loadSplitKey returns the row boundary nearest the median of samples
// if it leaves at least a fifth of them on each side.
func (s *Store) loadSplitKey(d kvpb.TabletDescriptor, samples [][]byte) ([]byte, error) {
	if len(samples) < minLoadSamples {
		return nil, nil
	}
	slices.SortFunc(samples, bytes.Compare)
	key, err := s.boundaryNear(d, samples[len(samples)/2])
	if key == nil || err != nil {
		return nil, err
	}
	left, _ := slices.BinarySearchFunc(samples, key, bytes.Compare)
	if min(left, len(samples)-left) < len(samples)/5 {
		return nil, nil
	}
	return key, nil
}

// boundaryNear returns the first row boundary at or after c strictly
// inside d, else the last one before c, else nil.
func (s *Store) boundaryNear(d kvpb.TabletDescriptor, c []byte) ([]byte, error) {
	if k, err := s.boundaryFrom(d, c); k != nil || err != nil {
		return k, err
	}
	var last []byte
	from := d.StartKey
	for {
		k, err := s.boundaryFrom(d, from)
		if err != nil || k == nil || bytes.Compare(k, c) >= 0 {
			return last, err
		}
		last, from = k, append(bytes.Clone(k), 0)
	}
}

// boundaryFrom returns the first split point k >= from with d.StartKey <
// k < d.EndKey: the start or end of a SplitUnit span, or a key that
// starts a row (see the file comment). Nil: none.
func (s *Store) boundaryFrom(d kvpb.TabletDescriptor, from []byte) ([]byte, error) {
	unitOf := s.cfg.SplitUnit
	if unitOf == nil {
		unitOf = systemSplitUnit
	}
	inside := func(k []byte) bool {
		return bytes.Compare(k, d.StartKey) > 0 && bytes.Compare(k, d.EndKey) < 0
	}
	it, err := s.eng.NewIter(storage.IterOptions{LowerBound: d.StartKey, UpperBound: d.EndKey})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	probe, err := s.eng.NewIter(storage.IterOptions{Prefix: true})
	if err != nil {
		return nil, err
	}
	defer probe.Close()
	exists := func(k []byte) bool {
		return probe.SeekGE(storage.MVCCKey{Key: k}) && bytes.Equal(probe.UnsafeKey().Key, k)
	}
	for ok := it.SeekGE(storage.MVCCKey{Key: from}); ok; {
		k := bytes.Clone(it.UnsafeKey().Key)
		if u, isUnit := unitOf(k); isUnit {
			if bytes.Compare(u.Key, from) >= 0 && inside(u.Key) {
				return u.Key, nil
			}
			if !inside(u.EndKey) {
				return nil, nil
			}
			return u.EndKey, nil
		}
		if inside(k) {
			start := true
			for j := 1; j <= maxFamilySuffix && j < len(k); j++ {
				if exists(k[:len(k)-j]) {
					start = false
					break
				}
			}
			if start {
				return k, nil
			}
		}
		ok = it.NextKey()
	}
	return nil, it.Err()
}

// systemSplitUnit keeps the system span whole (Config.SplitUnit's
// default).
func systemSplitUnit(key []byte) (kvpb.Span, bool) {
	if bytes.Compare(key, keys.TableDataMin) < 0 {
		return kvpb.Span{Key: keys.Min, EndKey: keys.TableDataMin}, true
	}
	return kvpb.Span{}, false
}

// SplitMiddle splits tablet id, which this store must lead, at the row
// boundary nearest the middle of its data, as the split queue splits a
// tablet too large; nil descriptors and no error when the tablet has no
// such boundary (empty, one row, or one SplitUnit). It is how a test (the
// chaos harness's split nemesis) splits a tablet under load without
// knowing its keys.
func (s *Store) SplitMiddle(ctx context.Context, id kvpb.TabletID) (left, right kvpb.TabletDescriptor, err error) {
	var d kvpb.TabletDescriptor
	found := false
	for _, t := range s.Tablets() {
		if t.TabletID == id {
			d, found = t, true
		}
	}
	if !found || !s.leads(id) {
		return left, right, fmt.Errorf("store: tablet %d is not led here", id)
	}
	mid, err := s.middleKey(d)
	if err != nil || mid == nil {
		return left, right, err
	}
	key, err := s.boundaryNear(d, mid)
	if err != nil || key == nil {
		return left, right, err
	}
	return s.Split(ctx, key)
}
