package exec

import (
	"bytes"
	"context"
	"errors"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// mergeJoinOp is a merge join (plan.Join.Merge): both sides arrive sorted
// ascending by their equality keys (sql/opt plans it only over scans that
// read an index in that order), so one pass over each matches them, with
// no hash table and nothing on disk: what a disk that seeks (read-
// planning.txt) reads best, both tables front to back.
//
// Invariants:
//
//  1. The left side streams; of the right side only the rows of one key
//     (the group) are held, accounted in the statement's memory. The
//     output is in the left side's order.
//  2. Keys compare by their key encoding (rowenc.EncodeKey, ascending),
//     which orders as the index the sides were read from and equals
//     where SQL's = does (rowenc's invariant), the same bytes a hash join
//     hashes. A row with a NULL key matches nothing.
//  3. A side whose keys go down is an internal error (XX000), never a
//     silently wrong answer.
//  4. Inner, left, semi and anti joins; the residual condition (On past
//     the equalities) decides among a group's rows.
type mergeJoinOp struct {
	r       *runner
	n       *plan.Join
	left    op
	right   op
	on      func([]types.Datum) (bool, error)
	leftEq  []int
	rightEq []int
	rw      int
	acc     *mon.Account

	// group holds the right rows whose key is gkey (haveGroup: gkey is
	// set); next is the first right row past it and nextKey its key
	// (nil: not read yet); rightDone: the right side is exhausted.
	group      [][]types.Datum
	gkey       []byte
	haveGroup  bool
	next       []types.Datum
	nextKey    []byte
	rightDone  bool
	groupBytes int64
	// lastLeft is the last left key seen (invariant 3).
	lastLeft []byte
	haveLeft bool

	out  [][]types.Datum
	oi   int
	done bool
	comb []types.Datum
	k    int
}

func (r *runner) buildMergeJoin(n *plan.Join) (op, error) {
	switch n.Kind {
	case plan.InnerJoin, plan.LeftJoin, plan.SemiJoin, plan.AntiJoin:
	default:
		return nil, pgerror.New(pgerrcode.InternalError, "exec: merge join of kind %d", n.Kind)
	}
	lcols, rcols := n.Left.Columns(), n.Right.Columns()
	o := &mergeJoinOp{r: r, n: n, rw: len(rcols), acc: r.account()}
	var err error
	if o.leftEq, err = colPositions(lcols, n.LeftEq); err != nil {
		return nil, err
	}
	if o.rightEq, err = colPositions(rcols, n.RightEq); err != nil {
		return nil, err
	}
	if len(o.leftEq) != len(o.rightEq) || len(o.leftEq) == 0 {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: merge join with %d left and %d right keys", len(o.leftEq), len(o.rightEq))
	}
	if o.on, o.left, o.right, err = r.buildJoinInputs(n); err != nil {
		return nil, err
	}
	return o, nil
}

// mergeKey encodes row's key columns pos (invariant 2); nil for a NULL.
func mergeKey(dst []byte, row []types.Datum, pos []int) ([]byte, error) {
	if hasNull(row, pos) {
		return nil, nil
	}
	k, err := hashKey(dst[:0], row, pos)
	if k == nil {
		k = []byte{}
	}
	return k, err
}

var errMergeOrder = errors.New("merge join input out of order")

// readRight reads the next right row with a non-NULL key into next.
func (o *mergeJoinOp) readRight(ctx context.Context) error {
	for o.next == nil && !o.rightDone {
		row, err := o.right.Next(ctx)
		if err != nil {
			return err
		}
		if row == nil {
			o.rightDone = true
			return nil
		}
		key, err := mergeKey(nil, row, o.rightEq)
		if err != nil {
			return err
		}
		if key == nil {
			continue // a NULL key matches nothing
		}
		if o.nextKey != nil && bytes.Compare(key, o.nextKey) < 0 {
			return pgerror.Wrapf(errMergeOrder, pgerrcode.InternalError, "exec: merge join: right side out of order")
		}
		o.next, o.nextKey = row, key
	}
	return nil
}

// seek makes the group the right rows of the smallest key at or above
// target (none: haveGroup false, the right side exhausted).
func (o *mergeJoinOp) seek(ctx context.Context, target []byte) error {
	if o.haveGroup && bytes.Compare(o.gkey, target) >= 0 {
		return nil
	}
	o.group, o.haveGroup = o.group[:0], false
	o.acc.Shrink(o.groupBytes)
	o.groupBytes = 0
	for {
		if err := o.readRight(ctx); err != nil {
			return err
		}
		if o.next == nil {
			return nil
		}
		if bytes.Compare(o.nextKey, target) >= 0 {
			break
		}
		o.next = nil // below every left key still to come
	}
	o.gkey, o.haveGroup = o.nextKey, true
	for o.next != nil && bytes.Equal(o.nextKey, o.gkey) {
		size := rowcontainer.RowSize(o.next)
		err := o.acc.Grow(size)
		if errors.Is(err, mon.ErrWorkMem) {
			// A group is what one key matches: the join's output holds
			// it anyway, so it is held past work_mem (only the node's
			// budget refuses).
			err = o.acc.Force(size)
		}
		if err != nil {
			return err
		}
		o.groupBytes += size
		o.group = append(o.group, o.next)
		o.next = nil
		if err := o.readRight(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (o *mergeJoinOp) Next(ctx context.Context) ([]types.Datum, error) {
	for o.oi >= len(o.out) {
		if o.done {
			return nil, nil
		}
		if o.k++; o.k%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		o.out, o.oi = o.out[:0], 0
		left, err := o.left.Next(ctx)
		if err != nil {
			return nil, err
		}
		if left == nil {
			o.done = true
			return nil, nil
		}
		if err := o.join(ctx, left); err != nil {
			return nil, err
		}
	}
	row := o.out[o.oi]
	o.out[o.oi] = nil
	o.oi++
	return row, nil
}

// join matches one left row against its group and queues what it emits.
func (o *mergeJoinOp) join(ctx context.Context, left []types.Datum) error {
	key, err := mergeKey(nil, left, o.leftEq)
	if err != nil {
		return err
	}
	matched := false
	if key != nil {
		if o.haveLeft && bytes.Compare(key, o.lastLeft) < 0 {
			return pgerror.Wrapf(errMergeOrder, pgerrcode.InternalError, "exec: merge join: left side out of order")
		}
		o.lastLeft, o.haveLeft = key, true
		if err := o.seek(ctx, key); err != nil {
			return err
		}
		if o.haveGroup && bytes.Equal(o.gkey, key) {
			for _, right := range o.group {
				o.comb = append(append(o.comb[:0], left...), right...)
				ok, err := o.on(o.comb)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				matched = true
				switch o.n.Kind {
				case plan.InnerJoin, plan.LeftJoin:
					o.out = append(o.out, append([]types.Datum(nil), o.comb...))
				case plan.SemiJoin:
					o.out = append(o.out, left)
					return nil
				case plan.AntiJoin:
					return nil
				}
			}
		}
	}
	if !matched {
		switch o.n.Kind {
		case plan.LeftJoin:
			o.out = append(o.out, append(append([]types.Datum(nil), left...), nulls(o.rw)...))
		case plan.AntiJoin:
			o.out = append(o.out, left)
		}
	}
	return nil
}

func (o *mergeJoinOp) Close() {
	o.left.Close()
	o.right.Close()
	o.acc.Clear()
}
