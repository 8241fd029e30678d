package ddl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// Privileges: GRANT and REVOKE on objects and roles, DROP OWNED and
// REASSIGN OWNED, and the ownership and CREATE checks DDL makes, over
// the model sql/catalog/privilege.go describes.

// authorizer answers privilege questions for the statement's user.
func (e *executor) authorizer(ctx context.Context) (*catalog.Authorizer, error) {
	if e.auth == nil {
		a, err := catalog.NewAuthorizer(ctx, &e.x.Writer.Reader, e.x.User, e.x.Database)
		if err != nil {
			return nil, err
		}
		e.auth = a
	}
	return e.auth, nil
}

// descOwner, descACL and withACL read and set the owner and ACL of the
// descriptor kinds that have them.
func descOwner(d catalog.Descriptor) string {
	var o string
	switch v := d.(type) {
	case *catalog.Table:
		o = v.Owner
	case *catalog.View:
		o = v.Owner
	case *catalog.Sequence:
		o = v.Owner
	case *catalog.Schema:
		o = v.Owner
	case *catalog.Database:
		o = v.Owner
	case *catalog.TypeDesc:
		o = v.Owner
	case *catalog.FuncDesc:
		o = v.Owner
	}
	if o == "" {
		return catalog.SuperuserName
	}
	return o
}

func descACL(d catalog.Descriptor) []catalog.ACLItem {
	switch v := d.(type) {
	case *catalog.Table:
		return v.ACL
	case *catalog.View:
		return v.ACL
	case *catalog.Sequence:
		return v.ACL
	case *catalog.Schema:
		return v.ACL
	case *catalog.Database:
		return v.ACL
	}
	return nil
}

// withOwnerACL returns a copy of d with owner and acl.
func withOwnerACL(d catalog.Descriptor, owner string, acl []catalog.ACLItem) catalog.Descriptor {
	switch v := d.(type) {
	case *catalog.Table:
		c := cloneTable(v)
		c.Owner, c.ACL = owner, acl
		return c
	case *catalog.View:
		c := *v
		c.Owner, c.ACL = owner, acl
		return &c
	case *catalog.Sequence:
		c := *v
		c.Owner, c.ACL = owner, acl
		return &c
	case *catalog.Schema:
		c := *v
		c.Owner, c.ACL = owner, acl
		return &c
	case *catalog.Database:
		c := *v
		c.Owner, c.ACL = owner, acl
		return &c
	case *catalog.FuncDesc:
		// Functions keep no ACL: EXECUTE is PUBLIC's, as PostgreSQL's
		// default.
		c := *v
		c.Owner = owner
		return &c
	case *catalog.TypeDesc:
		// Types keep no ACL: USAGE on a type is PUBLIC's, as PostgreSQL's
		// default.
		c := *v
		c.Owner = owner
		return &c
	}
	return d
}

// checkOwner refuses (42501) a statement only the owner of d may run.
func (e *executor) checkOwner(ctx context.Context, d catalog.Descriptor) error {
	a, err := e.authorizer(ctx)
	if err != nil {
		return err
	}
	if a.IsOwner(descOwner(d)) {
		return nil
	}
	return pgerror.New(pgerrcode.InsufficientPrivilege, "must be owner of %s %s", catalog.ObjectKindWord(d.DescKind()), d.DescName())
}

// checkIndexOwner is checkOwner for an index: its table's owner.
func (e *executor) checkIndexOwner(ctx context.Context, t *catalog.Table, index string) error {
	a, err := e.authorizer(ctx)
	if err != nil {
		return err
	}
	if a.IsOwner(descOwner(t)) {
		return nil
	}
	return pgerror.New(pgerrcode.InsufficientPrivilege, "must be owner of index %s", index)
}

// checkPrivilege refuses (42501) unless the user holds want on d.
func (e *executor) checkPrivilege(ctx context.Context, d catalog.Descriptor, want catalog.Privilege) error {
	a, err := e.authorizer(ctx)
	if err != nil {
		return err
	}
	if a.Has(d.DescKind(), descOwner(d), descACL(d), want) {
		return nil
	}
	return pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied for %s %s", catalog.ObjectKindWord(d.DescKind()), d.DescName())
}

