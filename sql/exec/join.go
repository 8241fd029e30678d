package exec

import (
	"bytes"
	"context"
	"errors"
	"hash/maphash"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// joinOp is a hash join (with equality keys) or a nested-loop join (without)
// of a streamed left side against a materialized right side, for every join
// kind. NULL keys never match (they still come out of outer joins).
//
// A hash join whose right side outgrows work_mem becomes a grace hash
// join: both sides are split into hash partitions on disk by their keys
// (rows with NULL keys too, where they simply find no match), and each
// pair of partitions is joined in memory, split again at the next level
// (a new hash seed) when its right side is still too large. Output order
// then follows the partitions, not the left input (sql/opt assumes no
// order out of a hash join). A nested-loop join whose right side outgrows
// work_mem moves it to a rowcontainer.Buffer (on disk) and becomes a
// block nested-loop join (nlStep): a block of left rows within work_mem
// against one read of the right side, so memory stays within work_mem
// and the right side is read once per block, not per left row.
//
// A hash join's partition that cannot usefully be split again (past
// maxSpillLevel levels, or skewed: every right row of its parent went to
// it, as when all keys are equal) is joined the same way, as a block
// nested loop over its spilled sides with the keys compared row by row,
// instead of being held in memory: heavy skew costs time (the join's
// output is the product of the equal keys' rows anyway), never memory.
type joinOp struct {
	r       *runner
	n       *plan.Join
	left    op
	right   op
	on      func([]types.Datum) (bool, error)
	leftEq  []int
	rightEq []int
	lw, rw  int
	acc     *mon.Account
	part    *partitioner

	built bool
	// probe is where the left rows being joined come from: o.left, or
	// the current partition's left file; nil between partitions.
	probe   op
	rrows   [][]types.Datum
	table   *hashTable // over rrows; nil: nested loop, or no right rows
	matched []bool     // right rows some left row matched (RIGHT/FULL)
	queue   []joinPart // spilled partition pairs still to join
	out     [][]types.Datum
	oi      int
	keybuf  []byte
	comb    []types.Datum

	// Block nested loop (right side spilled): rbuf holds the right
	// rows; blk the current block of left rows (reserved in blkAcc) and
	// blkMatched which of them matched; rit reads rbuf for the block,
	// rpos is its row's position, rmatched a bitset of right rows that
	// matched (RIGHT/FULL), final the last read emitting those that did
	// not.
	rbuf       *rowcontainer.Buffer
	blk        [][]types.Datum
	blkMatched []bool
	blkAcc     *mon.Account
	rit        rowcontainer.Iterator
	rpos       int64
	rmatched   []uint64
	leftDone   bool
	final      bool
	// nlLeft is where the block nested loop's left rows come from: left,
	// or a skewed partition's left file (nlPart; nlLeftFile is removed
	// when the partition is done, and the join goes on with the queue).
	// blkKeys are the block's left keys (nil: a NULL key) when the join
	// has equality keys.
	nlLeft     op
	nlPart     bool
	nlLeftFile *rowcontainer.File
	blkKeys    [][]byte
	rkey       []byte
}

// joinPart is a pair of spilled partitions (either may be nil: no rows).
type joinPart struct {
	left, right *rowcontainer.File
	level       int
	// skewed: the split that made this pair sent it every right row of
	// its parent, so splitting it again would most likely do the same.
	skewed bool
}

func (r *runner) buildJoin(n *plan.Join) (op, error) {
	if n.Lateral {
		return r.buildLateralJoin(n)
	}
	if n.Merge {
		return r.buildMergeJoin(n)
	}
	lcols, rcols := n.Left.Columns(), n.Right.Columns()
	o := &joinOp{r: r, n: n, lw: len(lcols), rw: len(rcols), acc: r.account()}
	var err error
	if o.leftEq, err = colPositions(lcols, n.LeftEq); err != nil {
		return nil, err
	}
	if o.rightEq, err = colPositions(rcols, n.RightEq); err != nil {
		return nil, err
	}
	if len(o.leftEq) != len(o.rightEq) {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: join with %d left and %d right keys", len(o.leftEq), len(o.rightEq))
	}
	if o.on, o.left, o.right, err = r.buildJoinInputs(n); err != nil {
		return nil, err
	}
	return o, nil
}

// buildJoinInputs compiles a join's ON predicate over both sides' columns
// and builds its two inputs, the left one closed again if the right one
// fails: what the hash join and the merge join share.
func (r *runner) buildJoinInputs(n *plan.Join) (on func([]types.Datum) (bool, error), left, right op, err error) {
	both := append(append([]plan.Column{}, n.Left.Columns()...), n.Right.Columns()...)
	if on, err = r.compilePred(n.On, both); err != nil {
		return nil, nil, nil, err
	}
	if left, err = r.build(n.Left); err != nil {
		return nil, nil, nil, err
	}
	if right, err = r.build(n.Right); err != nil {
		left.Close()
		return nil, nil, nil, err
	}
	return on, left, right, nil
}

func hasNull(row []types.Datum, pos []int) bool {
	for _, p := range pos {
		if types.IsNull(row[p]) {
			return true
		}
	}
	return false
}

// rowCost is what holding one right row costs: the row and its share of
// the hash table.
func (o *joinOp) rowCost(row []types.Datum) int64 {
	return rowcontainer.RowSize(row) + 64
}

// build reads the right side into memory, or, past work_mem, splits both
// sides into partitions and queues them.
func (o *joinOp) build(ctx context.Context) error {
	o.built = true
	hashed := len(o.rightEq) > 0
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, o.right, k)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		size := o.rowCost(row)
		err = o.acc.Grow(size)
		if err != nil && hashed && o.r.canSpill(0, len(o.rrows)) {
			o.part = newPartitioner()
			return o.spill(ctx, 0, o.rrows, row, o.right, o.left)
		}
		if err != nil && !hashed && o.r.canSpill(0, len(o.rrows)) {
			o.nlLeft = o.left
			return o.spillNested(ctx, row, o.right)
		}
		if errors.Is(err, mon.ErrWorkMem) {
			err = o.acc.Force(size)
		}
		if err != nil {
			return err
		}
		o.rrows = append(o.rrows, row)
	}
	o.index()
	o.probe = o.left
	return nil
}

