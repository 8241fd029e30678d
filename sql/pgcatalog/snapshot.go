package pgcatalog

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// Fixed OIDs, PostgreSQL's own.
const (
	oidPgCatalog         = 11
	oidPublic            = 2200
	oidInformationSchema = 13207
	oidSuperuser         = 10
	oidTablespaceDefault = 1663
	oidTablespaceGlobal  = 1664
	oidBtree             = 403
	oidHash              = 405
	oidGin               = 2742
	oidHeap              = 2
	oidCollDefault       = 100
	oidCollC             = 950
	oidLangInternal      = 12
	oidPgClass           = 1259
	oidPgConstraint      = 2606
	oidPgExtension       = 3079
	oidPgNamespace       = 2615
	oidPgAttrdef         = 2604
	oidPgRewrite         = 2618
	oidPgType            = 1247
	oidEncodingUTF8      = 6
)

// Derived OIDs for objects without descriptors: the top two bits say the
// kind, the next 20 hold the table's descriptor ID and the low 10 the
// object within the table. Descriptor IDs stay below 1<<20 (about a
// million) and a table below 1024 indexes, constraints and columns for
// this to be one-to-one; DDL past that would alias OIDs, not corrupt data.
const (
	kindShift   = 30
	tableShift  = 10
	subMask     = 1<<tableShift - 1
	kindIndex   = 1
	kindConstr  = 2
	kindAttrdef = 3

	// Constraint sub-numbers: PRIMARY KEY and UNIQUE use their index ID,
	// CHECK constraints 256+i, foreign keys 512+i.
	subCheck = 256
	subFK    = 512
)

func derivedOID(kind uint32, table catalog.ID, sub uint32) uint32 {
	return kind<<kindShift | uint32(table)<<tableShift | sub&subMask
}

func indexOID(t catalog.ID, ix catalog.IndexID) uint32 { return derivedOID(kindIndex, t, uint32(ix)) }
func attrdefOID(t catalog.ID, c rowenc.ColumnID) uint32 {
	return derivedOID(kindAttrdef, t, uint32(c))
}

// ruleOID is the OID of view v's ON SELECT rule (pg_rewrite's _RETURN).
// It borrows the attrdef kind's sub-number 0: a view has no column
// defaults, and no table column is numbered 0.
func ruleOID(v catalog.ID) uint32 { return derivedOID(kindAttrdef, v, 0) }

// splitOID decodes a derived OID; kind 0 is a descriptor ID.
func splitOID(oid uint32) (kind uint32, table catalog.ID, sub uint32) {
	kind = oid >> kindShift
	if kind == 0 {
		return 0, catalog.ID(oid), 0
	}
	return kind, catalog.ID(oid >> tableShift & (1<<(kindShift-tableShift) - 1)), oid & subMask
}

// nspOID is a schema's pg_namespace OID.
func nspOID(id catalog.ID) uint32 {
	switch id {
	case catalog.PgCatalogSchemaID:
		return oidPgCatalog
	case catalog.InformationSchemaID:
		return oidInformationSchema
	case catalog.PublicSchemaID:
		return oidPublic
	}
	return uint32(id)
}

