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

// readBuf is the read buffer of one run during a merge; the merge order
// is as many runs as work_mem holds buffers for (PostgreSQL's tuplesort
// sizes its merge the same way), at least minMerge and at most maxMerge.
const (
	readBuf  = 32 << 10
	minMerge = 8
	maxMerge = 128
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

	rows  [][]types.Datum
	idx   []sortItem // sortMem's scratch
	bytes int64      // reserved for rows, and idx
	runs  []*File
	// Runs counts the runs written (for EXPLAIN ANALYZE and tests).
	Runs int
}

// NewSorter returns a sorter ordering by cmp, reserving memory in acc and
// spilling into scope (a nil or unspillable scope keeps everything in
// memory, bounded only by the node budget).
func NewSorter(cmp Compare, acc *mon.Account, scope *Scope) *Sorter {
	return &Sorter{cmp: cmp, acc: acc, scope: scope}
}

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
	for i, r := range s.rows {
		if err := checkCtx(ctx, i); err != nil {
			return err
		}
		if err := f.Append(r); err != nil {
			return err
		}
		s.rows[i] = nil
	}
	s.rows, s.idx = s.rows[:0], nil
	s.acc.Shrink(s.bytes)
	if err := f.Seal(); err != nil {
		return err
	}
	s.bytes = 0
	return nil
}

// sortMem sorts the rows in memory, stably: pattern-defeating quicksort
// over (row, position) pairs, ties broken by position, is several times
// faster than a stable merge sort in place (SortStableFunc's
// symmerge does O(n log² n) comparisons).
func (s *Sorter) sortMem() {
	if len(s.rows) < 2 {
		return
	}
	if cap(s.idx) < len(s.rows) {
		s.idx = make([]sortItem, len(s.rows))
	}
	items := s.idx[:len(s.rows)]
	for i, r := range s.rows {
		items[i] = sortItem{r, i}
	}
	slices.SortFunc(items, func(a, b sortItem) int {
		if c := s.cmp(a.row, b.row); c != 0 {
			return c
		}
		return a.pos - b.pos
	})
	for i := range items {
		s.rows[i] = items[i].row
		items[i].row = nil
	}
}

type sortItem struct {
	row []types.Datum
	pos int
}

// sortItemSize is what a row costs in sortMem's scratch, reserved with
// the row.
const sortItemSize = 32

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
		order = int(min(max(wm/readBuf, minMerge), maxMerge))
	}
	// Merge in passes until one merge can take every run; each pass
	// merges consecutive runs, which keeps the sort stable (invariant 3).
	for len(s.runs) > order {
		var next []*File
		for i := 0; i < len(s.runs); i += order {
			group := s.runs[i:min(i+order, len(s.runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
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
	s.rows, s.idx = nil, nil
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
}

type mergeHeap struct {
	items []mergeItem
	cmp   Compare
}

func (h *mergeHeap) Len() int { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool {
	if c := h.cmp(h.items[i].row, h.items[j].row); c != 0 {
		return c < 0
	}
	return h.items[i].run < h.items[j].run
}
func (h *mergeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(mergeItem)) }
func (h *mergeHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return it
}

func (s *Sorter) newMerge(runs []*File) (*merge, error) {
	m := &merge{cmp: s.cmp, acc: s.acc, h: mergeHeap{cmp: s.cmp}}
	// The read buffers are memory the merge holds: reserve them past
	// work_mem if need be (the merge order already fits them in it).
	m.bufs = int64(len(runs)) * readBuf
	if err := s.acc.Force(m.bufs); err != nil {
		return nil, err
	}
	for _, f := range runs {
		r, err := f.Reader(readBuf)
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
				m.h.items = append(m.h.items, mergeItem{row, i})
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
		top.row = next
		heap.Fix(&m.h, 0)
	}
	return out, nil
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
