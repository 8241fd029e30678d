package catalog

import (
	"strings"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/zone"
)

// Table is a table's descriptor: its columns, indexes, constraints, and
// where and how its rows are stored.
type Table struct {
	ID         ID     `json:"id"`
	DatabaseID ID     `json:"database_id"`
	SchemaID   ID     `json:"schema_id"`
	Name       string `json:"name"`
	Version    uint64 `json:"version"`
	Owner      string `json:"owner,omitempty"`

	Columns []Column `json:"columns"`
	// DroppedColumns are kept until no packed row written while they
	// existed survives, so readers can skip their bytes (rowenc
	// invariant 5).
	DroppedColumns []DroppedColumn    `json:"dropped_columns,omitempty"`
	NextColumnID   rowenc.ColumnID    `json:"next_column_id"`
	PrimaryIndex   Index              `json:"primary_index"`
	Indexes        []Index            `json:"indexes,omitempty"`
	NextIndexID    IndexID            `json:"next_index_id"`
	Checks         []Check            `json:"checks,omitempty"`
	ForeignKeys    []ForeignKey       `json:"foreign_keys,omitempty"`
	Uniques        []UniqueConstraint `json:"uniques,omitempty"`
	// ReferencedBy lists the other tables whose foreign keys reference
	// this one (the executor applies ON DELETE / ON UPDATE actions to
	// them). The Writer maintains it from those tables' ForeignKeys on
	// Create, Update and Drop (references.go); nobody sets it by hand.
	ReferencedBy []ID `json:"referenced_by,omitempty"`

	Partitioning Partitioning `json:"partitioning"`
	// Colocated: the table lives in its database's colocation group
	// (GroupID is then the database's ColocationGroupID).
	Colocated bool `json:"colocated,omitempty"`
	// GroupID is the table group holding the primary index and the local
	// secondary indexes: the table's own ID for an ordinary table.
	GroupID   uint64    `json:"group_id"`
	RowFormat RowFormat `json:"row_format"`
	Comment   string    `json:"comment,omitempty"`
	// ConstraintComments are COMMENT ON CONSTRAINT's texts, by constraint
	// name (a constraint is not a descriptor of its own).
	ConstraintComments map[string]string `json:"constraint_comments,omitempty"`
	// ACL is the object's privileges (privilege.go); nil is the default.
	ACL []ACLItem `json:"acl,omitempty"`
	// Zone is ALTER TABLE ... CONFIGURE ZONE's placement settings
	// (package zone), for the fields it sets; the rest come from the
	// database's. A colocated table has none (it shares its database's
	// tablet).
	Zone *zone.Config `json:"zone,omitempty"`
	// Move, when set, is the online move of the table to another location
	// under way (move.go): writers maintain the target too, and other
	// schema changes of the table wait for it (Writer.Update refuses them).
	Move *TableMove `json:"move,omitempty"`

	// layout: see SharedLayout (layout.go).
	layout *layoutMemo
}

// Column is one column of a table.
type Column struct {
	ID       rowenc.ColumnID `json:"id"`
	Name     string          `json:"name"`
	Type     *types.T        `json:"-"` // stored as OID and typmod (coltype.go)
	Nullable bool            `json:"nullable,omitempty"`
	// DefaultExpr is the DEFAULT expression as SQL text.
	DefaultExpr string `json:"default_expr,omitempty"`
	// ComputedExpr is a generated column's expression as SQL text; Stored
	// says whether its value is stored (GENERATED ... STORED) or computed
	// on read.
	ComputedExpr string `json:"computed_expr,omitempty"`
	Stored       bool   `json:"stored,omitempty"`
	// Hidden columns (rowid, a hash-sharded index's shard column) are left
	// out of SELECT * and SHOW CREATE TABLE's column list.
	Hidden   bool     `json:"hidden,omitempty"`
	Identity Identity `json:"identity,omitempty"`
	// SequenceID is the sequence behind a serial or identity column.
	SequenceID ID `json:"sequence_id,omitempty"`
	// AddedIn is the row schema version (RowFormat.SchemaVersion) that
	// added the column.
	AddedIn uint32 `json:"added_in,omitempty"`
	// MissingValue is what rows written before the column existed read as
	// (ADD COLUMN ... DEFAULT const), in the type's text form; nil: NULL.
	MissingValue *string `json:"missing_value,omitempty"`
	// Comment is COMMENT ON COLUMN's text.
	Comment string `json:"comment,omitempty"`
}

