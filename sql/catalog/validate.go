package catalog

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Validate checks what every descriptor needs: an ID and a name. Writers
// call Validate before storing (Encode) and readers after loading
// (Decode), so a descriptor in the catalog is always valid (invariant 1).

func validateHeader(kind Kind, id ID, name string) error {
	if id == InvalidID {
		return fmt.Errorf("%s %q has no ID", kind, name)
	}
	if name == "" {
		return fmt.Errorf("%s %d has no name", kind, id)
	}
	return nil
}

// Validate checks the database descriptor.
func (d *Database) Validate() error {
	if err := validateHeader(KindDatabase, d.ID, d.Name); err != nil {
		return err
	}
	if d.Colocated && d.ColocationGroupID == 0 {
		return fmt.Errorf("colocated database %q has no colocation group", d.Name)
	}
	return nil
}

// Validate checks the schema descriptor.
func (s *Schema) Validate() error {
	if err := validateHeader(KindSchema, s.ID, s.Name); err != nil {
		return err
	}
	if s.DatabaseID == InvalidID && !s.Virtual {
		return fmt.Errorf("schema %q has no database", s.Name)
	}
	return nil
}

// Validate checks the view descriptor.
func (v *View) Validate() error {
	if err := validateHeader(KindView, v.ID, v.Name); err != nil {
		return err
	}
	if v.DatabaseID == InvalidID || v.SchemaID == InvalidID {
		return fmt.Errorf("view %q has no database or schema", v.Name)
	}
	if v.Query == "" {
		return fmt.Errorf("view %q has no query", v.Name)
	}
	for i, c := range v.Columns {
		if c.Name == "" || c.Type == nil {
			return fmt.Errorf("view %q column %d has no name or type", v.Name, i+1)
		}
	}
	return nil
}

// Validate checks the sequence descriptor.
func (s *Sequence) Validate() error {
	if err := validateHeader(KindSequence, s.ID, s.Name); err != nil {
		return err
	}
	if s.DatabaseID == InvalidID || s.SchemaID == InvalidID {
		return fmt.Errorf("sequence %q has no database or schema", s.Name)
	}
	if s.Increment == 0 {
		return fmt.Errorf("sequence %q: INCREMENT must not be zero", s.Name)
	}
	if s.Min > s.Max {
		return fmt.Errorf("sequence %q: MINVALUE (%d) must be less than MAXVALUE (%d)", s.Name, s.Min, s.Max)
	}
	if s.Start < s.Min || s.Start > s.Max {
		return fmt.Errorf("sequence %q: START value (%d) must be between MINVALUE (%d) and MAXVALUE (%d)", s.Name, s.Start, s.Min, s.Max)
	}
	return nil
}

// Validate checks the table descriptor: every reference inside it
// resolves, names are unique, and the storage settings agree.
func (t *Table) Validate() error {
	if err := validateHeader(KindTable, t.ID, t.Name); err != nil {
		return err
	}
	if err := t.validate(); err != nil {
		return fmt.Errorf("table %q: %w", t.Name, err)
	}
	return nil
}

