package catalog

import (
	"fmt"
	"sort"
	"sync"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// RowSchema returns the value layout of the table's primary index for
// packed rows: every column that is not a primary-key column, live or
// dropped-but-remembered, at RowFormat.SchemaVersion.
func (t *Table) RowSchema() (*rowenc.Schema, error) {
	var cols []rowenc.Column
	for _, c := range t.Columns {
		if t.PrimaryIndex.isKeyColumn(c.ID) {
			continue
		}
		rc := rowenc.Column{ID: c.ID, Type: c.Type, Added: c.AddedIn}
		if c.MissingValue != nil {
			d, err := types.ParseDatum(nil, c.Type, *c.MissingValue)
			if err != nil {
				return nil, fmt.Errorf("table %q column %q missing value: %w", t.Name, c.Name, err)
			}
			rc.Default = d
		}
		cols = append(cols, rc)
	}
	for _, c := range t.DroppedColumns {
		cols = append(cols, rowenc.Column{ID: c.ID, Type: c.Type, Added: c.AddedIn, Dropped: c.DroppedIn})
	}
	sort.Slice(cols, func(i, j int) bool { return cols[i].ID < cols[j].ID })
	s, err := rowenc.NewSchemaWithHistory(t.RowFormat.SchemaVersion, cols,
		rowenc.SchemaHistory{OldestPacked: t.RowFormat.OldestPacked, NextColumnID: t.NextColumnID})
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", t.Name, err)
	}
	return s, nil
}

// Layout returns what rowenc's table encoders need, with rows laid out in
// Columns order. Every index but the primary one is included, whatever its
// state (writers maintain indexes from delete-only on); a GIN index is an
// inverted one (rowenc gin.go) with its operator class.
func (t *Table) Layout() (*rowenc.TableLayout, error) {
	s, err := t.RowSchema()
	if err != nil {
		return nil, err
	}
	l := &rowenc.TableLayout{
		ID:      uint32(t.ID),
		Name:    t.Name,
		GroupID: t.GroupID,
		Schema:  s,
		Primary: indexLayout(&t.PrimaryIndex),
	}
	if t.Partitioning.Kind == PartitionHash {
		l.HashColumns, l.HashColumn = t.Partitioning.HashColumns, t.Partitioning.HashColumn
		// A distributed table's group is its Citus colocation group,
		// which the tables colocated with it share.
		l.SharedGroup = t.Partitioning.Distributed
	}
	for _, c := range t.Columns {
		l.Columns = append(l.Columns, rowenc.TableColumn{ID: c.ID, Name: c.Name, Type: c.Type})
	}
	for i := range t.Indexes {
		l.Secondary = append(l.Secondary, indexLayout(&t.Indexes[i]))
	}
	if err := l.Init(); err != nil {
		return nil, err
	}
	return l, nil
}

// layoutMemo holds the Layout of a descriptor read from the store, which
// is shared and immutable (Reader), so it is computed once instead of per
// statement (4% of the CPU of a prepared point SELECT). owner guards
// against a copy of the Table struct, which may be changed, using it.
type layoutMemo struct {
	owner *Table
	once  sync.Once
	l     *rowenc.TableLayout
	err   error
}

// shareLayout marks t as shared and immutable: SharedLayout may keep its
// layout from now on.
func (t *Table) shareLayout() { t.layout = &layoutMemo{owner: t} }

// SharedLayout is Layout, computed once for a descriptor the catalog
// read (those are immutable; a Table being built or changed gets a fresh
// one every time). The layout is shared: callers must not modify it.
func (t *Table) SharedLayout() (*rowenc.TableLayout, error) {
	if m := t.layout; m != nil && m.owner == t {
		m.once.Do(func() { m.l, m.err = t.Layout() })
		return m.l, m.err
	}
	return t.Layout()
}

func indexLayout(idx *Index) rowenc.IndexLayout {
	return rowenc.IndexLayout{
		ID:           uint32(idx.ID),
		KeyID:        idx.StorageID,
		Name:         idx.Name,
		Unique:       idx.Unique,
		KeyColumns:   idx.KeyColumnIDs,
		KeyOrders:    idx.KeyDirections,
		StoreColumns: idx.StoreColumnIDs,
		Local:        idx.Placement != IndexGlobal,
		GroupID:      idx.GroupID,
		Partial:      idx.Predicate != "",
		Sharded:      idx.HashSharding != nil,
		DeleteOnly:   idx.State == IndexDeleteOnly,
		Inverted:     idx.InvertedOpclass(),
		Blocks:       idx.Blocks,
	}
}
