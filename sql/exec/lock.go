package exec

import (
	"context"
	"errors"
	"slices"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// Row locking (SELECT ... FOR UPDATE / NO KEY UPDATE / SHARE / KEY SHARE).
//
// A locking read is a Scan, IndexJoin or LookupJoin of a table's primary
// index with Lock set. It runs as the plain read it is, reading the row's
// primary key as well, and every row it produces after its own filter is
// locked before it goes on: a kv row lock (kv.Batch.Lock) on the row's
// primary key standing for the whole row span, held until the transaction
// ends. So only the rows the query actually returns are locked, as in
// PostgreSQL, which is what makes SKIP LOCKED work as a job queue.
//
// The lock request waits for another transaction's lock or uncommitted
// write on the row (or, NOWAIT, fails with 55P03; SKIP LOCKED drops the
// row). If the row changed after the statement's snapshot it fails with a
// retryable error: under READ COMMITTED the session reruns the statement
// at a newer snapshot (holding the lock meanwhile), which is PostgreSQL's
// re-evaluation of the updated row; under REPEATABLE READ and SERIALIZABLE
// it is 40001, as in PostgreSQL.
//
// KV has exclusive locks only: FOR SHARE and FOR KEY SHARE take the same
// exclusive lock as FOR UPDATE, so two sharers of a row wait for each
// other where PostgreSQL lets them share it. Nothing is ever wrong because
// of that, some things wait longer.

// buildLocking builds n, wrapping a locking read in a lockOp.
func (r *runner) buildLocking(n plan.Node) (op, error) {
	var (
		tbl   *catalog.Table
		wait  plan.LockWaitPolicy
		width int
		cp    plan.Node
	)
	switch v := n.(type) {
	case *plan.Scan:
		if v.Lock == plan.LockNone || (v.Index != nil && v.Index.ID != v.Table.PrimaryIndex.ID) {
			return r.buildNode(n)
		}
		c := *v
		c.Cols, c.TableCols = withPrimaryKey(v.Table, v.Cols, v.TableCols)
		if v.LockWait == plan.LockWaitSkip {
			// Skipped rows must not count against a limit pushed into
			// the scan (the Limit above still applies).
			c.HardLimit = 0
		}
		tbl, wait, width, cp = v.Table, v.LockWait, len(v.Cols), &c
	case *plan.IndexJoin:
		if v.Lock == plan.LockNone {
			return r.buildNode(n)
		}
		c := *v
		c.Cols, c.TableCols = withPrimaryKey(v.Table, v.Cols, v.TableCols)
		if s, ok := v.Input.(*plan.Scan); ok && s.HardLimit > 0 && v.LockWait == plan.LockWaitSkip {
			sc := *s
			sc.HardLimit = 0
			c.Input = &sc
		}
		tbl, wait, width, cp = v.Table, v.LockWait, len(v.Cols), &c
	case *plan.LookupJoin:
		if v.Lock == plan.LockNone || v.Kind == plan.SemiJoin || v.Kind == plan.AntiJoin ||
			(v.Index != nil && v.Index.ID != v.Table.PrimaryIndex.ID) {
			return r.buildNode(n)
		}
		c := *v
		c.Cols, c.TableCols = withPrimaryKey(v.Table, v.Cols, v.TableCols)
		tbl, wait, width, cp = v.Table, v.LockWait, len(v.Input.Columns())+len(v.Cols), &c
	default:
		return r.buildNode(n)
	}
	l, err := r.tableLayout(tbl)
	if err != nil {
		return nil, err
	}
	pkPos, err := tableRowPositions(l, tbl.PrimaryIndex.KeyColumnIDs)
	if err != nil {
		return nil, err
	}
	in, err := r.buildNode(cp)
	if err != nil {
		return nil, err
	}
	return &lockOp{r: r, in: in, table: tbl, l: l, pkPos: pkPos, width: width, wait: wait}, nil
}

// withPrimaryKey returns cols and tableCols with the table's primary-key
// columns appended (hidden, under IDs no expression refers to), so the
// node's rows carry what the row lock needs after the columns it had.
func withPrimaryKey(t *catalog.Table, cols []plan.Column, tableCols []rowenc.ColumnID) ([]plan.Column, []rowenc.ColumnID) {
	cols, tableCols = slices.Clone(cols), slices.Clone(tableCols)
	for i, id := range t.PrimaryIndex.KeyColumnIDs {
		c := t.ColumnByID(id)
		cols = append(cols, plan.Column{ID: sem.ColumnID(-1 - i), Name: c.Name, T: c.Type, Hidden: true, Table: t.ID, TableCol: id})
		tableCols = append(tableCols, id)
	}
	return cols, tableCols
}

// lockOp locks each row its input produces (see the top of the file) and
// strips the primary-key columns the input added for it.
type lockOp struct {
	r     *runner
	in    op
	table *catalog.Table
	l     *rowenc.TableLayout
	// pkPos are the table-row positions of the primary-key columns,
	// which the input's rows carry from width on.
	pkPos []int
	width int
	wait  plan.LockWaitPolicy
	full  []types.Datum
}

func (o *lockOp) Next(ctx context.Context) ([]types.Datum, error) {
	for {
		row, err := o.in.Next(ctx)
		if err != nil || row == nil {
			return nil, err
		}
		pk := row[o.width:]
		if len(pk) != len(o.pkPos) {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: locking read of %q produced %d key columns, want %d", o.table.Name, len(pk), len(o.pkPos))
		}
		if types.IsNull(pk[0]) {
			// The NULL side of an outer join: no row to lock.
			return row[:o.width], nil
		}
		skipped, err := o.lock(ctx, pk)
		if err != nil {
			return nil, err
		}
		if !skipped {
			return row[:o.width], nil
		}
	}
}

// lock takes the row lock of the row whose primary key is pk.
func (o *lockOp) lock(ctx context.Context, pk []types.Datum) (skipped bool, err error) {
	if o.full == nil {
		o.full = make([]types.Datum, len(o.l.Columns))
	}
	for i := range o.full {
		o.full[i] = types.DNull
	}
	for i, p := range o.pkPos {
		o.full[p] = pk[i]
	}
	key, err := o.l.PrimaryKey(nil, o.full)
	if err != nil {
		return false, err
	}
	b := &kv.Batch{}
	if o.wait == plan.LockWaitError {
		b.WaitPolicy = kvpb.WaitError
	}
	b.Lock(key, keys.PrefixEnd(key), o.wait == plan.LockWaitSkip)
	if err := o.r.x.Txn.Run(ctx, b); err != nil {
		if wie := (*kvpb.WriteIntentError)(nil); errors.As(err, &wie) {
			return false, pgerror.New(pgerrcode.LockNotAvailable, "could not obtain lock on row in relation %q", o.table.Name)
		}
		return false, err
	}
	return b.Results[0].Skipped, nil
}

func (o *lockOp) Close() { o.in.Close() }

// lockUpdated adds to the statement's batch the row lock an UPDATE takes
// on each row it changes (PostgreSQL's FOR NO KEY UPDATE lock of an
// updated row). The writes alone would not conflict with a FOR UPDATE
// lock: an update of some columns writes only those columns' keys, and
// the lock sits on the row key.
func (s *dmlState) lockUpdated(ti *tableInfo, old, new []types.Datum) error {
	if old == nil || new == nil {
		return nil
	}
	key, err := ti.primaryKey(old)
	if err != nil {
		return err
	}
	s.batch.Lock(key, keys.PrefixEnd(key), false)
	return nil
}

// lockingPointScan returns the scan under an UPDATE of one row by its
// whole primary key (projections over a scan of one point of the primary
// index, no filter), whose read then takes the row's lock
// (kv.Batch.LockOnRead over the row's span): the span lockUpdated locks,
// so the buffered write of the row needs no round trip to lock it
// (kv.Txn.runLockingRead). PostgreSQL's UPDATE too locks the row it reads
// to change. A row that does not exist stays locked (its span) until the
// transaction ends; an INSERT of it waits for that, where PostgreSQL's
// would not.
func lockingPointScan(n *plan.Update) *plan.Scan {
	in := n.Input
	for {
		p, ok := in.(*plan.Project)
		if !ok {
			break
		}
		in = p.Input
	}
	sc, ok := in.(*plan.Scan)
	if !ok || sc.Table == nil || sc.Table.ID != n.Table.ID || sc.Lock != plan.LockNone || sc.Filter != nil || sc.Inverted != nil ||
		(sc.Index != nil && sc.Index.ID != sc.Table.PrimaryIndex.ID) || len(sc.Spans) != 1 {
		return nil
	}
	sp := sc.Spans[0]
	nk := len(sc.Table.PrimaryIndex.KeyColumnIDs)
	if sp.StartExclusive || !sp.EndInclusive || len(sp.Start) != nk || len(sp.End) != nk {
		return nil
	}
	for i := range sp.Start {
		if types.IsNull(sp.Start[i]) || types.Compare(sp.Start[i], sp.End[i]) != 0 {
			return nil
		}
	}
	return sc
}
