package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// Role is a login or group role. Verifier is the SCRAM-SHA-256 verifier
// string as pgwire's auth produces and checks it
// ("SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>"); empty means no
// password.
type Role struct {
	Name      string `json:"name"`
	Login     bool   `json:"login,omitempty"`
	Superuser bool   `json:"superuser,omitempty"`
	Verifier  string `json:"verifier,omitempty"`
	// MemberOf are the roles this one was granted (GRANT role TO this):
	// it has their privileges.
	MemberOf []string `json:"member_of,omitempty"`
}

// predefinedRoles are PostgreSQL's built-in roles Cairn knows: never
// stored, listed by Roles, and not droppable or creatable.
var predefinedRoles = []*Role{{Name: DatabaseOwnerRole}}

// IsPredefinedRole reports whether name is a built-in role.
func IsPredefinedRole(name string) bool {
	for _, r := range predefinedRoles {
		if r.Name == name {
			return true
		}
	}
	return false
}

type roleEnvelope struct {
	FormatVersion int  `json:"format_version"`
	Role          Role `json:"role"`
}

func encodeRole(r *Role) ([]byte, error) {
	if r.Name == "" {
		return nil, errors.New("catalog: role has no name")
	}
	return json.Marshal(roleEnvelope{FormatVersion: FormatVersion, Role: *r})
}

func decodeRole(b []byte) (*Role, error) {
	var e roleEnvelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%w: role: %v", ErrBadDescriptor, err)
	}
	if e.FormatVersion != FormatVersion || e.Role.Name == "" {
		return nil, fmt.Errorf("%w: role format %d", ErrBadDescriptor, e.FormatVersion)
	}
	return &e.Role, nil
}

// Role returns the role named name (42704 if none).
func (r *Reader) Role(ctx context.Context, name string) (*Role, error) {
	for _, p := range predefinedRoles {
		if p.Name == name {
			c := *p
			return &c, nil
		}
	}
	b, ok, err := r.txn.Get(ctx, roleKey(name))
	if err != nil {
		return nil, fmt.Errorf("reading role %q: %w", name, err)
	}
	if !ok {
		return nil, undefinedRole(name)
	}
	return decodeRole(b)
}

// Roles lists every role in name order.
func (r *Reader) Roles(ctx context.Context) ([]*Role, error) {
	var gen []byte
	if r.cache != nil {
		var err error
		if gen, err = r.generation(ctx); err != nil {
			return nil, err
		}
		if gen != nil {
			if roles, ok := r.cache.genRoles(gen); ok {
				return roles, nil
			}
		}
	}
	roles, err := r.readRoles(ctx)
	if err == nil && gen != nil {
		r.cache.putGenRoles(gen, roles)
	}
	return roles, err
}

func (r *Reader) readRoles(ctx context.Context) ([]*Role, error) {
	p := keys.System(rolePrefix)
	kvs, err := r.txn.Scan(ctx, p, keys.PrefixEnd(p), 0)
	if err != nil {
		return nil, fmt.Errorf("listing roles: %w", err)
	}
	out := make([]*Role, 0, len(kvs)+len(predefinedRoles))
	for _, e := range kvs {
		role, err := decodeRole(e.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, role)
	}
	for _, p := range predefinedRoles {
		c := *p
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *Role) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// CreateRole stores a new role (42710 if the name is taken).
func (w *Writer) CreateRole(ctx context.Context, role *Role) error {
	b, err := encodeRole(role)
	if err != nil {
		return err
	}
	// Roles are part of the catalog a generation names (pg_roles and
	// every ACL read them): a role change makes a new one.
	if err := w.bump(ctx); err != nil {
		return err
	}
	err = w.txn.CPut(ctx, roleKey(role.Name), b, nil, false)
	if _, ok := errors.AsType[*kvpb.ConditionFailedError](err); ok {
		return duplicateRole(role.Name)
	}
	if err != nil {
		return fmt.Errorf("creating role %q: %w", role.Name, err)
	}
	return nil
}

// UpdateRole replaces an existing role's attributes (42704 if none).
func (w *Writer) UpdateRole(ctx context.Context, role *Role) error {
	if _, err := w.Role(ctx, role.Name); err != nil {
		return err
	}
	b, err := encodeRole(role)
	if err != nil {
		return err
	}
	if err := w.bump(ctx); err != nil {
		return err
	}
	return w.txn.Put(ctx, roleKey(role.Name), b)
}

// DropRole removes a role (42704 if none).
func (w *Writer) DropRole(ctx context.Context, name string) error {
	if _, err := w.Role(ctx, name); err != nil {
		return err
	}
	if err := w.bump(ctx); err != nil {
		return err
	}
	return w.txn.Delete(ctx, roleKey(name))
}
