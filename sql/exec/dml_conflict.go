package exec

import (
	"context"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// INSERT ... ON CONFLICT. Before writing a proposed row, the arbiter
// indexes are probed for an entry with the row's key: the given arbiter,
// or, for DO NOTHING without one, the primary key and every unique index.
// The probe reads the transaction's state after flushing the statement's
// pending writes, so a row proposed earlier in the same statement is a
// conflict like any other: DO NOTHING skips the later row, and DO UPDATE
// fails with 21000 when the conflicting row is one this statement inserted
// or updated, as PostgreSQL does. A unique index that is not an arbiter
// still fails with 23505 through the RowWriter's conditional puts.

type conflictSpec struct {
	s        *dmlState
	ti       *tableInfo
	arbiters []*rowenc.IndexLayout
	update   bool
	// setPos[i] is the table position Set[i] assigns; set and where are
	// compiled over the existing row followed by the excluded row.
	setPos []int
	set    []rowFn
	where  func(row []types.Datum) (bool, error)
	// written holds the primary keys of rows this statement inserted or
	// updated (DO UPDATE only).
	written map[string]bool
}

func (r *runner) buildConflict(s *dmlState, ti *tableInfo, n *plan.Insert) (*conflictSpec, error) {
	oc := n.OnConflict
	c := &conflictSpec{s: s, ti: ti, update: !oc.DoNothing}
	if oc.Arbiter != nil {
		idx := ti.layout.Index(uint32(oc.Arbiter.ID))
		if idx == nil || !idx.Unique {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: ON CONFLICT arbiter %q is not a unique index of %q", oc.Arbiter.Name, ti.desc.Name)
		}
		c.arbiters = []*rowenc.IndexLayout{idx}
	} else if !oc.DoNothing {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: ON CONFLICT DO UPDATE without an arbiter index")
	} else {
		c.arbiters = append(c.arbiters, &ti.layout.Primary)
		for i := range ti.layout.Secondary {
			idx := &ti.layout.Secondary[i]
			if d := ti.desc.IndexByID(catalog.IndexID(idx.ID)); idx.Unique && d != nil && d.State == catalog.IndexPublic {
				c.arbiters = append(c.arbiters, idx)
			}
		}
	}
	if !c.update {
		return c, nil
	}
	ncols := len(ti.desc.Columns)
	if len(oc.ExistingCols) != ncols || len(oc.ExcludedCols) != ncols || len(oc.SetCols) != len(oc.Set) {
		return nil, pgerror.New(pgerrcode.InternalError, "exec: ON CONFLICT DO UPDATE of %q has mismatched column lists", ti.desc.Name)
	}
	cols := append(colsOf(oc.ExistingCols), colsOf(oc.ExcludedCols)...)
	for _, id := range oc.SetCols {
		p, ok := ti.pos[id]
		if !ok {
			return nil, pgerror.New(pgerrcode.InternalError, "exec: ON CONFLICT column %d is not in table %q", id, ti.desc.Name)
		}
		c.setPos = append(c.setPos, p)
	}
	var err error
	if c.set, err = r.compileAll(oc.Set, cols); err != nil {
		return nil, err
	}
	if c.where, err = r.compilePred(oc.Where, cols); err != nil {
		return nil, err
	}
	c.written = map[string]bool{}
	return c, nil
}

func (c *conflictSpec) markWritten(row []types.Datum) error {
	k, err := c.ti.primaryKey(row)
	if err != nil {
		return err
	}
	c.written[string(k)] = true
	return nil
}

// arbiterKey is the key idx's entry for row would have, or nil when row
// cannot conflict there (a NULL in a unique key, or a partial index the
// row is not in).
func (c *conflictSpec) arbiterKey(idx *rowenc.IndexLayout, row []types.Datum) ([]byte, error) {
	if idx.IsPrimary() {
		return c.ti.primaryKey(row)
	}
	if idx.Partial {
		in, err := c.ti.writer.InPartialIndex(idx, row)
		if err != nil || !in {
			return nil, err
		}
	}
	e, err := c.ti.layout.EncodeIndexEntry(idx, row)
	if err != nil || !e.Unique {
		return nil, err
	}
	return e.Key, nil
}

// handle probes the arbiters for row. done reports that the row was dealt
// with (skipped, or the conflicting row updated); otherwise the caller
// inserts it.
func (c *conflictSpec) handle(ctx context.Context, in *inserter, row []types.Datum) (done bool, err error) {
	s := c.s
	if err := s.flush(ctx); err != nil {
		return false, err
	}
	b := &kv.Batch{}
	var probed []*rowenc.IndexLayout
	for _, idx := range c.arbiters {
		k, err := c.arbiterKey(idx, row)
		if err != nil {
			return false, err
		}
		if k == nil {
			continue
		}
		b.Get(k)
		probed = append(probed, idx)
	}
	if len(probed) == 0 {
		return false, nil
	}
	if err := s.x.Txn.Run(ctx, b); err != nil {
		return false, err
	}
	hit := -1
	for i := range probed {
		if b.Results[i].Found {
			hit = i
			break
		}
	}
	if hit < 0 {
		return false, nil
	}
	if !c.update {
		return true, nil
	}
	existing, err := c.conflictingRow(ctx, probed[hit], b.Results[hit].Rows[0])
	if err != nil {
		return false, err
	}
	if existing == nil {
		return false, nil
	}
	ek, err := c.ti.primaryKey(existing)
	if err != nil {
		return false, err
	}
	if c.written[string(ek)] {
		return false, pgerror.New(pgerrcode.CardinalityViolation, "ON CONFLICT DO UPDATE command cannot affect row a second time").
			WithHint("Ensure that no rows proposed for insertion within the same command have duplicate constrained values.")
	}
	both := append(append(make([]types.Datum, 0, 2*len(row)), existing...), row...)
	ok, err := c.where(both)
	if err != nil || !ok {
		return true, err
	}
	nr := append([]types.Datum(nil), existing...)
	for i, f := range c.set {
		if nr[c.setPos[i]], err = f(both); err != nil {
			return false, err
		}
	}
	if err := in.spec.finish(s, nr); err != nil {
		return false, err
	}
	if err := s.write(ctx, c.ti, existing, nr); err != nil {
		return false, err
	}
	if err := c.markWritten(nr); err != nil {
		return false, err
	}
	if err := s.noteWrite(ctx, c.ti, existing, nr); err != nil {
		return false, err
	}
	return true, in.emit(nr)
}

// conflictingRow reads the row an arbiter entry belongs to.
func (c *conflictSpec) conflictingRow(ctx context.Context, idx *rowenc.IndexLayout, entry kvpb.KeyValue) ([]types.Datum, error) {
	rowKey := entry.Key
	if !idx.IsPrimary() {
		f, err := rowenc.NewRowFetcher(c.ti.layout, idx, nil)
		if err != nil {
			return nil, err
		}
		rows, err := f.DecodeRows([]kvpb.KeyValue{entry})
		if err != nil || len(rows) != 1 {
			return nil, err
		}
		if rowKey, err = c.ti.primaryKey(rows[0]); err != nil {
			return nil, err
		}
	}
	rows, err := c.s.fetchByPrimaryKeys(ctx, c.ti, [][]byte{rowKey})
	if err != nil {
		return nil, err
	}
	return rows[0], nil
}
