package catalog

import (
	"bytes"
	"fmt"

	"github.com/cairn-db/cairn/sql/types"
)

// KindType is a user-defined type (CREATE TYPE ... AS ENUM). Types live in
// a schema's relation namespace: in PostgreSQL a table's row type shares
// pg_type's namespace, so CREATE TYPE t fails when a table t exists and
// the other way round, which one namespace gives for free.
const KindType Kind = "type"

// TypeDesc is an enum type. Its ID doubles as the type's pg_type OID (as
// relation IDs double as pg_class OIDs); ArrayID is the OID of its array
// type _name, allocated from the same ID space when the type is created.
//
// Members keep types.EnumMember's physical representations: key and value
// encodings store them, so they must never change once a member exists.
type TypeDesc struct {
	ID         ID         `json:"id"`
	DatabaseID ID         `json:"database_id"`
	SchemaID   ID         `json:"schema_id"`
	Name       string     `json:"name"`
	Version    uint64     `json:"version"`
	Owner      string     `json:"owner,omitempty"`
	ArrayID    ID         `json:"array_id"`
	Members    []EnumDesc `json:"members"`
	// Comment is COMMENT ON TYPE's text.
	Comment string `json:"comment,omitempty"`
	// Domain, when set, makes the descriptor a domain (CREATE DOMAIN)
	// rather than an enum; Members is then empty.
	Domain *DomainDesc `json:"domain,omitempty"`
}

// DomainDesc is a domain's definition: its base type and constraints.
type DomainDesc struct {
	Base    typeRef             `json:"base"`
	NotNull bool                `json:"not_null,omitempty"`
	Default string              `json:"default,omitempty"`
	Checks  []types.DomainCheck `json:"checks,omitempty"`
}

// NewDomainDesc describes a domain over base.
func NewDomainDesc(base *types.T, notNull bool, def string, checks []types.DomainCheck) *DomainDesc {
	return &DomainDesc{Base: refOf(base), NotNull: notNull, Default: def, Checks: checks}
}

// Type returns the SQL type the descriptor defines (an enum or a
// domain); schema is the name of its schema.
func (t *TypeDesc) Type(schema string) (*types.T, error) {
	if t.Domain == nil {
		return t.EnumType(schema), nil
	}
	base, err := t.Domain.Base.resolve()
	if err != nil {
		return nil, err
	}
	return types.MakeDomain(base, &types.DomainMeta{Oid: uint32(t.ID), Schema: schema, Name: t.Name,
		NotNull: t.Domain.NotNull, Default: t.Domain.Default, Checks: t.Domain.Checks}), nil
}

// EnumDesc is one stored enum member (types.EnumMember).
type EnumDesc struct {
	Label     string  `json:"label"`
	PhysRep   []byte  `json:"rep"`
	SortOrder float32 `json:"sort_order"`
}

func (t *TypeDesc) DescID() ID                  { return t.ID }
func (t *TypeDesc) DescName() string            { return t.Name }
func (t *TypeDesc) DescVersion() uint64         { return t.Version }
func (t *TypeDesc) DescKind() Kind              { return KindType }
func (t *TypeDesc) Parent() (dbID, schemaID ID) { return t.DatabaseID, t.SchemaID }
func (t *TypeDesc) setID(id ID)                 { t.ID = id }
func (t *TypeDesc) setName(n string)            { t.Name = n }
func (t *TypeDesc) setVersion(v uint64)         { t.Version = v }

