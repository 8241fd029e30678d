package pgcatalog

import (
	"context"
	"strings"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/types"
)

// User-defined types (CREATE TYPE ... AS ENUM): the Resolver finds them by
// name for the binder (types.TypeResolver) and by OID for regtype and
// format_type; pg_type and pg_enum list them (genType, genEnum).
//
// A type descriptor's ID is its pg_type OID; its array type has an OID of
// its own (TypeDesc.ArrayID) and no descriptor, so it is found through its
// element's descriptor.

var _ types.TypeResolver = (*Resolver)(nil)

// typeInSchema returns the type named name in schema sc, nil if there is
// none (a relation of that name is not a type).
func (res *Resolver) typeInSchema(sc *catalog.Schema, name string) (*catalog.TypeDesc, error) {
	if sc.Virtual {
		return nil, nil
	}
	id, ok, err := res.r.LookupID(res.ctx, res.db.ID, sc.ID, name)
	if err != nil || !ok {
		return nil, err
	}
	d, err := res.r.ByID(res.ctx, id)
	if err != nil {
		return nil, err
	}
	td, _ := d.(*catalog.TypeDesc)
	return td, nil
}

// ResolveType implements types.TypeResolver.
func (res *Resolver) ResolveType(schema, name string) (*types.T, bool, error) {
	var path []*catalog.Schema
	if schema != "" {
		sc, err := res.schemaNamed(schema)
		if err != nil || sc == nil {
			return nil, false, err
		}
		path = []*catalog.Schema{sc}
	} else {
		var err error
		if path, err = res.searchPath(); err != nil {
			return nil, false, err
		}
	}
	for _, sc := range path {
		td, err := res.typeInSchema(sc, name)
		if err != nil {
			return nil, false, err
		}
		if td != nil {
			t, err := td.Type(sc.Name)
			return t, err == nil, err
		}
		// "_t" is t's array type, as PostgreSQL names it.
		if elem, ok := strings.CutPrefix(name, "_"); ok {
			if td, err = res.typeInSchema(sc, elem); err != nil {
				return nil, false, err
			}
			if td != nil {
				t, err := td.Type(sc.Name)
				if err != nil {
					return nil, false, err
				}
				if t, err = types.MakeArray(t); err != nil {
					return nil, false, err
				}
				return t, true, nil
			}
		}
	}
	return nil, false, nil
}

// TypeByOID implements types.TypeResolver.
func (res *Resolver) TypeByOID(oid uint32) (*types.T, bool) {
	td, sc, array := res.typeDescByOID(oid)
	if td == nil {
		return nil, false
	}
	t, err := td.Type(sc.Name)
	if err != nil {
		return nil, false
	}
	if array {
		a, err := types.MakeArray(t)
		return a, err == nil
	}
	return t, true
}

// typeDescByOID finds the type whose OID, or whose array type's OID, is
// oid.
func (res *Resolver) typeDescByOID(oid uint32) (td *catalog.TypeDesc, sc *catalog.Schema, array bool) {
	if catalog.ID(oid) < catalog.FirstUserID || oid>>kindShift != 0 {
		return nil, nil, false
	}
	if d, err := res.r.ByID(res.ctx, catalog.ID(oid)); err == nil {
		if td, ok := d.(*catalog.TypeDesc); ok && td.DatabaseID == res.db.ID {
			if sc := res.schemaByID(td.SchemaID); sc != nil {
				return td, sc, false
			}
		}
		return nil, nil, false // some other descriptor: not an array OID either
	}
	s, err := res.load()
	if err != nil {
		return nil, nil, false
	}
	for _, r := range s.rels {
		if td, ok := r.desc.(*catalog.TypeDesc); ok && uint32(td.ArrayID) == oid {
			return td, r.schema, true
		}
	}
	return nil, nil, false
}

// typeName is regtype's output and format_type's text for a user type:
// its name, qualified when the search path does not find it first, with
// [] for the array type.
func (res *Resolver) typeName(oid uint32) (string, bool) {
	td, sc, array := res.typeDescByOID(oid)
	if td == nil {
		return "", false
	}
	name := quoteIdent(td.Name)
	if t, ok, err := res.ResolveType("", td.Name); err != nil || !ok || types.TypeOID(t) != uint32(td.ID) {
		name = quoteIdent(sc.Name) + "." + name
	}
	if array {
		name += "[]"
	}
	return name, true
}

