package rowcontainer

import (
	"container/heap"
	"context"
	"errors"
	"slices"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/types"
)

// Compare orders two rows: negative, zero or positive.
type Compare func(a, b []types.Datum) int

// readBuf is the read buffer of one run during a merge, and
// minReadBuf the smallest a Sorter's merge gives a run: the merge order
// is as many runs as work_mem holds minReadBuf buffers for (PostgreSQL's
// tuplesort sizes its merge by work_mem too), at least minMerge and at
// most maxMerge (each run an open descriptor), and a merge of fewer runs
// gives each a larger buffer, up to readBuf. Small buffers cost read
// calls, a few thousand per 100 MB of runs, where a merge pass more
// costs a write, a read and a decode of every row: at 4 MB an order of
// 512 instead of 128 merges 10M rows of a window's sort (535 runs) in
// one pass instead of writing three quarters of them again.
const (
	readBuf    = 32 << 10
	minReadBuf = 8 << 10
	minMerge   = 8
	maxMerge   = 512
)

// MinRunRows is the fewest rows a run holds: a sorter under a tinier
// budget holds that many anyway (reserved past work_mem), since a run of
// one row would cost a file per row.
const MinRunRows = 64

// Sorter sorts rows, spilling sorted runs to temporary files when its
// account refuses more memory, and merging them when asked for the result.
type Sorter struct {
	cmp   Compare
	acc   *mon.Account
	scope *Scope

	key   KeyFunc // nil: none
	rows  [][]types.Datum
	keys  []rowKey   // rows' abbreviated keys, when key is set
	idx   []sortItem // sortMem's scratch
	bytes int64      // reserved for rows, and idx
	runs  []*File
	// Runs counts the runs written (for EXPLAIN ANALYZE and tests);
	// SortedRuns those of sorted input, the rest are merges of them.
	Runs, SortedRuns int
	// MergedRows counts rows written again by merges before the last.
	MergedRows int64
}

// NewSorter returns a sorter ordering by cmp, reserving memory in acc and
// spilling into scope (a nil or unspillable scope keeps everything in
// memory, bounded only by the node budget).
func NewSorter(cmp Compare, acc *mon.Account, scope *Scope) *Sorter {
	return &Sorter{cmp: cmp, acc: acc, scope: scope}
}

// SetKey makes the sorter abbreviate rows' sort keys with key
// (before the first Add): most comparisons of the in-memory sort and of
// the merge then compare two integers.
func (s *Sorter) SetKey(key KeyFunc) { s.key = key }

// Add adds a row; the sorter keeps it (the caller must not change it).
func (s *Sorter) Add(ctx context.Context, row []types.Datum) error {
	n := RowSize(row) + sortItemSize
	err := s.acc.Grow(n)
	if err != nil && len(s.rows) >= MinRunRows && s.scope.Spillable() {
		// Past work_mem, or the node is short: write what is held as a
		// run and start again with an empty memory.
		if err := s.spill(ctx); err != nil {
			return err
		}
		err = s.acc.Grow(n)
	}
	if errors.Is(err, mon.ErrWorkMem) {
		// One row larger than work_mem, or nowhere to spill: hold it
		// anyway; only the node budget can refuse now.
		err = s.acc.Force(n)
	}
	if err != nil {
		return err
	}
	s.bytes += n
	s.rows = append(s.rows, row)
	if s.key != nil {
		k, ok := s.key(row)
		s.keys = append(s.keys, rowKey{k, ok})
	}
	return nil
}

// spill sorts the rows in memory into a new run.
func (s *Sorter) spill(ctx context.Context) error {
	s.sortMem()
	f, err := s.scope.NewFile()
	if err != nil {
		return err
	}
	s.runs = append(s.runs, f)
	s.Runs++
	s.SortedRuns++
	for i, r := range s.rows {
		if err := checkCtx(ctx, i); err != nil {
			return err
		}
		if err := f.Append(r); err != nil {
			return err
		}
		s.rows[i] = nil
	}
	s.rows, s.idx, s.keys = s.rows[:0], nil, s.keys[:0]
	s.acc.Shrink(s.bytes)
	if err := f.Seal(); err != nil {
		return err
	}
	s.bytes = 0
	return nil
}