// DroppedColumn is a dropped column that packed rows may still hold.
type DroppedColumn struct {
	ID        rowenc.ColumnID `json:"id"`
	Type      *types.T        `json:"-"`
	AddedIn   uint32          `json:"added_in"`
	DroppedIn uint32          `json:"dropped_in"`
}

// Identity is a column's GENERATED ... AS IDENTITY kind.
type Identity string

// Identity kinds; "" is not an identity column.
const (
	IdentityAlways    Identity = "always"
	IdentityByDefault Identity = "by_default"
)

// IndexID names an index within its table. The primary index is 1.
type IndexID uint32

// PrimaryIndexID is the ID of every table's primary index.
const PrimaryIndexID IndexID = 1

// Index is the primary index or a secondary index.
type Index struct {
	ID     IndexID `json:"id"`
	Name   string  `json:"name"`
	Unique bool    `json:"unique,omitempty"`
	// KeyColumnIDs are the key columns in order; KeyDirections their orders
	// (one per key column).
	KeyColumnIDs  []rowenc.ColumnID `json:"key_column_ids"`
	KeyDirections []rowenc.Order    `json:"key_directions"`
	// StoreColumnIDs are the non-key columns a secondary index stores
	// (INCLUDE, STORING).
	StoreColumnIDs []rowenc.ColumnID `json:"store_column_ids,omitempty"`
	// Predicate makes a partial index: the WHERE clause as SQL text.
	Predicate string `json:"predicate,omitempty"`
	// HashSharding makes a hash-sharded index (a hidden shard column leads
	// the key); nil otherwise.
	HashSharding *HashSharding `json:"hash_sharding,omitempty"`
	Kind         IndexKind     `json:"kind"`
	State        IndexState    `json:"state"`
	// Placement: a global index is partitioned by its own key in its own
	// group (GroupID); a local one lives in the table's group and buckets.
	Placement IndexPlacement `json:"placement,omitempty"`
	GroupID   uint64         `json:"group_id,omitempty"`
	// Blocks, for a local GIN index of a hash-partitioned (distributed)
	// table, is how many blocks of buckets its entries are grouped in:
	// the table's shard count when the index was placed, so that each
	// shard's entries of a token are one span in the shard's tablet
	// (rowenc.IndexLayout.Blocks, docs/distributed.md "Local GIN
	// indexes"). Zero for every other index.
	Blocks int `json:"blocks,omitempty"`
	// StorageID, when set, is what the index's keys carry in place of ID:
	// a bulk load (sql/exec COPY into a table created in its transaction,
	// CREATE INDEX's backfill) writes committed versions into fresh
	// storage, named by an ID from AllocateStorageID that no other
	// attempt ever gets, so an aborted load leaves only unreachable
	// garbage. Zero: the keys carry ID.
	StorageID uint32 `json:"storage_id,omitempty"`
	// Comment is COMMENT ON INDEX's text.
	Comment string `json:"comment,omitempty"`
	// Opclass is a GIN index's operator class (rowenc.JSONBOps,
	// JSONBPathOps or ArrayOps); "" for btree indexes.
	Opclass string `json:"opclass,omitempty"`
	// JobID is the job building the index while it is not public (sql/ddl
	// index_job.go): whoever finds that job orphaned rolls the index back.
	JobID int64 `json:"job_id,omitempty"`
}

// MinShardBuckets and MaxShardBuckets bound a hash-sharded index's bucket
// count (CockroachDB's bounds).
const (
	MinShardBuckets = 2
	MaxShardBuckets = 2048
)

