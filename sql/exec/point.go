package exec

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// The point-read fast path (issue 22): a SELECT of one row by its whole
// primary key (pgbench's select-only, a prepared statement's kept plan)
// is, after planning, a Scan of one point span of the primary index with
// a chain of Projects above it. Start runs such a plan as one operator
// that sends one kv.Batch of one Scan and decodes its row, instead of
// building the general scan (buildLocking, the scan's order keys and
// stream, the distributed-planning checks, a kvStream) and Project
// operators over it: together 8% of the node's CPU per point SELECT
// (bench/README.md, issue 22, 2026-11-30 morning).
//
// Only plans whose result cannot differ take it: no row lock (FOR
// UPDATE/SHARE goes through lock.go), no filter, no hash buckets, no
// EXPLAIN ANALYZE (Stats), and not under distsql = on, which distributes
// even one row; with auto, one row lies on one tablet and runs locally
// anyway (distChainAt). The read itself is the scan's: the same Scan
// request through the statement's kv.Txn, the same RowFetcher, a resume
// span followed as kvStream follows it.
//
// The point DML fast path (issue 22): the input of a single-row UPDATE
// or DELETE by whole primary key (pgbench's `UPDATE ... SET abalance =
// abalance + $1 WHERE aid = $2`, a chain of Projects over such a Scan) is
// built by buildPointInput as this same operator instead of a scan, its
// kvStream and one operator per Project. An UPDATE's read is the one
// lockingPointScan marks (r.lockOnRead): the operator asks for the row's
// lock in the read's own batch, as the scan does (kv.Batch.LockOnRead),
// so the UPDATE still reads and locks its row in one KV batch and writes
// it in the next. The writing side is unchanged (dmlState.write, the
// constraints, secondary indexes, foreign keys, RETURNING and the row
// count are the general path's): the fast path only leaves out the
// operator tree of the read.

// pointOp reads the one row of a point span.
type pointOp struct {
	r      *runner
	span   kvpb.Span
	f      *rowenc.RowFetcher
	outPos []int
	// lock, when set, is the row span the read locks (an UPDATE's read,
	// r.lockOnRead).
	lock *kvpb.Span
	// projs, when not nil, are the Projects above the scan, compiled,
	// innermost first.
	projs [][]rowFn
	// evs, when not nil, are the projections kept compiled
	// (PointCache), evaluated with ectx.
	evs  [][]sem.Evaluator
	ectx *sem.EvalContext
	done bool
	row  []types.Datum
	// fetcher and merger hold f when it is a kept shape's copy (one
	// allocation for the operator and its fetcher).
	fetcher rowenc.RowFetcher
	merger  rowenc.RowMerger
	// read: startImplicit read the row already; readRow is it (nil: no
	// row), which the first Next returns.
	read    bool
	readRow []types.Datum
	// batch is fetch's, allocated with the operator.
	batch kv.Batch
	// key backs span's two keys, and projRow and outRow the row fetch
	// projects to the plan's columns and the last level of projections
	// it evaluates, when they fit: three of the objects of every point
	// read (TestImplicitPointAllocs). The operator serves one statement
	// and returns one row, so nothing it returned is overwritten.
	key             [pointKeyBuf]byte
	projRow, outRow [pointRowBuf]types.Datum
}

// pointKeyBuf and pointRowBuf size pointOp's own buffers: a span of a
// key prefix and values of up to pointKeyRoom bytes (both ends), rows of
// up to pointRowBuf columns; longer ones are allocated.
const (
	pointKeyBuf = 64
	pointRowBuf = 4
)

// startImplicit reads the row of root, which must be the point operator,
// for a statement without a transaction (Context.Implicit). The read is
// one batch the leaseholder of the row's tablet reads at its own clock:
// no uncertainty interval applies to it, since every write acknowledged
// before the batch was sent is at or below that clock (the leaseholder
// stamps a write at or below its clock and waits it out before answering:
// tablet.Replica.commitWait), and one read at one timestamp is
// serializable by itself. A plan the operator does not take (a filter, a
// lock, distsql = on, a span of more than one row) and a row longer than
// one page are refused with ErrImplicitRetry, as a second batch would be
// a second snapshot.
func startImplicit(ctx context.Context, root op) error {
	o, ok := root.(*pointOp)
	if !ok {
		return ErrImplicitRetry
	}
	row, err := o.fetch(ctx)
	if err != nil {
		return err
	}
	o.done, o.read, o.readRow = true, true, row
	return nil
}

