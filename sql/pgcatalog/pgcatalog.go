// Package pgcatalog owns the system catalogs Cairn generates: the
// pg_catalog and information_schema relations (tables.go, infoschema.go)
// that psql, pgbench, drivers and ORMs read to reflect a database, and the
// catalog resolver (resolver.go) behind the reg* types' text I/O and the
// catalog-information functions (pg_get_indexdef, obj_description, ...).
//
// Nothing is stored: every row is computed from the descriptors a
// catalog.Reader sees in the statement's transaction, so the catalogs are
// exactly as transactional as DDL. The package must not write the catalog,
// touch table data, or know about sessions beyond plan.VirtualEnv.
//
// OIDs. Descriptor IDs are OIDs: a table's pg_class.oid is its catalog.ID,
// a column's attnum its rowenc.ColumnID. Objects without descriptors get
// OIDs derived from their table's ID (oids.go): indexes, constraints and
// column defaults, which keeps them stable and decodable without a lookup.
// The virtual relations and built-in types use PostgreSQL's own OIDs
// (pg_class is 1259, int4 is 23), pg_catalog is namespace 11, public of the
// postgres database 2200, the superuser role 10.
//
// Hidden columns (rowid, a hash-sharded index's shard column) are left out
// of pg_attribute and information_schema.columns, and a primary index over
// hidden columns only (a table declared without a primary key) is left out
// of pg_index and pg_constraint: an ORM reflecting the table sees what the
// user declared, as in PostgreSQL, where such a table has no key at all.
package pgcatalog

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/types"
)

// vtable is one generated relation.
type vtable struct {
	schema, name string
	oid          uint32
	view         bool // a view in PostgreSQL (relkind 'v' in pg_class)
	cols         []plan.VirtualColumn
	idx          map[string]int
	gen          func(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error)
}

func (t *vtable) Schema() string                { return t.schema }
func (t *vtable) Name() string                  { return t.name }
func (t *vtable) OID() uint32                   { return t.oid }
func (t *vtable) Columns() []plan.VirtualColumn { return t.cols }
func (t *vtable) String() string                { return t.schema + "." + t.name }
func (t *vtable) colType(name string) *types.T  { return t.cols[t.col(name)].T }
func (t *vtable) has(name string) bool          { _, ok := t.idx[name]; return ok }
func (t *vtable) col(name string) int {
	i, ok := t.idx[name]
	if !ok {
		panic(fmt.Sprintf("pgcatalog: %s has no column %s", t, name))
	}
	return i
}

// Rows generates the relation's rows in env's transaction.
func (t *vtable) Rows(ctx context.Context, env *plan.VirtualEnv) ([][]types.Datum, error) {
	s, err := newSnapshot(ctx, env)
	if err != nil {
		return nil, err
	}
	if t.gen == nil {
		return nil, nil // a catalog that is always empty in Cairn
	}
	return t.gen(ctx, s, t)
}

// row builds one row from name/value pairs. Unnamed columns are NULL in
// information_schema; in pg_catalog they get the zero of their type (0,
// false) or NULL (text, arrays, timestamps), which is what the
// corresponding PostgreSQL catalog column holds in the common case.
func (t *vtable) row(kv ...any) []types.Datum {
	r := make([]types.Datum, len(t.cols))
	for i, c := range t.cols {
		if t.schema != "pg_catalog" {
			r[i] = types.DNull
			continue
		}
		switch c.T.Family {
		case types.BoolFamily:
			r[i] = types.DBool(false)
		case types.IntFamily:
			r[i] = types.DInt(0)
		case types.FloatFamily:
			r[i] = types.DFloat(0)
		case types.OidFamily:
			r[i] = types.DOid(0)
		default:
			r[i] = types.DNull
		}
	}
	for i := 0; i < len(kv); i += 2 {
		j := t.col(kv[i].(string))
		r[j] = datum(t.cols[j].T, kv[i+1])
	}
	return r
}

// datum converts a Go value to a datum of type typ.
func datum(typ *types.T, v any) types.Datum {
	switch x := v.(type) {
	case nil:
		return types.DNull
	case types.Datum:
		return x
	case string:
		return types.DString(x)
	case bool:
		return types.DBool(x)
	case []string:
		a := types.NewArray(types.Text)
		for _, s := range x {
			a.Elems = append(a.Elems, types.DString(s))
		}
		return a
	case []int64:
		a := types.NewArray(typ.Elem)
		if types.IsVector(typ) {
			a = types.NewVector(typ)
		}
		for _, n := range x {
			a.Elems = append(a.Elems, datum(typ.Elem, n))
		}
		return a
	}
	n := toInt64(v)
	switch typ.Family {
	case types.OidFamily:
		return types.DOid(uint32(n))
	case types.FloatFamily:
		return types.DFloat(float64(n))
	case types.StringFamily:
		return types.DString(fmt.Sprint(n))
	}
	return types.DInt(n)
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case uint32:
		return int64(x)
	case uint64:
		return int64(x)
	}
	// Named integer types (catalog.ID, rowenc.ColumnID, ...).
	rv := reflect.ValueOf(v)
	switch {
	case rv.CanInt():
		return rv.Int()
	case rv.CanUint():
		return int64(rv.Uint())
	}
	panic(fmt.Sprintf("pgcatalog: cannot convert %T to a datum", v))
}