// sortMem sorts the rows in memory, stably: pattern-defeating quicksort
// over (key, position) pairs, ties broken by position, is several times
// faster than a stable merge sort in place (SortStableFunc's symmerge
// does O(n log² n) comparisons). The pairs are small (24 bytes: the
// abbreviated key and the row's position) so swaps are cheap; the rows
// are looked up only when the keys do not decide.
func (s *Sorter) sortMem() {
	if len(s.rows) < 2 {
		return
	}
	if cap(s.idx) < len(s.rows) {
		s.idx = make([]sortItem, len(s.rows))
	}
	items := s.idx[:len(s.rows)]
	for i := range s.rows {
		items[i] = sortItem{pos: i}
		if s.key != nil {
			items[i].key, items[i].ok = s.keys[i].k, s.keys[i].ok
		}
	}
	rows := s.rows
	slices.SortFunc(items, func(a, b sortItem) int {
		if a.ok && b.ok && a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		if c := s.cmp(rows[a.pos], rows[b.pos]); c != 0 {
			return c
		}
		return a.pos - b.pos
	})
	sorted := make([][]types.Datum, len(rows))
	for i := range items {
		sorted[i] = rows[items[i].pos]
	}
	clear(rows)
	s.rows = sorted
	s.keys = s.keys[:0] // the merge computes them again as it reads
}

type sortItem struct {
	key uint64
	pos int
	ok  bool
}

// sortItemSize is what a row costs besides its values: its place in
// rows and in sortMem's copy of it (24 bytes each), its sortItem (24)
// and its abbreviated key (16), reserved with the row.
const sortItemSize = 88

// Iterator returns rows one at a time: nil at the end.
type Iterator interface {
	Next(ctx context.Context) ([]types.Datum, error)
	Close()
}

// Sort ends adding and returns the rows in order. The iterator owns the
// sorter's memory and files: closing it (or the sorter) releases them.
func (s *Sorter) Sort(ctx context.Context) (Iterator, error) {
	if len(s.runs) == 0 {
		s.sortMem()
		return &memIter{s: s}, nil
	}
	if len(s.rows) > 0 {
		if err := s.spill(ctx); err != nil {
			return nil, err
		}
	}
	order := maxMerge
	if wm := s.acc.Limit(); wm > 0 {
		order = int(min(max(wm/minReadBuf, minMerge), maxMerge))
	}
	// Under a node budget with little left (a small --max-sql-memory,
	// or many statements at once), a merge of that order would be
	// refused its read buffers (53200); take an order whose buffers fit
	// in half of what the node can grant now, down to minMerge, which
	// costs more merge passes instead.
	for order > minMerge && min(order, len(s.runs)) > minMerge {
		probe := 2 * int64(min(order, len(s.runs))) * minReadBuf
		if err := s.acc.Force(probe); err == nil {
			s.acc.Shrink(probe)
			break
		}
		order /= 2
	}
	order = max(order, minMerge)
	// Merge in passes until one merge can take every run, merging only
	// as many runs as needed to bring their number down to the order
	// (with 300 runs and order 128, 128 runs and then 46, not all 300:
	// the rest is read once, by the final merge). Groups are consecutive
	// runs, which keeps the sort stable (invariant 3), and each merge
	// holds at most order files open.
	for len(s.runs) > order {
		var next []*File
		excess := len(s.runs) - order
		for i := 0; i < len(s.runs); {
			g := min(order, excess+1, len(s.runs)-i)
			group := s.runs[i : i+g]
			i += g
			if g == 1 {
				next = append(next, group[0])
				continue
			}
			excess -= g - 1
			m, err := s.newMerge(group)
			if err != nil {
				return nil, err
			}
			f, err := s.scope.NewFile()
			if err != nil {
				m.Close()
				return nil, err
			}
			s.Runs++
			for k := 0; ; k++ {
				row, err := m.Next(ctx)
				if err == nil && row != nil {
					err = f.Append(row)
					s.MergedRows++
				}
				if err != nil {
					m.Close()
					f.Close()
					return nil, err
				}
				if row == nil {
					break
				}
			}
			m.Close()
			for _, g := range group {
				g.Close()
			}
			next = append(next, f)
		}
		s.runs = next
	}
	m, err := s.newMerge(s.runs)
	if err != nil {
		return nil, err
	}
	m.owner = s
	return m, nil
}

