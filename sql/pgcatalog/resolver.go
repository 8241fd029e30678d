package pgcatalog

import (
	"context"
	"strings"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
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

// searchPath is the effective search path: pg_catalog first unless listed,
// then the session's schemas that exist.
func (res *Resolver) searchPath(s *snapshot) []*catalog.Schema {
	var out []*catalog.Schema
	names := res.path
	if !containsName(names, "pg_catalog") {
		names = append([]string{"pg_catalog"}, names...)
	}
	for _, n := range names {
		if n == "$user" {
			n = res.user
		}
		if sc := s.schemaByName(n); sc != nil {
			out = append(out, sc)
		}
	}
	return out
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
		if r.schema.ID != sc.ID {
			continue
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

// relByOID returns a relation's schema and name.
func (s *snapshot) relByOID(oid uint32) (*catalog.Schema, string, bool) {
	if v := virtualByOID(oid); v != nil {
		return s.schemaByName(v.schema), v.name, true
	}
	kind, tid, sub := splitOID(oid)
	r, ok := s.byID[tid]
	if !ok {
		return nil, "", false
	}
	switch kind {
	case 0:
		return r.schema, r.desc.DescName(), true
	case kindIndex:
		if t, ok := r.desc.(*catalog.Table); ok {
			if ix := t.IndexByID(catalog.IndexID(sub)); ix != nil {
				return r.schema, ix.Name, true
			}
		}
	}
	return nil, "", false
}

func (res *Resolver) resolveClass(s *snapshot, name string) (uint32, error) {
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
		sc := s.schemaByName(parts[0])
		if sc == nil {
			return 0, pgerror.New(pgerrcode.InvalidSchemaName, "schema \"%s\" does not exist", parts[0])
		}
		if oid, ok := s.relByName(sc, parts[1]); ok {
			return oid, nil
		}
		return 0, types.RegNotFound(types.RegClass, parts[0]+"."+parts[1])
	}
	for _, sc := range res.searchPath(s) {
		if oid, ok := s.relByName(sc, parts[0]); ok {
			return oid, nil
		}
	}
	return 0, types.RegNotFound(types.RegClass, parts[0])
}

// ResolveReg implements types.RegResolver.
func (res *Resolver) ResolveReg(kind *types.T, name string) (uint32, error) {
	s, err := res.load()
	if err != nil {
		return 0, err
	}
	switch kind.Oid {
	case types.RegClass.Oid:
		return res.resolveClass(s, name)
	case types.RegNamespace.Oid:
		parts, err := splitName(name)
		if err != nil {
			return 0, err
		}
		if len(parts) != 1 {
			return 0, pgerror.New(pgerrcode.InvalidName, "invalid name syntax")
		}
		if sc := s.schemaByName(parts[0]); sc != nil {
			return nspOID(sc.ID), nil
		}
		return 0, types.RegNotFound(kind, parts[0])
	case types.RegRole.Oid:
		parts, err := splitName(name)
		if err != nil {
			return 0, err
		}
		for _, r := range s.roles {
			if len(parts) == 1 && r.Name == parts[0] {
				return roleOID(r.Name), nil
			}
		}
		return 0, types.RegNotFound(kind, name)
	case types.RegProc.Oid, types.RegProcedure.Oid:
		return resolveProc(kind, name)
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
	case types.RegProc.Oid, types.RegProcedure.Oid:
		o, ok := builtins.ByOID(oid)
		if !ok || o.Name() == "" {
			return "", false
		}
		if kind.Oid == types.RegProc.Oid {
			return o.Name(), true
		}
		var args []string
		for _, a := range o.Args {
			args = append(args, a.Name())
		}
		return o.Name() + "(" + strings.Join(args, ",") + ")", true
	}
	s, err := res.load()
	if err != nil {
		return "", false
	}
	switch kind.Oid {
	case types.RegClass.Oid:
		sc, name, ok := s.relByOID(oid)
		if !ok {
			return "", false
		}
		if vis, _ := res.visible(s, oid); vis {
			return quoteIdent(name), true
		}
		return quoteIdent(sc.Name) + "." + quoteIdent(name), true
	case types.RegNamespace.Oid:
		for _, sc := range s.schemas {
			if nspOID(sc.ID) == oid {
				return quoteIdent(sc.Name), true
			}
		}
	case types.RegRole.Oid:
		for _, r := range s.roles {
			if roleOID(r.Name) == oid {
				return r.Name, true
			}
		}
	}
	return "", false
}

// visible reports whether relation oid is the one its bare name finds on
// the search path (pg_table_is_visible).
func (res *Resolver) visible(s *snapshot, oid uint32) (bool, bool) {
	_, name, ok := s.relByOID(oid)
	if !ok {
		return false, false
	}
	for _, sc := range res.searchPath(s) {
		if found, ok := s.relByName(sc, name); ok {
			return found == oid, true
		}
	}
	return false, true
}

// TableIsVisible implements builtins.CatalogInfo.
func (res *Resolver) TableIsVisible(oid uint32) (bool, bool) {
	s, err := res.load()
	if err != nil {
		return false, false
	}
	return res.visible(s, oid)
}

func (s *snapshot) table(id catalog.ID) (*catalog.Table, *catalog.Schema) {
	if r, ok := s.byID[id]; ok {
		if t, ok := r.desc.(*catalog.Table); ok {
			return t, r.schema
		}
	}
	return nil, nil
}

// IndexDef implements builtins.CatalogInfo.
func (res *Resolver) IndexDef(oid uint32, col int) (string, bool) {
	s, err := res.load()
	if err != nil {
		return "", false
	}
	kind, tid, sub := splitOID(oid)
	if kind != kindIndex {
		return "", false
	}
	t, sc := s.table(tid)
	if t == nil {
		return "", false
	}
	for _, ix := range indexes(t) {
		if uint32(ix.ID) == sub {
			return indexDef(sc, t, ix, col), true
		}
	}
	return "", false
}

// ConstraintDef implements builtins.CatalogInfo.
func (res *Resolver) ConstraintDef(oid uint32) (string, bool) {
	s, err := res.load()
	if err != nil {
		return "", false
	}
	kind, tid, _ := splitOID(oid)
	if kind != kindConstr {
		return "", false
	}
	t, sc := s.table(tid)
	if t == nil {
		return "", false
	}
	for _, c := range tableConstraints(t, sc, func(id catalog.ID) *catalog.Table { tb, _ := s.table(id); return tb }) {
		if c.oid == oid {
			return constraintDef(c), true
		}
	}
	return "", false
}

// Description implements builtins.CatalogInfo: tables carry a comment;
// nothing else does yet.
func (res *Resolver) Description(oid uint32, catalogName string, sub int32) (string, bool) {
	if sub != 0 || catalogName != "" && catalogName != "pg_class" {
		return "", false
	}
	s, err := res.load()
	if err != nil {
		return "", false
	}
	if kind, tid, _ := splitOID(oid); kind == 0 {
		if t, _ := s.table(tid); t != nil && t.Comment != "" {
			return t.Comment, true
		}
	}
	return "", false
}

// ViewDef implements builtins.CatalogInfo.
func (res *Resolver) ViewDef(oid uint32) (string, bool) {
	s, err := res.load()
	if err != nil {
		return "", false
	}
	if r, ok := s.byID[catalog.ID(oid)]; ok {
		if v, ok := r.desc.(*catalog.View); ok {
			return v.Query, true
		}
	}
	return "", false
}

// SerialSequence implements builtins.CatalogInfo.
func (res *Resolver) SerialSequence(table, column string) (string, error) {
	s, err := res.load()
	if err != nil {
		return "", err
	}
	oid, err := res.resolveClass(s, table)
	if err != nil {
		return "", err
	}
	kind, tid, _ := splitOID(oid)
	t, _ := s.table(tid)
	if kind != 0 || t == nil {
		return "", pgerror.New(pgerrcode.WrongObjectType, "\"%s\" is not a table", table)
	}
	c := t.ColumnByName(column)
	if c == nil || c.Hidden {
		return "", pgerror.New(pgerrcode.UndefinedColumn, "column \"%s\" of relation \"%s\" does not exist", column, t.Name)
	}
	seq := c.SequenceID
	if seq == 0 {
		for _, r := range s.sequences() {
			if q := r.desc.(*catalog.Sequence); q.OwnedBy != nil && q.OwnedBy.TableID == t.ID && q.OwnedBy.ColumnID == c.ID {
				seq = q.ID
			}
		}
	}
	if r, ok := s.byID[seq]; ok && seq != 0 {
		return quoteIdent(r.schema.Name) + "." + quoteIdent(r.desc.DescName()), nil
	}
	return "", nil
}

// RelKind implements builtins.CatalogInfo.
func (res *Resolver) RelKind(oid uint32) (string, bool) {
	if v := virtualByOID(oid); v != nil {
		if v.view {
			return "v", true
		}
		return "r", true
	}
	s, err := res.load()
	if err != nil {
		return "", false
	}
	kind, tid, sub := splitOID(oid)
	r, ok := s.byID[tid]
	if !ok {
		return "", false
	}
	switch d := r.desc.(type) {
	case *catalog.Table:
		switch kind {
		case 0:
			return "r", true
		case kindIndex:
			for _, ix := range indexes(d) {
				if uint32(ix.ID) == sub {
					return "i", true
				}
			}
		}
	case *catalog.View:
		return "v", kind == 0
	case *catalog.Sequence:
		return "S", kind == 0
	}
	return "", false
}
