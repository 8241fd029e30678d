package pgcatalog

import (
	"context"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// Resolver resolves catalog names for the reg* types' text I/O
// (types.RegResolver) and answers the catalog functions
// (builtins.CatalogInfo), as of one transaction. The session makes one
// per statement and puts it in the statement's types.Context.Reg.
//
// It reads the database's whole relation list on first use and keeps it
// for its life: a statement sees one catalog snapshot, and a resolver is
// not reused across statements (DDL in between would not be seen).
// Not safe for concurrent use (nor is the catalog.Reader under it).
type Resolver struct {
	ctx  context.Context
	r    *catalog.Reader
	db   *catalog.Database
	user string
	path []string
	snap *snapshot
	// sizes counts relations' bytes (sizes.go); nil without a node.
	sizes plan.SpanSizes
	// tablets is the node's tablet directory (the shard rebalancer's
	// plan, rebalance.go); nil without a node.
	tablets plan.TabletDirectory
	// jobs reads the job records (citus_rebalance_status); nil: none.
	jobs jobs.Reader
}

var (
	_ types.RegResolver    = (*Resolver)(nil)
	_ builtins.CatalogInfo = (*Resolver)(nil)
)

// NewRegResolver returns a resolver over r for database db with the
// session's user and search path (schema names in order; "$user" stands for
// the user's own schema). ctx must live as long as the resolver is used.
func NewRegResolver(ctx context.Context, r *catalog.Reader, db *catalog.Database, user string, searchPath []string) *Resolver {
	return &Resolver{ctx: ctx, r: r, db: db, user: user, path: searchPath}
}

func (res *Resolver) load() (*snapshot, error) {
	if res.snap == nil {
		s, err := loadSnapshot(res.ctx, nil, res.r, res.db)
		if err != nil {
			return nil, err
		}
		res.snap = s
	}
	return res.snap, nil
}

// The resolver answers with point lookups (a name in a schema, a
// descriptor by ID) rather than the whole-database listing the virtual
// tables read, since one statement typically resolves a name or two; the
// listing is read only to find an index by name.

// schemaNamed returns schema name of the database, nil if there is none.
func (res *Resolver) schemaNamed(name string) (*catalog.Schema, error) {
	sc, err := res.r.Schema(res.ctx, res.db.ID, name)
	if pgerror.Code(err) == pgerrcode.InvalidSchemaName {
		return nil, nil
	}
	return sc, err
}

// schemaByID returns a schema of the database by ID, nil if there is none.
func (res *Resolver) schemaByID(id catalog.ID) *catalog.Schema {
	for _, v := range virtualSchemas {
		if v.ID == id {
			return v
		}
	}
	d, err := res.r.ByID(res.ctx, id)
	if err != nil {
		return nil
	}
	if sc, ok := d.(*catalog.Schema); ok && sc.DatabaseID == res.db.ID {
		return sc
	}
	return nil
}

// searchPath is the effective search path: pg_catalog first unless listed,
// then the session's schemas that exist.
func (res *Resolver) searchPath() ([]*catalog.Schema, error) {
	var out []*catalog.Schema
	names := res.path
	if !containsName(names, "pg_catalog") {
		names = append([]string{"pg_catalog"}, names...)
	}
	for _, n := range names {
		if n == "$user" {
			n = res.user
		}
		sc, err := res.schemaNamed(n)
		if err != nil {
			return nil, err
		}
		if sc != nil {
			out = append(out, sc)
		}
	}
	return out, nil
}

func containsName(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func (s *snapshot) schemaByName(name string) *catalog.Schema {
	for _, sc := range s.schemas {
		if sc.Name == name {
			return sc
		}
	}
	return nil
}

// relInSchema finds a relation (table, view, sequence, index or virtual
// relation) named name in schema sc: its OID and whether it exists.
func (res *Resolver) relInSchema(sc *catalog.Schema, name string) (uint32, bool, error) {
	if sc.Virtual {
		if t := registry[[2]string{sc.Name, name}]; t != nil {
			return t.oid, true, nil
		}
		return 0, false, nil
	}
	id, ok, err := res.r.LookupID(res.ctx, res.db.ID, sc.ID, name)
	if err != nil {
		return 0, false, err
	}
	if ok {
		// Types share the namespace (catalog.KindType) but are no
		// relations: 'mood'::regclass does not find enum type mood.
		if d, err := res.r.ByID(res.ctx, id); err == nil && d.DescKind() == catalog.KindType {
			return 0, false, nil
		}
		return uint32(id), true, nil
	}
	// Index names live inside their tables' descriptors.
	s, err := res.load()
	if err != nil {
		return 0, false, err
	}
	oid, ok := s.relByName(sc, name)
	return oid, ok, nil
}

// relByOID returns a relation's schema and name.
func (res *Resolver) relByOID(oid uint32) (*catalog.Schema, string, bool) {
	if v := virtualByOID(oid); v != nil {
		return res.schemaByID(schemaIDOf(v.schema)), v.name, true
	}
	kind, tid, sub := splitOID(oid)
	d, err := res.r.ByID(res.ctx, tid)
	if err != nil {
		return nil, "", false
	}
	db, schemaID := d.Parent()
	if db != res.db.ID {
		return nil, "", false
	}
	sc := res.schemaByID(schemaID)
	if sc == nil {
		return nil, "", false
	}
	switch d := d.(type) {
	case *catalog.Table:
		if kind == 0 {
			return sc, d.Name, true
		}
		if kind == kindIndex {
			for _, ix := range indexes(d) {
				if uint32(ix.ID) == sub {
					return sc, ix.Name, true
				}
			}
		}
	case *catalog.View, *catalog.Sequence:
		if kind == 0 {
			return sc, d.DescName(), true
		}
	}
	return nil, "", false
}

// table returns table id of the database and its schema.
func (res *Resolver) table(id catalog.ID) (*catalog.Table, *catalog.Schema) {
	d, err := res.r.ByID(res.ctx, id)
	if err != nil {
		return nil, nil
	}
	t, ok := d.(*catalog.Table)
	if !ok || t.DatabaseID != res.db.ID {
		return nil, nil
	}
	if sc := res.schemaByID(t.SchemaID); sc != nil {
		return t, sc
	}
	return nil, nil
}

// splitName parses a possibly qualified, possibly quoted name as
// PostgreSQL's stringToQualifiedNameList does: unquoted parts fold to
// lower case. A syntax error is 42602.
func splitName(name string) ([]string, error) {
	var parts []string
	var cur strings.Builder
	s := strings.TrimSpace(name)
	bad := func() ([]string, error) {
		return nil, pgerror.New(pgerrcode.InvalidName, "invalid name syntax")
	}
	for i := 0; i <= len(s); {
		if i < len(s) && s[i] == '"' {
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '"' {
					if j+1 < len(s) && s[j+1] == '"' {
						cur.WriteByte('"')
						j++
						continue
					}
					break
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return bad()
			}
			i = j + 1
			continue
		}
		if i == len(s) || s[i] == '.' {
			if cur.Len() == 0 {
				return bad()
			}
			parts = append(parts, cur.String())
			cur.Reset()
			i++
			continue
		}
		if s[i] == ' ' {
			return bad()
		}
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		cur.WriteByte(c)
		i++
	}
	if len(parts) == 0 || len(parts) > 3 {
		return bad()
	}
	return parts, nil
}

// relByName finds a relation (table, view, sequence, index or virtual
// relation) named name in schema sc; its OID and whether it exists.
func (s *snapshot) relByName(sc *catalog.Schema, name string) (uint32, bool) {
	if sc.Virtual {
		if t := registry[[2]string{sc.Name, name}]; t != nil {
			return t.oid, true
		}
		return 0, false
	}
	for _, r := range s.rels {
		if r.schema.ID != sc.ID || r.desc.DescKind() == catalog.KindFunction {
			continue // functions share the namespace but are no relations
		}
		if r.desc.DescName() == name {
			return r.oid(), true
		}
		if t, ok := r.desc.(*catalog.Table); ok {
			for _, ix := range indexes(t) {
				if ix.Name == name {
					return indexOID(t.ID, ix.ID), true
				}
			}
		}
	}
	return 0, false
}

func (res *Resolver) resolveClass(name string) (uint32, error) {
	parts, err := splitName(name)
	if err != nil {
		return 0, err
	}
	if len(parts) == 3 {
		if parts[0] != res.db.Name {
			return 0, pgerror.New(pgerrcode.FeatureNotSupported, "cross-database references are not implemented: %s", name)
		}
		parts = parts[1:]
	}
	if len(parts) == 2 {
		sc, err := res.schemaNamed(parts[0])
		if err != nil {
			return 0, err
		}
		if sc == nil {
			return 0, pgerror.New(pgerrcode.InvalidSchemaName, "schema \"%s\" does not exist", parts[0])
		}
		oid, ok, err := res.relInSchema(sc, parts[1])
		if err != nil || ok {
			return oid, err
		}
		return 0, types.RegNotFound(types.RegClass, parts[0]+"."+parts[1])
	}
	path, err := res.searchPath()
	if err != nil {
		return 0, err
	}
	for _, sc := range path {
		oid, ok, err := res.relInSchema(sc, parts[0])
		if err != nil || ok {
			return oid, err
		}
	}
	return 0, types.RegNotFound(types.RegClass, parts[0])
}

// ResolveReg implements types.RegResolver.
func (res *Resolver) ResolveReg(kind *types.T, name string) (uint32, error) {
	switch kind.Oid {
	case types.RegClass.Oid:
		return res.resolveClass(name)
	case types.RegNamespace.Oid:
		parts, err := splitName(name)
		if err != nil {
			return 0, err
		}
		if len(parts) != 1 {
			return 0, pgerror.New(pgerrcode.InvalidName, "invalid name syntax")
		}
		sc, err := res.schemaNamed(parts[0])
		if err != nil {
			return 0, err
		}
		if sc == nil {
			return 0, types.RegNotFound(kind, parts[0])
		}
		return nspOID(sc.ID), nil
	case types.RegRole.Oid:
		parts, err := splitName(name)
		if err != nil {
			return 0, err
		}
		if len(parts) == 1 {
			if _, err := res.r.Role(res.ctx, parts[0]); err == nil {
				return roleOID(parts[0]), nil
			}
		}
		return 0, types.RegNotFound(kind, name)
	case types.RegProc.Oid, types.RegProcedure.Oid:
		oid, err := resolveProc(kind, name)
		if pgerror.Code(err) != pgerrcode.UndefinedFunction {
			return oid, err
		}
		if uoid, found, uerr := res.resolveUserProc(kind, name); uerr != nil || found {
			return uoid, uerr
		}
		return 0, err
	case types.RegType.Oid:
		return res.resolveTypeName(name)
	}
	return 0, types.RegNotFound(kind, name)
}

// resolveProc finds a built-in function: regproc by name alone (42725 when
// overloaded), regprocedure by name(argument types).
func resolveProc(kind *types.T, name string) (uint32, error) {
	fn, args, hasArgs := strings.Cut(strings.TrimSpace(name), "(")
	parts, err := splitName(fn)
	if err != nil {
		return 0, err
	}
	if len(parts) == 2 && parts[0] == "pg_catalog" {
		parts = parts[1:]
	}
	if len(parts) != 1 {
		return 0, types.RegNotFound(kind, name)
	}
	ovs := builtins.Lookup(parts[0])
	if !hasArgs {
		if kind.Oid == types.RegProcedure.Oid {
			return 0, pgerror.New(pgerrcode.InvalidTextRepresentation, "expected a left parenthesis")
		}
		switch len(ovs) {
		case 0:
			return 0, types.RegNotFound(kind, name)
		case 1:
			return ovs[0].OID, nil
		}
		return 0, pgerror.New(pgerrcode.AmbiguousFunction, "more than one function named \"%s\"", name)
	}
	args = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(args), ")"))
	var want []uint32
	if args != "" {
		for _, a := range strings.Split(args, ",") {
			t, err := types.LookupName(strings.TrimSpace(a))
			if err != nil {
				return 0, err
			}
			want = append(want, t.Oid)
		}
	}
	for _, o := range ovs {
		if len(o.Args) != len(want) {
			continue
		}
		match := true
		for i, a := range o.Args {
			match = match && a.Oid == want[i]
		}
		if match {
			return o.OID, nil
		}
	}
	return 0, types.RegNotFound(kind, name)
}