// ---- GRANT / REVOKE on objects ----

func (e *executor) grantPrivileges(ctx context.Context, n *pg_query.GrantStmt) (string, error) {
	tag := "GRANT"
	if !n.IsGrant {
		tag = "REVOKE"
	}
	objs, err := e.grantObjects(ctx, n)
	if err != nil {
		return tag, err
	}
	grantees, err := e.grantees(ctx, n.Grantees)
	if err != nil {
		return tag, err
	}
	a, err := e.authorizer(ctx)
	if err != nil {
		return tag, err
	}
	for _, d := range objs {
		kind := d.DescKind()
		privs, err := grantedPrivileges(n.Privileges, kind)
		if err != nil {
			return tag, err
		}
		owner := descOwner(d)
		// The owner (or a superuser, on its behalf) grants as the owner,
		// as PostgreSQL records it; anyone else only what it holds WITH
		// GRANT OPTION, as itself.
		grantor := owner
		if !a.IsOwner(owner) {
			var opts catalog.Privilege
			for _, it := range catalog.EffectiveACL(kind, owner, descACL(d)) {
				if it.Grantee == "" || a.HasRole(it.Grantee) {
					opts |= it.GrantOption
				}
			}
			if opts&privs == 0 {
				return tag, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied for %s %s", catalog.ObjectKindWord(kind), d.DescName())
			}
			privs &= opts
			grantor = e.x.User
		}
		acl := catalog.EffectiveACL(kind, owner, descACL(d))
		for _, g := range grantees {
			if n.IsGrant {
				acl = catalog.Grant(acl, g, grantor, privs, n.GrantOption)
			} else {
				acl = catalog.Revoke(acl, g, privs, n.GrantOption)
			}
		}
		if err := e.x.Writer.Update(ctx, withOwnerACL(d, owner, acl)); err != nil {
			return tag, err
		}
	}
	return tag, nil
}

// grantObjects resolves a GRANT's objects.
func (e *executor) grantObjects(ctx context.Context, n *pg_query.GrantStmt) ([]catalog.Descriptor, error) {
	var out []catalog.Descriptor
	switch n.Targtype {
	case pg_query.GrantTargetType_ACL_TARGET_OBJECT:
	case pg_query.GrantTargetType_ACL_TARGET_ALL_IN_SCHEMA:
		for _, o := range n.Objects {
			s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, strVal(o))
			if err != nil {
				return nil, err
			}
			rels, err := e.x.Writer.Relations(ctx, e.x.Database.ID, s.ID)
			if err != nil {
				return nil, err
			}
			for _, r := range rels {
				k := r.DescKind()
				if n.Objtype == pg_query.ObjectType_OBJECT_SEQUENCE && k == catalog.KindSequence ||
					n.Objtype == pg_query.ObjectType_OBJECT_TABLE && (k == catalog.KindTable || k == catalog.KindView) {
					out = append(out, r)
				}
			}
		}
		return out, nil
	default:
		return nil, notSupported("ALTER DEFAULT PRIVILEGES is not supported yet")
	}
	for _, o := range n.Objects {
		switch n.Objtype {
		case pg_query.ObjectType_OBJECT_TABLE, pg_query.ObjectType_OBJECT_SEQUENCE:
			rv := o.GetRangeVar()
			d, _, err := e.lookupRelation(ctx, rv)
			if err != nil {
				return nil, err
			}
			if n.Objtype == pg_query.ObjectType_OBJECT_SEQUENCE && d.DescKind() != catalog.KindSequence {
				return nil, pgerror.New(pgerrcode.WrongObjectType, "%q is not a sequence", d.DescName())
			}
			out = append(out, d)
		case pg_query.ObjectType_OBJECT_SCHEMA:
			s, err := e.x.Writer.Schema(ctx, e.x.Database.ID, strVal(o))
			if err != nil {
				return nil, err
			}
			if s.Virtual {
				return nil, notSupported("privileges on system schema %s cannot be changed", s.Name)
			}
			out = append(out, s)
		case pg_query.ObjectType_OBJECT_DATABASE:
			db, err := e.x.Writer.Database(ctx, strVal(o))
			if err != nil {
				return nil, err
			}
			out = append(out, db)
		default:
			return nil, notSupported("GRANT and REVOKE on %s are not supported yet", strings.ToLower(strings.TrimPrefix(n.Objtype.String(), "OBJECT_")))
		}
	}
	return out, nil
}

