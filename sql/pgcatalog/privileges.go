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

var _ builtins.PrivilegeInfo = (*Resolver)(nil)

// HasPrivilege implements builtins.PrivilegeInfo: has_table_privilege
// and its kin, over the descriptors' owners and ACLs.
func (res *Resolver) HasPrivilege(role, kind, obj string, oid uint32, privs string) (bool, error) {
	if _, err := res.r.Role(res.ctx, role); err != nil {
		return false, err
	}
	a, err := catalog.NewAuthorizer(res.ctx, res.r, role, res.db)
	if err != nil {
		return false, err
	}
	var d catalog.Descriptor
	mask := catalog.Privilege(0) // the privileges the kind admits; 0: the object's
	if kind == "column" {
		// Column privileges are their table's in Cairn; PostgreSQL admits
		// these four for a column.
		kind, mask = "table", catalog.PrivSelect|catalog.PrivInsert|catalog.PrivUpdate|catalog.PrivReferences
	}
	switch kind {
	case "table", "sequence":
		if obj != "" {
			if oid, err = res.resolveClass(obj); err != nil {
				return false, err
			}
		}
		if k, _, _ := splitOID(oid); k != 0 {
			return false, nil // an index: PostgreSQL checks its (absent) ACL
		}
		if virtualByOID(oid) != nil {
			// The system catalogs are readable by everyone.
			return kind == "table" && wantsOnly(privs, "SELECT"), nil
		}
		d, err = res.r.ByID(res.ctx, catalog.ID(oid))
		if err != nil {
			return false, err
		}
		if kind == "sequence" && d.DescKind() != catalog.KindSequence {
			return false, pgerror.New(pgerrcode.WrongObjectType, "\"%s\" is not a sequence", d.DescName())
		}
	case "schema":
		var sc *catalog.Schema
		if obj != "" {
			if sc, err = res.schemaNamed(obj); err != nil {
				return false, err
			}
			if sc == nil {
				return false, pgerror.New(pgerrcode.InvalidSchemaName, "schema \"%s\" does not exist", obj)
			}
		} else {
			id := catalog.ID(oid)
			if oid == oidPublic {
				id = catalog.PublicSchemaID
			}
			if sc = res.schemaByID(id); sc == nil {
				return false, nil
			}
		}
		if sc.Virtual {
			return wantsOnly(privs, "USAGE"), nil
		}
		d = sc
	case "database":
		dbs, err := res.r.Databases(res.ctx)
		if err != nil {
			return false, err
		}
		for _, db := range dbs {
			if obj != "" && db.Name == obj || obj == "" && uint32(db.ID) == oid {
				d = db
			}
		}
		if d == nil {
			if obj == "" {
				return false, nil
			}
			return false, pgerror.New(pgerrcode.InvalidCatalogName, "database \"%s\" does not exist", obj)
		}
	default:
		return false, pgerror.New(pgerrcode.FeatureNotSupported, "privileges on %ss are not supported", kind)
	}
	k := d.DescKind()
	if mask == 0 {
		mask = catalog.AllPrivileges(k)
	}
	want, grantOpt, err := parsePrivList(privs, mask)
	if err != nil {
		return false, err
	}
	owner, acl := ownerACL(d)
	if a.Privileges(k, owner, acl, want) != 0 {
		if grantOpt == 0 || a.Superuser || a.IsOwner(owner) {
			return true, nil
		}
	}
	if grantOpt != 0 {
		for _, it := range catalog.EffectiveACL(k, owner, acl) {
			if (it.Grantee == "" || a.HasRole(it.Grantee)) && it.GrantOption&grantOpt != 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// wantsOnly reports whether a privilege list asks only for the named
// privilege (what everyone holds on the system catalogs).
func wantsOnly(privs, name string) bool {
	for _, p := range strings.Split(privs, ",") {
		if !strings.EqualFold(strings.TrimSpace(p), name) {
			return false
		}
	}
	return true
}

// parsePrivList parses has_*_privilege's list: privilege names, each
// optionally WITH GRANT OPTION, among those of valid (22023 otherwise).
func parsePrivList(s string, valid catalog.Privilege) (want, grantOpt catalog.Privilege, err error) {
	for _, part := range strings.Split(s, ",") {
		f := strings.Fields(strings.ToUpper(part))
		withGrant := false
		if len(f) == 4 && f[1] == "WITH" && f[2] == "GRANT" && f[3] == "OPTION" {
			f, withGrant = f[:1], true
		}
		var p catalog.Privilege
		ok := len(f) == 1
		if ok {
			p, ok = catalog.ParsePrivilege(f[0])
		}
		if !ok || p&valid == 0 {
			return 0, 0, pgerror.New(pgerrcode.InvalidParameterValue, "unrecognized privilege type: \"%s\"", strings.TrimSpace(part))
		}
		if withGrant {
			grantOpt |= p
		} else {
			want |= p
		}
	}
	return want, grantOpt, nil
}

func ownerACL(d catalog.Descriptor) (string, []catalog.ACLItem) {
	switch v := d.(type) {
	case *catalog.Table:
		return v.Owner, v.ACL
	case *catalog.View:
		return v.Owner, v.ACL
	case *catalog.Sequence:
		return v.Owner, v.ACL
	case *catalog.Schema:
		return v.Owner, v.ACL
	case *catalog.Database:
		return v.Owner, v.ACL
	}
	return "", nil
}

// genAuthMembers is pg_auth_members: each role's memberships (GRANT role
// TO role), granted by the bootstrap superuser as far as Cairn records.
func genAuthMembers(_ context.Context, s *snapshot, t *vtable) ([][]types.Datum, error) {
	var out [][]types.Datum
	for _, r := range s.roles {
		for _, m := range r.MemberOf {
			out = append(out, t.row("roleid", roleOID(m), "member", roleOID(r.Name), "grantor", oidSuperuser, "admin_option", false))
		}
	}
	return out, nil
}
