package catalog

import (
	"fmt"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/cairn-db/cairn/zone"
)

// ID names a descriptor (database, schema, table, view, sequence) for its
// whole life. IDs are never reused once a creating transaction commits.
type ID uint32

// Fixed IDs: a fresh cluster's catalog (Bootstrap) and the virtual
// schemas every database shows.
const (
	InvalidID ID = 0
	// PostgresDatabaseID is the database named postgres.
	PostgresDatabaseID ID = 1
	// PublicSchemaID is postgres.public; other databases' public schemas
	// get fresh IDs.
	PublicSchemaID ID = 2
	// PgCatalogSchemaID and InformationSchemaID are virtual: every database
	// shows them, nothing is stored for them, and no user schema may take
	// their names.
	PgCatalogSchemaID   ID = 3
	InformationSchemaID ID = 4
	// CairnCatalogSchemaID is cairn_catalog, the virtual schema of
	// Cairn's own introspection relations (cairn_catalog.tablets).
	CairnCatalogSchemaID ID = 5
	// FirstUserID is the first ID AllocateID hands out; the gap below it is
	// reserved for more fixed descriptors. Descriptor IDs double as
	// PostgreSQL OIDs (pg_class.oid, regclass values), so user objects start
	// at PostgreSQL's FirstNormalObjectId and never collide with the OIDs
	// of built-in types, functions and catalogs that clients hard-code.
	FirstUserID ID = 16384
)

// Kind says which descriptor a Descriptor is.
type Kind string

// The descriptor kinds.
const (
	KindDatabase Kind = "database"
	KindSchema   Kind = "schema"
	KindTable    Kind = "table"
	KindView     Kind = "view"
	KindSequence Kind = "sequence"
)

// Descriptor is what every descriptor kind has in common. The set of kinds
// is closed (the unexported methods seal it).
//
// A Descriptor returned by a Reader or a Cache is shared and must not be
// modified: Clone it, change the copy, and pass the copy to Writer.Update.
type Descriptor interface {
	DescID() ID
	DescName() string
	// DescVersion increments on every committed change (invariant 3).
	DescVersion() uint64
	DescKind() Kind
	// Parent returns the namespace the name lives in: (0, 0) for a
	// database, (database, 0) for a schema, (database, schema) for a
	// relation.
	Parent() (dbID, schemaID ID)
	Validate() error

	setID(ID)
	setName(string)
	setVersion(uint64)
}

// Database is a database. A colocated database keeps all its tables (those
// that do not opt out) and their indexes in one table group, so one tablet
// holds them all (DESIGN §5, seeds/colocated-tables.txt).
type Database struct {
	ID                ID     `json:"id"`
	Name              string `json:"name"`
	Version           uint64 `json:"version"`
	Owner             string `json:"owner"`
	Colocated         bool   `json:"colocated,omitempty"`
	ColocationGroupID uint64 `json:"colocation_group_id,omitempty"`
	// Comment is COMMENT ON DATABASE's text.
	Comment string `json:"comment,omitempty"`
	// ACL is the object's privileges (privilege.go); nil is the default.
	ACL []ACLItem `json:"acl,omitempty"`
	// Zone is ALTER DATABASE ... CONFIGURE ZONE's placement settings
	// (package zone); nil: the cluster's.
	Zone *zone.Config `json:"zone,omitempty"`
	// Extensions are the database's CREATE EXTENSION records (pg_extension),
	// in creation order. Only extensions whose functions Cairn has built in
	// can be created (ddl/extension.go), so a record adds no functions: it
	// is what \dx, pg_dump and migration tools read back.
	Extensions []Extension `json:"extensions,omitempty"`
}

