package ddl

// The backfill's SSTs, cut from several key ranges at once (issue 18):
// once the readers are done, walking every sorted entry (the merge of
// the sorter's chunks, the duplicate check, each entry's MVCC key and the
// SST writer's blocks) was one goroutine's work, a third of a 1M-row
// build's wall time with the other core idle. When the entries are many
// (cutParallelBytes), the sort hands out cutWorkers iterators over
// consecutive key ranges, chosen from a sample of the sorted chunks' keys
// (or of the spilled runs' marks: a sort that spilled writes what it
// still holds as a last run, and each range merges the runs from its
// lower bound, rowcontainer.EntrySorter.Range; in memory, a range is
// one merge of every sorter's sorted segments, rowcontainer.MergeRange),
// and each range is cut into SSTs by a goroutine of its own:
//
//	sorters ── SampleKeys ──▶ bounds b1 < b2 < ...
//	range [nil, b1) ─▶ cutSSTs ─┐
//	range [b1, b2)  ─▶ cutSSTs ─┼─▶ writers (AddSSTable) as before
//	range [bk, nil) ─▶ cutSSTs ─┘
//
// Invariants:
//
//  1. The ranges cover every entry once: a range holds the keys at or
//     above its lower bound and below its upper bound, in every sorter.
//  2. Equal keys land in one range (membership is by key alone), so the
//     unique check on adjacent keys within each range is the check on the
//     whole sorted stream.
//  3. A build whose entries are few is cut from the one merged stream as
//     before (a small index stays one SST).
//  4. A global index's tablets stay under the split size with ranges as
//     with one stream: a build of backfillSplitBytes or more splits the
//     index's tablet at each range's first key, so each range fills
//     tablets of its own, and splits those as one stream does.

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// cutWorkers is how many key ranges a large in-memory build cuts at once.
var cutWorkers = backfillReaders

// cutParallelBytes is the least entry bytes (keys and values) a build
// cuts in several ranges; below it one SST holds them (invariant 3). A
// variable so that tests can lower it.
var cutParallelBytes int64 = 8 << 20

// minRangeSSTBytes is the least entry bytes an SST cut from one of
// several ranges holds (unless its range ends first).
const minRangeSSTBytes = 8 << 20

// sampleKeysPerChunk is how many keys each sorted chunk (about 1 MiB of
// entries) gives the sample the range bounds are chosen from.
const sampleKeysPerChunk = 16

