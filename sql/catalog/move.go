package catalog

import (
	"fmt"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// TableMove is an online move of a table to another location (ALTER TABLE
// ... SET (colocated = ...) run as a job, sql/ddl colocation_job.go): the
// table is still read and written where its descriptor says, and every
// writer also maintains a copy of each row change at the target (write
// only: MoveWrite), while the job copies the rows that existed before.
// When the copy is complete the job swaps the target's location into the
// descriptor (MoveTarget) in one catalog write and frees the old storage.
//
// A move may also be a rewrite (Target set): ALTER INDEX ... SET
// (bucket_count = n) and ALTER PRIMARY KEY to the same columns run online
// as a job (sql/ddl rekey.go) by "moving" the table to its new descriptor,
// whose columns and index keys differ (a new shard column, the old one
// dropped) but whose rows are the same rows: writers convert each row to
// the target's columns (RowConv) before MoveWrite. Such a target never
// changes which rows collide on a unique key (the indexes are unique on the
// same user columns: only the hashing differs), so uniqueness checked
// where the table lives still holds in the target.
//
// The target never shares keys with the current location: the table's
// group differs (its database's colocation group on one side, a group of
// its own on the other), every global index gets a fresh group, and every
// index fresh storage (Index.StorageID), so a write to one side never
// lands on the other, and leftovers of an earlier move that was cut short
// are never read.
type TableMove struct {
	// JobID is the job moving the table (package jobs).
	JobID int64 `json:"job_id"`
	// Colocated, GroupID and Partitioning are the target's Table fields.
	Colocated    bool         `json:"colocated,omitempty"`
	GroupID      uint64       `json:"group_id"`
	Partitioning Partitioning `json:"partitioning"`
	// Indexes are the target's placement of every index, the primary one
	// included, by index ID (a colocation move; empty for a rewrite).
	Indexes []MovedIndex `json:"indexes"`
	// Target, for a rewrite, is the table's whole next descriptor (every
	// index in fresh storage); the fields above are then unused.
	Target *Table `json:"target,omitempty"`
}

// MovedIndex is where one index of a moving table goes.
type MovedIndex struct {
	ID        IndexID        `json:"id"`
	Placement IndexPlacement `json:"placement,omitempty"`
	GroupID   uint64         `json:"group_id,omitempty"`
	StorageID uint32         `json:"storage_id"`
	// Blocks is a local GIN index's block count at the target
	// (Index.Blocks); zero for every other index.
	Blocks int `json:"blocks,omitempty"`
}

// MoveTarget returns a copy of t at its move's target location, without
// the move: the descriptor the job writes when it switches the table over,
// and the layout writers maintain meanwhile. The copy shares t's column
// and index key slices (the caller must not change them).
func (t *Table) MoveTarget() (*Table, error) {
	m := t.Move
	if m == nil {
		return nil, fmt.Errorf("catalog: table %q is not being moved", t.Name)
	}
	if m.Target != nil {
		// The job built Target from this version of t; the name may have
		// changed since (Rename does not wait for moves).
		c := *m.Target
		c.layout, c.Move = nil, nil
		c.ID, c.Name, c.Version = t.ID, t.Name, t.Version
		return &c, nil
	}
	c := *t
	c.layout = nil
	c.Move = nil
	c.Colocated, c.GroupID, c.Partitioning = m.Colocated, m.GroupID, m.Partitioning
	c.Indexes = append([]Index(nil), t.Indexes...)
	place := func(idx *Index) error {
		for _, mi := range m.Indexes {
			if mi.ID == idx.ID {
				idx.StorageID = mi.StorageID
				if idx.ID != t.PrimaryIndex.ID {
					// The primary index lives in the table's group.
					idx.Placement, idx.GroupID, idx.Blocks = mi.Placement, mi.GroupID, mi.Blocks
				}
				return nil
			}
		}
		return fmt.Errorf("catalog: move of table %q has no target for index %q", t.Name, idx.Name)
	}
	if err := place(&c.PrimaryIndex); err != nil {
		return nil, err
	}
	for i := range c.Indexes {
		if err := place(&c.Indexes[i]); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// MoveLayout is the layout of t's move target (nil when t is not being
// moved): what writers maintain besides t's own layout.
func (t *Table) MoveLayout() (*rowenc.TableLayout, error) {
	if t.Move == nil {
		return nil, nil
	}
	target, err := t.MoveTarget()
	if err != nil {
		return nil, err
	}
	return target.Layout()
}

// RowConv returns the conversion of rows of from (in from.Columns order)
// to rows of to, a rewrite of it (TableMove.Target): a column to keeps (by
// ID) keeps its value; a column new in to is a generated column whose
// value compute gives (compiled over from's row). A column of to that is
// neither is an error: existing rows would have no value for it. A column
// NOT NULL in to that was nullable in from (a new primary-key column)
// fails a row whose value is NULL with 23502.
func RowConv(from, to *Table, compute func(c *Column) (func(old []types.Datum) (types.Datum, error), error)) (func(old []types.Datum) ([]types.Datum, error), error) {
	type source struct {
		old int
		ev  func(old []types.Datum) (types.Datum, error)
		// notNull: the column is NOT NULL in to but not in from, so a
		// NULL there must fail the conversion (23502) rather than reach
		// the target, where nothing checks it again.
		notNull bool
	}
	pos := make(map[rowenc.ColumnID]int, len(from.Columns))
	for i, c := range from.Columns {
		pos[c.ID] = i
	}
	srcs := make([]source, len(to.Columns))
	for i := range to.Columns {
		c := &to.Columns[i]
		if p, ok := pos[c.ID]; ok {
			srcs[i] = source{old: p, notNull: !c.Nullable && from.Columns[p].Nullable}
			continue
		}
		if c.ComputedExpr == "" {
			return nil, fmt.Errorf("catalog: new column %q of table %q has no value for existing rows", c.Name, to.Name)
		}
		ev, err := compute(c)
		if err != nil {
			return nil, fmt.Errorf("catalog: column %q of table %q: %w", c.Name, to.Name, err)
		}
		srcs[i] = source{old: -1, ev: ev}
	}
	return func(r []types.Datum) ([]types.Datum, error) {
		if r == nil {
			return nil, nil
		}
		nr := make([]types.Datum, len(srcs))
		for i, s := range srcs {
			switch {
			case s.ev != nil:
				v, err := s.ev(r)
				if err != nil {
					return nil, err
				}
				nr[i] = v
			case s.old < len(r) && r[s.old] != nil:
				nr[i] = r[s.old]
			default:
				nr[i] = types.DNull
			}
			if s.notNull && types.IsNull(nr[i]) {
				return nil, pgerror.New(pgerrcode.NotNullViolation, "null value in column %q of relation %q violates not-null constraint", to.Columns[i].Name, to.Name)
			}
		}
		return nr, nil
	}, nil
}

// MoveWrite adds to b the writes that make a move target (written by w,
// a RowWriter over MoveLayout) follow the row change old → new, whatever
// the target held for the row before: old's row and index entries are
// deleted and new is written whole, with plain puts. The target may not
// hold the row yet (the job has not copied it), so a partial update or a
// conditional put, which assume it does, would be wrong there;
// uniqueness is checked where the table lives now, in the same batch.
//
// The row is deleted by a point tombstone on the row key and on every
// column entry key it may have (one per column of the target's row
// schema), not by a range deletion: a range deletion in a transaction
// deletes only the keys it finds at its read timestamp, while a point
// tombstone shadows whatever version lies below it, however it got there.
func MoveWrite(w *rowenc.RowWriter, b rowenc.Writes, old, new []types.Datum) error {
	pb := moveWrites{Writes: b, cols: w.Table.Schema}
	if old != nil {
		if err := w.Write(pb, old, nil); err != nil {
			return err
		}
	}
	if new != nil {
		if err := w.Write(putOnly{b}, nil, new); err != nil {
			return err
		}
	}
	return nil
}

// moveWrites is putOnly whose range deletion of a row (RowWriter's delete:
// [row key, its prefix end)) becomes point deletions of the row key and
// of each of its possible column entries.
type moveWrites struct {
	rowenc.Writes
	cols *rowenc.Schema
}

func (m moveWrites) CPut(key, value, _ []byte, _ bool) { m.Put(key, value) }

func (m moveWrites) DelRange(start, _ []byte) {
	m.Del(start)
	for _, c := range m.cols.Columns {
		m.Del(rowenc.ColumnKey(nil, start, c.ID))
	}
}

// putOnly turns a RowWriter's conditional puts into puts.
type putOnly struct{ rowenc.Writes }

func (p putOnly) CPut(key, value, _ []byte, _ bool) { p.Put(key, value) }

// ErrMoving is the error of a schema change of a table that a job is
// moving or rewriting (see Writer.Update).
func ErrMoving(t *Table) error {
	if t.Move.Target != nil {
		return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState,
			"table %q is being rewritten by job %d", t.Name, t.Move.JobID).
			WithHint("Wait for the job to finish (SHOW JOB %d). A job whose node stopped is rolled back by the next ALTER INDEX ... SET (bucket_count) or ALTER PRIMARY KEY of %s.", t.Move.JobID, t.Name)
	}
	return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState,
		"table %q is being moved by job %d", t.Name, t.Move.JobID).
		WithHint("Wait for the job to finish (SHOW JOB %d). A job whose node stopped is rolled back by the next ALTER TABLE %s SET (colocated = ...).", t.Move.JobID, t.Name)
}