// HashSharding describes a hash-sharded index (CockroachDB's USING HASH):
// its key is (shard, the user's columns...), where the shard column is a
// hidden generated column holding ShardBucket of the user's columns (sql/
// builtins.ShardHash, FNV-1 of their key encodings, mod Buckets).
type HashSharding struct {
	Buckets       int32           `json:"buckets"`
	ShardColumnID rowenc.ColumnID `json:"shard_column_id"`
}

// InvertedOpclass is the operator class of a GIN index ("" for btree):
// what rowenc's inverted entries extract from its column.
func (idx *Index) InvertedOpclass() string {
	if idx.Kind != IndexGIN {
		return ""
	}
	return idx.Opclass
}

// IndexKind is the index access method.
type IndexKind string

// Index kinds.
const (
	IndexBTree IndexKind = "btree"
	IndexGIN   IndexKind = "gin"
)

// IndexState is where an index is in an online schema change (DESIGN §8):
// writers maintain it from delete-only on, readers use it only once public.
type IndexState string

// Index states, in the order an index being added passes through them (and
// in reverse when it is dropped).
const (
	// IndexDeleteOnly: writers delete entries of rows they delete or
	// update, but add none.
	IndexDeleteOnly IndexState = "delete_only"
	// IndexWriteOnly: writers maintain every entry; readers ignore it.
	IndexWriteOnly IndexState = "write_only"
	// IndexBackfilling: as write-only while a job fills in the entries of
	// rows that existed before.
	IndexBackfilling IndexState = "backfilling"
	// IndexValidating: as write-only while the build checks the entries
	// against the table (a unique index's count of entries against its
	// rows).
	IndexValidating IndexState = "validating"
	// IndexPublic: complete; the planner may read it.
	IndexPublic IndexState = "public"
)

// IndexPlacement says how a secondary index is partitioned (DESIGN §5).
type IndexPlacement string

// Index placements; "" is resolved by Writer.Create (indexDefaults).
const (
	IndexGlobal IndexPlacement = "global"
	IndexLocal  IndexPlacement = "local"
)

// Check is a CHECK constraint.
type Check struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

// ForeignKey is a FOREIGN KEY constraint from this table's columns to
// another table's.
type ForeignKey struct {
	Name                string            `json:"name"`
	ColumnIDs           []rowenc.ColumnID `json:"column_ids"`
	ReferencedTableID   ID                `json:"referenced_table_id"`
	ReferencedColumnIDs []rowenc.ColumnID `json:"referenced_column_ids"`
	OnDelete            RefAction         `json:"on_delete,omitempty"`
	OnUpdate            RefAction         `json:"on_update,omitempty"`
	// Deferrable and InitiallyDeferred record DEFERRABLE [INITIALLY
	// DEFERRED] as declared (pg_constraint shows them). The executor checks
	// every foreign key at the end of each statement until deferred
	// checking is built.
	Deferrable        bool `json:"deferrable,omitempty"`
	InitiallyDeferred bool `json:"initially_deferred,omitempty"`
}

// RefAction is a foreign key's ON DELETE / ON UPDATE action; "" is NO
// ACTION.
type RefAction string

// Referential actions.
const (
	NoAction   RefAction = ""
	Restrict   RefAction = "restrict"
	Cascade    RefAction = "cascade"
	SetNull    RefAction = "set_null"
	SetDefault RefAction = "set_default"
)

// UniqueConstraint is a UNIQUE constraint; IndexID is the unique index
// that enforces it.
type UniqueConstraint struct {
	Name    string  `json:"name"`
	IndexID IndexID `json:"index_id"`
}