// spill splits a join at level into partitions of level+1: the right
// rows held (held, then pending, then the rest of right), then every
// row of left. The pairs go to the front of the queue.
//
// A right partition that will not fit in work_mem (the rows' costs,
// summed as they are written) is split again at once, before the left
// side is read (presplit), and the left rows are routed straight to the
// finest partitions: the left side, usually the larger, is written
// once, as PostgreSQL's hash join writes each batch once, instead of
// being written to a partition, read back and split again in nextPart.
//
// The files' write buffers are memory the join holds while it splits,
// reserved in its account and sized so that, with the one file it reads
// meanwhile (joinReadBuf), they fit in work_mem: a split of the right
// rows fills 16 files at a time (rightSplitBuf each), and the left rows
// fill every finest partition at once, which share what work_mem leaves
// (leftSplitBuf): 4,096 partitions (a 25M-row right side at 4 MB) hold
// 1 KiB each, not 16 KiB.
func (o *joinOp) spill(ctx context.Context, level int, held [][]types.Datum, pending []types.Datum, right, left op) error {
	o.rrows, o.table, o.matched = nil, nil, nil
	wbuf := o.rightSplitBuf()
	root := newSplitNode(o.r, level+1, spillFanout, wbuf)
	addRight := func(row []types.Datum) error {
		var err error
		if o.keybuf, err = hashKey(o.keybuf[:0], row, o.rightEq); err != nil {
			return err
		}
		return root.add(o.part.ofN(level, o.keybuf, root.ways()), row, o.rowCost(row))
	}
	for i, row := range held {
		if err := addRight(row); err != nil {
			return err
		}
		held[i] = nil
	}
	// The held rows are written (and dropped): the account holds the
	// split's buffers instead.
	o.acc.Clear()
	bufs := int64(spillFanout*wbuf + joinReadBuf)
	if err := o.acc.Force(bufs); err != nil {
		return err
	}
	if err := addRight(pending); err != nil {
		return err
	}
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, right, k)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		if err := addRight(row); err != nil {
			return err
		}
	}
	if err := o.presplit(ctx, root); err != nil {
		return err
	}
	o.acc.Shrink(bufs)
	lbuf := o.leftSplitBuf(root.leaves())
	bufs = int64(root.leaves() * lbuf)
	if err := o.acc.Force(bufs); err != nil {
		return err
	}
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, left, k)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		if o.keybuf, err = hashKey(o.keybuf[:0], row, o.leftEq); err != nil {
			return err
		}
		n, i := root, o.part.ofN(level, o.keybuf, root.ways())
		for n.sub[i] != nil {
			n = n.sub[i]
			i = o.part.ofN(n.level-1, o.keybuf, n.ways())
		}
		if n.left == nil {
			n.left = o.r.newPartitionsBuf(n.level, n.ways(), lbuf)
		}
		if err := n.left.add(i, row); err != nil {
			return err
		}
	}
	var parts []joinPart
	if err := root.pairs(&parts); err != nil {
		return err
	}
	o.acc.Shrink(bufs) // pairs sealed every file
	o.queue = append(parts, o.queue...)
	return nil
}

