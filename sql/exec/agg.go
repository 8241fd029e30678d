package exec

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// aggSpec is one compiled aggregate call.
type aggSpec struct {
	a      *plan.Aggregate
	args   []rowFn
	filter func([]types.Datum) (bool, error)
	order  []rowFn
	keys   []sortKey // over the order values
	// buffered: ORDER BY or DISTINCT needs the group's inputs before
	// feeding the accumulator.
	buffered bool
	// collects: the accumulator keeps every input (array_agg,
	// string_agg, the JSON aggregates), so its state grows with them.
	collects bool
}

// collectingAggs are the aggregates whose state holds their inputs; what
// they hold is measured as the inputs' size (holdsOf).
var collectingAggs = map[string]bool{
	"array_agg": true, "string_agg": true, "json_agg": true, "jsonb_agg": true,
	"json_object_agg": true, "jsonb_object_agg": true,
}

// aggBaseName is an aggregate's name without its schema, lower case.
func aggBaseName(name string) string {
	name = strings.ToLower(name)
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// maxAggValue bounds what one collecting aggregate of one group holds:
// its result is one value, and a value is at most 1 GB (as in
// PostgreSQL, whose string and array builders stop there).
var maxAggValue int64 = 1 << 30

// aggInput is one row's arguments (and ORDER BY values) for a buffered
// aggregate.
type aggInput struct {
	args, order []types.Datum
}

// aggState is one aggregate's state in one group. Most aggregates
// (count, sum, min, max, ...) need only their accumulator; what buffered
// (DISTINCT, ORDER BY) and collecting aggregates need besides is in x,
// made only for them, so each of a hash table's groups holds 24 bytes an
// aggregate beside the accumulator instead of 80 (aggStateCost).
type aggState struct {
	acc builtins.Aggregate
	x   *aggExtra // nil unless the spec is buffered or collects
}

type aggExtra struct {
	buf  []aggInput
	seen map[string]struct{} // DISTINCT without ORDER BY
	// held is what a collecting accumulator holds (its inputs' size).
	held int64
	// bufBytes is what buf or seen holds; srt, once it passed the
	// group's spillAt, the inputs buffered since (spillAgg).
	bufBytes int64
	srt      *rowcontainer.Sorter
	n        int64 // inputs added to srt, their tiebreak
}

// What a group costs in a hash aggregation besides its key's bytes: the
// group (groupCost: the struct, 64 bytes, and its place in the index and
// the list of groups, about 48 for a map slot, the key's string header
// and a pointer), per value 24 (its interface and, for most values, a
// boxed word; DatumSize adds what a value holds beyond that), and per
// aggregate its aggState and accumulator (aggStateCost: 24 bytes and, for
// the common accumulators, one small object: count's is 16 bytes), plus
// aggExtraCost for a buffered or collecting one.
const (
	groupCost    = 64 + 48
	groupValCost = 24
	aggStateCost = 24 + 24
	aggExtraCost = 80
)

// groupSize is what a new group of specs keyed by key over row's values
// at gpos costs (its values are kept: groupVals; the rest of the row is
// not).
func groupSize(specs []*aggSpec, key []byte, row []types.Datum, gpos []int) int64 {
	n := int64(len(key)) + groupCost + int64(groupValCost*len(gpos))
	for _, p := range gpos {
		n += rowcontainer.DatumSize(row[p])
	}
	for _, s := range specs {
		n += aggStateCost
		if s.buffered || s.collects {
			n += aggExtraCost
		}
	}
	return n
}

type group struct {
	vals []types.Datum
	aggs []aggState
	// bytes counts what the group holds beyond its fixed size: inputs
	// buffered for ORDER BY and DISTINCT aggregates, DISTINCT's seen keys
	// and collecting accumulators' inputs, reserved by the operator
	// (Force: a group cannot spill, so only the node budget bounds it,
	// and a statement past it fails with 53200 instead of growing until
	// the node runs out of memory).
	bytes int64
	// spillAt, when positive, is the work_mem past which one buffered
	// aggregate's inputs go to a sorter that spills (spillAgg). Only an
	// aggregation holding one group at a time (no GROUP BY, or a
	// streaming one) sets it: a hash table's many groups could each hold
	// work_mem.
	spillAt int64
}

func (r *runner) compileAggs(aggs []plan.Aggregate, cols []plan.Column) ([]*aggSpec, error) {
	specs := make([]*aggSpec, len(aggs))
	for i := range aggs {
		a := &aggs[i]
		if a.Fn == nil || a.Fn.Overload.NewAggregate == nil {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: %s is not an aggregate", a.Name)
		}
		s := &aggSpec{a: a, buffered: a.Distinct || len(a.OrderBy) > 0, collects: collectingAggs[aggBaseName(a.Name)]}
		for _, e := range a.Args {
			f, err := r.compile(e, cols)
			if err != nil {
				return nil, err
			}
			s.args = append(s.args, f)
		}
		var err error
		if a.Filter != nil {
			if s.filter, err = r.compilePred(a.Filter, cols); err != nil {
				return nil, err
			}
		}
		for j, o := range a.OrderBy {
			f, err := r.compile(o.Expr, cols)
			if err != nil {
				return nil, err
			}
			s.order = append(s.order, f)
			s.keys = append(s.keys, sortKey{pos: j, desc: o.Desc, nullsFirst: o.NullsFirst})
		}
		specs[i] = s
	}
	return specs, nil
}

func (r *runner) newGroup(specs []*aggSpec, vals []types.Datum) *group {
	g := &group{vals: vals, aggs: make([]aggState, len(specs))}
	for i, s := range specs {
		g.aggs[i].acc = s.a.Fn.Overload.NewAggregate(s.a.Fn.ArgTypes)
		if s.buffered || s.collects {
			g.aggs[i].x = &aggExtra{}
		}
		if s.a.Distinct && len(s.a.OrderBy) == 0 {
			g.aggs[i].x.seen = map[string]struct{}{}
		}
	}
	return g
}

func evalAll(fns []rowFn, row []types.Datum) ([]types.Datum, error) {
	out := make([]types.Datum, len(fns))
	for i, f := range fns {
		d, err := f(row)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (r *runner) addRow(specs []*aggSpec, g *group, row []types.Datum) error {
	for i, s := range specs {
		if s.filter != nil {
			ok, err := s.filter(row)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		args, err := evalAll(s.args, row)
		if err != nil {
			return err
		}
		st := &g.aggs[i]
		if st.x != nil && st.x.seen != nil {
			k, err := hashKey(nil, args, allPositions(len(args)))
			if err != nil {
				return err
			}
			if _, dup := st.x.seen[string(k)]; dup {
				continue
			}
			if st.x.srt != nil {
				// Past spillAt the seen set stays as it is: a value not
				// in it waits in the sorter, deduplicated at finish.
				if err := r.spilledInput(s, st, args, nil); err != nil {
					return err
				}
				continue
			}
			st.x.seen[string(k)] = struct{}{}
			g.bytes += int64(len(k)) + 64
			st.x.bufBytes += int64(len(k)) + 64
			if g.spillAt > 0 && st.x.bufBytes > g.spillAt && len(st.x.seen) >= minSpillRows {
				r.spillAgg(s, st)
			}
		} else if s.buffered {
			order, err := evalAll(s.order, row)
			if err != nil {
				return err
			}
			if st.x.srt != nil {
				if err := r.spilledInput(s, st, args, order); err != nil {
					return err
				}
				continue
			}
			st.x.buf = append(st.x.buf, aggInput{args, order})
			n := rowcontainer.RowSize(args) + rowcontainer.RowSize(order)
			g.bytes += n
			st.x.bufBytes += n
			if g.spillAt > 0 && st.x.bufBytes > g.spillAt && len(st.x.buf) >= minSpillRows {
				r.spillAgg(s, st)
				for _, in := range st.x.buf {
					if err := r.spilledInput(s, st, in.args, in.order); err != nil {
						return err
					}
				}
				st.x.buf = nil
				g.bytes -= st.x.bufBytes
				st.x.bufBytes = 0
			}
			continue
		}
		if err := st.acc.Add(r.fn(), args); err != nil {
			return err
		}
		if s.collects {
			if err := st.hold(s, g, args); err != nil {
				return err
			}
		}
	}
	return nil
}

// reserveDelta reserves (Force) or releases a change of what a group
// holds. A refusal of the node budget is 53200 with a hint naming what
// could not spill: one group's state is one value being built.
func reserveDelta(acc *mon.Account, d int64, specs []*aggSpec) error {
	if d < 0 {
		acc.Shrink(-d)
		return nil
	}
	err := acc.Force(d)
	if err == nil {
		return nil // before pe, which escapes: no allocation per row
	}
	var pe *pgerror.Error
	if errors.As(err, &pe) && pe.Code == pgerrcode.OutOfMemory && pe.Hint == "" {
		name := "an aggregate"
		for _, s := range specs {
			if s.collects {
				name = s.a.Name
				break
			}
		}
		err = pe.WithHint("The state of %s for one group (array_agg, string_agg and the JSON aggregates keep their inputs) is held in memory until the group ends: it is one value and cannot spill. Raise --max-sql-memory, or aggregate smaller groups.", name)
	}
	return err
}

// spillAgg starts the sorter of a buffered aggregate whose inputs passed
// its group's spillAt: rows (ORDER BY values, arguments, tiebreak),
// ordered by the ORDER BY values, then (DISTINCT) the arguments, then
// the order they came in, so finish feeds them as the in-memory path
// does, with equal arguments adjacent for DISTINCT.
func (r *runner) spillAgg(s *aggSpec, st *aggState) {
	no, na := len(s.order), len(s.args)
	keys := append([]sortKey{}, s.keys...)
	if s.a.Distinct {
		for j := range na {
			keys = append(keys, sortKey{pos: no + j})
		}
	}
	keys = append(keys, sortKey{pos: no + na})
	st.x.srt = rowcontainer.NewSorter(func(a, b []types.Datum) int { return compareRows(keys, a, b) }, r.account(), r.tempScope())
}

// spilledInput adds one input to a spilled aggregate's sorter.
func (r *runner) spilledInput(s *aggSpec, st *aggState, args, order []types.Datum) error {
	row := make([]types.Datum, 0, len(order)+len(args)+1)
	row = append(append(append(row, order...), args...), types.DInt(st.x.n))
	st.x.n++
	return st.x.srt.Add(r.ctx, row)
}

// feedSpilled feeds a spilled aggregate's sorted inputs to its
// accumulator, skipping repeated arguments for DISTINCT.
func (r *runner) feedSpilled(s *aggSpec, st *aggState) error {
	defer func() { st.x.srt.Close(); st.x.srt = nil }()
	it, err := st.x.srt.Sort(r.ctx)
	if err != nil {
		return err
	}
	defer it.Close()
	no, na := len(s.order), len(s.args)
	var prev, key []byte
	for {
		row, err := it.Next(r.ctx)
		if err != nil || row == nil {
			return err
		}
		args := row[no : no+na]
		if s.a.Distinct {
			if key, err = hashKey(key[:0], args, allPositions(na)); err != nil {
				return err
			}
			if prev != nil && string(prev) == string(key) {
				continue
			}
			prev = append(prev[:0], key...)
		}
		if err := st.acc.Add(r.fn(), args); err != nil {
			return err
		}
		if s.collects {
			if st.x.held += rowcontainer.RowSize(args); st.x.held > maxAggValue {
				return pgerror.New(pgerrcode.ProgramLimitExceeded, "out of memory").
					WithDetail("The result of %s would exceed 1 GB.", s.a.Name)
			}
		}
	}
}

// hold counts args into a collecting accumulator's state: in the group's
// bytes, and against maxAggValue (54000 past it, as PostgreSQL's string
// and array builders refuse to grow past 1 GB).
func (st *aggState) hold(s *aggSpec, g *group, args []types.Datum) error {
	n := rowcontainer.RowSize(args)
	if st.x.held+n > maxAggValue {
		return pgerror.New(pgerrcode.ProgramLimitExceeded, "out of memory").
			WithDetail("The result of %s would exceed 1 GB (%d bytes held, %d more).", s.a.Name, st.x.held, n)
	}
	st.x.held += n
	g.bytes += n
	return nil
}

// finish feeds buffered inputs (sorted, deduplicated) and returns the
// group's output row.
func (r *runner) finish(specs []*aggSpec, g *group) ([]types.Datum, error) {
	out := append([]types.Datum(nil), g.vals...)
	for i, s := range specs {
		st := &g.aggs[i]
		if st.x == nil {
			d, err := st.acc.Result()
			if err != nil {
				return nil, err
			}
			out = append(out, d)
			continue
		}
		if st.x.srt != nil {
			if err := r.feedSpilled(s, st); err != nil {
				return nil, err
			}
		}
		if st.x.buf != nil {
			slices.SortStableFunc(st.x.buf, func(a, b aggInput) int { return compareRows(s.keys, a.order, b.order) })
			var seen map[string]struct{}
			if s.a.Distinct {
				seen = map[string]struct{}{}
			}
			for _, in := range st.x.buf {
				if seen != nil {
					k, err := hashKey(nil, in.args, allPositions(len(in.args)))
					if err != nil {
						return nil, err
					}
					if _, dup := seen[string(k)]; dup {
						continue
					}
					seen[string(k)] = struct{}{}
				}
				if err := st.acc.Add(r.fn(), in.args); err != nil {
					return nil, err
				}
				if s.collects {
					// The buffered inputs are already reserved; only
					// the 1 GB bound is checked here.
					if st.x.held += rowcontainer.RowSize(in.args); st.x.held > maxAggValue {
						return nil, pgerror.New(pgerrcode.ProgramLimitExceeded, "out of memory").
							WithDetail("The result of %s would exceed 1 GB.", s.a.Name)
					}
				}
			}
			st.x.buf = nil
		}
		d, err := st.acc.Result()
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (r *runner) buildGroupBy(n *plan.GroupBy) (op, error) {
	if o, err := r.countPushdown(n); err != nil || o != nil {
		return o, err
	}
	if !n.Ordered && len(n.GroupCols) > 0 && slices.ContainsFunc(n.Aggs, func(a plan.Aggregate) bool {
		return a.Distinct || len(a.OrderBy) > 0 || collectingAggs[aggBaseName(a.Name)]
	}) {
		// As PostgreSQL plans it: a GROUP BY with DISTINCT or ORDER BY
		// aggregates sorts its input by the group columns (a sort that
		// spills) and aggregates one group at a time, so each group's
		// buffered inputs can spill too (spillAt); hashed, every group
		// in the table could hold work_mem. The same for aggregates
		// that keep their inputs (array_agg, string_agg, the JSON
		// aggregates): their state cannot be written out, and in a hash
		// table every group's grows at once, so past the node budget
		// the statement would stop with 53200; sorted, only the group
		// being aggregated holds its inputs (one value's worth).
		order := make([]plan.Ordering, len(n.GroupCols))
		for i, c := range n.GroupCols {
			order[i] = plan.Ordering{Col: c}
		}
		c := *n
		c.Input, c.Ordered = &plan.Sort{Input: n.Input, Order: order}, true
		n = &c
	}
	in, err := r.build(n.Input)
	if err != nil {
		return nil, err
	}
	o, err := r.groupByOver(n, n.Input.Columns(), in)
	if err != nil {
		in.Close()
	}
	return o, err
}

// groupByOver is n's operator over in, whose rows are laid out as cols
// (n.Input's, or the partial rows of a distributed GROUP BY's fragments,
// distsql_plan.go).
func (r *runner) groupByOver(n *plan.GroupBy, cols []plan.Column, in op) (op, error) {
	gpos, err := colPositions(cols, n.GroupCols)
	if err != nil {
		return nil, err
	}
	specs, err := r.compileAggs(n.Aggs, cols)
	if err != nil {
		return nil, err
	}
	groupVals := func(row []types.Datum) []types.Datum {
		v := make([]types.Datum, len(gpos))
		for i, p := range gpos {
			v[i] = row[p]
		}
		return v
	}
	if n.Ordered && len(gpos) > 0 {
		return r.streamGroupBy(in, specs, gpos, groupVals, r.account()), nil
	}
	return &hashAggOp{r: r, in: in, specs: specs, gpos: gpos, groupVals: groupVals, acc: r.account()}, nil
}

// hashAggOp aggregates by hashing the group columns. Groups live in
// memory while the operator's account grants them; past work_mem, the
// rows of groups not in the table go to hash partitions on disk, and each
// partition is aggregated the same way once the table's groups are out.
// No aggregate state is ever written (PostgreSQL 13's hash aggregation
// spills the same way), so every aggregate can spill. Without spilling,
// groups come out in the order they first appeared.
type hashAggOp struct {
	r         *runner
	in        op
	specs     []*aggSpec
	gpos      []int
	groupVals func([]types.Datum) []types.Datum
	acc       *mon.Account
	part      *partitioner

	started bool
	queue   []spillPart
	out     [][]types.Datum
	oi      int
}

// spillPart is a spilled partition waiting to be processed.
type spillPart struct {
	f     *rowcontainer.File
	level int
}

func (o *hashAggOp) Next(ctx context.Context) ([]types.Datum, error) {
	for {
		if o.oi < len(o.out) {
			row := o.out[o.oi]
			o.out[o.oi] = nil
			o.oi++
			return row, nil
		}
		if !o.started {
			o.started = true
			if err := o.aggregate(ctx, o.in, 0, -1); err != nil {
				return nil, err
			}
			continue
		}
		if len(o.queue) == 0 {
			return nil, nil
		}
		p := o.queue[0]
		o.queue = o.queue[1:]
		src, err := openSource(p.f)
		if err == nil {
			err = o.aggregate(ctx, src, p.level, p.f.Rows())
		}
		p.f.Close()
		if err != nil {
			return nil, err
		}
	}
}

// aggregate aggregates the rows of src (the input at level 0, a spilled
// partition of total rows after; total < 0: not known) into o.out,
// queueing what did not fit.
func (o *hashAggOp) aggregate(ctx context.Context, src op, level int, total int64) error {
	o.acc.Clear()
	o.out, o.oi = o.out[:0], 0
	var groups []*group
	index := map[string]*group{}
	var ps *partitions
	var key []byte
	for k := 0; ; k++ {
		row, err := nextChecked(ctx, src, k)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		if key, err = hashKey(key[:0], row, o.gpos); err != nil {
			return err
		}
		g := index[string(key)]
		if g == nil {
			if ps != nil {
				if err := ps.add(o.part.ofN(level, key, len(ps.files)), row); err != nil {
					return err
				}
				continue
			}
			size := groupSize(o.specs, key, row, o.gpos)
			err := o.acc.Grow(size)
			if err != nil && len(o.gpos) > 0 && o.r.canSpill(level, len(groups)) {
				// The table is full: from now on, rows of new groups
				// wait in partitions (rows of groups in the table still
				// aggregate into them).
				if o.part == nil {
					o.part = newPartitioner()
				}
				if ps, err = o.r.newPartitionsN(level+1, hashAggFanout(total, int64(k))); err != nil {
					return err
				}
				if err := ps.add(o.part.ofN(level, key, len(ps.files)), row); err != nil {
					return err
				}
				continue
			}
			if errors.Is(err, mon.ErrWorkMem) {
				err = o.acc.Force(size)
			}
			if err != nil {
				return err
			}
			g = o.r.newGroup(o.specs, o.groupVals(row))
			if len(o.gpos) == 0 && o.r.tempScope().Spillable() {
				g.spillAt = o.acc.Limit()
			}
			index[string(key)] = g
			groups = append(groups, g)
		}
		before := g.bytes
		if err := o.r.addRow(o.specs, g, row); err != nil {
			return err
		}
		if err := reserveDelta(o.acc, g.bytes-before, o.specs); err != nil {
			return err
		}
	}
	if level == 0 && len(o.gpos) == 0 && len(groups) == 0 {
		// A scalar aggregate yields one row over an empty input.
		groups = append(groups, o.r.newGroup(o.specs, nil))
	}
	for i, g := range groups {
		row, err := o.r.finish(o.specs, g)
		if err != nil {
			return err
		}
		groups[i] = nil
		o.out = append(o.out, row)
	}
	o.queue = appendParts(o.queue, ps)
	return nil
}

// Hash aggregation's split of the rows left once its table is full.
// Every row spilled is written and read once more per level, and a split
// too fine for what is left makes files of a few rows each (a file's
// creation costs more than a thousand rows' writes), so the split is
// sized to what is left, as PostgreSQL's hash_choose_num_partitions
// does from its estimate of the groups left:
//
//   - Of the statement's input, the size is unknown: maxAggFanout, so a
//     large input needs one more level only past maxAggFanout tables'
//     worth of groups (5,000,000-odd groups at 4 MB), and the write
//     buffers of the files being filled (4 KiB each at 256 ways, outside
//     work_mem, as are every spilling operator's: partitionBuffers) stay
//     at 1 MiB.
//   - Of a spilled partition of total rows whose table filled after
//     consumed rows: the groups left are taken to arrive as densely as
//     the table's did, (total-consumed)/consumed tables' worth, plus a
//     half for error (more rows per group than so far only makes the
//     parts smaller), at least minAggFanout.
const (
	minAggFanout = 4
	maxAggFanout = 256
)

func hashAggFanout(total, consumed int64) int {
	if total < 0 || consumed <= 0 {
		return maxAggFanout
	}
	n := 1 + 3*(total-consumed)/(2*consumed)
	return int(min(max(n, minAggFanout), maxAggFanout))
}

func (o *hashAggOp) Close() {
	o.in.Close()
	for _, p := range o.queue {
		p.f.Close()
	}
	o.queue, o.out = nil, nil
	o.acc.Clear()
}

// streamGroupBy aggregates input sorted by the group columns, emitting a
// group as soon as the next one starts.
//
// What the current group holds (group.bytes) is reserved in acc and
// released when the group is emitted.
func (r *runner) streamGroupBy(in op, specs []*aggSpec, gpos []int, groupVals func([]types.Datum) []types.Datum, acc *mon.Account) op {
	var cur *group
	var curKey, key []byte
	done := false
	return &funcOp{next: func(ctx context.Context) ([]types.Datum, error) {
		for !done {
			row, err := in.Next(ctx)
			if err != nil {
				return nil, err
			}
			if row == nil {
				done = true
				break
			}
			if key, err = hashKey(key[:0], row, gpos); err != nil {
				return nil, err
			}
			var out []types.Datum
			if cur != nil && string(key) != string(curKey) {
				if out, err = r.finish(specs, cur); err != nil {
					return nil, err
				}
				cur = nil
				acc.Clear()
			}
			if cur == nil {
				cur = r.newGroup(specs, groupVals(row))
				curKey = append(curKey[:0], key...)
				if r.tempScope().Spillable() {
					cur.spillAt = acc.Limit()
				}
			}
			before := cur.bytes
			if err := r.addRow(specs, cur, row); err != nil {
				return nil, err
			}
			if err := reserveDelta(acc, cur.bytes-before, specs); err != nil {
				return nil, err
			}
			if out != nil {
				return out, nil
			}
		}
		if cur != nil {
			g := cur
			cur = nil
			defer acc.Clear()
			return r.finish(specs, g)
		}
		return nil, nil
	}, close: func() { in.Close(); acc.Clear() }}
}