// Validate checks the type descriptor: members with distinct labels and
// strictly ascending representations (the order keys rely on).
func (t *TypeDesc) Validate() error {
	if err := validateHeader(KindType, t.ID, t.Name); err != nil {
		return err
	}
	if t.DatabaseID == InvalidID || t.SchemaID == InvalidID {
		return fmt.Errorf("type %q has no database or schema", t.Name)
	}
	if t.ArrayID == InvalidID || t.ArrayID == t.ID {
		return fmt.Errorf("type %q has no array type", t.Name)
	}
	seen := make(map[string]bool, len(t.Members))
	for i, m := range t.Members {
		if seen[m.Label] {
			return fmt.Errorf("type %q: duplicate label %q", t.Name, m.Label)
		}
		seen[m.Label] = true
		if len(m.PhysRep) == 0 || m.PhysRep[len(m.PhysRep)-1] == 0 {
			return fmt.Errorf("type %q: label %q has a bad representation %x", t.Name, m.Label, m.PhysRep)
		}
		if i > 0 && bytes.Compare(t.Members[i-1].PhysRep, m.PhysRep) >= 0 {
			return fmt.Errorf("type %q: labels %q and %q out of order", t.Name, t.Members[i-1].Label, m.Label)
		}
	}
	return nil
}

// EnumType returns the SQL type the descriptor defines; schema is the name
// of its schema (for format_type and messages).
func (t *TypeDesc) EnumType(schema string) *types.T {
	m := &types.EnumMeta{Schema: schema, Name: t.Name, ArrayOid: uint32(t.ArrayID),
		Members: make([]types.EnumMember, len(t.Members))}
	for i, e := range t.Members {
		m.Members[i] = types.EnumMember{Label: e.Label, PhysRep: e.PhysRep, SortOrder: e.SortOrder}
	}
	return &types.T{Family: types.EnumFamily, Oid: uint32(t.ID), Enum: m}
}

// SetMembers replaces the descriptor's members with m's (after
// CREATE TYPE or ALTER TYPE ... ADD/RENAME VALUE on the types.EnumMeta).
func (t *TypeDesc) SetMembers(m *types.EnumMeta) {
	t.Members = make([]EnumDesc, len(m.Members))
	for i, e := range m.Members {
		t.Members[i] = EnumDesc{Label: e.Label, PhysRep: e.PhysRep, SortOrder: e.SortOrder}
	}
}

// enumRef is how a table or view column of an enum type (or an array of
// one) stores its type: a copy of the type's members, so a table
// descriptor decodes on its own, as built-in types do. ALTER TYPE ... ADD
// VALUE / RENAME VALUE must therefore rewrite the copy in every descriptor
// whose columns use the type (the same transaction bumps their versions,
// which also invalidates cached plans). Representations never change, so a
// stale copy can only miss a label added later, never misread one.
type enumRef struct {
	TypeOID  uint32     `json:"type_oid"`
	ArrayOID uint32     `json:"array_oid"`
	Schema   string     `json:"schema"`
	Name     string     `json:"name"`
	Members  []EnumDesc `json:"members"`
}

// enumRefOf returns the enum copy a column of type t stores, or nil.
func enumRefOf(t *types.T) *enumRef {
	if t.Family == types.ArrayFamily && t.Elem != nil {
		t = t.Elem
	}
	if t.Family != types.EnumFamily || t.Enum == nil {
		return nil
	}
	d := TypeDesc{}
	d.SetMembers(t.Enum)
	return &enumRef{TypeOID: t.Oid, ArrayOID: t.Enum.ArrayOid, Schema: t.Enum.Schema, Name: t.Enum.Name, Members: d.Members}
}

// resolve rebuilds the enum type, or its array type when oid is the
// array's OID.
func (e *enumRef) resolve(oid uint32) (*types.T, error) {
	d := TypeDesc{ID: ID(e.TypeOID), ArrayID: ID(e.ArrayOID), Name: e.Name, Members: e.Members}
	t := d.EnumType(e.Schema)
	switch oid {
	case e.TypeOID:
		return t, nil
	case e.ArrayOID:
		return types.MakeArray(t)
	}
	return nil, fmt.Errorf("%w: type oid %d is neither enum %q (%d) nor its array (%d)", ErrBadDescriptor, oid, e.Name, e.TypeOID, e.ArrayOID)
}