// joinReadBuf is the read buffer of a spilled file the join reads
// (openSource's).
const joinReadBuf = 32 << 10

// minJoinBuf is the smallest write buffer a spilling join gives a file:
// a few dozen rows per write call. Only a work_mem too small for its
// partitions (under 1 MiB for 4,096 of them) takes more than work_mem.
const minJoinBuf = 256

// rightSplitBuf is the write buffer of each file of a split of the right
// rows: 16 files are filled at a time (spill, then each presplit), which
// together take at most half of work_mem.
func (o *joinOp) rightSplitBuf() int {
	limit := o.acc.Limit()
	if limit <= 0 {
		return maxPartitionBuf
	}
	return int(min(max(limit/(2*spillFanout), minJoinBuf), maxPartitionBuf))
}

// leftSplitBuf is the write buffer of each of the leaves files the left
// rows are routed to at once: work_mem shared between them, less the
// file being read meanwhile (a split of a spilled pair reads its left
// file).
func (o *joinOp) leftSplitBuf(leaves int) int {
	limit := o.acc.Limit()
	if limit <= 0 {
		return maxPartitionBuf
	}
	return int(min(max((limit-joinReadBuf)/int64(max(leaves, 1)), minJoinBuf), maxPartitionBuf))
}

// splitNode is one split of a spilled hash join: the partitions at level
// of the right rows and of the left rows, and, for each partition split
// again by presplit, its sub-split at level+1 instead of files. A split
// of the statement's right side is spillFanout ways (its size is not
// known); presplit sizes a sub-split to its partition (subSplitWays).
type splitNode struct {
	level       int
	right, left *partitions // left: nil until a left row comes
	costs       []int64
	sub         []*splitNode
}

func newSplitNode(r *runner, level, ways, wbuf int) *splitNode {
	return &splitNode{level: level, right: r.newPartitionsBuf(level, ways, wbuf), costs: make([]int64, ways), sub: make([]*splitNode, ways)}
}

// ways is how many partitions the split makes.
func (n *splitNode) ways() int { return len(n.costs) }

// subSplitWays is how many ways presplit splits a right partition whose
// rows cost cost bytes: enough for each part to take two thirds of
// work_mem (hash partitions are not all the same size), between 2 and
// spillFanout. A fixed 16-way split of a partition a few times work_mem
// made parts of a sixth of it: at 50M x 25M rows and 4 MB, 4,096 finest
// partitions where ~1,000 do, each left file with a quarter of the write
// buffer.
func subSplitWays(cost, limit int64) int {
	return int(min(max((3*cost+2*limit-1)/(2*limit), 2), spillFanout))
}

func (n *splitNode) add(i int, row []types.Datum, cost int64) error {
	n.costs[i] += cost
	return n.right.add(i, row)
}

// skewed reports whether the split sent every right row to one
// partition (splitting it again would most likely do the same). It
// counts costs, not files: presplit replaces a partition's file by its
// sub-split.
func (n *splitNode) skewed() bool {
	parts := 0
	for _, c := range n.costs {
		if c > 0 {
			parts++
		}
	}
	return parts == 1
}

// leaves is the number of finest partitions under n: where left rows
// go.
func (n *splitNode) leaves() int {
	k := 0
	for _, sub := range n.sub {
		if sub != nil {
			k += sub.leaves()
		} else {
			k++
		}
	}
	return k
}