// RegName implements types.RegResolver.
func (res *Resolver) RegName(kind *types.T, oid uint32) (string, bool) {
	switch kind.Oid {
	case types.RegType.Oid:
		return res.typeName(oid)
	case types.RegProc.Oid, types.RegProcedure.Oid:
		o, ok := builtins.ByOID(oid)
		if !ok || o.Name() == "" {
			return res.userProcName(oid, kind.Oid == types.RegProcedure.Oid)
		}
		if kind.Oid == types.RegProc.Oid {
			return o.Name(), true
		}
		var args []string
		for _, a := range o.Args {
			args = append(args, a.Name())
		}
		return o.Name() + "(" + strings.Join(args, ",") + ")", true
	case types.RegClass.Oid:
		sc, name, ok := res.relByOID(oid)
		if !ok {
			return "", false
		}
		if vis, _ := res.visible(oid); vis {
			return quoteIdent(name), true
		}
		return quoteIdent(sc.Name) + "." + quoteIdent(name), true
	case types.RegNamespace.Oid:
		for _, v := range virtualSchemas {
			if nspOID(v.ID) == oid {
				return v.Name, true
			}
		}
		id := catalog.ID(oid)
		if oid == oidPublic {
			id = catalog.PublicSchemaID
		}
		if sc := res.schemaByID(id); sc != nil && nspOID(sc.ID) == oid {
			return quoteIdent(sc.Name), true
		}
	case types.RegRole.Oid:
		roles, err := res.r.Roles(res.ctx)
		if err != nil {
			return "", false
		}
		for _, r := range roles {
			if roleOID(r.Name) == oid {
				return r.Name, true
			}
		}
	}
	return "", false
}