func (t *Table) validate() error {
	if t.DatabaseID == InvalidID || t.SchemaID == InvalidID {
		return errors.New("no database or schema")
	}
	if len(t.Columns) == 0 {
		return errors.New("no columns")
	}
	ids := map[rowenc.ColumnID]bool{}
	names := map[string]bool{}
	for _, c := range t.Columns {
		switch {
		case c.ID == 0 || c.ID >= t.NextColumnID:
			return fmt.Errorf("column %q has ID %d outside [1, %d)", c.Name, c.ID, t.NextColumnID)
		case c.Name == "":
			return fmt.Errorf("column %d has no name", c.ID)
		case c.Type == nil:
			return fmt.Errorf("column %q has no type", c.Name)
		case ids[c.ID]:
			return fmt.Errorf("column ID %d is used twice", c.ID)
		case names[c.Name]:
			return fmt.Errorf("column %q is defined twice", c.Name)
		case c.AddedIn > t.RowFormat.SchemaVersion:
			return fmt.Errorf("column %q added in row schema version %d, after the table's %d", c.Name, c.AddedIn, t.RowFormat.SchemaVersion)
		case c.Stored && c.ComputedExpr == "":
			return fmt.Errorf("column %q is stored but not computed", c.Name)
		case c.Identity != "" && c.Identity != IdentityAlways && c.Identity != IdentityByDefault:
			return fmt.Errorf("column %q has unknown identity kind %q", c.Name, c.Identity)
		}
		if c.MissingValue != nil {
			if _, err := types.ParseDatum(nil, c.Type, *c.MissingValue); err != nil {
				return fmt.Errorf("column %q missing value: %w", c.Name, err)
			}
		}
		ids[c.ID], names[c.Name] = true, true
	}
	for _, c := range t.DroppedColumns {
		switch {
		case ids[c.ID] || c.ID == 0 || c.ID >= t.NextColumnID:
			return fmt.Errorf("dropped column %d reuses an ID or is out of range", c.ID)
		case c.Type == nil:
			return fmt.Errorf("dropped column %d has no type", c.ID)
		case c.DroppedIn <= c.AddedIn || c.DroppedIn > t.RowFormat.SchemaVersion:
			return fmt.Errorf("dropped column %d has versions added=%d dropped=%d", c.ID, c.AddedIn, c.DroppedIn)
		case c.DroppedIn <= t.RowFormat.OldestPacked:
			return fmt.Errorf("dropped column %d (dropped in %d) is kept though no packed row is older than version %d", c.ID, c.DroppedIn, t.RowFormat.OldestPacked)
		}
		ids[c.ID] = true
	}
	if t.RowFormat.OldestPacked > t.RowFormat.SchemaVersion {
		return fmt.Errorf("oldest packed row version %d is above the row schema version %d", t.RowFormat.OldestPacked, t.RowFormat.SchemaVersion)
	}
	if t.PrimaryIndex.ID != PrimaryIndexID {
		return fmt.Errorf("primary index has ID %d, want %d", t.PrimaryIndex.ID, PrimaryIndexID)
	}
	if !t.PrimaryIndex.Unique || t.PrimaryIndex.State != IndexPublic || t.PrimaryIndex.Predicate != "" || len(t.PrimaryIndex.StoreColumnIDs) != 0 {
		return errors.New("primary index must be unique, public, total and store nothing")
	}
	idxIDs := map[IndexID]bool{}
	idxNames := map[string]bool{}
	storage := map[uint32]bool{}
	for _, idx := range append([]Index{t.PrimaryIndex}, t.Indexes...) {
		if err := t.validateIndex(&idx); err != nil {
			return fmt.Errorf("index %q: %w", idx.Name, err)
		}
		if idxIDs[idx.ID] || idxNames[idx.Name] {
			return fmt.Errorf("index %q or its ID %d is used twice", idx.Name, idx.ID)
		}
		idxIDs[idx.ID], idxNames[idx.Name] = true, true
		if idx.StorageID != 0 {
			// Two indexes sharing storage would read each other's keys.
			if idx.StorageID < firstStorageID || storage[idx.StorageID] {
				return fmt.Errorf("index %q: storage ID %d is not a fresh storage ID or is used twice", idx.Name, idx.StorageID)
			}
			storage[idx.StorageID] = true
		}
	}
	for _, idx := range append([]Index{t.PrimaryIndex}, t.Indexes...) {
		if idx.StorageID == 0 && storage[uint32(idx.ID)] {
			return fmt.Errorf("index %q: its ID %d is another index's storage ID", idx.Name, idx.ID)
		}
	}
	for _, id := range t.PrimaryIndex.KeyColumnIDs {
		if t.ColumnByID(id).Nullable {
			return fmt.Errorf("primary key column %q is nullable", t.ColumnByID(id).Name)
		}
	}
	for _, c := range t.Checks {
		if c.Name == "" || c.Expr == "" {
			return fmt.Errorf("check %q has no name or expression", c.Name)
		}
	}
	for _, fk := range t.ForeignKeys {
		if fk.Name == "" || len(fk.ColumnIDs) == 0 || len(fk.ColumnIDs) != len(fk.ReferencedColumnIDs) || fk.ReferencedTableID == InvalidID {
			return fmt.Errorf("foreign key %q must name equally many local and referenced columns and a table", fk.Name)
		}
		for _, id := range fk.ColumnIDs {
			if t.ColumnByID(id) == nil {
				return fmt.Errorf("foreign key %q references missing column %d", fk.Name, id)
			}
		}
	}
	for _, u := range t.Uniques {
		if idx := t.IndexByID(u.IndexID); idx == nil || !idx.Unique {
			return fmt.Errorf("unique constraint %q is not backed by a unique index", u.Name)
		}
	}
	return t.validateStorage()
}

