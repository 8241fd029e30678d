package rowenc

import (
	"fmt"

	"github.com/cairn-db/cairn/sql/types"
)

// TableLayout is what the table-level encoders (index.go, rowwriter.go,
// fetcher.go) need to know about a table. The catalog builds it from a
// table descriptor (catalog.Table.Layout) and calls Init; this package
// never sees descriptors, so it does not import the catalog.
//
// A row is a []types.Datum with one entry per Columns element, in that
// order. After Init a TableLayout is immutable and safe for concurrent use.
type TableLayout struct {
	ID   uint32
	Name string
	// GroupID is the table group of the primary index and local indexes.
	GroupID uint64
	// HashColumns is how many leading primary-key columns the row's
	// bucket is hashed from; 0 puts every row in bucket 0.
	HashColumns int
	// HashColumn, when not 0, is the one primary-key column the bucket
	// is hashed from instead (HashColumns must be 1), wherever it is in
	// the key: a Citus distribution column that is not the key's first.
	// The bucket is still a function of the primary key, so a row's key
	// is still fixed by its primary-key values.
	HashColumn ColumnID
	// SharedGroup marks a hash-partitioned table whose group other
	// tables may share (a Citus colocation group): its data is not the
	// whole group, so what frees it (FreeSpans, StorageSpans) clears it
	// bucket by bucket.
	SharedGroup bool
	Columns     []TableColumn
	Primary     IndexLayout
	Secondary   []IndexLayout
	// Schema is the value layout of the primary index: every column that
	// is not a primary-key column, with its history.
	Schema *Schema

	colPos   map[ColumnID]int
	valuePos []int // row position of each Schema.Live() column
	hashPos  []int // row positions of the columns the bucket is hashed from
}

// TableColumn is one column of a row.
type TableColumn struct {
	ID   ColumnID
	Name string
	Type *types.T
}

// IndexLayout is one index of a table.
type IndexLayout struct {
	ID uint32
	// KeyID, when not zero, is what the index's keys carry instead of ID
	// (a bulk-loaded index's fresh storage: catalog.Index.StorageID).
	KeyID  uint32
	Name   string
	Unique bool
	// KeyColumns and KeyOrders are the key columns and their orders.
	KeyColumns []ColumnID
	KeyOrders  []Order
	// StoreColumns are the non-key columns a secondary index stores.
	StoreColumns []ColumnID
	// Local indexes live in the table's group and the row's bucket; a
	// global one in GroupID, bucket 0, ordered by its own key.
	Local   bool
	GroupID uint64
	// Partial indexes hold only the rows RowWriter.InPartialIndex accepts.
	Partial bool
	// Sharded: the first key column is a hash-sharded index's shard, a
	// function of the others, left out of uniqueness errors.
	Sharded bool
	// DeleteOnly indexes (an online schema change's first state) get their
	// entries deleted but never written.
	DeleteOnly bool
	// Inverted, when set, makes a GIN index with this operator class
	// (gin.go): one key column, one entry per token of its value.
	Inverted string
	// Blocks, for a local inverted index of a hash-partitioned table, is
	// how many blocks of buckets its entries are grouped in (ginblock.go):
	// a row's entries go under the first bucket of its bucket's block.
	// Zero for every other index.
	Blocks int

	keyPos      []int   // row positions of KeyColumns
	suffixPos   []int   // row positions of the primary-key columns not in KeyColumns
	suffixOrder []Order // their orders
	storePos    []int
	storeSchema *Schema // StoreColumns as a version-0 schema, for their value
	primary     bool
}