// visible reports whether relation oid is the one its bare name finds on
// the search path (pg_table_is_visible); ok is false for an unknown OID.
func (res *Resolver) visible(oid uint32) (visible, ok bool) {
	_, name, ok := res.relByOID(oid)
	if !ok {
		return false, false
	}
	path, err := res.searchPath()
	if err != nil {
		return false, false
	}
	for _, sc := range path {
		found, ok, err := res.relInSchema(sc, name)
		if err != nil {
			return false, false
		}
		if ok {
			return found == oid, true
		}
	}
	return false, true
}

// TableIsVisible implements builtins.CatalogInfo.
func (res *Resolver) TableIsVisible(oid uint32) (bool, bool) { return res.visible(oid) }

// IndexDef implements builtins.CatalogInfo.
func (res *Resolver) IndexDef(oid uint32, col int) (string, bool) {
	return res.IndexDefPretty(oid, col, false)
}

// IndexDefPretty implements builtins.PrettyCatalogInfo.
func (res *Resolver) IndexDefPretty(oid uint32, col int, pretty bool) (string, bool) {
	kind, tid, sub := splitOID(oid)
	if kind != kindIndex {
		return "", false
	}
	t, sc := res.table(tid)
	if t == nil {
		return "", false
	}
	for _, ix := range indexes(t) {
		if uint32(ix.ID) == sub {
			visible := false
			if pretty {
				visible, _ = res.visible(uint32(t.ID))
			}
			return indexDef(sc, t, ix, col, pretty, visible), true
		}
	}
	return "", false
}