func (t *Table) validateIndex(idx *Index) error {
	switch {
	case idx.ID == 0 || idx.ID >= t.NextIndexID:
		return fmt.Errorf("ID %d outside [1, %d)", idx.ID, t.NextIndexID)
	case idx.Name == "":
		return errors.New("no name")
	case len(idx.KeyColumnIDs) == 0:
		return errors.New("no key columns")
	case len(idx.KeyDirections) != len(idx.KeyColumnIDs):
		return fmt.Errorf("%d directions for %d key columns", len(idx.KeyDirections), len(idx.KeyColumnIDs))
	}
	switch idx.State {
	case IndexDeleteOnly, IndexWriteOnly, IndexBackfilling, IndexValidating, IndexPublic:
	default:
		return fmt.Errorf("unknown state %q", idx.State)
	}
	switch idx.Placement {
	case IndexLocal:
	case IndexGlobal:
		if idx.GroupID == 0 {
			return errors.New("global index has no group")
		}
	default:
		if idx.ID != PrimaryIndexID {
			return fmt.Errorf("unknown placement %q", idx.Placement)
		}
	}
	seen := map[rowenc.ColumnID]bool{}
	for i, id := range idx.KeyColumnIDs {
		c := t.ColumnByID(id)
		if c == nil {
			return fmt.Errorf("key column %d does not exist", id)
		}
		if seen[id] {
			return fmt.Errorf("key column %q appears twice", c.Name)
		}
		seen[id] = true
		if idx.KeyDirections[i] > rowenc.Desc {
			return fmt.Errorf("key column %q has unknown direction %d", c.Name, idx.KeyDirections[i])
		}
		if idx.Kind == IndexBTree && c.Type.Family == types.JSONBFamily {
			return fmt.Errorf("column %q of type jsonb cannot be in a btree index", c.Name)
		}
	}
	for _, id := range idx.StoreColumnIDs {
		if t.ColumnByID(id) == nil || seen[id] {
			return fmt.Errorf("stored column %d does not exist or is a key column", id)
		}
		seen[id] = true
	}
	switch idx.Kind {
	case IndexBTree:
	case IndexGIN:
		if len(idx.KeyColumnIDs) != 1 || idx.Unique || len(idx.StoreColumnIDs) > 0 || idx.HashSharding != nil {
			return errors.New("a gin index has one key column, no stored column and no hash sharding, and is not unique")
		}
		c := t.ColumnByID(idx.KeyColumnIDs[0])
		switch {
		case (idx.Opclass == rowenc.JSONBOps || idx.Opclass == rowenc.JSONBPathOps) && c.Type.Family == types.JSONBFamily:
		case idx.Opclass == rowenc.ArrayOps && c.Type.Family == types.ArrayFamily:
		default:
			return fmt.Errorf("gin operator class %q does not fit column %q", idx.Opclass, c.Name)
		}
	default:
		return fmt.Errorf("unknown kind %q", idx.Kind)
	}
	if hs := idx.HashSharding; hs != nil {
		if hs.Buckets < 2 {
			return fmt.Errorf("hash sharding needs at least 2 buckets, has %d", hs.Buckets)
		}
		if hs.Buckets > MaxShardBuckets {
			return fmt.Errorf("hash sharding allows at most %d buckets, has %d", MaxShardBuckets, hs.Buckets)
		}
		if len(idx.KeyColumnIDs) < 2 || idx.KeyColumnIDs[0] != hs.ShardColumnID {
			return errors.New("a hash-sharded index's key must start with its shard column, followed by the hashed columns")
		}
		if c := t.ColumnByID(hs.ShardColumnID); c == nil || !c.Hidden || c.ComputedExpr == "" || c.Type.Oid != types.Int8.Oid {
			return errors.New("a hash-sharded index's shard column must be a hidden int8 generated column")
		}
	}
	return nil
}

func (t *Table) validateStorage() error {
	if t.GroupID == 0 {
		return errors.New("no table group")
	}
	p := t.Partitioning
	switch p.Kind {
	case PartitionSingle, PartitionRange:
		if p.HashColumns != 0 || p.HashColumn != 0 {
			return fmt.Errorf("%s partitioning has hash columns", p.Kind)
		}
	case PartitionHash:
		if p.HashColumns < 1 || p.HashColumns > len(t.PrimaryIndex.KeyColumnIDs) {
			return fmt.Errorf("hash partitioning on %d of %d primary key columns", p.HashColumns, len(t.PrimaryIndex.KeyColumnIDs))
		}
		if p.HashColumn != 0 && (p.HashColumns != 1 || !slices.Contains(t.PrimaryIndex.KeyColumnIDs, p.HashColumn)) {
			return fmt.Errorf("hash partitioning on column %d, which is not one primary key column", p.HashColumn)
		}
	default:
		return fmt.Errorf("unknown partitioning %q", p.Kind)
	}
	if t.Colocated && p.Kind != PartitionSingle {
		return errors.New("a colocated table must use single partitioning")
	}
	if !t.Colocated && t.GroupID != uint64(t.ID) && p.Kind != PartitionHash {
		return errors.New("only colocated or hash-partitioned tables share a group")
	}
	if p.InitialTablets < 0 || p.InitialTablets > rowenc.NumBuckets {
		return fmt.Errorf("initial tablets %d outside [0, %d]", p.InitialTablets, rowenc.NumBuckets)
	}
	return nil
}
