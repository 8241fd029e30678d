package rowcontainer

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"math"
	"slices"
	"unsafe"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// Compare orders two rows: negative, zero or positive.
type Compare func(a, b []types.Datum) int

// readBuf is the read buffer of one run during a merge, and
// minReadBuf the smallest a Sorter's merge gives a run: the merge order
// is as many runs as work_mem holds minReadBuf buffers and their
// readers' overhead for (PostgreSQL's tuplesort sizes its merge by
// work_mem too), at least minMerge and at most maxMerge (each run an
// open descriptor, within the statement's and node's share:
// Scope.FileShare), and a merge of fewer runs gives each a larger
// buffer, up to readBuf. Small buffers cost read calls, ~2,000 per 4 MB
// of runs at 2 KiB, where a merge pass more costs a write, a read and a
// decode of every row it merges: at 4 MB an order of 1,260 merges 50M
// rows of a window's sort (~1,240 runs) in one pass, where an order of
// 512 wrote three fifths of them again. The runs are read from the page
// cache on the machines Cairn's figures come from; on a disk that
// seeks, a larger work_mem buys larger buffers.
//
// A run being merged also holds its reader (descriptor, buffered reader,
// record buffer, the buffer's rounding to an allocation size), its row
// in the heap and a part of the merge's shared decode slab:
// readerOverhead, reserved with its buffer (invariant 1) and counted in
// the order (TestSorterMergeReservesItsReaders). The merge's readers
// share one slab (SetSlab), not one each.
const (
	readBuf        = 32 << 10
	minReadBuf     = 2 << 10
	readerOverhead = 1280
	minMerge       = 8
	maxMerge       = 2048
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
	items []sortItem // one per row: its key and position; sorted by sortMem
	bytes int64      // reserved for the rows' values (RowSize less the header)
	spare int64      // reserved ahead, for no row yet (grow)
	slots int64      // reserved for rows' and items' capacity (slotSize each)
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
	if uint64(len(s.rows)) >= math.MaxUint32 {
		// sortItem's position is 32 bits: 4G rows in memory is ~400 GB,
		// past any node budget, but say so rather than wrap.
		return pgerror.New(pgerrcode.ProgramLimitExceeded, "rowcontainer: more than %d rows to sort in memory", uint64(math.MaxUint32))
	}
	// The row's values, and room for its slot when rows is full.
	v := RowSize(row) - rowHeaderSize
	grow := s.growth()
	err := s.grow(v + grow*slotSize)
	if err != nil && grow > MinRunRows {
		// Doubling does not fit: grow by as many slots as rows of this
		// size (slots included) fit in what work_mem has left, so a run
		// is as long as work_mem holds, not a power of two; halving
		// when the node budget, not work_mem, refused.
		if lim := s.acc.Limit(); lim > 0 {
			fit := (lim - s.acc.Used() + s.spare - v) / (slotSize + v)
			grow = min(max(fit, MinRunRows), grow/2)
			err = s.grow(v + grow*slotSize)
		}
		for err != nil && grow > MinRunRows {
			grow /= 2
			err = s.grow(v + grow*slotSize)
		}
	}
	if err != nil && len(s.rows) >= MinRunRows && s.scope.Spillable() {
		// Past work_mem, or the node is short: write what is held as a
		// run and start again with an empty memory.
		if err := s.spill(ctx); err != nil {
			return err
		}
		grow = s.growth()
		err = s.grow(v + grow*slotSize)
	}
	if errors.Is(err, mon.ErrWorkMem) {
		// One row larger than work_mem, or nowhere to spill: hold it
		// anyway; only the node budget can refuse now.
		err = s.force(v + grow*slotSize)
	}
	if err != nil {
		return err
	}
	if grow > 0 {
		s.growSlots(int(grow))
	}
	s.bytes += v
	it := sortItem{pos: uint32(len(s.rows))}
	if s.key != nil {
		it.key, it.ok = s.key(row)
	}
	s.rows = append(s.rows, row)
	s.items = append(s.items, it)
	return nil
}

