package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Privileges, as PostgreSQL's: every object has an owner (which holds all
// privileges on it implicitly and alone may drop or alter it) and an ACL,
// a list of aclitems "grantee=privileges/grantor" that GRANT and REVOKE
// edit. A nil ACL is the object kind's default (PostgreSQL's acldefault:
// the owner holds everything, and on a database PUBLIC holds CONNECT and
// TEMPORARY); a non-nil ACL is exactly what it lists, the owner's own
// entry included, as pg_class.relacl shows it once a GRANT was made.
// Superusers bypass every check. A role holds the privileges of the roles
// it is a member of (GRANT role TO role; Role.MemberOf), and every role
// those granted to PUBLIC (the empty grantee).

// DatabaseOwnerRole is PostgreSQL's predefined pg_database_owner: its
// only member, implicitly, is the owner of the current database. It owns
// each database's public schema, as in PostgreSQL 15.
const DatabaseOwnerRole = "pg_database_owner"

// Privilege is a set of privileges; the bits follow PostgreSQL's ACL_*
// order, so Letters prints them in aclitem order.
type Privilege uint16

// The privileges; PrivAll is ALL of the object kind (AllPrivileges).
const (
	PrivInsert     Privilege = 1 << iota // a
	PrivSelect                           // r
	PrivUpdate                           // w
	PrivDelete                           // d
	PrivTruncate                         // D
	PrivReferences                       // x
	PrivTrigger                          // t
	PrivExecute                          // X
	PrivUsage                            // U
	PrivCreate                           // C
	PrivTemporary                        // T
	PrivConnect                          // c
)

const privLetters = "arwdDxtXUCTc"

var privNames = []string{"INSERT", "SELECT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER",
	"EXECUTE", "USAGE", "CREATE", "TEMPORARY", "CONNECT"}

// ParsePrivilege maps a privilege's SQL name (case-insensitive; TEMP
// too) to its bit; false for an unknown name.
func ParsePrivilege(name string) (Privilege, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if n == "TEMP" {
		n = "TEMPORARY"
	}
	for i, p := range privNames {
		if p == n {
			return Privilege(1) << i, true
		}
	}
	return 0, false
}

// Name is the privilege's SQL name (one bit).
func (p Privilege) Name() string {
	for i := range privNames {
		if p == Privilege(1)<<i {
			return privNames[i]
		}
	}
	return fmt.Sprintf("privilege(%d)", uint16(p))
}

// AllPrivileges is ALL PRIVILEGES on an object of kind k, as PostgreSQL
// 15 defines them (ACL_ALL_RIGHTS_*).
func AllPrivileges(k Kind) Privilege {
	switch k {
	case KindTable, KindView:
		return PrivInsert | PrivSelect | PrivUpdate | PrivDelete | PrivTruncate | PrivReferences | PrivTrigger
	case KindSequence:
		return PrivSelect | PrivUpdate | PrivUsage
	case KindSchema:
		return PrivUsage | PrivCreate
	case KindDatabase:
		return PrivCreate | PrivTemporary | PrivConnect
	}
	return 0
}

// ACLItem is one aclitem: Grantee ("" is PUBLIC) holds Privs granted by
// Grantor, those in GrantOption WITH GRANT OPTION.
type ACLItem struct {
	Grantee     string    `json:"grantee,omitempty"`
	Grantor     string    `json:"grantor"`
	Privs       Privilege `json:"privs"`
	GrantOption Privilege `json:"grant_option,omitempty"`
}

// String is the aclitem's text form, "grantee=arwd*/grantor".
func (a ACLItem) String() string {
	var b strings.Builder
	b.WriteString(aclName(a.Grantee))
	b.WriteByte('=')
	for i := 0; i < len(privLetters); i++ {
		bit := Privilege(1) << i
		if a.Privs&bit != 0 {
			b.WriteByte(privLetters[i])
			if a.GrantOption&bit != 0 {
				b.WriteByte('*')
			}
		}
	}
	b.WriteByte('/')
	b.WriteString(aclName(a.Grantor))
	return b.String()
}

// aclName quotes a role name in an aclitem as PostgreSQL's putid does.
func aclName(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r >= 0x80) {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
	}
	return s
}

// DefaultACL is PostgreSQL's acldefault for an object of kind k owned by
// owner: what a nil ACL means.
func DefaultACL(k Kind, owner string) []ACLItem {
	out := []ACLItem{{Grantee: owner, Grantor: owner, Privs: AllPrivileges(k)}}
	if k == KindDatabase {
		out = append(out, ACLItem{Grantor: owner, Privs: PrivTemporary | PrivConnect})
	}
	return out
}

// EffectiveACL is the object's ACL, its kind's default when nil.
func EffectiveACL(k Kind, owner string, acl []ACLItem) []ACLItem {
	if acl == nil {
		return DefaultACL(k, owner)
	}
	return acl
}

// Grant adds privs (and, withGrant, the grant option on them) for grantee
// by grantor to an ACL, returning the new ACL (never nil).
func Grant(acl []ACLItem, grantee, grantor string, privs Privilege, withGrant bool) []ACLItem {
	out := slices.Clone(acl)
	if out == nil {
		out = []ACLItem{}
	}
	for i := range out {
		if out[i].Grantee == grantee && out[i].Grantor == grantor {
			out[i].Privs |= privs
			if withGrant {
				out[i].GrantOption |= privs
			}
			return out
		}
	}
	it := ACLItem{Grantee: grantee, Grantor: grantor, Privs: privs}
	if withGrant {
		it.GrantOption = privs
	}
	return append(out, it)
}