// ImplicitPointRead reports whether p may be started without a
// transaction (Context.Implicit): a read of one row by the whole primary
// key, under Projects of columns, constants and parameters only, whose
// every output value prints without the catalog (no reg* type, which
// resolves names in the statement's transaction). It is the caller's
// filter before it decides not to open a transaction; Start still
// refuses (ErrImplicitRetry) what the point operator does not take.
// Nothing evaluated above the read may read KV or the session's
// transaction: a function could (pg_* catalog functions, nextval,
// casts to reg*), so none is allowed.
func ImplicitPointRead(p *plan.Plan) bool {
	if p == nil || p.Root == nil || !p.ReadOnly {
		return false
	}
	n := p.Root
	for {
		proj, ok := n.(*plan.Project)
		if !ok {
			break
		}
		for _, e := range proj.Exprs {
			switch e.(type) {
			case *sem.ColRef, *sem.Const, *sem.Param:
			default:
				return false
			}
		}
		n = proj.Input
	}
	scan, ok := n.(*plan.Scan)
	if !ok || scan.Lock != plan.LockNone || scan.Filter != nil || scan.Inverted != nil ||
		len(scan.Spans) != 1 || scan.Buckets != nil || scan.ShardMerge ||
		scan.Index != nil && scan.Index.ID != scan.Table.PrimaryIndex.ID {
		return false
	}
	// One row: every key column fixed (pointSpan decides with the
	// layout's key; a span of a key prefix would be refused at every
	// Start).
	sp, nkey := scan.Spans[0], len(scan.Table.PrimaryIndex.KeyColumnIDs)
	if nkey == 0 || len(sp.Start) != nkey || len(sp.End) != nkey || sp.StartExclusive || !sp.EndInclusive {
		return false
	}
	for _, c := range p.Root.Columns() {
		if !printsAlone(c.T) {
			return false
		}
	}
	return true
}

// printsAlone: a value of t is printed without the statement's catalog
// reader (types.FormatUsesContext asks for the time zone only).
func printsAlone(t *types.T) bool {
	if t == nil {
		return false
	}
	switch t.Family {
	case types.BoolFamily, types.IntFamily, types.FloatFamily, types.NumericFamily, types.StringFamily,
		types.BytesFamily, types.DateFamily, types.TimeFamily, types.TimestampFamily,
		types.TimestampTZFamily, types.IntervalFamily, types.UUIDFamily, types.JSONBFamily, types.JSONTextFamily, types.EnumFamily:
		return true
	case types.ArrayFamily:
		return printsAlone(t.Elem)
	}
	return false
}

// PointCache keeps what the point operator of a cached plan depends on
// besides its key values: the table's layout and index, the index's key
// prefix, the fetcher's column sets, the output positions and the
// compiled projections. A session keeps one with each cached plan (a
// prepared statement's kept plan, a query shape's: sql/session,
// plancache.go) and passes it in Context.Point, so that each Execute of
// the plan encodes its key into the kept prefix and reads, instead of
// building all of that again from the plan (buildPoint was 3-5% of the
// node's CPU per point SELECT: bench/README.md, issue 22, ninth session).
//
// Every plan started with a given PointCache must be instantiated from
// one cached plan (one catalog generation; the same nodes but for the
// Scan's spans): the cache checks that the table, the scan's columns and
// the projections' expressions are the ones it was filled from, and
// fills itself again when they are not. Only the shape is kept; the
// span, the row lock of an UPDATE's read, and whether the plan may take
// the fast path at all (EXPLAIN ANALYZE, distsql = on, a span of one
// row) are decided at each Start as buildPoint decides them. Not safe
// for concurrent use: one session's statements run one at a time, and
// an operator uses the kept parts only inside its one Next.
type PointCache struct {
	// root is the shape of a point read at a plan's root (a SELECT),
	// input that of a DML statement's input (buildPointInput).
	root, input *pointShape
	// insert and update are the shapes of an INSERT's and an UPDATE's
	// build (dml_keep.go).
	insert *insertShape
	update *updateShape
}