// presplit splits again, recursively, each right partition of n whose
// rows cost more than work_mem, while a split helps (canSpill, not
// skewed). n's files are complete: they are sealed first, so only one
// split's files hold write buffers and descriptors at a time, not every
// finest partition's.
func (o *joinOp) presplit(ctx context.Context, n *splitNode) error {
	for _, f := range n.right.files {
		if f != nil {
			if err := f.Seal(); err != nil {
				return err
			}
		}
	}
	limit := o.acc.Limit()
	if limit <= 0 || n.skewed() {
		return nil
	}
	for i, f := range n.right.files {
		if f == nil || n.costs[i] <= limit || !o.r.canSpill(n.level, int(f.Rows())) {
			continue
		}
		if err := f.Seal(); err != nil {
			return err
		}
		src, err := openSource(f)
		if err != nil {
			return err
		}
		sub := newSplitNode(o.r, n.level+1, subSplitWays(n.costs[i], limit), n.right.wbuf)
		ps := sub.right
		for {
			row, err := src.Next(ctx)
			if err == nil && row != nil {
				if o.keybuf, err = hashKey(o.keybuf[:0], row, o.rightEq); err == nil {
					err = sub.add(o.part.ofN(n.level, o.keybuf, sub.ways()), row, o.rowCost(row))
				}
			}
			if err != nil {
				src.r.Close()
				ps.close()
				return err
			}
			if row == nil {
				break
			}
		}
		src.r.Close()
		f.Close()
		n.right.files[i] = nil
		n.sub[i] = sub
		if err := o.presplit(ctx, sub); err != nil {
			return err
		}
	}
	return nil
}

// pairs appends the join's partition pairs under n, sealed, in
// partition order.
func (n *splitNode) pairs(parts *[]joinPart) error {
	skewed := n.skewed()
	for i := range n.right.files {
		if n.sub[i] != nil {
			if err := n.sub[i].pairs(parts); err != nil {
				return err
			}
			continue
		}
		p := joinPart{right: n.right.files[i], level: n.level, skewed: skewed}
		if n.left != nil {
			p.left = n.left.files[i]
		}
		for _, f := range []*rowcontainer.File{p.left, p.right} {
			if f != nil {
				if err := f.Seal(); err != nil {
					return err
				}
			}
		}
		if p.left != nil || p.right != nil {
			*parts = append(*parts, p)
		}
	}
	return nil
}

// index builds the hash table over o.rrows.
func (o *joinOp) index() {
	o.matched = make([]bool, len(o.rrows))
	if len(o.rightEq) == 0 {
		return
	}
	// A seed of its own: the partitions' hash put all of a partition's
	// keys in the same residue class.
	o.table = &hashTable{seed: maphash.MakeSeed()}
	o.keybuf = o.table.build(o.rrows, o.rightEq, o.keybuf)
}

// nextPart loads the next queued partition pair; false when none is left.
func (o *joinOp) nextPart(ctx context.Context) (bool, error) {
	for len(o.queue) > 0 {
		p := o.queue[0]
		o.queue = o.queue[1:]
		o.acc.Clear()
		o.rrows, o.table, o.matched = nil, nil, nil
		kind := o.n.Kind
		if p.left == nil && kind != plan.RightJoin && kind != plan.FullJoin ||
			p.right == nil && (kind == plan.InnerJoin || kind == plan.SemiJoin || kind == plan.RightJoin) {
			// Nothing of this pair can come out.
			closeFiles(p.left, p.right)
			continue
		}
		var right, left op = &sliceOp{}, &sliceOp{}
		var err error
		if p.right != nil {
			if right, err = openSource(p.right); err != nil {
				return false, err
			}
		}
		if p.left != nil {
			if left, err = openSource(p.left); err != nil {
				return false, err
			}
		}
		spilled := false
		for {
			row, err := right.Next(ctx)
			if err != nil {
				return false, err
			}
			if row == nil {
				break
			}
			size := o.rowCost(row)
			err = o.acc.Grow(size)
			if err != nil && !p.skewed && o.r.canSpill(p.level, len(o.rrows)) {
				if err := o.spill(ctx, p.level, o.rrows, row, right, left); err != nil {
					return false, err
				}
				spilled = true
				break
			}
			if err != nil && o.r.canSpill(0, len(o.rrows)) {
				// Splitting again would not help: a block nested loop
				// over the pair's files.
				if err := o.spillNested(ctx, row, right); err != nil {
					return false, err
				}
				o.nlLeft, o.nlPart, o.nlLeftFile = left, true, p.left
				if p.right != nil {
					p.right.Close()
				}
				return true, nil
			}
			if errors.Is(err, mon.ErrWorkMem) {
				err = o.acc.Force(size)
			}
			if err != nil {
				return false, err
			}
			o.rrows = append(o.rrows, row)
		}
		if spilled {
			// The pair now waits as sub-partitions at the queue's front.
			closeFiles(p.left, p.right)
			continue
		}
		if p.right != nil {
			p.right.Close()
		}
		o.index()
		o.probe = &fileProbe{op: left, f: p.left}
		return true, nil
	}
	return false, nil
}