// Partitioning is how a table's rows are spread over the keyspace.
type Partitioning struct {
	Kind PartitionKind `json:"kind"`
	// HashColumns is how many leading primary-key columns the bucket is
	// hashed from (hash partitioning only).
	HashColumns int `json:"hash_columns,omitempty"`
	// HashColumn, when not 0, is the one primary-key column (HashColumns
	// 1) the bucket is hashed from instead of the first: a Citus
	// distribution column elsewhere in the key (HashColumnIDs).
	HashColumn rowenc.ColumnID `json:"hash_column,omitempty"`
	// InitialTablets is how many tablets the bucket space is pre-split
	// into when the table is created.
	InitialTablets int `json:"initial_tablets,omitempty"`
	// Distributed marks a Citus-style distributed table: its secondary
	// indexes default to local so that index writes and builds stay on the
	// row's tablet.
	Distributed bool `json:"distributed,omitempty"`
	// ColocationID is a distributed table's Citus colocation group (the
	// tables it was colocated with share it and its shard count); 0: a
	// group of its own, numbered by its table group (ColocationOf).
	ColocationID uint64 `json:"colocation_id,omitempty"`
	// Reference marks a Citus reference table (create_reference_table):
	// an ordinary table that distributed joins read whole in every
	// fragment instead of moving the other input (docs/distributed.md).
	Reference bool `json:"reference,omitempty"`
}

// HashColumnIDs returns the primary-key columns t's rows are hashed on
// into buckets (a distributed table's distribution column): HashColumn
// when it is set, else the leading HashColumns; none unless t is hash
// partitioned.
func (t *Table) HashColumnIDs() []rowenc.ColumnID {
	p := t.Partitioning
	switch {
	case p.Kind != PartitionHash:
		return nil
	case p.HashColumn != 0:
		return []rowenc.ColumnID{p.HashColumn}
	case p.HashColumns > len(t.PrimaryIndex.KeyColumnIDs):
		return nil
	}
	return t.PrimaryIndex.KeyColumnIDs[:p.HashColumns:p.HashColumns]
}

// ColocationOf is t's Citus colocation ID: its Partitioning.ColocationID,
// or its table group's ID when it has a group of its own.
func ColocationOf(t *Table) uint64 {
	if t.Partitioning.ColocationID != 0 {
		return t.Partitioning.ColocationID
	}
	return t.GroupID
}

// PartitionKind is a table's partitioning scheme.
type PartitionKind string

// Partition kinds.
const (
	// PartitionSingle: one bucket (colocated tables).
	PartitionSingle PartitionKind = "single"
	// PartitionHash: rows go to one of 65536 buckets by a hash of the
	// leading HashColumns primary-key columns (or of HashColumn).
	PartitionHash PartitionKind = "hash"
	// PartitionRange: ordered by primary key, split by size and load.
	PartitionRange PartitionKind = "range"
)

// RowFormat is how primary-index rows are written.
type RowFormat struct {
	// Packed asks writers to pack rows (rowenc.PackRow); readers accept
	// both forms whatever it says.
	Packed bool `json:"packed"`
	// SchemaVersion is the row schema version: it increments on every ADD
	// or DROP of a stored column, and packed rows record it.
	SchemaVersion uint32 `json:"schema_version"`
	// OldestPacked is the oldest row schema version a packed row of the
	// table may have been written under (0: any). ForgetPackingVersions
	// raises it when a census finds no older packed row, and forgets the
	// dropped columns only older versions had (rowenc.SchemaHistory).
	OldestPacked uint32 `json:"oldest_packed,omitempty"`
}

// ColumnByID returns the live column with id, or nil.
func (t *Table) ColumnByID(id rowenc.ColumnID) *Column {
	for i := range t.Columns {
		if t.Columns[i].ID == id {
			return &t.Columns[i]
		}
	}
	return nil
}

// ColumnByName returns the live column named name, or nil.
func (t *Table) ColumnByName(name string) *Column {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return &t.Columns[i]
		}
	}
	return nil
}

// IndexByID returns the primary or secondary index with id, or nil.
func (t *Table) IndexByID(id IndexID) *Index {
	if t.PrimaryIndex.ID == id {
		return &t.PrimaryIndex
	}
	for i := range t.Indexes {
		if t.Indexes[i].ID == id {
			return &t.Indexes[i]
		}
	}
	return nil
}