// Extension is one installed extension of a database.
type Extension struct {
	// OID is the extension's pg_extension OID, allocated from the
	// descriptor ID space so that it never collides with another object's.
	OID      ID     `json:"oid"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	SchemaID ID     `json:"schema_id"`
	Owner    string `json:"owner"`
	// Comment is the extension's description (pg_description), the
	// comment of its control file when created.
	Comment string `json:"comment,omitempty"`
}

// Schema is a schema of a database.
type Schema struct {
	ID         ID     `json:"id"`
	DatabaseID ID     `json:"database_id"`
	Name       string `json:"name"`
	Version    uint64 `json:"version"`
	Owner      string `json:"owner,omitempty"`
	// Virtual schemas (pg_catalog, information_schema) are generated, never
	// stored.
	Virtual bool `json:"virtual,omitempty"`
	// Comment is COMMENT ON SCHEMA's text.
	Comment string `json:"comment,omitempty"`
	// ACL is the object's privileges (privilege.go); nil is the default.
	ACL []ACLItem `json:"acl,omitempty"`
	// Temp marks a session's schema of temporary tables (pg_temp_...),
	// which the session creates on first use and drops when it ends.
	Temp bool `json:"temp,omitempty"`
}

// View is a view: its query text and the columns it produces.
type View struct {
	ID         ID           `json:"id"`
	DatabaseID ID           `json:"database_id"`
	SchemaID   ID           `json:"schema_id"`
	Name       string       `json:"name"`
	Version    uint64       `json:"version"`
	Owner      string       `json:"owner,omitempty"`
	Query      string       `json:"query"`
	Columns    []ViewColumn `json:"columns"`
	// DependsOn lists the tables, views and sequences the query reads:
	// DROP of one of them fails without CASCADE (2BP01) and takes the view
	// with it with CASCADE.
	DependsOn []ID `json:"depends_on,omitempty"`
	// Comment is COMMENT ON VIEW's text.
	Comment string `json:"comment,omitempty"`
	// ACL is the object's privileges (privilege.go); nil is the default.
	ACL []ACLItem `json:"acl,omitempty"`
	// CheckOption is WITH [LOCAL | CASCADED] CHECK OPTION: "local" or
	// "cascaded" ("" when the view has none). Rows written through the
	// view must satisfy its condition (and, cascaded, those of the views
	// below it).
	CheckOption string `json:"check_option,omitempty"`
}

// ViewColumn is one output column of a view.
type ViewColumn struct {
	Name string   `json:"name"`
	Type *types.T `json:"-"` // stored as OID and typmod (coltype.go)
}

// Sequence is a sequence's definition. Its current value is not part of
// the descriptor (a descriptor changes rarely, a sequence on every
// nextval).
type Sequence struct {
	ID         ID             `json:"id"`
	DatabaseID ID             `json:"database_id"`
	SchemaID   ID             `json:"schema_id"`
	Name       string         `json:"name"`
	Version    uint64         `json:"version"`
	Owner      string         `json:"owner,omitempty"`
	Start      int64          `json:"start"`
	Increment  int64          `json:"increment"`
	Min        int64          `json:"min"`
	Max        int64          `json:"max"`
	Cycle      bool           `json:"cycle,omitempty"`
	OwnedBy    *SequenceOwner `json:"owned_by,omitempty"`
	// Cache is how many values a session fetches at once (CACHE n; 0 and 1
	// both mean one at a time).
	Cache int64 `json:"cache,omitempty"`
	// Comment is COMMENT ON SEQUENCE's text.
	Comment string `json:"comment,omitempty"`
	// TypeOID is the AS type (int2, int4 or int8 OID); 0 means int8.
	TypeOID uint32 `json:"type_oid,omitempty"`
	// ACL is the object's privileges (privilege.go); nil is the default.
	ACL []ACLItem `json:"acl,omitempty"`
}

// SequenceOwner is the column a sequence belongs to (serial, identity, OWNED
// BY): dropping the column drops the sequence.
type SequenceOwner struct {
	TableID  ID              `json:"table_id"`
	ColumnID rowenc.ColumnID `json:"column_id"`
}

func (d *Database) DescID() ID                  { return d.ID }
func (d *Database) DescName() string            { return d.Name }
func (d *Database) DescVersion() uint64         { return d.Version }
func (d *Database) DescKind() Kind              { return KindDatabase }
func (d *Database) Parent() (dbID, schemaID ID) { return 0, 0 }
func (d *Database) setID(id ID)                 { d.ID = id }
func (d *Database) setName(n string)            { d.Name = n }
func (d *Database) setVersion(v uint64)         { d.Version = v }

func (s *Schema) DescID() ID                  { return s.ID }
func (s *Schema) DescName() string            { return s.Name }
func (s *Schema) DescVersion() uint64         { return s.Version }
func (s *Schema) DescKind() Kind              { return KindSchema }
func (s *Schema) Parent() (dbID, schemaID ID) { return s.DatabaseID, 0 }
func (s *Schema) setID(id ID)                 { s.ID = id }
func (s *Schema) setName(n string)            { s.Name = n }
func (s *Schema) setVersion(v uint64)         { s.Version = v }

func (v *View) DescID() ID                  { return v.ID }
func (v *View) DescName() string            { return v.Name }
func (v *View) DescVersion() uint64         { return v.Version }
func (v *View) DescKind() Kind              { return KindView }
func (v *View) Parent() (dbID, schemaID ID) { return v.DatabaseID, v.SchemaID }
func (v *View) setID(id ID)                 { v.ID = id }
func (v *View) setName(n string)            { v.Name = n }
func (v *View) setVersion(x uint64)         { v.Version = x }

func (s *Sequence) DescID() ID                  { return s.ID }
func (s *Sequence) DescName() string            { return s.Name }
func (s *Sequence) DescVersion() uint64         { return s.Version }
func (s *Sequence) DescKind() Kind              { return KindSequence }
func (s *Sequence) Parent() (dbID, schemaID ID) { return s.DatabaseID, s.SchemaID }
func (s *Sequence) setID(id ID)                 { s.ID = id }
func (s *Sequence) setName(n string)            { s.Name = n }
func (s *Sequence) setVersion(v uint64)         { s.Version = v }

func (t *Table) DescID() ID                  { return t.ID }
func (t *Table) DescName() string            { return t.Name }
func (t *Table) DescVersion() uint64         { return t.Version }
func (t *Table) DescKind() Kind              { return KindTable }
func (t *Table) Parent() (dbID, schemaID ID) { return t.DatabaseID, t.SchemaID }
func (t *Table) setID(id ID)                 { t.ID = id }
func (t *Table) setName(n string)            { t.Name = n }
func (t *Table) setVersion(v uint64)         { t.Version = v }

// describe names a descriptor in error messages.
func describe(d Descriptor) string {
	return fmt.Sprintf("%s %q (id %d)", d.DescKind(), d.DescName(), d.DescID())
}