// resolveTypeName is regtype's input for a user type: [schema.]name, a
// trailing [] for its array.
func (res *Resolver) resolveTypeName(name string) (uint32, error) {
	base, array := strings.CutSuffix(strings.TrimSpace(name), "[]")
	parts, err := splitName(base)
	if err != nil {
		return 0, err
	}
	if len(parts) == 3 && parts[0] == res.db.Name {
		parts = parts[1:]
	}
	var t *types.T
	var ok bool
	switch len(parts) {
	case 1:
		t, ok, err = res.ResolveType("", parts[0])
	case 2:
		t, ok, err = res.ResolveType(parts[0], parts[1])
	}
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, types.RegNotFound(types.RegType, name)
	}
	if array && t.Family != types.ArrayFamily {
		if t, err = types.MakeArray(t); err != nil {
			return 0, err
		}
	}
	return types.TypeOID(t), nil
}

// TypeIsVisible implements builtins.TypeVisibility.
func (res *Resolver) TypeIsVisible(oid uint32) (visible, ok bool) {
	td, _, _ := res.typeDescByOID(oid)
	if td == nil {
		return false, false
	}
	t, found, err := res.ResolveType("", td.Name)
	return err == nil && found && types.TypeOID(t) == uint32(td.ID), true
}

// userTypes are the snapshot's type descriptors with their schemas.
func (s *snapshot) userTypes() []rel {
	var out []rel
	for _, r := range s.rels {
		if _, ok := r.desc.(*catalog.TypeDesc); ok {
			out = append(out, r)
		}
	}
	return out
}

// userTypeRows are pg_type's rows for the enum types and their arrays,
// with PostgreSQL 15's values for an enum (4 bytes by value, category E,
// enum_out; Cairn has no enum_in, since its input function needs the
// type's OID where Cairn's functions have static result types, so
// typinput is 0) and for its array _name.
func userTypeRows(s *snapshot, t *vtable) [][]types.Datum {
	var out [][]types.Datum
	enumOut := builtins.Lookup("enum_out")[0].OID
	arrIn, arrOut := builtins.Lookup("array_in")[0].OID, builtins.Lookup("array_out")[0].OID
	for _, r := range s.userTypes() {
		td := r.desc.(*catalog.TypeDesc)
		nsp, own := nspOID(r.schema.ID), roleOID(owner(td.Owner))
		if td.Domain != nil {
			out = append(out, domainTypeRows(t, td, r.schema, nsp, own, arrIn, arrOut)...)
			continue
		}
		out = append(out, t.row("oid", uint32(td.ID), "typname", td.Name, "typnamespace", nsp,
			"typowner", own, "typlen", 4, "typbyval", true, "typtype", "e", "typcategory", "E",
			"typisdefined", true, "typdelim", ",", "typarray", uint32(td.ArrayID),
			"typoutput", types.DOid(enumOut), "typalign", "i", "typstorage", "p", "typtypmod", -1))
		out = append(out, t.row("oid", uint32(td.ArrayID), "typname", "_"+td.Name, "typnamespace", nsp,
			"typowner", own, "typlen", -1, "typbyval", false, "typtype", "b", "typcategory", "A",
			"typisdefined", true, "typdelim", ",", "typelem", uint32(td.ID),
			"typinput", types.DOid(arrIn), "typoutput", types.DOid(arrOut),
			"typalign", "i", "typstorage", "x", "typtypmod", -1))
	}
	return out
}

// enumLabelOID is a pg_enum row's OID. Labels have no descriptors: the
// OID is derived from the type's ID and the label's position (the
// attrdef kind is free for types, which have no columns), so it changes
// when ADD VALUE BEFORE inserts ahead of the label. Only pg_upgrade's
// binary mode of pg_dump reads it.
func enumLabelOID(typeID catalog.ID, i int) uint32 {
	return derivedOID(kindAttrdef, typeID, uint32(i+1))
}