// IndexByName returns the primary or secondary index named name, or nil.
func (t *Table) IndexByName(name string) *Index {
	if t.PrimaryIndex.Name == name {
		return &t.PrimaryIndex
	}
	for i := range t.Indexes {
		if t.Indexes[i].Name == name {
			return &t.Indexes[i]
		}
	}
	return nil
}

// isKeyColumn reports whether id is a key column of idx.
func (idx *Index) isKeyColumn(id rowenc.ColumnID) bool {
	for _, k := range idx.KeyColumnIDs {
		if k == id {
			return true
		}
	}
	return false
}

// ExprColumnPrefix starts the name of the hidden stored generated column
// that holds an index expression's value (sql/ddl's exprindex.go): an
// index key is made of columns, so CREATE INDEX ON t (lower(email)) keys
// such a column, which the catalogs show as the expression.
const ExprColumnPrefix = "cairn_idx_expr_"

// IsIndexExpr reports whether c holds an index expression.
func (c *Column) IsIndexExpr() bool {
	return c.Hidden && c.ComputedExpr != "" && strings.HasPrefix(c.Name, ExprColumnPrefix)
}

// UserKeyColumnIDs are idx's key columns as the user wrote them: without
// the leading shard column of a hash-sharded index.
func (idx *Index) UserKeyColumnIDs() []rowenc.ColumnID {
	if idx.HashSharding != nil && len(idx.KeyColumnIDs) > 0 && idx.KeyColumnIDs[0] == idx.HashSharding.ShardColumnID {
		return idx.KeyColumnIDs[1:]
	}
	return idx.KeyColumnIDs
}

// ShardColumnPrefix and ShardColumnInfix frame the name of a hash-sharded
// index's shard column, crdb_internal_<cols>_shard_<buckets> as in
// CockroachDB (sql/ddl's hashshard.go makes it).
const (
	ShardColumnPrefix = "crdb_internal_"
	ShardColumnInfix  = "_shard_"
)

// IsShardColumn reports whether c is the shard column of some
// hash-sharded index of t. Unlike other hidden columns it is listed by
// the catalogs (as a generated column), only SELECT * leaves it out.
func (t *Table) IsShardColumn(id rowenc.ColumnID) bool {
	for _, ix := range t.allIndexes() {
		if ix.HashSharding != nil && ix.HashSharding.ShardColumnID == id {
			return true
		}
	}
	return false
}

// RowIDKey reports whether t's primary key is the implicit one of a table
// created without a PRIMARY KEY: its last key column is the hidden int8
// rowid (sql/ddl's addRowID), alone, or after the distribution column of
// a distributed table (create_distributed_table rewrites the key to
// (column, rowid) so that the row's key fixes its shard,
// docs/distributed.md). It returns rowid's column ID. Such a key is no
// constraint the user declared: the catalogs list no primary key for it,
// and ADD PRIMARY KEY replaces it.
func (t *Table) RowIDKey() (rowenc.ColumnID, bool) {
	keys := t.PrimaryIndex.KeyColumnIDs
	if len(keys) == 0 || len(keys) > 2 || t.PrimaryIndex.HashSharding != nil {
		return 0, false
	}
	last := t.ColumnByID(keys[len(keys)-1])
	if last == nil || !last.Hidden || last.Name != RowIDColumnName || last.ComputedExpr != "" {
		return 0, false
	}
	if len(keys) == 2 {
		first := t.ColumnByID(keys[0])
		if first == nil || first.Hidden || !t.Partitioning.Distributed {
			return 0, false
		}
	}
	return last.ID, true
}

// RowIDColumnName is the name of the hidden primary-key column of a table
// created without a PRIMARY KEY.
const RowIDColumnName = "rowid"

// RowIDDefault is the rowid column's default: values unique in the
// cluster (the node's bits in every value), which an INSERT that leaves
// rowid to it relies on (sql/exec's inserter.generatedKey).
const RowIDDefault = "unique_rowid()"

func (t *Table) allIndexes() []*Index {
	out := []*Index{&t.PrimaryIndex}
	for i := range t.Indexes {
		out = append(out, &t.Indexes[i])
	}
	return out
}