// Close releases the sorter's memory and removes its runs.
func (s *Sorter) Close() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs = nil
	s.rows, s.idx, s.keys = nil, nil, nil
	s.acc.Shrink(s.bytes)
	s.bytes = 0
}

type memIter struct {
	s *Sorter
	i int
}

func (m *memIter) Next(ctx context.Context) ([]types.Datum, error) {
	if m.i >= len(m.s.rows) {
		return nil, nil
	}
	if err := checkCtx(ctx, m.i); err != nil {
		return nil, err
	}
	r := m.s.rows[m.i]
	m.s.rows[m.i] = nil
	m.i++
	return r, nil
}

func (m *memIter) Close() { m.s.Close() }

// merge is a k-way merge of runs: a heap of each run's current row.
type merge struct {
	cmp     Compare
	key     KeyFunc
	acc     *mon.Account
	readers []*Reader
	h       mergeHeap
	started bool
	n       int
	owner   *Sorter // closed with the merge when it is the final one
	bufs    int64
}

type mergeItem struct {
	row []types.Datum
	run int
	key rowKey
}

type mergeHeap struct {
	items []mergeItem
	cmp   Compare
}

func (h *mergeHeap) Len() int           { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool { return h.less(&h.items[i], &h.items[j]) }
func (h *mergeHeap) less(a, b *mergeItem) bool {
	if c := keyCompare(h.cmp, a.row, b.row, a.key, b.key); c != 0 {
		return c < 0
	}
	return a.run < b.run
}
func (h *mergeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(mergeItem)) }
func (h *mergeHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return it
}

func (s *Sorter) newMerge(runs []*File) (*merge, error) {
	m := &merge{cmp: s.cmp, key: s.key, acc: s.acc, h: mergeHeap{cmp: s.cmp}}
	// The read buffers are memory the merge holds: reserve them past
	// work_mem if need be (the merge order already fits them in it, at
	// minReadBuf each; fewer runs share work_mem in larger buffers).
	buf := int64(readBuf)
	if wm := s.acc.Limit(); wm > 0 {
		buf = min(max(wm/int64(len(runs)), minReadBuf), readBuf)
	}
	m.bufs = int64(len(runs)) * buf
	if err := s.acc.Force(m.bufs); err != nil {
		return nil, err
	}
	for _, f := range runs {
		r, err := f.Reader(int(buf))
		if err != nil {
			m.Close()
			return nil, err
		}
		m.readers = append(m.readers, r)
	}
	return m, nil
}

func (m *merge) Next(ctx context.Context) ([]types.Datum, error) {
	if !m.started {
		m.started = true
		for i, r := range m.readers {
			row, err := r.Next()
			if err != nil {
				return nil, err
			}
			if row != nil {
				m.h.items = append(m.h.items, mergeItem{row: row, run: i, key: m.keyOf(row)})
			}
		}
		heap.Init(&m.h)
	}
	if m.h.Len() == 0 {
		return nil, nil
	}
	m.n++
	if err := checkCtx(ctx, m.n); err != nil {
		return nil, err
	}
	top := &m.h.items[0]
	out := top.row
	next, err := m.readers[top.run].Next()
	if err != nil {
		return nil, err
	}
	if next == nil {
		heap.Pop(&m.h)
	} else {
		top.row, top.key = next, m.keyOf(next)
		m.h.down0()
	}
	return out, nil
}

// down0 restores the heap after its root changed: heap.Fix(h, 0) without
// the interface calls, which cost as much as the comparisons.
func (h *mergeHeap) down0() {
	items := h.items
	i := 0
	for {
		l := 2*i + 1
		if l >= len(items) {
			return
		}
		c := l
		if r := l + 1; r < len(items) && h.less(&items[r], &items[l]) {
			c = r
		}
		if !h.less(&items[c], &items[i]) {
			return
		}
		items[i], items[c] = items[c], items[i]
		i = c
	}
}

func (m *merge) keyOf(row []types.Datum) rowKey {
	if m.key == nil {
		return rowKey{}
	}
	k, ok := m.key(row)
	return rowKey{k, ok}
}

func (m *merge) Close() {
	for _, r := range m.readers {
		r.Close()
	}
	m.readers = nil
	m.h.items = nil
	m.acc.Shrink(m.bufs)
	m.bufs = 0
	if m.owner != nil {
		m.owner.Close()
		m.owner = nil
	}
}