// Ranges ends adding and returns the sorted entries as iterators over
// consecutive key ranges, at most n of them (one, the merged stream,
// unless they hold at least minBytes). The caller closes every iterator;
// the sorters' memory and runs go with s.Close.
func (s *entrySort) Ranges(ctx context.Context, n int, minBytes int64) ([]rowcontainer.EntryIterator, error) {
	if err := s.finish(); err != nil {
		return nil, err
	}
	if n < 2 || s.Bytes() < minBytes {
		it, err := s.Sort(ctx)
		if err != nil {
			return nil, err
		}
		return []rowcontainer.EntryIterator{it}, nil
	}
	var sample [][]byte
	for _, so := range s.sorters {
		// A sorter that spilled writes its last run (invariant 1: every
		// entry in a run, the ranges merge the runs).
		if err := so.Finish(ctx); err != nil {
			return nil, err
		}
		sample = so.SampleKeys(sample, sampleKeysPerChunk)
	}
	if len(sample) == 0 {
		n = 1
	}
	slices.SortFunc(sample, bytes.Compare)
	var bounds [][]byte
	for i := 1; i < n; i++ {
		b := sample[i*len(sample)/n]
		if len(bounds) == 0 || bytes.Compare(bounds[len(bounds)-1], b) < 0 {
			bounds = append(bounds, b)
		}
	}
	inMemory := true
	for _, so := range s.sorters {
		inMemory = inMemory && so.InMemory()
	}
	out := make([]rowcontainer.EntryIterator, 0, len(bounds)+1)
	for i := 0; i <= len(bounds); i++ {
		var lo, hi []byte
		if i > 0 {
			lo = bounds[i-1]
		}
		if i < len(bounds) {
			hi = bounds[i]
		}
		if inMemory {
			// One merge of every sorter's sorted segments: a merge of
			// each sorter's own merge cost another comparison per entry.
			out = append(out, rowcontainer.MergeRange(s.sorters, lo, hi))
			continue
		}
		its := make([]rowcontainer.EntryIterator, len(s.sorters))
		for j, so := range s.sorters {
			its[j] = so.Range(lo, hi)
		}
		if len(its) == 1 {
			out = append(out, its[0])
			continue
		}
		m, err := mergeEntryStreams(ctx, its, s.sorters[0].Abbreviation)
		if err != nil {
			for _, it := range out {
				it.Close()
			}
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Bytes is the entries' keys and values added to the sort.
func (s *entrySort) Bytes() int64 {
	var n int64
	for _, so := range s.sorters {
		n += so.Bytes
	}
	return n
}

// mergeEntryStreams returns the merge of sorted streams its (closing it
// closes them); abbr is the sorters' abbreviation of a key
// (EntrySorter.Abbreviation).
func mergeEntryStreams(ctx context.Context, its []rowcontainer.EntryIterator, abbr func([]byte) uint64) (*streamMerge, error) {
	m := &streamMerge{its: its, heads: make([]streamHead, len(its)), abbr: abbr, last: -1}
	for i := range its {
		if err := m.advance(ctx, i); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// streamMerge merges a few sorted streams (one per sorter that spilled:
// at most backfillReaders) by looking at every head for each entry: with two or
// three streams that is one or two comparisons, of the keys'
// abbreviations first (index keys share their first bytes, which a full
// comparison walks each time), and no allocation (a container/heap
// boxes each pushed head).
type streamMerge struct {
	its   []rowcontainer.EntryIterator
	heads []streamHead
	abbr  func([]byte) uint64
	last  int // the stream whose head Next returned last (-1: none)
}

type streamHead struct {
	abbr       uint64
	key, value []byte
	live       bool
}

// advance reads stream i's next entry into its head.
func (m *streamMerge) advance(ctx context.Context, i int) error {
	k, v, ok, err := m.its[i].Next(ctx)
	if err != nil {
		return err
	}
	h := &m.heads[i]
	h.key, h.value, h.live = k, v, ok
	if ok {
		h.abbr = m.abbr(k)
	}
	return nil
}

func (h *streamHead) less(o *streamHead) bool {
	if h.abbr != o.abbr {
		return h.abbr < o.abbr
	}
	return bytes.Compare(h.key, o.key) < 0
}

// Next implements rowcontainer.EntryIterator.
func (m *streamMerge) Next(ctx context.Context) (key, value []byte, ok bool, err error) {
	if m.last >= 0 {
		// The head returned last time stays valid until now.
		if err := m.advance(ctx, m.last); err != nil {
			return nil, nil, false, err
		}
		m.last = -1
	}
	best := -1
	for i := range m.heads {
		if h := &m.heads[i]; h.live && (best < 0 || h.less(&m.heads[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil, nil, false, nil
	}
	m.last = best
	return m.heads[best].key, m.heads[best].value, true, nil
}

// Close implements rowcontainer.EntryIterator.
func (m *streamMerge) Close() {
	for _, it := range m.its {
		it.Close()
	}
}

// cutRanges cuts the SSTs of each of its (consecutive key ranges of the
// sorted entries, total bytes of keys and values in all) on a goroutine
// of its own, handing them to writes, and adds what they cut to stats.
// The first failure (a duplicate key's 23505 before the cancellation it
// causes elsewhere) is returned.
//
// The ranges end together, and the SSTs still being ingested when the
// last one is cut are the build's tail: a range's SSTs are cut at half
// the range's bytes (at least minRangeSSTBytes, at most
// backfillSSTBytes), so the first half of each is ingested while the
// second is cut.
func (b *indexBuild) cutRanges(ctx context.Context, layout *rowenc.TableLayout, its []rowcontainer.EntryIterator, total int64,
	ts hlc.Timestamp, w *sstWriters, stats *backfillStats) error {
	if len(its) == 1 {
		return b.cutSSTs(ctx, layout, its[0], ts, backfillSSTBytes, false, w, stats)
	}
	limit := min(backfillSSTBytes, max(total/int64(2*len(its)), minRangeSSTBytes))
	// A large build splits a global index's tablet at each range's
	// first key (invariant 4); a small one keeps its index in one.
	splitFirst := total >= backfillSplitBytes
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	each := make([]backfillStats, len(its))
	for i, it := range its {
		wg.Go(func() {
			if err := b.cutSSTs(ctx, layout, it, ts, limit, splitFirst && i > 0, w, &each[i]); err != nil {
				once.Do(func() { first = err; cancel(err) })
			}
		})
	}
	wg.Wait()
	for i := range each {
		stats.ssts += each[i].ssts
		stats.entries += each[i].entries
		stats.splits += each[i].splits
	}
	return first
}
