package catalog

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-db/cairn/sql/types"
)

// typeRef is how a column type is stored: Postgres's own pair, the type
// OID and its modifier (pg_attribute.atttypid, atttypmod), so a descriptor
// reads like the pg_catalog row it becomes and needs no type registry of
// its own.
type typeRef struct {
	OID    uint32 `json:"oid"`
	Typmod int32  `json:"typmod"`
	// Enum is a copy of the enum type (or array element type) the column
	// uses (typedesc.go); nil for built-in types.
	Enum *enumRef `json:"enum,omitempty"`
	// Domain is a copy of the domain the column's type is (OID, Typmod
	// and Enum then describe its base type); nil for other types. Domains
	// cannot be altered, so the copy never goes stale.
	Domain *types.DomainMeta `json:"domain,omitempty"`
}

func refOf(t *types.T) typeRef {
	if t == nil {
		return typeRef{}
	}
	return typeRef{OID: t.Oid, Typmod: t.Typmod(), Enum: enumRefOf(t), Domain: t.Domain}
}

// resolve rebuilds the type a typeRef names.
func (r typeRef) resolve() (*types.T, error) {
	if r.Domain != nil {
		base := r
		base.Domain = nil
		t, err := base.resolve()
		if err != nil {
			return nil, err
		}
		return types.MakeDomain(t, r.Domain), nil
	}
	if r.Enum != nil {
		return r.Enum.resolve(r.OID)
	}
	base, ok := types.OidToType(r.OID)
	if !ok {
		return nil, fmt.Errorf("%w: unknown type oid %d", ErrBadDescriptor, r.OID)
	}
	if r.Typmod < 0 {
		return base, nil
	}
	if base.Family == types.ArrayFamily {
		elem, err := typeRef{OID: base.Elem.Oid, Typmod: r.Typmod}.resolve()
		if err != nil {
			return nil, err
		}
		return types.MakeArray(elem)
	}
	var t *types.T
	var err error
	switch base.Family {
	case types.StringFamily:
		n := r.Typmod - 4
		switch base.Oid {
		case types.VarChar.Oid:
			t, err = types.MakeVarChar(n)
		case types.BPChar.Oid:
			t, err = types.MakeChar(n)
		default:
			err = fmt.Errorf("type %s takes no modifier", base.Name())
		}
	case types.NumericFamily:
		m := r.Typmod - 4
		t, err = types.MakeNumeric(m>>16, int32(int16(m&0xffff)))
	case types.TimeFamily, types.TimestampFamily, types.TimestampTZFamily:
		t, err = types.MakeTimestamp(base, r.Typmod)
	default:
		err = fmt.Errorf("type %s takes no modifier", base.Name())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: typmod %d: %v", ErrBadDescriptor, r.Typmod, err)
	}
	return t, nil
}

// MarshalJSON stores the column's type as a typeRef.
func (c Column) MarshalJSON() ([]byte, error) {
	type plain Column
	return json.Marshal(struct {
		plain
		Type typeRef `json:"type"`
	}{plain(c), refOf(c.Type)})
}

// UnmarshalJSON resolves the stored typeRef.
func (c *Column) UnmarshalJSON(b []byte) error {
	type plain Column
	var v struct {
		plain
		Type typeRef `json:"type"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	t, err := v.Type.resolve()
	if err != nil {
		return err
	}
	*c = Column(v.plain)
	c.Type = t
	return nil
}

// MarshalJSON stores the column's type as a typeRef.
func (c DroppedColumn) MarshalJSON() ([]byte, error) {
	type plain DroppedColumn
	return json.Marshal(struct {
		plain
		Type typeRef `json:"type"`
	}{plain(c), refOf(c.Type)})
}

// UnmarshalJSON resolves the stored typeRef.
func (c *DroppedColumn) UnmarshalJSON(b []byte) error {
	type plain DroppedColumn
	var v struct {
		plain
		Type typeRef `json:"type"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	t, err := v.Type.resolve()
	if err != nil {
		return err
	}
	*c = DroppedColumn(v.plain)
	c.Type = t
	return nil
}

// MarshalJSON stores the column's type as a typeRef.
func (c ViewColumn) MarshalJSON() ([]byte, error) {
	type plain ViewColumn
	return json.Marshal(struct {
		plain
		Type typeRef `json:"type"`
	}{plain(c), refOf(c.Type)})
}

// UnmarshalJSON resolves the stored typeRef.
func (c *ViewColumn) UnmarshalJSON(b []byte) error {
	type plain ViewColumn
	var v struct {
		plain
		Type typeRef `json:"type"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	t, err := v.Type.resolve()
	if err != nil {
		return err
	}
	*c = ViewColumn(v.plain)
	c.Type = t
	return nil
}