// pointShape is the part of a point operator that depends on the plan's
// shape only (PointCache).
type pointShape struct {
	// table, tableCols and projExprs identify the plan the shape was
	// made from (pointers into the cached plan, which its instantiations
	// share).
	table     *catalog.Table
	tableCols []rowenc.ColumnID
	projExprs [][]sem.Expr

	l      *rowenc.TableLayout
	idx    *rowenc.IndexLayout
	prefix []byte // the index's key prefix
	outPos []int
	fetch  *rowenc.RowFetcher // copied for each operator (RowFetcher.Copy)
	// evs are the projections' compiled expressions, innermost first;
	// nil when one of them reads outer columns or a subquery, which
	// compile binds per statement (the operator compiles them then).
	evs [][]sem.Evaluator
}

// matches reports whether sh was made from the plan whose point read is
// scan under projs.
func (sh *pointShape) matches(scan *plan.Scan, projs []*plan.Project) bool {
	if sh.table != scan.Table || len(sh.projExprs) != len(projs) || !sameSlice(sh.tableCols, scan.TableCols) {
		return false
	}
	for i, p := range projs {
		if !sameSlice(sh.projExprs[i], p.Exprs) {
			return false
		}
	}
	return true
}

// sameSlice: a and b are the same slice (one backing array, one length),
// as the instantiations of a cached plan share their nodes' slices.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// buildPointInput builds the input of a DML statement: the fast-path
// operator when it is a point read (see above), else the general one.
func (r *runner) buildPointInput(n plan.Node) (op, error) {
	var slot **pointShape
	if r.x.Point != nil {
		slot = &r.x.Point.input
	}
	o, err := r.buildPointIn(n, slot)
	if o != nil || err != nil {
		return o, err
	}
	return r.build(n)
}

// buildPoint returns the fast-path operator for root, a point Scan under
// a chain of Projects, or nil when root is not a point read it may run
// (the general path runs it then).
func (r *runner) buildPoint(root plan.Node) (op, error) {
	var slot **pointShape
	if r.x.Point != nil && root == r.p.Root {
		slot = &r.x.Point.root
	}
	return r.buildPointIn(root, slot)
}

// buildPointIn is buildPoint keeping the shape in *slot (nil: none).
func (r *runner) buildPointIn(root plan.Node, slot **pointShape) (op, error) {
	if r.x.Stats != nil || r.fragSpan != nil {
		return nil, nil
	}
	var projs []*plan.Project
	n := root
	for {
		proj, ok := n.(*plan.Project)
		if !ok {
			break
		}
		projs = append(projs, proj)
		n = proj.Input
	}
	scan, ok := n.(*plan.Scan)
	if !ok || scan.Lock != plan.LockNone || scan.Filter != nil || scan.Inverted != nil ||
		len(scan.Spans) != 1 || scan.Buckets != nil || scan.ShardMerge {
		return nil, nil
	}
	if scan.Index != nil && scan.Index.ID != scan.Table.PrimaryIndex.ID {
		return nil, nil
	}
	if distsql.FromContext(r.ctx) != nil && r.setting("distsql") == "on" {
		return nil, nil
	}
	var sh *pointShape
	if slot != nil && *slot != nil && (*slot).matches(scan, projs) {
		sh = *slot
	} else {
		var err error
		if sh, err = r.pointShapeOf(scan, projs); sh == nil || err != nil {
			return nil, err
		}
		if slot != nil {
			*slot = sh
		}
	}
	if !onePointSpan(sh, scan.Spans[0]) {
		return nil, nil
	}
	o := &pointOp{r: r, outPos: sh.outPos, ectx: &r.ev}
	span, ok, err := pointSpan(o.key[:0], sh, scan.Spans[0])
	if !ok || err != nil {
		return nil, err
	}
	o.span = span
	sh.fetch.CopyTo(&o.fetcher, &o.merger)
	o.f = &o.fetcher
	if scan == r.lockOnRead {
		// The span the UPDATE's write locks: the row key as the writer
		// makes it, from the point's key values (as buildScan does).
		l, idx := sh.l, sh.idx
		keyPos, err := tableRowPositions(l, idx.KeyColumns)
		if err != nil {
			return nil, err
		}
		row := make([]types.Datum, len(l.Columns))
		for i, p := range keyPos {
			row[p] = scan.Spans[0].Start[i]
		}
		key, err := l.PrimaryKey(nil, row)
		if err != nil {
			return nil, err
		}
		o.lock = &kvpb.Span{Key: key, EndKey: keys.PrefixEnd(key)}
	}
	if sh.evs != nil {
		o.evs = sh.evs
		return o, nil
	}
	cols := scan.Columns()
	for i := len(projs) - 1; i >= 0; i-- {
		fns := make([]rowFn, len(projs[i].Exprs))
		for j, e := range projs[i].Exprs {
			if fns[j], err = r.compile(e, cols); err != nil {
				return nil, err
			}
		}
		o.projs = append(o.projs, fns)
		cols = projs[i].Columns()
	}
	return o, nil
}

