package hba

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		text, err string
	}{
		{"hosts all all all trust", `line 1: invalid connection type "hosts"`},
		{"host all all trust", `invalid IP address "trust"`},
		{"host all all", "end-of-line before the authentication method"},
		{"host all all 10.0.0.0/8", "end-of-line before the authentication method"},
		{"host all all all md6", `invalid authentication method "md6"`},
		{"host all all all ldap", `"ldap" is not supported by Cairn`},
		{"host all all all cert", "cert authentication is only supported on hostssl connections"},
		{"host all all 10.0.0.1 trust", `invalid IP mask "trust"`},
		{"host all all 10.0.0.1", `IP address "10.0.0.1" needs a /length or a mask`},
		{"host all all 10.0.0.1 255.0.255.0 trust", "not a contiguous mask"},
		{"host all all db.example.com trust", "host names are not supported"},
		{"host all +admins all trust", "role membership (+admins) is not supported"},
		{"host samerole all all trust", "samerole is not supported"},
		{"host all @users all trust", "file inclusion"},
		{"host all all all trust foo=bar", `authentication option "foo" is not supported`},
		{"host all all all scram-sha-256 clientcert=verify-full", "clientcert can only be configured for hostssl rows"},
		{"hostssl all all all cert clientcert=verify-ca", "clientcert only accepts verify-full"},
		{"host all \"unterminated all trust", "unterminated quoted string"},
		{"host a,,b all all trust", "empty item"},
		{"host a, all all", "end-of-line before the authentication method"},
		{"# fine\nhost all all all trust\nhost all", "line 3:"},
	} {
		_, err := Parse(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.text, err, tc.err)
		}
	}
}

func TestParseRules(t *testing.T) {
	c, err := Parse(`
# TYPE  DATABASE        USER            ADDRESS                 METHOD
local   all             all                                     trust
host    "all",db2       alice, bob      192.168.1.0 255.255.255.0 password   # a comment
hostssl sameuser        "all"           ::1/128                 scram-sha-256 clientcert=verify-ca
hostssl all             all             samenet                 cert
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules) != 4 {
		t.Fatalf("got %d rules, want 4", len(c.Rules))
	}
	r := c.Rules[1]
	if r.Line != 4 || r.Type != Host || r.Method != Password ||
		len(r.Databases) != 2 || r.Databases[0] != (Token{"all", false}) || r.Databases[1] != (Token{"db2", false}) ||
		len(r.Users) != 2 || r.Users[1].Value != "bob" ||
		r.Addr.Prefix != netip.MustParsePrefix("192.168.1.0/24") {
		t.Errorf("rule 2 parsed as %+v", r)
	}
	if r := c.Rules[2]; r.Users[0].Keyword || r.ClientCert != VerifyCA || !r.Databases[0].Keyword {
		t.Errorf("rule 3 parsed as %+v", r)
	}
	if r := c.Rules[3]; r.Addr.Kind != AddrSameNet || r.ClientCert != VerifyFull {
		t.Errorf("rule 4 parsed as %+v", r)
	}
}

func TestMatch(t *testing.T) {
	c, err := Parse(`
local     all       all                     trust
hostnossl all       all       0.0.0.0/0     reject
host      sales     alice     10.1.0.0/16   password
host      sameuser  all       10.0.0.0/8    scram-sha-256
hostssl   all       "all"     all           cert
hostssl   all       all       samehost      trust
host      all       all       ::1/128       trust
hostgssenc all      all       all           reject
host      replication all     all           reject
hostnogssenc all    all       all           trust
`)
	if err != nil {
		t.Fatal(err)
	}
	c.local = func() ([]netip.Prefix, error) {
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("10.9.0.5/24")}, nil
	}
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		conn Conn
		line int
	}{
		{"plaintext is rejected first", Conn{Addr: ip("10.1.2.3"), Database: "sales", User: "alice"}, 3},
		{"IPv4-mapped is IPv4", Conn{Addr: ip("::ffff:10.1.2.3"), Database: "sales", User: "alice"}, 3},
		{"TLS skips hostnossl", Conn{TLS: true, Addr: ip("10.1.2.3"), Database: "sales", User: "alice"}, 4},
		{"wrong database", Conn{TLS: true, Addr: ip("10.2.2.3"), Database: "hr", User: "bob"}, 11},
		{"sameuser", Conn{TLS: true, Addr: ip("10.2.2.3"), Database: "bob", User: "bob"}, 5},
		{"quoted all is a role name", Conn{TLS: true, Addr: ip("192.0.2.1"), Database: "x", User: "all"}, 6},
		{"samehost", Conn{TLS: true, Addr: ip("10.9.0.5"), Database: "x", User: "carol"}, 7},
		{"samehost is not samenet", Conn{TLS: true, Addr: ip("10.9.0.6"), Database: "x", User: "carol"}, 11},
		{"IPv6 loopback without TLS", Conn{Addr: ip("::1"), Database: "x", User: "carol"}, 8},
		{"IPv4 rule does not match IPv6", Conn{TLS: true, Addr: ip("::1"), Database: "x", User: "carol"}, 8},
		{"hostgssenc and replication never match; hostnogssenc is host", Conn{TLS: true, Addr: ip("192.0.2.7"), Database: "replication", User: "carol"}, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Match(tc.conn)
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			if r != nil {
				got = r.Line
			}
			if got != tc.line {
				t.Errorf("matched line %d, want %d", got, tc.line)
			}
		})
	}
}

func TestEmptyConfigRefusesAll(t *testing.T) {
	c, err := Parse("# nothing\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Match(Conn{Addr: netip.MustParseAddr("127.0.0.1"), Database: "d", User: "u"}); r != nil || err != nil {
		t.Fatalf("an empty configuration matched %v, %v", r, err)
	}
}
