package rowenc

import (
	"fmt"
	"sync"

	"github.com/cairn-db/cairn/sql/types"
)

// ColumnID names a column for its whole life; IDs are never reused, so a
// dropped and re-added column is a new column.
type ColumnID uint32

// Column describes one value column (not a key column: those live in the
// key) as the catalog knows it.
type Column struct {
	ID   ColumnID
	Type *types.T
	// Default is what rows written before the column existed read as
	// (Postgres's "missing value" for ADD COLUMN ... DEFAULT const); nil
	// reads as NULL.
	Default types.Datum
	// Added is the schema version in which the column appeared.
	Added uint32
	// Dropped is the schema version in which it was dropped; 0 while live.
	Dropped uint32
}

// presentAt reports whether rows written under schema version v have the
// column.
func (c *Column) presentAt(v uint32) bool {
	return c.Added <= v && (c.Dropped == 0 || c.Dropped > v)
}

// Schema is the value-column layout of one index (usually the primary
// index) at a schema version, plus the history needed to read rows written
// under earlier versions. The catalog builds it from the table descriptor.
//
// Columns lists every column added and not yet forgotten, dropped ones
// included, in ascending ID order. A dropped column may be forgotten only
// once no packed row written while it was present survives (after a
// repacking pass over the table); until then its type is needed to skip
// its bytes.
//
// A Schema is immutable and safe for concurrent use.
type Schema struct {
	Version uint32
	Columns []Column
	// History is what the schema remembers of the versions forgotten.
	History SchemaHistory

	live []int // indexes into Columns of the columns present at Version

	mu      sync.Mutex
	layouts map[uint32][]int
}

// SchemaHistory says which packing versions a Schema has forgotten
// (invariant 5): the catalog forgets a dropped column once a census of
// the table found no packed row written under a version that had it.
type SchemaHistory struct {
	// OldestPacked is the oldest version a packed row may have been
	// written under: older versions' layouts may lack forgotten columns,
	// so a packed row under one is refused (ErrCorrupt), never misread.
	// Unpacked rows (liveness) of any version stay readable: what they
	// hold does not depend on dropped columns.
	OldestPacked uint32
	// NextColumnID is above every column ID the table ever had (0: not
	// known): a column entry whose ID is below it and not in Columns
	// belongs to a forgotten dropped column, which readers ignore and a
	// repack leaves out, rather than to a column a newer schema added.
	NextColumnID ColumnID
}

// NewSchema validates cols and returns the schema at version.
func NewSchema(version uint32, cols []Column) (*Schema, error) {
	return NewSchemaWithHistory(version, cols, SchemaHistory{})
}

// NewSchemaWithHistory is NewSchema for a table some of whose packing
// versions were forgotten.
func NewSchemaWithHistory(version uint32, cols []Column, h SchemaHistory) (*Schema, error) {
	if h.OldestPacked > version {
		return nil, fmt.Errorf("rowenc: oldest packed version %d is above schema version %d", h.OldestPacked, version)
	}
	s := &Schema{Version: version, Columns: cols, History: h, layouts: map[uint32][]int{}}
	for i := range cols {
		c := &cols[i]
		if i > 0 && cols[i-1].ID >= c.ID {
			return nil, fmt.Errorf("rowenc: schema columns must be in ascending ID order without duplicates (column %d)", c.ID)
		}
		if c.Type == nil {
			return nil, fmt.Errorf("rowenc: column %d has no type", c.ID)
		}
		if c.Added > version || c.Dropped > version || (c.Dropped != 0 && c.Dropped <= c.Added) {
			return nil, fmt.Errorf("rowenc: column %d has versions added=%d dropped=%d outside schema version %d", c.ID, c.Added, c.Dropped, version)
		}
		if c.presentAt(version) {
			s.live = append(s.live, i)
		}
		if h.NextColumnID != 0 && c.ID >= h.NextColumnID {
			return nil, fmt.Errorf("rowenc: column %d is not below the next column ID %d", c.ID, h.NextColumnID)
		}
	}
	return s, nil
}

// Live returns the columns of a row under the current version, in the
// order PackRow and RowMerger.Row use. The caller must not modify it.
func (s *Schema) Live() []Column {
	out := make([]Column, len(s.live))
	for i, j := range s.live {
		out[i] = s.Columns[j]
	}
	return out
}

// NumLive returns len(Live()) without copying.
func (s *Schema) NumLive() int { return len(s.live) }

// LiveIndex returns the position of column id in a row, or -1 if the
// column is not live.
func (s *Schema) LiveIndex(id ColumnID) int {
	for i, j := range s.live {
		if s.Columns[j].ID == id {
			return i
		}
	}
	return -1
}

// layout returns the indexes into Columns of the columns stored in a row
// written under version v, in storage order.
func (s *Schema) layout(v uint32) ([]int, error) {
	if v > s.Version {
		return nil, fmt.Errorf("%w: row version %d, schema version %d", ErrSchemaTooOld, v, s.Version)
	}
	if v == s.Version {
		return s.live, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.layouts[v]; ok {
		return l, nil
	}
	l := []int{}
	for i := range s.Columns {
		if s.Columns[i].presentAt(v) {
			l = append(l, i)
		}
	}
	s.layouts[v] = l
	return l, nil
}