// pointShapeOf makes the shape of the point read of scan under projs, or
// returns nil when it may not take the fast path whatever its key.
func (r *runner) pointShapeOf(scan *plan.Scan, projs []*plan.Project) (*pointShape, error) {
	l, err := r.tableLayout(scan.Table)
	if err != nil {
		return nil, nil
	}
	idx := &l.Primary
	if bucketed(l, idx) {
		return nil, nil
	}
	sh := &pointShape{table: scan.Table, tableCols: scan.TableCols, l: l, idx: idx, prefix: l.IndexPrefix(nil, idx, 0)}
	sh.prefix = sh.prefix[:len(sh.prefix):len(sh.prefix)]
	if sh.outPos, err = tableRowPositions(l, scan.TableCols); err != nil {
		return nil, err
	}
	if sh.fetch, err = rowenc.NewRowFetcher(l, idx, scan.TableCols); err != nil {
		return nil, err
	}
	sh.projExprs = make([][]sem.Expr, len(projs))
	for i, p := range projs {
		sh.projExprs[i] = p.Exprs
	}
	cols := scan.Columns()
	evs := make([][]sem.Evaluator, 0, len(projs))
	for i := len(projs) - 1; i >= 0 && evs != nil; i-- {
		out := make([]sem.Evaluator, len(projs[i].Exprs))
		for j, e := range projs[i].Exprs {
			ev, ok, err := compileLocal(e, cols)
			if err != nil {
				return nil, err
			}
			if !ok {
				evs = nil
				break
			}
			out[j] = ev
		}
		if evs != nil {
			evs = append(evs, out)
		}
		cols = projs[i].Columns()
	}
	sh.evs = evs
	return sh, nil
}

// compileLocal compiles e over rows laid out as cols when it reads
// nothing but those columns (no outer column, no subquery): then the
// evaluator depends on no runner and may be kept (PointCache). ok is
// false otherwise; compile must then bind it per statement.
func compileLocal(e sem.Expr, cols []plan.Column) (sem.Evaluator, bool, error) {
	pos := make(map[sem.ColumnID]int, len(cols))
	for i, c := range cols {
		if _, dup := pos[c.ID]; !dup {
			pos[c.ID] = i
		}
	}
	local := true
	sem.Walk(e, func(e sem.Expr) bool {
		switch v := e.(type) {
		case *sem.ColRef:
			if _, ok := pos[v.ID]; !ok {
				local = false
			}
		case *sem.SubqueryRef:
			local = false
		}
		return local
	})
	if !local {
		return nil, false, nil
	}
	ev, err := sem.Compile(e, pos)
	if err != nil {
		return nil, false, fmt.Errorf("exec: compiling %s: %w", e, err)
	}
	return ev, true, nil
}

// onePointSpan reports whether sp, a span of sh's index, may be one
// row's: every key column given at both ends, both ends included. The
// values are pointSpan's to compare.
func onePointSpan(sh *pointShape, sp plan.Span) bool {
	n := len(sh.idx.KeyColumns)
	return len(sp.Start) == n && len(sp.End) == n && !sp.StartExclusive && sp.EndInclusive && n > 0
}