// Init checks the layout and derives what the encoders use.
func (t *TableLayout) Init() error {
	t.colPos = make(map[ColumnID]int, len(t.Columns))
	for i, c := range t.Columns {
		if c.Type == nil {
			return fmt.Errorf("rowenc: table %q column %d has no type", t.Name, c.ID)
		}
		if _, dup := t.colPos[c.ID]; dup {
			return fmt.Errorf("rowenc: table %q has column %d twice", t.Name, c.ID)
		}
		t.colPos[c.ID] = i
	}
	if t.Schema == nil {
		return fmt.Errorf("rowenc: table %q has no row schema", t.Name)
	}
	if t.HashColumns < 0 || t.HashColumns > len(t.Primary.KeyColumns) {
		return fmt.Errorf("rowenc: table %q hashes %d of %d primary-key columns", t.Name, t.HashColumns, len(t.Primary.KeyColumns))
	}
	if t.HashColumn != 0 && t.HashColumns != 1 {
		return fmt.Errorf("rowenc: table %q hashes column %d but %d primary-key columns", t.Name, t.HashColumn, t.HashColumns)
	}
	t.Primary.primary, t.Primary.Local = true, true
	if err := t.initIndex(&t.Primary); err != nil {
		return err
	}
	t.hashPos = t.hashPos[:0]
	for _, id := range t.HashColumnIDs() {
		if !t.Primary.isKey(id) {
			return fmt.Errorf("rowenc: table %q hashes column %d, which is not a primary-key column", t.Name, id)
		}
		t.hashPos = append(t.hashPos, t.colPos[id])
	}
	t.valuePos = t.valuePos[:0]
	for _, c := range t.Schema.Live() {
		p, ok := t.colPos[c.ID]
		if !ok {
			return fmt.Errorf("rowenc: table %q row schema has column %d, which the table lacks", t.Name, c.ID)
		}
		if t.Primary.isKey(c.ID) {
			return fmt.Errorf("rowenc: table %q row schema stores key column %d", t.Name, c.ID)
		}
		t.valuePos = append(t.valuePos, p)
	}
	for i := range t.Secondary {
		idx := &t.Secondary[i]
		if idx.ID == t.Primary.ID {
			return fmt.Errorf("rowenc: table %q index %q reuses the primary index's ID", t.Name, idx.Name)
		}
		if err := t.initIndex(idx); err != nil {
			return err
		}
	}
	return nil
}

