package rowcontainer

import (
	"context"
	"errors"
	"slices"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/types"
)

// TopK keeps the first k rows of a stable sort (ORDER BY ... LIMIT k):
// a bounded max-heap of at most k rows, its root the worst kept row, so
// a row that does not beat the root costs one comparison and no memory.
//
// When k rows do not fit in the account's work_mem, TopK becomes a
// Sorter (spilling runs) and its iterator stops after k rows, as
// PostgreSQL's tuplesort gives up a bounded heap that would not fit.
// Either way the rows returned are exactly the first k that a Sorter
// over the same input would return (invariant 3: ties keep input order).
type TopK struct {
	cmp   Compare
	k     int64
	acc   *mon.Account
	scope *Scope

	h     []topItem // a max-heap by (cmp, seq) once len(h) == k
	bytes int64
	seq   int64
	// s is the Sorter the rows moved to when k of them did not fit.
	s *Sorter
	// Spilled reports whether the rows moved to a (spilling) Sorter.
	Spilled bool
}

type topItem struct {
	row  []types.Datum
	seq  int64
	size int64
}

// topItemSize is what a kept row costs beyond its values.
const topItemSize = 40

// NewTopK returns a TopK keeping k rows (k >= 0) in order of cmp.
func NewTopK(cmp Compare, k int64, acc *mon.Account, scope *Scope) *TopK {
	return &TopK{cmp: cmp, k: k, acc: acc, scope: scope}
}

// after reports whether a sorts after b: a later place in the stable
// order.
func (t *TopK) after(a, b *topItem) bool {
	if c := t.cmp(a.row, b.row); c != 0 {
		return c > 0
	}
	return a.seq > b.seq
}

// Add offers a row; TopK keeps it only while it is among the first k.
func (t *TopK) Add(ctx context.Context, row []types.Datum) error {
	if t.s != nil {
		return t.s.Add(ctx, row)
	}
	if t.k == 0 {
		return nil
	}
	t.seq++
	if int64(len(t.h)) == t.k {
		// Full: the row replaces the root only if it sorts before it; a
		// tie goes to the root, which came earlier.
		if t.cmp(row, t.h[0].row) >= 0 {
			return nil
		}
		n := RowSize(row) + topItemSize
		if d := n - t.h[0].size; d > 0 {
			// The heap has k rows already: a bigger replacement is reserved
			// past work_mem if need be (k rows are what the query needs).
			if err := t.acc.Force(d); err != nil {
				return err
			}
		} else {
			t.acc.Shrink(-d)
		}
		t.bytes += n - t.h[0].size
		t.h[0] = topItem{row, t.seq, n}
		t.down(0)
		return nil
	}
	n := RowSize(row) + topItemSize
	err := t.acc.Grow(n)
	if err != nil && len(t.h) >= MinRunRows && t.scope.Spillable() {
		// k rows do not fit in work_mem: sort everything instead.
		if err := t.toSorter(ctx); err != nil {
			return err
		}
		return t.s.Add(ctx, row)
	}
	if errors.Is(err, mon.ErrWorkMem) {
		err = t.acc.Force(n)
	}
	if err != nil {
		return err
	}
	t.bytes += n
	t.h = append(t.h, topItem{row, t.seq, n})
	if int64(len(t.h)) == t.k {
		for i := len(t.h)/2 - 1; i >= 0; i-- {
			t.down(i)
		}
	}
	return nil
}

// toSorter moves the kept rows, in input order, to a Sorter (no row has
// been dropped yet: the heap was not full).
func (t *TopK) toSorter(ctx context.Context) error {
	slices.SortFunc(t.h, func(a, b topItem) int { return int(a.seq - b.seq) })
	t.s = NewSorter(t.cmp, t.acc, t.scope)
	t.Spilled = true
	h := t.h
	t.h = nil
	t.acc.Shrink(t.bytes)
	t.bytes = 0
	for i := range h {
		if err := t.s.Add(ctx, h[i].row); err != nil {
			return err
		}
		h[i].row = nil
	}
	return nil
}

func (t *TopK) down(i int) {
	h := t.h
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && t.after(&h[r], &h[l]) {
			c = r
		}
		if !t.after(&h[c], &h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// Sort ends adding and returns the kept rows in order. The iterator owns
// the TopK's memory (and the Sorter's files): closing it releases them.
func (t *TopK) Sort(ctx context.Context) (Iterator, error) {
	if t.s != nil {
		it, err := t.s.Sort(ctx)
		if err != nil {
			return nil, err
		}
		return &limitIter{it: it, left: t.k}, nil
	}
	slices.SortFunc(t.h, func(a, b topItem) int {
		if c := t.cmp(a.row, b.row); c != 0 {
			return c
		}
		return int(a.seq - b.seq)
	})
	return &topIter{t: t}, nil
}

// Close releases the TopK's memory (and its Sorter's files).
func (t *TopK) Close() {
	if t.s != nil {
		t.s.Close()
	}
	t.h = nil
	t.acc.Shrink(t.bytes)
	t.bytes = 0
}

type topIter struct {
	t *TopK
	i int
}

func (it *topIter) Next(ctx context.Context) ([]types.Datum, error) {
	if it.i >= len(it.t.h) {
		return nil, nil
	}
	if err := checkCtx(ctx, it.i); err != nil {
		return nil, err
	}
	r := it.t.h[it.i].row
	it.t.h[it.i].row = nil
	it.i++
	return r, nil
}

func (it *topIter) Close() { it.t.Close() }

// limitIter returns the first left rows of it.
type limitIter struct {
	it   Iterator
	left int64
}

func (l *limitIter) Next(ctx context.Context) ([]types.Datum, error) {
	if l.left <= 0 {
		return nil, nil
	}
	l.left--
	return l.it.Next(ctx)
}

func (l *limitIter) Close() { l.it.Close() }