// The column types of the catalogs, PostgreSQL's own (name and "char"
// included, so RowDescription carries OIDs 19 and 18 as PostgreSQL's
// does), except that pg_node_tree is text (the
// expression's SQL, which pg_get_expr returns as is), aclitem[] is text[]
// (always NULL: no privileges yet), xid is int8.
var colTypes = map[string]*types.T{
	"oid": types.Oid, "name": types.Name, `"char"`: types.Char, "text": types.Text,
	"regproc": types.RegProc, "regtype": types.RegType, "regclass": types.RegClass, "smallint": types.Int2,
	"integer": types.Int4, "bigint": types.Int8, "real": types.Float4, "boolean": types.Bool,
	"pg_node_tree": types.Text, "aclitem[]": types.MustArray(types.Text),
	"text[]": types.MustArray(types.Text), `"char"[]`: types.MustArray(types.Char),
	"smallint[]": types.MustArray(types.Int2), "oid[]": types.MustArray(types.Oid), "integer[]": types.MustArray(types.Int4),
	"int2vector": types.Int2Vector, "oidvector": types.OidVector,
	"xid": types.Int8, "anyarray": types.Text, "inet": types.Text, "bytea": types.Bytea,
	"timestamptz": types.TimestampTZ, "float8": types.Float8, "real[]": types.MustArray(types.Float4), "pg_lsn": types.Text,
	// information_schema's domains.
	"sql_identifier": types.Text, "character_data": types.Text, "yes_or_no": types.Text,
	"cardinal_number": types.Int4, "time_stamp": types.TimestampTZ,
}

// parseCols reads "name:type name:type ..." as PostgreSQL 15's \d lists it.
func parseCols(spec string) []plan.VirtualColumn {
	var out []plan.VirtualColumn
	for _, f := range strings.Fields(spec) {
		name, typ, ok := strings.Cut(f, ":")
		t := colTypes[typ]
		if !ok || t == nil {
			panic("pgcatalog: bad column spec " + f)
		}
		out = append(out, plan.VirtualColumn{Name: name, T: t})
	}
	return out
}

var registry = map[[2]string]*vtable{}

// ordered lists the relations the catalogs list (pg_class, pg_attribute,
// information_schema), by schema and name; unlisted, cairn_catalog's. They
// are left out of the listings, and cairn_catalog out of pg_namespace, so
// that pg_dump, which dumps every schema not named pg_* or
// information_schema, does not try to dump (and a restore to re-create)
// Cairn's own virtual schema. They resolve by name and OID like the others.
var ordered, unlisted []*vtable

// unlistedSchema is the virtual schema the catalogs do not list.
const unlistedSchema = "cairn_catalog"

func define(schema, name string, oid uint32, view bool, spec string,
	gen func(ctx context.Context, s *snapshot, t *vtable) ([][]types.Datum, error)) {
	t := &vtable{schema: schema, name: name, oid: oid, view: view, cols: parseCols(spec), gen: gen, idx: map[string]int{}}
	for i, c := range t.cols {
		t.idx[c.Name] = i
	}
	if registry[[2]string{schema, name}] != nil {
		panic("pgcatalog: duplicate " + t.String())
	}
	registry[[2]string{schema, name}] = t
	if schema == unlistedSchema {
		unlisted = append(unlisted, t)
		return
	}
	ordered = append(ordered, t)
	sort.Slice(ordered, func(i, j int) bool {
		if ordered[i].schema != ordered[j].schema {
			return ordered[i].schema < ordered[j].schema
		}
		return ordered[i].name < ordered[j].name
	})
}

// Lookup returns the virtual table schema.name, nil if there is none.
func Lookup(schema, name string) plan.VirtualTable {
	if t := registry[[2]string{schema, name}]; t != nil {
		return t
	}
	return nil
}

// Tables lists every virtual table the catalogs list, ordered by schema
// and name, then cairn_catalog's.
func Tables() []plan.VirtualTable {
	out := make([]plan.VirtualTable, 0, len(ordered)+len(unlisted))
	for _, t := range append(append([]*vtable{}, ordered...), unlisted...) {
		out = append(out, t)
	}
	return out
}

func virtualByOID(oid uint32) *vtable {
	for _, t := range append(append([]*vtable{}, ordered...), unlisted...) {
		if t.oid == oid {
			return t
		}
	}
	return nil
}