func genEnum(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.userTypes() {
		td := r.desc.(*catalog.TypeDesc)
		for i, m := range td.Members {
			out = append(out, t.row("oid", enumLabelOID(td.ID, i), "enumtypid", uint32(td.ID),
				"enumsortorder", types.DFloat(m.SortOrder), "enumlabel", m.Label))
		}
	}
	return out, nil
}

// domainTypeRows are a domain's pg_type row (typtype d, the base type's
// storage, typbasetype, typtypmod, typnotnull, typdefault) and its array
// type's.
func domainTypeRows(t *vtable, td *catalog.TypeDesc, sc *catalog.Schema, nsp, own, arrIn, arrOut uint32) [][]types.Datum {
	dt, err := td.Type(sc.Name)
	if err != nil {
		return nil
	}
	base := types.BaseType(dt)
	length, byval, align, storage := typeAttrs(base)
	cat, _ := base.Category()
	in, outFn := builtins.TypeIOFuncs(base)
	var def any
	if td.Domain.Default != "" {
		def = td.Domain.Default
	}
	arrAlign := "i"
	if align == "d" {
		arrAlign = "d"
	}
	return [][]types.Datum{
		t.row("oid", uint32(td.ID), "typname", td.Name, "typnamespace", nsp,
			"typowner", own, "typlen", length, "typbyval", byval, "typtype", "d", "typcategory", string(cat),
			"typisdefined", true, "typdelim", ",", "typarray", uint32(td.ArrayID),
			"typinput", types.DOid(in), "typoutput", types.DOid(outFn), "typalign", align, "typstorage", storage,
			"typnotnull", td.Domain.NotNull, "typbasetype", base.Oid, "typtypmod", base.Typmod(),
			"typcollation", collationOf(base), "typdefault", def, "typdefaultbin", def),
		t.row("oid", uint32(td.ArrayID), "typname", "_"+td.Name, "typnamespace", nsp,
			"typowner", own, "typlen", -1, "typbyval", false, "typtype", "b", "typcategory", "A",
			"typisdefined", true, "typdelim", ",", "typelem", uint32(td.ID),
			"typinput", types.DOid(arrIn), "typoutput", types.DOid(arrOut),
			"typalign", arrAlign, "typstorage", "x", "typtypmod", -1, "typcollation", collationOf(base)),
	}
}

// domainConstraintOID is the pg_constraint OID of a domain's i-th CHECK
// (the table constraints' numbering, with the domain's ID as the table's).
func domainConstraintOID(typeID catalog.ID, i int) uint32 {
	return derivedOID(kindConstr, typeID, uint32(subCheck+i))
}

// domainConstraintRows are pg_constraint's rows for the domains' CHECKs
// (contypid set, conrelid 0).
func domainConstraintRows(s *snapshot, t *vtable) [][]types.Datum {
	var out [][]types.Datum
	for _, r := range s.userTypes() {
		td := r.desc.(*catalog.TypeDesc)
		if td.Domain == nil {
			continue
		}
		for i, c := range td.Domain.Checks {
			out = append(out, t.row("oid", domainConstraintOID(td.ID, i), "conname", c.Name,
				"connamespace", nspOID(r.schema.ID), "contype", "c", "convalidated", true,
				"contypid", uint32(td.ID), "conislocal", true, "connoinherit", false,
				"confupdtype", " ", "confdeltype", " ", "confmatchtype", " ", "conbin", c.Expr))
		}
	}
	return out
}

// domainConstraintDef is pg_get_constraintdef of a domain's CHECK.
func (res *Resolver) domainConstraintDef(oid uint32, pretty bool) (string, bool) {
	_, tid, sub := splitOID(oid)
	d, err := res.r.ByID(res.ctx, tid)
	if err != nil {
		return "", false
	}
	td, ok := d.(*catalog.TypeDesc)
	if !ok || td.Domain == nil || sub < subCheck || int(sub-subCheck) >= len(td.Domain.Checks) {
		return "", false
	}
	if pretty {
		return "CHECK (" + prettyExpr(td.Domain.Checks[sub-subCheck].Expr) + ")", true
	}
	return "CHECK (" + td.Domain.Checks[sub-subCheck].Expr + ")", true
}