// grow reserves n bytes for the sorter, as Account.Grow: from what it
// reserved ahead (spare), else from its account with reserveAhead more,
// else exactly n (so a run still fills work_mem to the byte). A row at a
// time, the account and the node budget's lock are taken once per
// reserveAhead bytes, not once per row.
func (s *Sorter) grow(n int64) error {
	if n <= s.spare {
		s.spare -= n
		return nil
	}
	need := n - s.spare
	if s.acc.Grow(need+reserveAhead) == nil {
		s.spare = reserveAhead
		return nil
	}
	if err := s.acc.Grow(need); err != nil {
		return err
	}
	s.spare = 0
	return nil
}

// force is grow past work_mem, as Account.Force.
func (s *Sorter) force(n int64) error {
	if n <= s.spare {
		s.spare -= n
		return nil
	}
	if err := s.acc.Force(n - s.spare); err != nil {
		return err
	}
	s.spare = 0
	return nil
}

// reserveAhead is how much more than a row needs the sorter reserves
// when it reserves (grow): 0.4% of a 4 MB work_mem.
const reserveAhead = 16 << 10

// rowHeaderSize is the slice header RowSize counts for a row: in the
// sorter it is the row's slot in rows, counted with the slots (slotSize)
// rather than with the row.
const rowHeaderSize = 24

// slotSize is what a row's place in memory costs the sorter: its slice
// header in rows and its sortItem. The sorter reserves slots for the
// arrays' capacity, not their length, so the arrays' slack is counted
// too (invariant 1).
var slotSize = int64(unsafe.Sizeof([]types.Datum(nil)) + unsafe.Sizeof(sortItem{}))

// growth is how many slots Add must add before appending a row: none
// while rows has room, else as many as it has (doubling), at least
// MinRunRows.
func (s *Sorter) growth() int64 {
	if len(s.rows) < cap(s.rows) {
		return 0
	}
	return int64(max(cap(s.rows), MinRunRows))
}

// growSlots gives rows and items n more slots of capacity (already
// reserved by the caller).
func (s *Sorter) growSlots(n int) {
	c := cap(s.rows) + n
	s.setSlots(c)
}

// setSlots reallocates rows and items with capacity c (>= their length)
// and records the slots' reservation; the caller reserved or releases the
// difference.
func (s *Sorter) setSlots(c int) {
	rows := make([][]types.Datum, len(s.rows), c)
	copy(rows, s.rows)
	items := make([]sortItem, len(s.items), c)
	copy(items, s.items)
	s.rows, s.items = rows, items
	s.slots = int64(c) * slotSize
}

// dropSlots releases rows and items (empty) and their reservation.
func (s *Sorter) dropSlots() {
	s.rows, s.items = nil, nil
	s.acc.Shrink(s.slots)
	s.slots = 0
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
	for i, it := range s.items {
		if err := checkCtx(ctx, i); err != nil {
			return err
		}
		if err := f.Append(s.rows[it.pos]); err != nil {
			return err
		}
	}
	// rows and items keep their arrays, still reserved, for the next
	// run: a run fills about as many slots as the last one. When this
	// run left more than a quarter of them empty (rows doubled past what
	// work_mem held), the arrays are cut to the run's length, so the
	// slack does not take the next run's room.
	n := len(s.rows)
	clear(s.rows)
	s.rows, s.items = s.rows[:0], s.items[:0]
	if c := cap(s.rows); n >= MinRunRows && c-n > c/4 {
		old := s.slots
		s.setSlots(n)
		s.acc.Shrink(old - s.slots)
	}
	s.acc.Shrink(s.bytes + s.spare)
	s.bytes, s.spare = 0, 0
	if err := f.Seal(); err != nil {
		return err
	}
	return nil
}