func (t *TableLayout) initIndex(idx *IndexLayout) error {
	if len(idx.KeyColumns) == 0 || len(idx.KeyOrders) != len(idx.KeyColumns) {
		return fmt.Errorf("rowenc: index %q needs key columns with one order each", idx.Name)
	}
	if !idx.Local && idx.GroupID == 0 {
		return fmt.Errorf("rowenc: global index %q has no group", idx.Name)
	}
	idx.keyPos = idx.keyPos[:0]
	for _, id := range idx.KeyColumns {
		p, ok := t.colPos[id]
		if !ok {
			return fmt.Errorf("rowenc: index %q key column %d is not a column of %q", idx.Name, id, t.Name)
		}
		if t.Columns[p].Type.Family == types.JSONBFamily && idx.Inverted == "" {
			return fmt.Errorf("index %q column %q: %w", idx.Name, t.Columns[p].Name, ErrNotKeyEncodable)
		}
		idx.keyPos = append(idx.keyPos, p)
	}
	if idx.primary {
		return nil
	}
	if idx.Inverted != "" {
		if len(idx.KeyColumns) != 1 || idx.Unique || len(idx.StoreColumns) > 0 {
			return fmt.Errorf("rowenc: inverted index %q needs one key column, no stored column, and is not unique", idx.Name)
		}
		switch idx.Inverted {
		case JSONBOps, JSONBPathOps:
			if t.Columns[idx.keyPos[0]].Type.Family != types.JSONBFamily {
				return fmt.Errorf("rowenc: inverted index %q: %s needs a jsonb column", idx.Name, idx.Inverted)
			}
		case ArrayOps:
			if t.Columns[idx.keyPos[0]].Type.Family != types.ArrayFamily {
				return fmt.Errorf("rowenc: inverted index %q: %s needs an array column", idx.Name, idx.Inverted)
			}
		default:
			return fmt.Errorf("rowenc: inverted index %q: unknown operator class %q", idx.Name, idx.Inverted)
		}
		if t.bucketed(idx) && (idx.Blocks <= 0 || idx.Blocks > NumBuckets) {
			// Without blocks each token would spread over every bucket.
			return fmt.Errorf("rowenc: local inverted index %q of a hash-partitioned table needs 1 to %d blocks, has %d", idx.Name, NumBuckets, idx.Blocks)
		}
	}
	if idx.Blocks != 0 && (idx.Inverted == "" || !t.bucketed(idx)) {
		return fmt.Errorf("rowenc: index %q has blocks but is not a local inverted index of a hash-partitioned table", idx.Name)
	}
	idx.suffixPos, idx.suffixOrder = idx.suffixPos[:0], idx.suffixOrder[:0]
	for i, id := range t.Primary.KeyColumns {
		if !idx.isKey(id) {
			idx.suffixPos = append(idx.suffixPos, t.Primary.keyPos[i])
			idx.suffixOrder = append(idx.suffixOrder, t.Primary.KeyOrders[i])
		}
	}
	idx.storePos = idx.storePos[:0]
	cols := make([]Column, 0, len(idx.StoreColumns))
	for _, id := range idx.StoreColumns {
		p, ok := t.colPos[id]
		if !ok {
			return fmt.Errorf("rowenc: index %q stores column %d, which %q lacks", idx.Name, id, t.Name)
		}
		idx.storePos = append(idx.storePos, p)
		cols = append(cols, Column{ID: id, Type: t.Columns[p].Type})
	}
	// The stored columns' schema is in StoreColumns order, which NewSchema
	// requires to ascend; sort a copy's positions along with it.
	sortStored(cols, idx.storePos)
	s, err := NewSchema(0, cols)
	if err != nil {
		return fmt.Errorf("rowenc: index %q stored columns: %w", idx.Name, err)
	}
	idx.storeSchema = s
	return nil
}

func sortStored(cols []Column, pos []int) {
	for i := 1; i < len(cols); i++ {
		for j := i; j > 0 && cols[j].ID < cols[j-1].ID; j-- {
			cols[j], cols[j-1] = cols[j-1], cols[j]
			pos[j], pos[j-1] = pos[j-1], pos[j]
		}
	}
}

func (idx *IndexLayout) isKey(id ColumnID) bool {
	for _, k := range idx.KeyColumns {
		if k == id {
			return true
		}
	}
	return false
}

// ColumnPos returns the row position of column id, or -1.
func (t *TableLayout) ColumnPos(id ColumnID) int {
	if p, ok := t.colPos[id]; ok {
		return p
	}
	return -1
}

// Index returns the primary or secondary index with id, or nil.
func (t *TableLayout) Index(id uint32) *IndexLayout {
	if t.Primary.ID == id {
		return &t.Primary
	}
	for i := range t.Secondary {
		if t.Secondary[i].ID == id {
			return &t.Secondary[i]
		}
	}
	return nil
}

// IndexByKeyID returns the index whose keys carry id (IndexLayout.KeyID,
// or ID when that is zero), or nil.
func (t *TableLayout) IndexByKeyID(id uint32) *IndexLayout {
	if t.Primary.keyID() == id {
		return &t.Primary
	}
	for i := range t.Secondary {
		if t.Secondary[i].keyID() == id {
			return &t.Secondary[i]
		}
	}
	return nil
}

// IsPrimary reports whether idx is its table's primary index.
func (idx *IndexLayout) IsPrimary() bool { return idx.primary }

func (t *TableLayout) checkRow(row []types.Datum) error {
	if len(row) != len(t.Columns) {
		return fmt.Errorf("%w: %d values for the %d columns of %q", ErrRowShape, len(row), len(t.Columns), t.Name)
	}
	return nil
}