// ConstraintDef implements builtins.CatalogInfo.
func (res *Resolver) ConstraintDef(oid uint32) (string, bool) {
	return res.ConstraintDefPretty(oid, false)
}

// ConstraintDefPretty implements builtins.PrettyCatalogInfo.
func (res *Resolver) ConstraintDefPretty(oid uint32, pretty bool) (string, bool) {
	kind, tid, _ := splitOID(oid)
	if kind != kindConstr {
		return "", false
	}
	t, sc := res.table(tid)
	if t == nil {
		return res.domainConstraintDef(oid, pretty)
	}
	byID := func(id catalog.ID) *catalog.Table { tb, _ := res.table(id); return tb }
	for _, c := range tableConstraints(t, sc, byID) {
		if c.oid == oid {
			if c.refTable != nil {
				if vis, _ := res.visible(uint32(c.refTable.ID)); !vis {
					if _, rsc := res.table(c.refTable.ID); rsc != nil {
						c.refSchema = rsc.Name
					}
				}
			}
			return constraintDef(c, pretty), true
		}
	}
	return "", false
}

// Description implements builtins.CatalogInfo: COMMENT ON's text for a
// relation (pg_class) or one of its columns (subID > 0), a function
// (pg_proc), a constraint, a schema (pg_namespace), a database
// (pg_database), a type (pg_type) or an extension (pg_extension).
func (res *Resolver) Description(oid uint32, catalogName string, sub int32) (string, bool) {
	nonEmpty := func(s string) (string, bool) { return s, s != "" }
	switch catalogName {
	case "", "pg_class":
		kind, tid, ixID := splitOID(oid)
		switch kind {
		case 0:
		case kindIndex:
			if t, _ := res.table(tid); t != nil && sub == 0 {
				for _, ix := range indexes(t) {
					if uint32(ix.ID) == ixID {
						return nonEmpty(ix.Comment)
					}
				}
			}
			return "", false
		default:
			return "", false
		}
		d, err := res.r.ByID(res.ctx, catalog.ID(oid))
		if err != nil {
			return "", false
		}
		switch v := d.(type) {
		case *catalog.Table:
			if sub == 0 {
				return nonEmpty(v.Comment)
			}
			if c := v.ColumnByID(rowenc.ColumnID(sub)); c != nil && !c.Hidden {
				return nonEmpty(c.Comment)
			}
		case *catalog.View:
			if sub == 0 {
				return nonEmpty(v.Comment)
			}
		case *catalog.Sequence:
			if sub == 0 {
				return nonEmpty(v.Comment)
			}
		}
	case "pg_proc":
		if f, _ := res.funcByOID(oid); f != nil && sub == 0 {
			return nonEmpty(f.Comment)
		}
	case "pg_constraint":
		kind, tid, _ := splitOID(oid)
		if kind != kindConstr || sub != 0 {
			return "", false
		}
		t, sc := res.table(tid)
		if t == nil {
			return "", false
		}
		for _, c := range tableConstraints(t, sc, func(catalog.ID) *catalog.Table { return nil }) {
			if c.oid == oid {
				return nonEmpty(t.ConstraintComments[c.name])
			}
		}
	case "pg_namespace":
		id := catalog.ID(oid)
		if oid == oidPublic {
			id = catalog.PublicSchemaID
		}
		if sc := res.schemaByID(id); sc != nil && sub == 0 && nspOID(sc.ID) == oid {
			return nonEmpty(sc.Comment)
		}
	case "pg_database":
		if res.db != nil && uint32(res.db.ID) == oid && sub == 0 {
			return nonEmpty(res.db.Comment)
		}
	case "pg_type":
		if td, _, array := res.typeDescByOID(oid); td != nil && !array && sub == 0 {
			return nonEmpty(td.Comment)
		}
	case "pg_extension":
		// Read the database afresh: the session's descriptor may predate
		// a CREATE EXTENSION or COMMENT ON EXTENSION it ran since.
		if res.db == nil || sub != 0 {
			return "", false
		}
		d, err := res.r.ByID(res.ctx, res.db.ID)
		if db, ok := d.(*catalog.Database); err == nil && ok {
			for _, x := range db.Extensions {
				if uint32(x.OID) == oid {
					return nonEmpty(x.Comment)
				}
			}
		}
	}
	return "", false
}