// grantedPrivileges is the privilege set a GRANT names for an object of
// kind k: ALL when it names none.
func grantedPrivileges(nodes []*pg_query.Node, k catalog.Kind) (catalog.Privilege, error) {
	all := catalog.AllPrivileges(k)
	if len(nodes) == 0 {
		return all, nil
	}
	var out catalog.Privilege
	for _, nd := range nodes {
		ap := nd.GetAccessPriv()
		if ap == nil {
			continue
		}
		if len(ap.Cols) > 0 {
			return 0, notSupported("column privileges are not supported yet")
		}
		if ap.PrivName == "" {
			return all, nil
		}
		p, ok := catalog.ParsePrivilege(ap.PrivName)
		if !ok {
			return 0, pgerror.New(pgerrcode.SyntaxError, "unrecognized privilege type \"%s\"", ap.PrivName)
		}
		if p&all == 0 {
			return 0, pgerror.New(pgerrcode.InvalidGrantOperation, "invalid privilege type %s for %s", p.Name(), catalog.ObjectKindWord(k))
		}
		out |= p
	}
	return out, nil
}

// grantees resolves GRANT's role list: "" is PUBLIC.
func (e *executor) grantees(ctx context.Context, nodes []*pg_query.Node) ([]string, error) {
	var out []string
	for _, nd := range nodes {
		rs := nd.GetRoleSpec()
		if rs == nil {
			continue
		}
		if rs.Roletype == pg_query.RoleSpecType_ROLESPEC_PUBLIC {
			out = append(out, "")
			continue
		}
		name, err := e.roleName(rs)
		if err != nil {
			return nil, err
		}
		if _, err := e.x.Writer.Role(ctx, name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}

// ---- GRANT / REVOKE role ----

func (e *executor) grantRole(ctx context.Context, n *pg_query.GrantRoleStmt) (string, error) {
	tag := "GRANT ROLE"
	if !n.IsGrant {
		tag = "REVOKE ROLE"
	}
	a, err := e.authorizer(ctx)
	if err != nil {
		return tag, err
	}
	grantees, err := e.grantees(ctx, n.GranteeRoles)
	if err != nil {
		return tag, err
	}
	for _, nd := range n.GrantedRoles {
		ap := nd.GetAccessPriv()
		if ap == nil {
			continue
		}
		granted := ap.PrivName
		if _, err := e.x.Writer.Role(ctx, granted); err != nil {
			return tag, err
		}
		if catalog.IsPredefinedRole(granted) {
			return tag, pgerror.New(pgerrcode.InvalidGrantOperation, "role \"%s\" cannot have explicit members", granted)
		}
		if !a.Superuser {
			return tag, pgerror.New(pgerrcode.InsufficientPrivilege, "must have admin option on role \"%s\"", granted)
		}
		for _, g := range grantees {
			if g == "" {
				return tag, pgerror.New(pgerrcode.InvalidGrantOperation, "role \"public\" cannot be a member of a role")
			}
			r, err := e.x.Writer.Role(ctx, g)
			if err != nil {
				return tag, err
			}
			c := *r
			member := slices.Contains(r.MemberOf, granted)
			if n.IsGrant {
				if member {
					e.notice("00000", fmt.Sprintf("role \"%s\" is already a member of role \"%s\"", g, granted))
					continue
				}
				if g == granted {
					return tag, pgerror.New(pgerrcode.InvalidGrantOperation, "role \"%s\" is a member of role \"%s\"", g, granted)
				}
				// A cycle: granted is (indirectly) a member of g already.
				ga := catalog.MembershipOf(ctx, &e.x.Writer.Reader, granted)
				if ga != nil && ga.HasRole(g) {
					return tag, pgerror.New(pgerrcode.InvalidGrantOperation, "role \"%s\" is a member of role \"%s\"", granted, g)
				}
				c.MemberOf = append(slices.Clone(r.MemberOf), granted)
			} else {
				if !member {
					e.notice("01000", fmt.Sprintf("role \"%s\" has not been granted membership in role \"%s\" by role \"%s\"", g, granted, e.x.User))
					continue
				}
				c.MemberOf = slices.DeleteFunc(slices.Clone(r.MemberOf), func(m string) bool { return m == granted })
			}
			if err := e.x.Writer.UpdateRole(ctx, &c); err != nil {
				return tag, err
			}
		}
	}
	return tag, nil
}

// ---- DROP OWNED / REASSIGN OWNED ----

// ownedRoles resolves DROP/REASSIGN OWNED's roles; the user must have
// each one's privileges.
func (e *executor) ownedRoles(ctx context.Context, nodes []*pg_query.Node, what string) ([]string, error) {
	a, err := e.authorizer(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, nd := range nodes {
		rs := nd.GetRoleSpec()
		if rs == nil {
			continue
		}
		name, err := e.roleName(rs)
		if err != nil {
			return nil, err
		}
		if _, err := e.x.Writer.Role(ctx, name); err != nil {
			return nil, err
		}
		if !a.HasRole(name) {
			return nil, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied to %s objects", what)
		}
		out = append(out, name)
	}
	return out, nil
}

// dropOwned drops the current database's objects the roles own and
// revokes what was granted to them, as PostgreSQL's DROP OWNED does.
func (e *executor) dropOwned(ctx context.Context, n *pg_query.DropOwnedStmt) (string, error) {
	tag := "DROP OWNED"
	roles, err := e.ownedRoles(ctx, n.Roles, "drop")
	if err != nil {
		return tag, err
	}
	cascade := n.Behavior == pg_query.DropBehavior_DROP_CASCADE
	ds := &dropSet{dropped: map[catalog.ID]bool{}}
	rels, err := e.allRelations(ctx)
	if err != nil {
		return tag, err
	}
	for _, r := range rels {
		if ds.dropped[r.DescID()] || !slices.Contains(roles, descOwner(r)) {
			continue
		}
		if s, ok := r.(*catalog.Sequence); ok && s.OwnedBy != nil {
			continue // goes with its column's table (or stays with it)
		}
		fresh, err := e.x.Writer.ByID(ctx, r.DescID())
		if err != nil {
			return tag, err
		}
		if err := e.dropRelation(ctx, fresh, cascade, ds, true); err != nil {
			return tag, err
		}
	}
	if err := e.revokeAll(ctx, roles, ds); err != nil {
		return tag, err
	}
	schemas, err := e.x.Writer.Schemas(ctx, e.x.Database.ID)
	if err != nil {
		return tag, err
	}
	var owned []*catalog.Schema
	for _, s := range schemas {
		if !s.Virtual && slices.Contains(roles, descOwner(s)) {
			owned = append(owned, s)
		}
	}
	if err := e.dropSchemaContents(ctx, owned, ds); err != nil {
		return tag, err
	}
	for _, s := range owned {
		if err := e.x.Writer.Drop(ctx, s); err != nil {
			return tag, err
		}
	}
	e.reportCascade(ds)
	return tag, nil
}

// ownedObjects lists what in the current database has an owner and an
// ACL: the database itself, its schemas (not the virtual ones) and their
// relations. DROP OWNED, REASSIGN OWNED and DROP ROLE's dependents walk it.
func (e *executor) ownedObjects(ctx context.Context) ([]catalog.Descriptor, error) {
	db, err := e.x.Writer.Database(ctx, e.x.Database.Name)
	if err != nil {
		return nil, err
	}
	objs := []catalog.Descriptor{db}
	schemas, err := e.x.Writer.Schemas(ctx, e.x.Database.ID)
	if err != nil {
		return nil, err
	}
	for _, s := range schemas {
		if !s.Virtual {
			objs = append(objs, s)
		}
	}
	rels, err := e.allRelations(ctx)
	if err != nil {
		return nil, err
	}
	return append(objs, rels...), nil
}

// revokeAll removes the roles from the ACLs of the current database, its
// schemas and its relations (the rest of DROP OWNED).
func (e *executor) revokeAll(ctx context.Context, roles []string, ds *dropSet) error {
	objs, err := e.ownedObjects(ctx)
	if err != nil {
		return err
	}
	for _, d := range objs {
		if ds.dropped[d.DescID()] {
			continue
		}
		acl := descACL(d)
		changed := false
		for _, r := range roles {
			if catalog.MentionsRole(acl, r) {
				var keep []catalog.ACLItem
				for _, it := range acl {
					if it.Grantee != r && it.Grantor != r {
						keep = append(keep, it)
					}
				}
				if keep == nil {
					keep = []catalog.ACLItem{}
				}
				acl, changed = keep, true
			}
		}
		if changed {
			if err := e.x.Writer.Update(ctx, withOwnerACL(d, descOwner(d), acl)); err != nil {
				return err
			}
		}
	}
	return nil
}

// reassignOwned gives the current database's objects the roles own (and
// the database itself, if theirs) to the new role.
func (e *executor) reassignOwned(ctx context.Context, n *pg_query.ReassignOwnedStmt) (string, error) {
	tag := "REASSIGN OWNED"
	roles, err := e.ownedRoles(ctx, n.Roles, "reassign")
	if err != nil {
		return tag, err
	}
	to, err := e.roleName(n.Newrole)
	if err != nil {
		return tag, err
	}
	if _, err := e.x.Writer.Role(ctx, to); err != nil {
		return tag, err
	}
	if a, _ := e.authorizer(ctx); !a.HasRole(to) {
		return tag, pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied to reassign objects")
	}
	objs, err := e.ownedObjects(ctx)
	if err != nil {
		return tag, err
	}
	for _, d := range objs {
		from := descOwner(d)
		if !slices.Contains(roles, from) {
			continue
		}
		if err := e.x.Writer.Update(ctx, withOwnerACL(d, to, catalog.RenameInACL(descACL(d), from, to))); err != nil {
			return tag, err
		}
	}
	return tag, nil
}

// roleDependents lists what keeps a role from being dropped in the
// current database (PostgreSQL's DETAIL lines): objects it owns and
// privileges granted to it.
func (e *executor) roleDependents(ctx context.Context, role string) ([]string, error) {
	var out []string
	objs, err := e.ownedObjects(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range objs {
		what := catalog.ObjectKindWord(d.DescKind()) + " " + d.DescName()
		if descOwner(d) == role {
			out = append(out, "owner of "+what)
		} else if catalog.MentionsRole(descACL(d), role) {
			out = append(out, "privileges for "+what)
		}
	}
	return out, nil
}

// requireSuperuser refuses (42501 "permission denied to <what>") a
// non-superuser: role management, which PostgreSQL also allows holders
// of CREATEROLE (Cairn has no such attribute).
func (e *executor) requireSuperuser(ctx context.Context, what string) error {
	a, err := e.authorizer(ctx)
	if err != nil {
		return err
	}
	if !a.Superuser {
		return pgerror.New(pgerrcode.InsufficientPrivilege, "permission denied to %s", what)
	}
	return nil
}

// forgetMemberships removes a dropped role from every role's MemberOf.
func (e *executor) forgetMemberships(ctx context.Context, role string) error {
	roles, err := e.x.Writer.Roles(ctx)
	if err != nil {
		return err
	}
	for _, r := range roles {
		if catalog.IsPredefinedRole(r.Name) || !slices.Contains(r.MemberOf, role) {
			continue
		}
		c := *r
		c.MemberOf = slices.DeleteFunc(slices.Clone(r.MemberOf), func(m string) bool { return m == role })
		if err := e.x.Writer.UpdateRole(ctx, &c); err != nil {
			return err
		}
	}
	return nil
}

// changeOwner is ALTER ... OWNER TO: the current owner (or a superuser)
// may give an object to a role it is a member of (42501 otherwise), and
// the owner's entries in the object's ACL follow, as PostgreSQL's
// aclnewowner does.
func (e *executor) changeOwner(ctx context.Context, d catalog.Descriptor, spec *pg_query.RoleSpec) error {
	to, err := e.roleName(spec)
	if err != nil {
		return err
	}
	if _, err := e.x.Writer.Role(ctx, to); err != nil {
		return err
	}
	from := descOwner(d)
	if from == to {
		return nil
	}
	if err := e.checkOwner(ctx, d); err != nil {
		return err
	}
	a, err := e.authorizer(ctx)
	if err != nil {
		return err
	}
	if !a.HasRole(to) {
		return pgerror.New(pgerrcode.InsufficientPrivilege, "must be member of role \"%s\"", to)
	}
	return e.x.Writer.Update(ctx, withOwnerACL(d, to, catalog.RenameInACL(descACL(d), from, to)))
}

// alterOwner is ALTER SCHEMA/DATABASE/SEQUENCE/VIEW ... OWNER TO.
func (e *executor) alterOwner(ctx context.Context, n *pg_query.AlterOwnerStmt) (string, error) {
	var d catalog.Descriptor
	var err error
	tag := "ALTER " + strings.ReplaceAll(strings.TrimPrefix(n.ObjectType.String(), "OBJECT_"), "_", " ")
	switch n.ObjectType {
	case pg_query.ObjectType_OBJECT_SCHEMA:
		var s *catalog.Schema
		if s, err = e.x.Writer.Schema(ctx, e.x.Database.ID, strVal(n.Object)); err == nil && s.Virtual {
			return tag, pgerror.New(pgerrcode.InsufficientPrivilege, "must be owner of schema %s", s.Name)
		}
		d = s
	case pg_query.ObjectType_OBJECT_DATABASE:
		d, err = e.x.Writer.Database(ctx, strVal(n.Object))
	case pg_query.ObjectType_OBJECT_TYPE, pg_query.ObjectType_OBJECT_DOMAIN:
		d, _, err = e.enumOf(ctx, typeNameParts(n.Object))
	case pg_query.ObjectType_OBJECT_FUNCTION:
		d, err = e.lookupFunction(ctx, n.Object.GetObjectWithArgs(), false)
	default:
		return tag, notSupported("%s OWNER TO is not supported yet", tag)
	}
	if err != nil {
		return tag, err
	}
	return tag, e.changeOwner(ctx, d, n.Newowner)
}

// commentOnConstraint is COMMENT ON CONSTRAINT c ON t: the table's owner
// may comment on its constraints (an index's constraint too).
func (e *executor) commentOnConstraint(ctx context.Context, n *pg_query.CommentStmt) error {
	names := nameList(n.Object.GetList().GetItems())
	if len(names) < 2 {
		return pgerror.New(pgerrcode.SyntaxError, "constraint name must be qualified by its table")
	}
	con := names[len(names)-1]
	rv := &pg_query.RangeVar{Relname: names[len(names)-2]}
	if len(names) > 2 {
		rv.Schemaname = names[len(names)-3]
	}
	t, err := e.mutableTable(ctx, rv)
	if err != nil {
		return err
	}
	if !tableHasConstraint(t, con) {
		return pgerror.New(pgerrcode.UndefinedObject, "constraint \"%s\" for table \"%s\" does not exist", con, t.Name)
	}
	if err := e.checkOwner(ctx, t); err != nil {
		return err
	}
	comments := map[string]string{}
	for k, v := range t.ConstraintComments {
		if tableHasConstraint(t, k) { // forget those of dropped constraints
			comments[k] = v
		}
	}
	if n.Comment == "" {
		delete(comments, con)
	} else {
		comments[con] = n.Comment
	}
	if len(comments) == 0 {
		comments = nil
	}
	t.ConstraintComments = comments
	return e.x.Writer.Update(ctx, t)
}

// tableHasConstraint reports whether t has a constraint named name.
func tableHasConstraint(t *catalog.Table, name string) bool {
	if _, implicit := t.RowIDKey(); t.PrimaryIndex.Name == name && !implicit {
		for _, id := range t.PrimaryIndex.KeyColumnIDs {
			if c := t.ColumnByID(id); c != nil && !c.Hidden {
				return true // a declared primary key, not rowid's
			}
		}
	}
	for _, u := range t.Uniques {
		if u.Name == name {
			return true
		}
	}
	for _, c := range t.Checks {
		if c.Name == name {
			return true
		}
	}
	for _, fk := range t.ForeignKeys {
		if fk.Name == name {
			return true
		}
	}
	return false
}
