package exec

import (
	"context"
	"fmt"

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
	// touched holds the arbiter keys written since the last prefetch.
	touched map[string]bool
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
		p, ok := ti.colPos(id)
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

// probe is what the arbiters hold for one proposed row: the keys probed
// (one per arbiter, nil where the row cannot conflict), the first arbiter
// that had an entry (-1: none) and, for DO UPDATE, the conflicting row.
type probe struct {
	keys     [][]byte
	hit      int
	existing []types.Datum
}

func (c *conflictSpec) arbiterKeys(row []types.Datum) ([][]byte, error) {
	keys := make([][]byte, len(c.arbiters))
	for i, idx := range c.arbiters {
		k, err := c.arbiterKey(idx, row)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

// prefetch probes the arbiters for many rows at once: one batch of point
// reads, then one batch reading the conflicting rows (DO UPDATE). The
// results stay valid for a row as long as no write since touched its
// keys (handle checks c.touched).
func (c *conflictSpec) prefetch(ctx context.Context, rows [][]types.Datum) ([]*probe, error) {
	s := c.s
	if err := s.flush(ctx); err != nil {
		return nil, err
	}
	c.touched = map[string]bool{}
	probes := make([]*probe, len(rows))
	b := &kv.Batch{}
	type at struct{ row, arb int }
	var gets []at
	for i, row := range rows {
		keys, err := c.arbiterKeys(row)
		if err != nil {
			return nil, err
		}
		probes[i] = &probe{keys: keys, hit: -1}
		for j, k := range keys {
			if k != nil {
				b.Get(k)
				gets = append(gets, at{i, j})
			}
		}
	}
	if len(gets) == 0 {
		return probes, nil
	}
	if err := s.x.Txn.Run(ctx, b); err != nil {
		return nil, err
	}
	entries := make([]kvpb.KeyValue, len(rows))
	for g, a := range gets {
		p := probes[a.row]
		if b.Results[g].Found && p.hit < 0 {
			p.hit = a.arb
			entries[a.row] = b.Results[g].Rows[0]
		}
	}
	if !c.update {
		return probes, nil
	}
	var rowKeys [][]byte
	var owners []int
	for i, p := range probes {
		if p.hit < 0 {
			continue
		}
		k, err := c.rowKeyOf(c.arbiters[p.hit], entries[i])
		if err != nil {
			return nil, err
		}
		rowKeys = append(rowKeys, k)
		owners = append(owners, i)
	}
	existing, err := s.fetchByPrimaryKeys(ctx, c.ti, rowKeys)
	if err != nil {
		return nil, err
	}
	for j, i := range owners {
		probes[i].existing = existing[j]
	}
	return probes, nil
}

// freshProbe probes the arbiters for one row after flushing the
// statement's pending writes, so that it sees every earlier row.
func (c *conflictSpec) freshProbe(ctx context.Context, row []types.Datum) (*probe, error) {
	s := c.s
	if err := s.flush(ctx); err != nil {
		return nil, err
	}
	keys, err := c.arbiterKeys(row)
	if err != nil {
		return nil, err
	}
	p := &probe{keys: keys, hit: -1}
	b := &kv.Batch{}
	var probed []int
	for j, k := range keys {
		if k != nil {
			b.Get(k)
			probed = append(probed, j)
		}
	}
	if len(probed) == 0 {
		return p, nil
	}
	if err := s.x.Txn.Run(ctx, b); err != nil {
		return nil, err
	}
	for g, j := range probed {
		if b.Results[g].Found {
			p.hit = j
			if c.update {
				k, err := c.rowKeyOf(c.arbiters[j], b.Results[g].Rows[0])
				if err != nil {
					return nil, err
				}
				rows, err := s.fetchByPrimaryKeys(ctx, c.ti, [][]byte{k})
				if err != nil {
					return nil, err
				}
				p.existing = rows[0]
			}
			break
		}
	}
	return p, nil
}

// touch records keys written since the last prefetch.
func (c *conflictSpec) touch(keys [][]byte) {
	if c.touched == nil {
		return
	}
	for _, k := range keys {
		if k != nil {
			c.touched[string(k)] = true
		}
	}
}

func (c *conflictSpec) stale(p *probe) bool {
	for _, k := range p.keys {
		if k != nil && c.touched[string(k)] {
			return true
		}
	}
	return false
}

// handle decides row's fate from its probe (nil, or stale because an
// earlier row of the statement wrote one of its keys: probe again). done
// reports that the row was dealt with (skipped, or the conflicting row
// updated); otherwise the caller inserts it.
func (c *conflictSpec) handle(ctx context.Context, in *inserter, row []types.Datum, p *probe) (done bool, err error) {
	s := c.s
	if p == nil || c.stale(p) {
		if p, err = c.freshProbe(ctx, row); err != nil {
			return false, err
		}
	}
	if p.hit < 0 {
		c.touch(p.keys)
		return false, nil
	}
	if !c.update {
		return true, nil
	}
	existing := p.existing
	if existing == nil {
		// An entry without its row: let the insert's conditional put
		// report the duplicate.
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
	newKeys, err := c.arbiterKeys(nr)
	if err != nil {
		return false, err
	}
	oldKeys, err := c.arbiterKeys(existing)
	if err != nil {
		return false, err
	}
	c.touch(newKeys)
	c.touch(oldKeys)
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

// rowKeyOf is the primary key of the row an arbiter entry belongs to.
func (c *conflictSpec) rowKeyOf(idx *rowenc.IndexLayout, entry kvpb.KeyValue) ([]byte, error) {
	if idx.IsPrimary() {
		return entry.Key, nil
	}
	f, err := rowenc.NewRowFetcher(c.ti.layout, idx, nil)
	if err != nil {
		return nil, err
	}
	rows, err := f.DecodeRows([]kvpb.KeyValue{entry})
	if err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("exec: index %q entry decodes to %d rows", idx.Name, len(rows))
	}
	return c.ti.primaryKey(rows[0])
}