// pointSpan encodes the span of sp, a span of sh's index, into sh's key
// prefix, in dst's room when it has enough: ok is false unless it is one
// row's (every key column given, both ends the same values), as oneRow
// requires of indexSpans' span.
func pointSpan(dst []byte, sh *pointShape, sp plan.Span) (kvpb.Span, bool, error) {
	if !onePointSpan(sh, sp) {
		return kvpb.Span{}, false, nil
	}
	// The start key and its end in one buffer: room for both ends of a
	// key of up to pointKeyRoom bytes of values.
	if room := 2 * (len(sh.prefix) + pointKeyRoom); cap(dst) < room {
		dst = make([]byte, 0, room)
	}
	buf := append(dst[:0], sh.prefix...)
	for i, d := range sp.Start {
		var err error
		if buf, err = rowenc.EncodeKey(buf, d, sh.idx.KeyOrders[i]); err != nil {
			return kvpb.Span{}, false, fmt.Errorf("exec: span of index %q: %w", sh.idx.Name, err)
		}
	}
	start := buf[:len(buf):len(buf)]
	if &sp.End[0] != &sp.Start[0] {
		// Not the shared values of a cached plan's point span: the end
		// must encode to the same key.
		end, err := encodePrefix(sh.prefix, sh.idx, sp.End)
		if err != nil {
			return kvpb.Span{}, false, err
		}
		if !bytes.Equal(start, end) {
			return kvpb.Span{}, false, nil
		}
	}
	return kvpb.Span{Key: start, EndKey: appendPrefixEnd(buf[len(buf):], start)}, true, nil
}

// pointKeyRoom is the bytes of key values pointSpan makes room for beside
// the prefix, for both ends at once (an int8 key is 9).
const pointKeyRoom = 24

// appendPrefixEnd appends keys.PrefixEnd(p) to dst, in dst's room when it
// has enough.
func appendPrefixEnd(dst, p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			dst = append(dst, p[:i+1]...)
			dst[len(dst)-1]++
			return dst
		}
	}
	return append(dst, keys.Max...)
}

func (o *pointOp) emit(row []types.Datum) error {
	o.row = row
	return nil
}

func (o *pointOp) Next(ctx context.Context) ([]types.Datum, error) {
	if o.read {
		// Read by startImplicit.
		o.read = false
		row := o.readRow
		o.readRow = nil
		return row, nil
	}
	if o.done {
		return nil, nil
	}
	o.done = true
	return o.fetch(ctx)
}

// fetch reads the row and projects it (nil: no row).
func (o *pointOp) fetch(ctx context.Context) ([]types.Datum, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	implicit := o.r.x.Txn == nil
	span := o.span
	for {
		o.batch = kv.Batch{}
		b := &o.batch
		b.Scan(span.Key, span.EndKey, firstPage)
		if o.lock != nil {
			if implicit {
				return nil, ErrImplicitRetry // a lock needs a transaction
			}
			b.LockOnRead(o.lock.Key, o.lock.EndKey)
			o.lock = nil
		}
		var err error
		if implicit {
			err = o.r.x.Implicit.ReadImplicit(ctx, b)
		} else {
			err = o.r.x.Txn.Run(ctx, b)
		}
		if err != nil {
			return nil, err
		}
		res := &b.Results[0]
		if res.ResumeSpan != nil && implicit {
			// The next page would be another batch, read at another
			// timestamp: the row must come from one snapshot.
			return nil, ErrImplicitRetry
		}
		noteKeyOnly(ctx, o.f)
		if err := o.f.Add(res.Rows, o.emit); err != nil {
			return nil, err
		}
		if res.ResumeSpan == nil {
			break
		}
		// A row of more column entries than a page (an unpacked row of
		// very many columns): read on, as kvStream does.
		span = *res.ResumeSpan
	}
	if err := o.f.Finish(o.emit); err != nil {
		return nil, err
	}
	if o.row == nil {
		return nil, nil
	}
	row := projectInto(o.projRow[:0], o.row, o.outPos)
	o.row = nil
	levels := len(o.projs) + len(o.evs)
	for _, fns := range o.projs {
		levels--
		out := o.levelRow(levels, len(fns))
		for i, f := range fns {
			var err error
			if out[i], err = f(row); err != nil {
				return nil, err
			}
		}
		row = out
	}
	for _, evs := range o.evs {
		levels--
		out := o.levelRow(levels, len(evs))
		for i, ev := range evs {
			var err error
			if out[i], err = ev(o.ectx, row); err != nil {
				return nil, err
			}
		}
		row = out
	}
	return row, nil
}

// levelRow returns the row a level of projections of n columns writes:
// outRow for the last level (left 0) when it fits, a new one otherwise
// (a level reads the row the one before it wrote).
func (o *pointOp) levelRow(left, n int) []types.Datum {
	if left == 0 && n <= len(o.outRow) {
		return o.outRow[:n:n]
	}
	return make([]types.Datum, n)
}

func (o *pointOp) Close() {}