// ViewDef implements builtins.CatalogInfo.
func (res *Resolver) ViewDef(oid uint32) (string, bool) {
	if kind, _, _ := splitOID(oid); kind != 0 {
		return "", false
	}
	d, err := res.r.ByID(res.ctx, catalog.ID(oid))
	if err != nil {
		return "", false
	}
	if v, ok := d.(*catalog.View); ok && v.DatabaseID == res.db.ID {
		// Deparsed as PostgreSQL prints it: names resolve as the session's
		// statements do.
		cat := plan.NewCatalog(res.r, res.db, res.path, Lookup)
		return plan.ViewDef(res.ctx, cat, &types.Context{}, v), true
	}
	return "", false
}

// SerialSequence implements builtins.CatalogInfo.
func (res *Resolver) SerialSequence(table, column string) (string, error) {
	oid, err := res.resolveClass(table)
	if err != nil {
		return "", err
	}
	kind, tid, _ := splitOID(oid)
	t, _ := res.table(tid)
	if kind != 0 || t == nil {
		return "", pgerror.New(pgerrcode.WrongObjectType, "\"%s\" is not a table", table)
	}
	c := t.ColumnByName(column)
	if c == nil || c.Hidden {
		return "", pgerror.New(pgerrcode.UndefinedColumn, "column \"%s\" of relation \"%s\" does not exist", column, t.Name)
	}
	seq := c.SequenceID
	if seq == 0 {
		// A sequence made the column's by OWNED BY without being its
		// default's.
		s, err := res.load()
		if err != nil {
			return "", err
		}
		for _, r := range s.sequences() {
			if q := r.desc.(*catalog.Sequence); q.OwnedBy != nil && q.OwnedBy.TableID == t.ID && q.OwnedBy.ColumnID == c.ID {
				seq = q.ID
			}
		}
	}
	if seq == 0 {
		return "", nil
	}
	sc, name, ok := res.relByOID(uint32(seq))
	if !ok {
		return "", nil
	}
	return quoteIdent(sc.Name) + "." + quoteIdent(name), nil
}

// RelKind implements builtins.CatalogInfo.
func (res *Resolver) RelKind(oid uint32) (string, bool) {
	if v := virtualByOID(oid); v != nil {
		if v.view {
			return "v", true
		}
		return "r", true
	}
	if _, _, ok := res.relByOID(oid); !ok {
		return "", false
	}
	kind, tid, _ := splitOID(oid)
	if kind == kindIndex {
		return "i", true
	}
	d, err := res.r.ByID(res.ctx, tid)
	if err != nil {
		return "", false
	}
	switch d.(type) {
	case *catalog.View:
		return "v", true
	case *catalog.Sequence:
		return "S", true
	}
	return "r", true
}