func closeFiles(fs ...*rowcontainer.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// fileProbe reads a left partition and removes it when done.
type fileProbe struct {
	op
	f *rowcontainer.File
}

func (p *fileProbe) Close() {
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
}

// probeRow joins one left row, queueing its output rows: against the
// right rows whose keys equal its keys (a hash join), or every right row
// (a nested loop: no equality keys).
func (o *joinOp) probeRow(left []types.Datum) error {
	kind := o.n.Kind
	matched := false
	var c chain
	all := len(o.rightEq) == 0
	if !all && o.table != nil && !hasNull(left, o.leftEq) {
		var err error
		if o.keybuf, err = hashKey(o.keybuf[:0], left, o.leftEq); err != nil {
			return err
		}
		c = o.table.lookup(o.keybuf)
	}
	for k := 0; ; k++ {
		i := k
		if !all {
			i = c.next()
		}
		if i < 0 || i >= len(o.rrows) {
			break
		}
		o.comb = append(append(o.comb[:0], left...), o.rrows[i]...)
		ok, err := o.on(o.comb)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		matched = true
		o.matched[i] = true
		switch kind {
		case plan.SemiJoin:
			o.out = append(o.out, left)
			return nil
		case plan.AntiJoin:
			return nil
		}
		o.out = append(o.out, append([]types.Datum(nil), o.comb...))
	}
	if !matched {
		switch kind {
		case plan.LeftJoin, plan.FullJoin:
			o.out = append(o.out, append(append([]types.Datum(nil), left...), nulls(o.rw)...))
		case plan.AntiJoin:
			o.out = append(o.out, left)
		}
	}
	return nil
}

func (o *joinOp) Next(ctx context.Context) ([]types.Datum, error) {
	if !o.built {
		if err := o.build(ctx); err != nil {
			return nil, err
		}
	}
	for k := 0; o.oi >= len(o.out); k++ {
		if k%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		o.out, o.oi = o.out[:0], 0
		if o.rbuf != nil {
			done, err := o.nlStep(ctx)
			if err != nil {
				return nil, err
			}
			if done && o.nlPart {
				o.endNestedPart()
				continue
			}
			if done {
				return nil, nil
			}
			continue
		}
		if o.probe == nil {
			ok, err := o.nextPart(ctx)
			if err != nil || !ok {
				return nil, err
			}
			continue
		}
		left, err := o.probe.Next(ctx)
		if err != nil {
			return nil, err
		}
		if left == nil {
			if o.n.Kind == plan.RightJoin || o.n.Kind == plan.FullJoin {
				for i, row := range o.rrows {
					if !o.matched[i] {
						o.out = append(o.out, append(nulls(o.lw), row...))
					}
				}
			}
			if o.probe != o.left {
				o.probe.Close()
			}
			o.probe = nil
			continue
		}
		if err := o.probeRow(left); err != nil {
			return nil, err
		}
	}
	row := o.out[o.oi]
	o.out[o.oi] = nil
	o.oi++
	return row, nil
}

func (o *joinOp) Close() {
	o.left.Close()
	o.right.Close()
	if o.probe != nil && o.probe != o.left {
		o.probe.Close()
	}
	for _, p := range o.queue {
		closeFiles(p.left, p.right)
	}
	o.queue = nil
	o.rrows, o.table = nil, nil
	o.acc.Clear()
	if o.rit != nil {
		o.rit.Close()
	}
	if o.rbuf != nil {
		o.rbuf.Close()
	}
	if o.nlLeftFile != nil {
		o.nlLeftFile.Close()
	}
	o.blk = nil
	if o.blkAcc != nil {
		o.blkAcc.Clear()
	}
}

// spillNested moves a nested-loop join's right side to a Buffer: the rows
// held, pending, then the rest of right.
func (o *joinOp) spillNested(ctx context.Context, pending []types.Datum, right op) error {
	o.rbuf = rowcontainer.NewBuffer(o.r.account(), o.r.tempScope())
	if o.blkAcc == nil {
		o.blkAcc = o.r.account()
	}
	o.leftDone, o.final, o.rmatched = false, false, nil
	for i, row := range o.rrows {
		if err := o.rbuf.Add(row); err != nil {
			return err
		}
		o.rrows[i] = nil
	}
	o.rrows = nil
	o.acc.Clear()
	for k := 0; pending != nil; k++ {
		if err := o.rbuf.Add(pending); err != nil {
			return err
		}
		if k%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		var err error
		if pending, err = right.Next(ctx); err != nil {
			return err
		}
	}
	return nil
}

// endNestedPart ends the block nested loop of a skewed partition: its
// files and memory go, and the join goes on with the queue.
func (o *joinOp) endNestedPart() {
	if o.rit != nil {
		o.rit.Close()
		o.rit = nil
	}
	o.rbuf.Close()
	o.rbuf = nil
	o.nlLeft.Close()
	if o.nlLeftFile != nil {
		o.nlLeftFile.Close()
	}
	o.nlLeft, o.nlPart, o.nlLeftFile = nil, false, nil
	o.blk, o.blkKeys, o.blkMatched, o.rmatched = nil, nil, nil, nil
	o.blkAcc.Clear()
	o.acc.Clear()
}

// nlStep advances the block nested loop by one right row (or one block
// boundary), queueing output in o.out; done at the end.
func (o *joinOp) nlStep(ctx context.Context) (done bool, err error) {
	kind := o.n.Kind
	if o.rit == nil {
		if o.leftDone {
			if o.final || (kind != plan.RightJoin && kind != plan.FullJoin) {
				return true, nil
			}
			// One more read of the right side: its unmatched rows.
			o.final = true
			o.rit, err = o.rbuf.Iter()
			o.rpos = 0
			return false, err
		}
		// The next block of left rows, within work_mem (at least
		// minSpillRows: a tinier budget would read the right side once
		// per row).
		o.blk, o.blkKeys = o.blk[:0], o.blkKeys[:0]
		o.blkAcc.Clear()
		for full := false; !full; {
			row, err := o.nlLeft.Next(ctx)
			if err != nil {
				return false, err
			}
			if row == nil {
				o.leftDone = true
				break
			}
			n := rowcontainer.RowSize(row)
			if err := o.blkAcc.Grow(n); err != nil {
				if !errors.Is(err, mon.ErrWorkMem) {
					return false, err
				}
				if err := o.blkAcc.Force(n); err != nil {
					return false, err
				}
				full = len(o.blk)+1 >= minSpillRows
			}
			o.blk = append(o.blk, row)
			if len(o.rightEq) > 0 {
				var key []byte
				if !hasNull(row, o.leftEq) {
					if key, err = hashKey(nil, row, o.leftEq); err != nil {
						return false, err
					}
					if err := o.blkAcc.Force(int64(len(key)) + 24); err != nil {
						return false, err
					}
				}
				o.blkKeys = append(o.blkKeys, key)
			}
		}
		if len(o.blk) == 0 {
			return false, nil
		}
		o.blkMatched = make([]bool, len(o.blk))
		o.rit, err = o.rbuf.Iter()
		o.rpos = 0
		return false, err
	}
	rrow, err := o.rit.Next(ctx)
	if err != nil {
		return false, err
	}
	if rrow == nil {
		o.rit.Close()
		o.rit = nil
		if o.final {
			return true, nil
		}
		for i, l := range o.blk {
			if o.blkMatched[i] {
				continue
			}
			switch kind {
			case plan.LeftJoin, plan.FullJoin:
				o.out = append(o.out, append(append([]types.Datum(nil), l...), nulls(o.rw)...))
			case plan.AntiJoin:
				o.out = append(o.out, l)
			}
		}
		return false, nil
	}
	pos := o.rpos
	o.rpos++
	word, bit := pos/64, uint64(1)<<(pos%64)
	if o.final {
		if word >= int64(len(o.rmatched)) || o.rmatched[word]&bit == 0 {
			o.out = append(o.out, append(nulls(o.lw), rrow...))
		}
		return false, nil
	}
	rnull := false
	if len(o.rightEq) > 0 {
		// A skewed hash partition: keys must be equal (NULL never is).
		if rnull = hasNull(rrow, o.rightEq); !rnull {
			if o.rkey, err = hashKey(o.rkey[:0], rrow, o.rightEq); err != nil {
				return false, err
			}
		}
	}
	for i, l := range o.blk {
		if o.blkMatched[i] && (kind == plan.SemiJoin || kind == plan.AntiJoin) {
			continue
		}
		if len(o.rightEq) > 0 && (rnull || o.blkKeys[i] == nil || !bytes.Equal(o.blkKeys[i], o.rkey)) {
			continue
		}
		o.comb = append(append(o.comb[:0], l...), rrow...)
		ok, err := o.on(o.comb)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		o.blkMatched[i] = true
		if kind == plan.RightJoin || kind == plan.FullJoin {
			for word >= int64(len(o.rmatched)) {
				// The bitset of right rows, reserved as it grows.
				if err := o.acc.Force(8); err != nil {
					return false, err
				}
				o.rmatched = append(o.rmatched, 0)
			}
			o.rmatched[word] |= bit
		}
		switch kind {
		case plan.SemiJoin:
			o.out = append(o.out, l)
		case plan.AntiJoin:
		default:
			o.out = append(o.out, append([]types.Datum(nil), o.comb...))
		}
	}
	return false, nil
}

// buildLateralJoin re-runs Right for every left row, with the left row's
// columns bound as outer references.
func (r *runner) buildLateralJoin(n *plan.Join) (op, error) {
	switch n.Kind {
	case plan.InnerJoin, plan.LeftJoin, plan.SemiJoin, plan.AntiJoin:
	default:
		return nil, pgerror.New(pgerrcode.FeatureNotSupported, "exec: LATERAL with a RIGHT or FULL join")
	}
	lcols, rcols := n.Left.Columns(), n.Right.Columns()
	both := append(append([]plan.Column{}, lcols...), rcols...)
	on, err := r.compilePred(n.On, both)
	if err != nil {
		return nil, err
	}
	left, err := r.build(n.Left)
	if err != nil {
		return nil, err
	}
	var out [][]types.Datum
	oi := 0
	var comb []types.Datum
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		for oi >= len(out) {
			out, oi = out[:0], 0
			lrow, err := left.Next(ctx)
			if err != nil || lrow == nil {
				return nil, err
			}
			if r.outer == nil {
				r.outer = map[sem.ColumnID]types.Datum{}
			}
			for i, c := range lcols {
				r.outer[c.ID] = lrow[i]
			}
			right, err := r.build(n.Right)
			if err != nil {
				return nil, err
			}
			matched := false
			for {
				rrow, err := right.Next(ctx)
				if err != nil {
					right.Close()
					return nil, err
				}
				if rrow == nil {
					break
				}
				comb = append(append(comb[:0], lrow...), rrow...)
				ok, err := on(comb)
				if err != nil {
					right.Close()
					return nil, err
				}
				if !ok {
					continue
				}
				matched = true
				if n.Kind == plan.SemiJoin || n.Kind == plan.AntiJoin {
					break
				}
				out = append(out, append([]types.Datum(nil), comb...))
			}
			right.Close()
			switch {
			case n.Kind == plan.SemiJoin && matched, n.Kind == plan.AntiJoin && !matched:
				out = append(out, lrow)
			case n.Kind == plan.LeftJoin && !matched:
				out = append(out, append(append([]types.Datum(nil), lrow...), nulls(len(rcols))...))
			}
		}
		row := out[oi]
		oi++
		return row, nil
	}, close: left.Close}, nil
}