// roleOID is a role's OID. Roles have no descriptor IDs; the superuser is
// 10 as in PostgreSQL and the others hash their name above the
// bootstrap range, which is stable as long as the name is.
func roleOID(name string) uint32 {
	if name == catalog.SuperuserName {
		return oidSuperuser
	}
	if name == catalog.DatabaseOwnerRole {
		return 6171 // PostgreSQL's OID for it
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32() &^ (3 << kindShift)
	if v < 16384 {
		v += 16384
	}
	return v
}

// rel is one relation of the snapshot's database.
type rel struct {
	schema *catalog.Schema
	desc   catalog.Descriptor // *catalog.Table, *catalog.View or *catalog.Sequence
}

func (r rel) oid() uint32 { return uint32(r.desc.DescID()) }

// snapshot is the part of the catalog one Rows call reads: the current
// database's schemas and relations, and the roles.
type snapshot struct {
	reg     *Resolver // regResolver's, made on first use
	env     *plan.VirtualEnv
	db      *catalog.Database
	dbs     []*catalog.Database
	schemas []*catalog.Schema // stored ones, then pg_catalog and information_schema
	rels    []rel
	byID    map[catalog.ID]rel
	roles   []*catalog.Role
}

var virtualSchemas = []*catalog.Schema{
	{ID: catalog.PgCatalogSchemaID, Name: "pg_catalog", Owner: catalog.SuperuserName, Virtual: true},
	{ID: catalog.InformationSchemaID, Name: "information_schema", Owner: catalog.SuperuserName, Virtual: true},
	{ID: catalog.CairnCatalogSchemaID, Name: "cairn_catalog", Owner: catalog.SuperuserName, Virtual: true},
}

func newSnapshot(ctx context.Context, env *plan.VirtualEnv) (*snapshot, error) {
	if env == nil || env.Catalog == nil || env.Database == nil {
		return nil, pgerror.New(pgerrcode.InternalError, "pgcatalog: no catalog to read")
	}
	return loadSnapshot(ctx, env, env.Catalog, env.Database)
}

func loadSnapshot(ctx context.Context, env *plan.VirtualEnv, r *catalog.Reader, db *catalog.Database) (*snapshot, error) {
	s := &snapshot{env: env, db: db, byID: map[catalog.ID]rel{}}
	var err error
	if s.dbs, err = r.Databases(ctx); err != nil {
		return nil, fmt.Errorf("pgcatalog: listing databases: %w", err)
	}
	stored, err := r.Schemas(ctx, db.ID)
	if err != nil {
		return nil, fmt.Errorf("pgcatalog: listing schemas: %w", err)
	}
	s.schemas = append(append(s.schemas, stored...), virtualSchemas...)
	for _, sc := range stored {
		descs, err := r.Relations(ctx, db.ID, sc.ID)
		if err != nil {
			return nil, fmt.Errorf("pgcatalog: listing relations of %s: %w", sc.Name, err)
		}
		for _, d := range descs {
			rl := rel{schema: sc, desc: d}
			s.rels = append(s.rels, rl)
			s.byID[d.DescID()] = rl
		}
	}
	if s.roles, err = r.Roles(ctx); err != nil {
		return nil, fmt.Errorf("pgcatalog: listing roles: %w", err)
	}
	return s, nil
}

func (s *snapshot) tables() []rel {
	var out []rel
	for _, r := range s.rels {
		if _, ok := r.desc.(*catalog.Table); ok {
			out = append(out, r)
		}
	}
	return out
}

// listedSchemas are the schemas pg_namespace and information_schema list:
// all but cairn_catalog (see unlisted).
func (s *snapshot) listedSchemas() []*catalog.Schema {
	var out []*catalog.Schema
	for _, sc := range s.schemas {
		if sc.Name != unlistedSchema {
			out = append(out, sc)
		}
	}
	return out
}

func (s *snapshot) schemaByID(id catalog.ID) *catalog.Schema {
	for _, sc := range s.schemas {
		if sc.ID == id {
			return sc
		}
	}
	return nil
}

func (s *snapshot) user() string {
	if s.env != nil && s.env.User != "" {
		return s.env.User
	}
	return catalog.SuperuserName
}

func owner(o string) string {
	if o == "" {
		return catalog.SuperuserName
	}
	return o
}

// visibleColumns are a table's columns as PostgreSQL would list them:
// hidden ones left out (see the package comment), except the shard
// columns of hash-sharded indexes, which are listed as the generated
// columns they are (CockroachDB's NOT VISIBLE: only SELECT * skips them).
func visibleColumns(t *catalog.Table) []*catalog.Column {
	var out []*catalog.Column
	for i := range t.Columns {
		if !t.Columns[i].Hidden || t.IsShardColumn(t.Columns[i].ID) {
			out = append(out, &t.Columns[i])
		}
	}
	return out
}

// indexes are a table's indexes as PostgreSQL would list them: the
// primary index only when the user declared a primary key (not the
// hidden rowid key, catalog.Table.RowIDKey, even with a distribution
// column before it), and the secondary ones.
func indexes(t *catalog.Table) []*catalog.Index {
	var out []*catalog.Index
	if hasPrimaryKey(t) {
		out = append(out, &t.PrimaryIndex)
	}
	for i := range t.Indexes {
		out = append(out, &t.Indexes[i])
	}
	return out
}

func hasPrimaryKey(t *catalog.Table) bool {
	if _, ok := t.RowIDKey(); ok {
		return false
	}
	for _, id := range t.PrimaryIndex.KeyColumnIDs {
		if c := t.ColumnByID(id); c != nil && !c.Hidden {
			return true
		}
	}
	return false
}

// keyColumns are an index's visible key columns (the shard column of a
// hash-sharded index is left out) with their orders, and its stored ones.
func keyColumns(t *catalog.Table, ix *catalog.Index) (keys []rowenc.ColumnID, orders []rowenc.Order, stored []rowenc.ColumnID) {
	for i, id := range ix.KeyColumnIDs {
		if c := t.ColumnByID(id); c != nil && c.Hidden && !c.IsIndexExpr() {
			continue
		}
		keys = append(keys, id)
		var o rowenc.Order
		if i < len(ix.KeyDirections) {
			o = ix.KeyDirections[i]
		}
		orders = append(orders, o)
	}
	for _, id := range ix.StoreColumnIDs {
		if c := t.ColumnByID(id); c == nil || !c.Hidden {
			stored = append(stored, id)
		}
	}
	return keys, orders, stored
}

func colName(t *catalog.Table, id rowenc.ColumnID) string {
	if c := t.ColumnByID(id); c != nil {
		return c.Name
	}
	return fmt.Sprintf("?column%d?", id)
}

// quoteIdent quotes an identifier as PostgreSQL's quote_ident does.
func quoteIdent(s string) string { return builtins.QuoteIdent(s) }

// regResolver resolves relation names for the reg* types in the
// snapshot's transaction, with the session's search path.
func (s *snapshot) regResolver(ctx context.Context) *Resolver {
	if s.reg == nil {
		s.reg = NewRegResolver(ctx, s.env.Catalog, s.db, s.user(), s.env.Session.SearchPath)
		s.reg.snap = s
		if s.env.Tablets != nil {
			s.reg.SetSizes(s.env.Tablets)
		}
	}
	return s.reg
}
