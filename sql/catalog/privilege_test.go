package catalog

import (
	"strings"
	"testing"
)

func aclString(acl []ACLItem) string {
	parts := make([]string, len(acl))
	for i, it := range acl {
		parts[i] = it.String()
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// The ACL texts are what PostgreSQL 15 shows in pg_class.relacl after
// the same statements.
func TestACLEdits(t *testing.T) {
	owner := "alice"
	acl := EffectiveACL(KindTable, owner, nil)
	if got, want := aclString(acl), "{alice=arwdDxt/alice}"; got != want {
		t.Fatalf("default table ACL = %s, want %s", got, want)
	}
	acl = Grant(acl, "bob", owner, PrivSelect|PrivInsert, false)
	acl = Grant(acl, "", owner, PrivUpdate, false)
	acl = Grant(acl, "bob", owner, PrivDelete, true)
	if got, want := aclString(acl), "{alice=arwdDxt/alice,bob=ard*/alice,=w/alice}"; got != want {
		t.Errorf("after GRANTs = %s, want %s", got, want)
	}
	acl = Revoke(acl, "bob", PrivDelete, true)
	if got, want := aclString(acl), "{alice=arwdDxt/alice,bob=ard/alice,=w/alice}"; got != want {
		t.Errorf("after REVOKE GRANT OPTION FOR = %s, want %s", got, want)
	}
	acl = Revoke(acl, "bob", PrivSelect|PrivInsert|PrivDelete, false)
	if got, want := aclString(acl), "{alice=arwdDxt/alice,=w/alice}"; got != want {
		t.Errorf("after REVOKE = %s, want %s", got, want)
	}
	if got, want := aclString(RenameInACL(acl, "alice", "carol")), "{carol=arwdDxt/carol,=w/carol}"; got != want {
		t.Errorf("after REASSIGN = %s, want %s", got, want)
	}
	if got, want := aclString(DefaultACL(KindDatabase, "alice")), "{alice=CTc/alice,=Tc/alice}"; got != want {
		t.Errorf("default database ACL = %s, want %s", got, want)
	}
	if got, want := (ACLItem{Grantee: "Odd Name", Grantor: "alice", Privs: PrivUsage}).String(), `"Odd Name"=U/alice`; got != want {
		t.Errorf("quoted grantee = %s, want %s", got, want)
	}
}

func TestAuthorizer(t *testing.T) {
	roles := []*Role{
		{Name: "admin", Superuser: true},
		{Name: "reader"},
		{Name: "app", MemberOf: []string{"reader"}},
		{Name: "svc", MemberOf: []string{"app"}},
		{Name: "dbowner"},
		{Name: "nobody"},
	}
	db := &Database{Name: "d", Owner: "dbowner"}
	tableACL := []ACLItem{
		{Grantee: "owner", Grantor: "owner", Privs: AllPrivileges(KindTable)},
		{Grantee: "reader", Grantor: "owner", Privs: PrivSelect},
		{Grantee: "", Grantor: "owner", Privs: PrivInsert},
	}
	for _, c := range []struct {
		user  string
		owner string
		acl   []ACLItem
		kind  Kind
		want  Privilege
		has   bool
	}{
		{"admin", "owner", tableACL, KindTable, PrivDelete, true},   // superuser
		{"reader", "owner", tableACL, KindTable, PrivSelect, true},  // granted
		{"svc", "owner", tableACL, KindTable, PrivSelect, true},     // through two memberships
		{"nobody", "owner", tableACL, KindTable, PrivSelect, false}, // nothing
		{"nobody", "owner", tableACL, KindTable, PrivInsert, true},  // PUBLIC
		{"reader", "owner", tableACL, KindTable, PrivUpdate, false}, // not granted
		{"nobody", "nobody", nil, KindTable, PrivDelete, true},      // owner, default ACL
		{"reader", "nobody", nil, KindTable, PrivSelect, false},     // default ACL: owner only
		{"dbowner", DatabaseOwnerRole, nil, KindSchema, PrivCreate, true},
		{"reader", DatabaseOwnerRole, nil, KindSchema, PrivCreate, false},
		{"reader", "dbowner", nil, KindDatabase, PrivConnect, true}, // PUBLIC's default
		{"reader", "dbowner", nil, KindDatabase, PrivCreate, false},
	} {
		a := authorizerFrom(c.user, roles, db)
		if got := a.Has(c.kind, c.owner, c.acl, c.want); got != c.has {
			t.Errorf("%s: Has(%s %s owned by %s) = %v, want %v", c.user, c.want.Name(), c.kind, c.owner, got, c.has)
		}
	}
	if a := authorizerFrom("svc", roles, db); !a.HasRole("reader") || a.HasRole("admin") || a.IsOwner("dbowner") {
		t.Error("svc's memberships are wrong")
	}
}

func TestParsePrivilege(t *testing.T) {
	for in, want := range map[string]Privilege{"select": PrivSelect, " TEMP": PrivTemporary, "References": PrivReferences} {
		if got, ok := ParsePrivilege(in); !ok || got != want {
			t.Errorf("ParsePrivilege(%q) = %v, %v", in, got, ok)
		}
	}
	if _, ok := ParsePrivilege("maintain"); ok {
		t.Error("maintain is not a PostgreSQL 15 privilege")
	}
}
