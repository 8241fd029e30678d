package catalog

import (
	"fmt"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// Column changes keep the packed-row schema history that readers depend
// on (rowenc invariant 5): every ADD or DROP of a column moves
// RowFormat.SchemaVersion forward, an added column records the version
// that added it, and a dropped one stays in DroppedColumns so rows packed
// while it existed can still be read. They change the descriptor only;
// the caller stores it with Writer.Update.

// AddColumn appends c as a new column with the next column ID and returns
// that ID. c.MissingValue, if set, is what existing rows read for it.
func (t *Table) AddColumn(c Column) (rowenc.ColumnID, error) {
	if t.ColumnByName(c.Name) != nil {
		return 0, pgerror.New(pgerrcode.DuplicateColumn, "column %q of relation %q already exists", c.Name, t.Name)
	}
	t.RowFormat.SchemaVersion++
	c.ID = t.NextColumnID
	c.AddedIn = t.RowFormat.SchemaVersion
	t.NextColumnID++
	t.Columns = append(t.Columns, c)
	return c.ID, nil
}

// DropColumn removes the column named name. A column of the primary key
// or of any index cannot be dropped (the caller drops such indexes first,
// as Postgres's CASCADE would).
func (t *Table) DropColumn(name string) error {
	c := t.ColumnByName(name)
	if c == nil {
		return pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", name, t.Name)
	}
	for _, idx := range append([]Index{t.PrimaryIndex}, t.Indexes...) {
		for _, id := range append(append([]rowenc.ColumnID{}, idx.KeyColumnIDs...), idx.StoreColumnIDs...) {
			if id == c.ID {
				return pgerror.New(pgerrcode.DependentObjectsStillExist, "cannot drop column %s of table %s because other objects depend on it", name, t.Name).
					WithDetail("index %s depends on column %s of table %s", idx.Name, name, t.Name)
			}
		}
	}
	if len(t.Columns) == 1 {
		return fmt.Errorf("catalog: table %q would have no columns", t.Name)
	}
	t.RowFormat.SchemaVersion++
	t.DroppedColumns = append(t.DroppedColumns, DroppedColumn{ID: c.ID, Type: c.Type, AddedIn: c.AddedIn, DroppedIn: t.RowFormat.SchemaVersion})
	out := t.Columns[:0]
	for _, k := range t.Columns {
		if k.ID != c.ID {
			out = append(out, k)
		}
	}
	t.Columns = out
	return nil
}

// ForgetPackingVersions drops the packing versions no packed row uses any
// more (rowenc invariant 5): oldest is a version at or below which every
// packed row of the table, at every timestamp a read may still use, was
// written (what a census of the primary index found, capped by the
// schema version whose drops are known to have committed before any
// transaction still open began; server/gc.go). It raises
// RowFormat.OldestPacked to oldest and removes the dropped columns only
// older versions had, returning their IDs (nil: the descriptor is
// unchanged and need not be written).
func (t *Table) ForgetPackingVersions(oldest uint32) []rowenc.ColumnID {
	oldest = min(oldest, t.RowFormat.SchemaVersion)
	var gone []rowenc.ColumnID
	kept := t.DroppedColumns[:0:0]
	for _, c := range t.DroppedColumns {
		if c.DroppedIn <= oldest {
			gone = append(gone, c.ID)
			continue
		}
		kept = append(kept, c)
	}
	if len(gone) == 0 {
		return nil
	}
	t.DroppedColumns = kept
	if len(kept) == 0 {
		t.DroppedColumns = nil
	}
	t.RowFormat.OldestPacked = max(t.RowFormat.OldestPacked, oldest)
	return gone
}