// sortMem sorts the rows in memory, stably, by sorting their items:
// pattern-defeating quicksort over (key, position) pairs, ties broken by
// position, is several times faster than a stable merge sort in place
// (SortStableFunc's symmerge does O(n log² n) comparisons). The items are
// small (16 bytes: the abbreviated key and the row's position) so swaps
// are cheap; the rows are looked up only when the keys do not decide.
// The rows stay where they are: the sorted order is the items'.
func (s *Sorter) sortMem() {
	if len(s.items) < 2 {
		return
	}
	rows := s.rows
	slices.SortFunc(s.items, func(a, b sortItem) int {
		if a.ok && b.ok && a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		if c := s.cmp(rows[a.pos], rows[b.pos]); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
}

// sortItem is a row's place in the in-memory sort: its abbreviated key
// (ok: the key is set) and its position in rows, a uint32 so the item is
// 16 bytes.
type sortItem struct {
	key uint64
	pos uint32
	ok  bool
}

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
	s.dropSlots() // the merge needs its memory for read buffers
	order := maxMerge
	if wm := s.acc.Limit(); wm > 0 {
		order = int(min(max(wm/(minReadBuf+readerOverhead), minMerge), maxMerge))
	}
	// Under a node budget with little left (a small --max-sql-memory,
	// or many statements at once), a merge of that order would be
	// refused its read buffers (53200); take an order whose buffers fit
	// in half of what the node can grant now, down to minMerge, which
	// costs more merge passes instead.
	for order > minMerge && min(order, len(s.runs)) > minMerge {
		probe := 2 * int64(min(order, len(s.runs))) * (minReadBuf + readerOverhead)
		if err := s.acc.Force(probe); err == nil {
			s.acc.Shrink(probe)
			break
		}
		order /= 2
	}
	order = max(order, minMerge)
	// Each run merged holds a descriptor, and an early merge one more
	// for its output: take no more than the statement's and the node's
	// share (Scope.FileShare), down to two runs at a time (more passes);
	// past that, opening a run fails with 53000, not the node.
	order = int(min(int64(order), max(s.scope.FileShare()-1, 2)))
	// Merge in passes until one merge can take every run, merging only
	// as many runs as needed to bring their number down to the order
	// (with 300 runs and order 128, 128 runs and then 46, not all 300:
	// the rest is read once, by the final merge). Groups are consecutive
	// runs, which keeps the sort stable (invariant 3), and each merge
	// holds at most order files open.
	for len(s.runs) > order {
		next, err := s.mergePass(ctx, order)
		if err != nil {
			return nil, err
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

// mergePass merges consecutive runs into one, group by group, each at
// most order runs, until order runs are left, and returns the runs then.
// Each merge's output is sealed as it ends, so it holds no descriptor or
// write buffer while the next merges run. s.runs names every file the
// sorter holds throughout (a merge's output takes its group's places),
// so Close removes them all whenever this fails.
func (s *Sorter) mergePass(ctx context.Context, order int) ([]*File, error) {
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
		for {
			row, err := m.Next(ctx)
			if err == nil && row != nil {
				err = f.Append(row)
				s.MergedRows++
			}
			if err == nil && row == nil {
				err = f.Seal()
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
		// The group's files are gone: their places name the output.
		for j := i - len(group); j < i; j++ {
			s.runs[j] = f
		}
		next = append(next, f)
	}
	return next, nil
}

// Close releases the sorter's memory and removes its runs.
func (s *Sorter) Close() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs = nil
	s.dropSlots()
	s.acc.Shrink(s.bytes + s.spare)
	s.bytes, s.spare = 0, 0
}

type memIter struct {
	s *Sorter
	i int
}

func (m *memIter) Next(ctx context.Context) ([]types.Datum, error) {
	if m.i >= len(m.s.items) {
		return nil, nil
	}
	if err := checkCtx(ctx, m.i); err != nil {
		return nil, err
	}
	pos := m.s.items[m.i].pos
	r := m.s.rows[pos]
	m.s.rows[pos] = nil
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
		buf = min(max(wm/int64(len(runs))-readerOverhead, minReadBuf), readBuf)
	}
	m.bufs = int64(len(runs)) * (buf + readerOverhead)
	if err := s.acc.Force(m.bufs); err != nil {
		return nil, err
	}
	slab := new([]types.Datum)
	for _, f := range runs {
		r, err := f.Reader(int(buf))
		if err != nil {
			m.Close()
			return nil, err
		}
		r.SetSlab(slab)
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
