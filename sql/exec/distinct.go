package exec

import (
	"context"
	"errors"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/types"
)

// dedupOp passes on the first row of each key (DISTINCT, DISTINCT ON,
// UNION), in input order. It streams while the set of keys seen fits in
// work_mem. Past it, a row whose key is not in the set goes, tagged with
// its input position, to a hash partition; once the input ends, each
// partition is deduplicated the same way (recursively), its first rows
// go to a Sorter by input position, and they come out in that order, so
// spilling never changes which row of a key is kept nor the output's
// order.
type dedupOp struct {
	r     *runner
	in    op
	pos   []int
	width int
	acc   *mon.Account
	part  *partitioner

	seen  map[string]struct{}
	key   []byte
	seq   int64
	spill *partitions
	done  bool
	sort  *rowcontainer.Sorter
	out   rowcontainer.Iterator
}

func (r *runner) newDedup(in op, pos []int, width int) *dedupOp {
	return &dedupOp{r: r, in: in, pos: pos, width: width, acc: r.account(), seen: map[string]struct{}{}}
}

// keyCost is what one key of the seen set costs besides its bytes (map
// entry and string header).
const keyCost = 48

func (o *dedupOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.out != nil {
		row, err := o.out.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		return row[:o.width:o.width], nil
	}
	for k := 0; !o.done; k++ {
		row, err := nextChecked(ctx, o.in, k)
		if err != nil {
			return nil, err
		}
		if row == nil {
			o.done = true
			break
		}
		o.seq++
		if o.key, err = hashKey(o.key[:0], row, o.pos); err != nil {
			return nil, err
		}
		if _, dup := o.seen[string(o.key)]; dup {
			continue
		}
		if o.spill != nil {
			if err := o.spillRow(row); err != nil {
				return nil, err
			}
			continue
		}
		size := int64(len(o.key)) + keyCost
		err = o.acc.Grow(size)
		if err != nil && o.r.canSpill(0, len(o.seen)) {
			o.part = newPartitioner()
			if o.spill, err = o.r.newPartitions(1); err != nil {
				return nil, err
			}
			if err := o.spillRow(row); err != nil {
				return nil, err
			}
			continue
		}
		if errors.Is(err, mon.ErrWorkMem) {
			err = o.acc.Force(size)
		}
		if err != nil {
			return nil, err
		}
		o.seen[string(o.key)] = struct{}{}
		return row, nil
	}
	if o.spill == nil {
		return nil, nil
	}
	if err := o.drainSpilled(ctx); err != nil {
		return nil, err
	}
	return o.Next(ctx)
}

// spillRow writes row, tagged with its input position, to its partition.
func (o *dedupOp) spillRow(row []types.Datum) error {
	tagged := append(row[:o.width:o.width], types.DInt(o.seq))
	return o.spill.add(o.part.of(0, o.key), tagged)
}

// drainSpilled deduplicates every partition into a Sorter by input
// position and starts reading it.
func (o *dedupOp) drainSpilled(ctx context.Context) error {
	o.seen = nil
	o.acc.Clear()
	w := o.width
	o.sort = rowcontainer.NewSorter(func(a, b []types.Datum) int {
		return compareDatums(a[w], b[w], false, false)
	}, o.r.account(), o.r.tempScope())
	var queue []spillPart
	queue = appendParts(queue, o.spill)
	o.spill = nil
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		sub, err := o.dedupPart(ctx, p)
		p.f.Close()
		if err != nil {
			return err
		}
		queue = appendParts(queue, sub)
	}
	it, err := o.sort.Sort(ctx)
	if err != nil {
		return err
	}
	o.out = it
	return nil
}

func (o *dedupOp) dedupPart(ctx context.Context, p spillPart) (*partitions, error) {
	defer o.acc.Clear()
	src, err := openSource(p.f)
	if err != nil {
		return nil, err
	}
	seen := map[string]struct{}{}
	var sub *partitions
	for {
		row, err := src.Next(ctx)
		if err != nil {
			return sub, err
		}
		if row == nil {
			return sub, nil
		}
		if o.key, err = hashKey(o.key[:0], row, o.pos); err != nil {
			return sub, err
		}
		if _, dup := seen[string(o.key)]; dup {
			continue
		}
		if sub != nil {
			if err := sub.add(o.part.of(p.level, o.key), row); err != nil {
				return sub, err
			}
			continue
		}
		size := int64(len(o.key)) + keyCost
		err = o.acc.Grow(size)
		if err != nil && o.r.canSpill(p.level, len(seen)) {
			if sub, err = o.r.newPartitions(p.level + 1); err != nil {
				return nil, err
			}
			if err := sub.add(o.part.of(p.level, o.key), row); err != nil {
				return sub, err
			}
			continue
		}
		if errors.Is(err, mon.ErrWorkMem) {
			err = o.acc.Force(size)
		}
		if err != nil {
			return sub, err
		}
		seen[string(o.key)] = struct{}{}
		if err := o.sort.Add(ctx, row); err != nil {
			return sub, err
		}
	}
}

// appendParts queues ps's non-empty files and removes the empty ones.
func appendParts(queue []spillPart, ps *partitions) []spillPart {
	if ps == nil {
		return queue
	}
	for i, f := range ps.files {
		ps.files[i] = nil
		if f == nil {
			continue
		}
		// Queued partitions wait without a descriptor or buffer.
		_ = f.Seal()
		queue = append(queue, spillPart{f: f, level: ps.level})
	}
	return queue
}

func (o *dedupOp) Close() {
	o.in.Close()
	if o.spill != nil {
		o.spill.close()
	}
	if o.out != nil {
		o.out.Close()
	}
	if o.sort != nil {
		o.sort.Close()
	}
	o.seen = nil
	o.acc.Clear()
}