// Revoke removes privs (only their grant option, grantOptionOnly) of
// grantee from an ACL, whoever granted them; entries left empty go.
func Revoke(acl []ACLItem, grantee string, privs Privilege, grantOptionOnly bool) []ACLItem {
	out := make([]ACLItem, 0, len(acl))
	for _, it := range acl {
		if it.Grantee == grantee {
			it.GrantOption &^= privs
			if !grantOptionOnly {
				it.Privs &^= privs
			}
			if it.Privs == 0 {
				continue
			}
		}
		out = append(out, it)
	}
	return out
}

// RenameInACL replaces role from by to in an ACL (REASSIGN OWNED), and
// drops the entries granted to drop (DROP OWNED), merging duplicates.
func RenameInACL(acl []ACLItem, from, to string) []ACLItem {
	if acl == nil {
		return nil
	}
	var out []ACLItem
	for _, it := range acl {
		if it.Grantee == from {
			it.Grantee = to
		}
		if it.Grantor == from {
			it.Grantor = to
		}
		out = Grant(out, it.Grantee, it.Grantor, it.Privs, false)
		for i := range out {
			if out[i].Grantee == it.Grantee && out[i].Grantor == it.Grantor {
				out[i].GrantOption |= it.GrantOption
			}
		}
	}
	return out
}

// MentionsRole reports whether role appears in an ACL.
func MentionsRole(acl []ACLItem, role string) bool {
	for _, it := range acl {
		if it.Grantee == role || it.Grantor == role {
			return true
		}
	}
	return false
}

// Authorizer answers privilege questions for one user as of one
// transaction: whether the user is a superuser, which roles it has the
// privileges of, and so whether it holds a privilege on an object.
type Authorizer struct {
	User      string
	Superuser bool
	// roles are the user and every role it is a member of, directly or
	// not (pg_database_owner when it owns the database).
	roles map[string]bool
}

// NewAuthorizer reads what deciding for user needs. The bootstrap
// superuser is answered without reading anything: it can never lose
// SUPERUSER (ALTER ROLE refuses), which keeps the per-statement check off
// the hot path.
func NewAuthorizer(ctx context.Context, r *Reader, user string, db *Database) (*Authorizer, error) {
	if user == SuperuserName || user == "" {
		return &Authorizer{User: user, Superuser: true}, nil
	}
	roles, err := r.Roles(ctx)
	if err != nil {
		return nil, err
	}
	return authorizerFrom(user, roles, db), nil
}

// MembershipOf is the Authorizer of role's memberships alone (its
// SUPERUSER attribute ignored), nil when the roles cannot be read: GRANT
// role uses it to refuse a membership cycle.
func MembershipOf(ctx context.Context, r *Reader, role string) *Authorizer {
	roles, err := r.Roles(ctx)
	if err != nil {
		return nil
	}
	a := authorizerFrom(role, roles, nil)
	a.Superuser = false
	return a
}

func authorizerFrom(user string, roles []*Role, db *Database) *Authorizer {
	byName := make(map[string]*Role, len(roles))
	for _, r := range roles {
		byName[r.Name] = r
	}
	a := &Authorizer{User: user, roles: map[string]bool{}}
	if r := byName[user]; r != nil && r.Superuser {
		a.Superuser = true
	}
	var visit func(string)
	visit = func(n string) {
		if a.roles[n] {
			return
		}
		a.roles[n] = true
		if r := byName[n]; r != nil {
			for _, m := range r.MemberOf {
				visit(m)
			}
		}
	}
	visit(user)
	if db != nil && a.roles[owner(db.Owner)] {
		a.roles[DatabaseOwnerRole] = true
	}
	return a
}

func owner(o string) string {
	if o == "" {
		return SuperuserName
	}
	return o
}

// HasRole reports whether the user has the privileges of role (is it or
// a member of it); superusers have every role's.
func (a *Authorizer) HasRole(role string) bool {
	return a.Superuser || a.roles[owner(role)]
}

// IsOwner reports whether the user may act as an object's owner.
func (a *Authorizer) IsOwner(objOwner string) bool { return a.HasRole(objOwner) }

// Privileges returns which of want the user holds on an object of kind k
// with owner and acl.
func (a *Authorizer) Privileges(k Kind, objOwner string, acl []ACLItem, want Privilege) Privilege {
	if a.Superuser {
		return want
	}
	if acl == nil && a.roles[owner(objOwner)] {
		return want & AllPrivileges(k)
	}
	var have Privilege
	for _, it := range EffectiveACL(k, owner(objOwner), acl) {
		if it.Grantee == "" || a.roles[it.Grantee] {
			have |= it.Privs
		}
	}
	return have & want
}

// Has reports whether the user holds all of want on the object.
func (a *Authorizer) Has(k Kind, objOwner string, acl []ACLItem, want Privilege) bool {
	return a.Privileges(k, objOwner, acl, want) == want
}

// ObjectKindWord is how PostgreSQL's "permission denied for ..." names a
// kind.
func ObjectKindWord(k Kind) string {
	switch k {
	case KindTable:
		return "table"
	case KindView:
		return "view"
	case KindSequence:
		return "sequence"
	case KindSchema:
		return "schema"
	case KindDatabase:
		return "database"
	case KindType:
		return "type"
	case KindFunction:
		return "function"
	}
	return "relation"
}
