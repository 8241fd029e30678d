package ddl

// The backfill's sort, in parallel when the table is in several pieces:
// each of P sorters (rowcontainer.EntrySorter, with 1/P of the build's
// memory, buildMemory)
// takes whole batches of entries from the readers on a goroutine of its
// own, sorts and spills them, and at the end the P sorted streams are
// merged into the one the SSTs are cut from:
//
//	readers ──batches──▶ sorter 1 ─┐
//	               ╲              ├─▶ merge (a heap of P heads) ─▶ cutSSTs
//	                ╲─▶ sorter P ─┘
//
// This is the seed's "many smaller indexes" on one node: sorting is the
// build's serial part (with one sorter, the goroutine feeding it sets the
// pace), and P smaller sorts run on P cores at once; the merge costs
// log P comparisons an entry. P is min(backfillReaders, pieces): a table
// in one tablet (a regular table until it splits) is read by one reader
// and sorted by one sorter, as before, and a distributed table's shards
// by as many sorters as readers. Duplicate keys (a unique index's) meet
// on the merged stream as on one sorter's, so cutSSTs's check is
// unchanged.

import (
	"bytes"
	"container/heap"
	"context"
	"sync"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/rowcontainer"
)

// entrySort is the backfill's sort: one sorter fed inline (p = 1), or p
// sorters fed by goroutines of their own.
type entrySort struct {
	sorters []*rowcontainer.EntrySorter
	accs    []*mon.Account // the sorters' memory accounts, in order
	closers []func()
	// in feeds the sorters' goroutines (nil with one sorter, fed inline).
	in  chan *entryBuf
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error // the first failure of a sorter's goroutine
}

// newEntrySort returns a sort of p sorters ordering entries by key
// (abbreviated after prefix), sharing the build's memory. A sorter's
// failure cancels ctx's build through fail.
func (b *indexBuild) newEntrySort(ctx context.Context, p int, prefix []byte, fail func(error)) *entrySort {
	p = max(p, 1)
	s := &entrySort{}
	limit := b.buildLimit() / int64(p)
	for range p {
		acc := b.buildAccountOf(limit)
		var scope *rowcontainer.Scope
		if ts := b.e.x.TempStorage; ts != nil {
			scope = ts.NewScope()
		}
		so := rowcontainer.NewEntrySorter(acc, scope, prefix)
		s.sorters = append(s.sorters, so)
		s.accs = append(s.accs, acc)
		s.closers = append(s.closers, func() {
			so.Close()
			acc.Clear()
			if scope != nil {
				scope.Close()
			}
		})
	}
	if p == 1 {
		return s
	}
	s.in = make(chan *entryBuf, p)
	for _, so := range s.sorters {
		s.wg.Go(func() {
			for batch := range s.in {
				if ctx.Err() != nil {
					continue // draining after a failure
				}
				if err := addAll(ctx, so, batch); err != nil {
					s.mu.Lock()
					if s.err == nil {
						s.err = err
					}
					s.mu.Unlock()
					fail(err)
				}
			}
		})
	}
	return s
}

// addAll adds batch's entries to so (which copies them) and recycles
// batch.
func addAll(ctx context.Context, so *rowcontainer.EntrySorter, batch *entryBuf) error {
	defer batch.recycle()
	return so.AddBatch(ctx, batch.buf, batch.lens)
}

// Add hands a batch of entries to the sort, which recycles it.
func (s *entrySort) Add(ctx context.Context, batch *entryBuf) error {
	if s.in == nil {
		return addAll(ctx, s.sorters[0], batch)
	}
	select {
	case s.in <- batch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// finish ends adding: it waits for the sorters' goroutines.
func (s *entrySort) finish() error {
	if s.in == nil {
		return nil
	}
	close(s.in)
	s.wg.Wait()
	s.in = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Sort ends adding and returns the entries in key order: each sorter's
// Sort (its last in-memory sort, or its merge passes) runs on a
// goroutine of its own, and their streams are merged.
func (s *entrySort) Sort(ctx context.Context) (rowcontainer.EntryIterator, error) {
	if err := s.finish(); err != nil {
		return nil, err
	}
	its := make([]rowcontainer.EntryIterator, len(s.sorters))
	errs := make([]error, len(s.sorters))
	var wg sync.WaitGroup
	for i, so := range s.sorters {
		wg.Go(func() { its[i], errs[i] = so.Sort(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, it := range its {
				if it != nil {
					it.Close()
				}
			}
			return nil, errs[i]
		}
	}
	if len(its) == 1 {
		return its[0], nil
	}
	m := &entryMerge{its: its, last: -1}
	for i, it := range its {
		k, v, ok, err := it.Next(ctx)
		if err != nil {
			m.Close()
			return nil, err
		}
		if ok {
			m.h = append(m.h, mergeHead{key: k, value: v, from: i})
		}
	}
	heap.Init(&m.h)
	return m, nil
}

// SortedRuns is how many runs the sorters spilled.
func (s *entrySort) SortedRuns() int {
	n := 0
	for _, so := range s.sorters {
		n += so.Runs
	}
	return n
}

// MemPeak is the sum of the sorters' memory high-water marks: at least
// the most the sort held at once, at most the build's budget (each
// sorter's account is limited to its share). Read it once the sorters'
// goroutines have ended (finish).
func (s *entrySort) MemPeak() int64 {
	var n int64
	for _, a := range s.accs {
		n += a.Peak()
	}
	return n
}

// Close releases the sorters' memory and files.
func (s *entrySort) Close() {
	if s.in != nil {
		close(s.in)
		s.wg.Wait()
		s.in = nil
	}
	for _, c := range s.closers {
		c()
	}
}

// entryMerge merges sorted streams of entries (rowcontainer.
// EntryIterator). A stream is advanced only when the caller asks for the
// next entry, so the key and value Next returned stay valid until then,
// as the streams promise.
type entryMerge struct {
	its  []rowcontainer.EntryIterator
	h    mergeHeads
	last int // the stream whose head Next returned last (-1: none)
}

type mergeHead struct {
	key, value []byte
	from       int
}

type mergeHeads []mergeHead

func (h mergeHeads) Len() int           { return len(h) }
func (h mergeHeads) Less(i, j int) bool { return bytes.Compare(h[i].key, h[j].key) < 0 }
func (h mergeHeads) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeads) Push(x any)        { *h = append(*h, x.(mergeHead)) }
func (h *mergeHeads) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Next implements rowcontainer.EntryIterator.
func (m *entryMerge) Next(ctx context.Context) (key, value []byte, ok bool, err error) {
	if m.last >= 0 {
		// The head popped last time: its stream's next entry.
		k, v, ok, err := m.its[m.last].Next(ctx)
		if err != nil {
			return nil, nil, false, err
		}
		if ok {
			heap.Push(&m.h, mergeHead{key: k, value: v, from: m.last})
		}
		m.last = -1
	}
	if len(m.h) == 0 {
		return nil, nil, false, nil
	}
	top := heap.Pop(&m.h).(mergeHead)
	m.last = top.from
	return top.key, top.value, true, nil
}

// Close implements rowcontainer.EntryIterator.
func (m *entryMerge) Close() {
	for _, it := range m.its {
		it.Close()
	}
}
