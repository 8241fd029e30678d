// Package hba parses and matches host-based authentication rules in the
// syntax of PostgreSQL's pg_hba.conf: which connections may log in, and
// how. The rules are the cluster setting
// server.host_based_authentication.configuration (sql/session sets and
// reads it, pgwire applies it at every login); this package only turns
// text into rules and finds the first rule a connection matches.
//
// It must not import pgwire, the SQL layer or anything that does I/O
// beyond listing this host's interface addresses (samehost, samenet).
//
// Invariants:
//
//  1. First match wins, as in PostgreSQL: the rules are tried in order
//     and the first whose connection type, database, user and address
//     all match decides the method; a connection no rule matches is
//     refused. Later rules are never consulted, even when the first
//     match's method fails.
//  2. Parse accepts exactly what it can enforce. A line using a feature
//     Cairn does not implement (group membership +role, @file includes,
//     host names, regular expressions, gss/ldap/... methods, unknown
//     options) is an error naming the line, never a rule that silently
//     matches more or less than it says.
//  3. Keywords are case-sensitive and lose their meaning when quoted, as
//     in PostgreSQL: "all" is the role named all.
package hba

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ConnType is a rule's first field.
type ConnType int

// The connection types of pg_hba.conf.
const (
	// Local matches Unix-domain socket connections. Cairn listens on TCP
	// only, so a local rule never matches; it is accepted so that a
	// pg_hba.conf copied from PostgreSQL parses.
	Local ConnType = iota
	// Host matches any TCP connection, with or without TLS.
	Host
	// HostSSL matches TCP connections that use TLS.
	HostSSL
	// HostNoSSL matches TCP connections that do not use TLS.
	HostNoSSL
	// HostGSSEnc matches GSSAPI-encrypted connections: Cairn has none,
	// so it never matches.
	HostGSSEnc
	// HostNoGSSEnc matches TCP connections without GSSAPI encryption:
	// every TCP connection here.
	HostNoGSSEnc
)

var connTypes = map[string]ConnType{
	"local": Local, "host": Host, "hostssl": HostSSL, "hostnossl": HostNoSSL,
	"hostgssenc": HostGSSEnc, "hostnogssenc": HostNoGSSEnc,
}

func (t ConnType) String() string {
	for k, v := range connTypes {
		if v == t {
			return k
		}
	}
	return fmt.Sprintf("ConnType(%d)", int(t))
}

// Method is how a matched connection authenticates.
type Method string

// The methods Cairn implements.
const (
	// Trust logs in any existing role that may log in, without a password.
	Trust Method = "trust"
	// Reject refuses the connection.
	Reject Method = "reject"
	// SCRAM asks for the password with SCRAM-SHA-256 (over TLS also
	// SCRAM-SHA-256-PLUS).
	SCRAM Method = "scram-sha-256"
	// MD5 is accepted as in PostgreSQL when the stored password is a
	// SCRAM verifier (Cairn stores no other kind): it runs SCRAM.
	MD5 Method = "md5"
	// Password asks for the password in clear text (only sensible over
	// TLS) and checks it against the stored verifier.
	Password Method = "password"
	// Cert requires a client certificate signed by the cluster CA whose
	// CommonName is the user; hostssl lines only.
	Cert Method = "cert"
)

var methods = map[string]Method{
	"trust": Trust, "reject": Reject, "scram-sha-256": SCRAM, "md5": MD5,
	"password": Password, "cert": Cert,
}

// unsupportedMethods are PostgreSQL methods Cairn recognises but does not
// implement: naming them is an error rather than a typo's "unknown".
var unsupportedMethods = map[string]bool{
	"gss": true, "sspi": true, "ident": true, "peer": true, "ldap": true,
	"radius": true, "pam": true, "bsd": true,
}

// ClientCert is the clientcert option of a non-cert method.
type ClientCert int

// clientcert values.
const (
	// NoClientCert: a client certificate is not required.
	NoClientCert ClientCert = iota
	// VerifyCA: a client certificate signed by the cluster CA is required.
	VerifyCA
	// VerifyFull: as VerifyCA, and its CommonName must be the user.
	VerifyFull
)

// Rule is one line of the configuration.
type Rule struct {
	// Line is the rule's line number in the text, from 1.
	Line int
	// Text is the line as written, for messages and SHOW.
	Text string
	Type ConnType
	// Databases and Users are the line's lists; a keyword (all, sameuser,
	// replication) is kept apart from names so that a quoted "all" is a
	// name.
	Databases []Token
	Users     []Token
	// Addr is the address field of a host line (unset for local).
	Addr Address
	// Method is how a matched connection authenticates.
	Method Method
	// ClientCert is the clientcert option (Cert implies VerifyFull).
	ClientCert ClientCert
}

// Token is one item of a database or user list.
type Token struct {
	Value string
	// Keyword is set when Value was written unquoted and is one of the
	// field's keywords.
	Keyword bool
}

// AddrKind says what an Address field is.
type AddrKind int

// Address kinds.
const (
	// AddrAll matches any client address.
	AddrAll AddrKind = iota
	// AddrPrefix matches clients in Prefix.
	AddrPrefix
	// AddrSameHost matches clients connecting from one of this host's
	// own addresses.
	AddrSameHost
	// AddrSameNet matches clients on a subnet this host is directly
	// connected to.
	AddrSameNet
)

// Address is a host line's address field.
type Address struct {
	Kind   AddrKind
	Prefix netip.Prefix
}

// Conn is what matching needs to know about a connection.
type Conn struct {
	// TLS is whether the connection upgraded to TLS.
	TLS bool
	// Addr is the client's IP address.
	Addr netip.Addr
	// Database and User are the startup packet's (Database already
	// defaulted to User when empty).
	Database, User string
}

// Config is a parsed configuration: its rules in order.
type Config struct {
	Rules []Rule
	// local lists this host's interface networks for samehost and
	// samenet; nil means net.InterfaceAddrs (tests set it).
	local func() ([]netip.Prefix, error)
}

// Error is a mistake in the configuration text, with its line.
type Error struct {
	Line int
	Text string
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("line %d: %s: %q", e.Line, e.Msg, e.Text)
}

// Parse parses text in pg_hba.conf syntax. An empty text (only comments
// and blank lines) is a valid configuration with no rules, which refuses
// every connection; callers that mean "no configuration" check for the
// empty setting before calling Parse.
func Parse(text string) (*Config, error) {
	c := &Config{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		raw := strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		fields, err := tokenize(raw)
		if err != nil {
			return nil, &Error{Line: n, Text: raw, Msg: err.Error()}
		}
		if len(fields) == 0 {
			continue
		}
		r, err := parseRule(fields)
		if err != nil {
			return nil, &Error{Line: n, Text: raw, Msg: err.Error()}
		}
		r.Line, r.Text = n, raw
		c.Rules = append(c.Rules, r)
	}
	return c, nil
}

// field is one whitespace-separated field: a comma-separated list of
// tokens (a list may span whitespace after a comma, as in PostgreSQL).
type field []Token

// tokenize splits a line into fields, dropping a # comment outside
// quotes.
func tokenize(line string) ([]field, error) {
	var fields []field
	var cur field
	var tok strings.Builder
	quoted, inQuote, haveTok := false, false, false
	endTok := func() {
		if haveTok {
			cur = append(cur, Token{Value: tok.String(), Keyword: !quoted})
		}
		tok.Reset()
		quoted, haveTok = false, false
	}
	endField := func() {
		endTok()
		if len(cur) > 0 {
			fields = append(fields, cur)
		}
		cur = nil
	}
	afterComma := false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case inQuote:
			if ch == '"' {
				if i+1 < len(line) && line[i+1] == '"' {
					tok.WriteByte('"')
					i++
					continue
				}
				inQuote = false
				continue
			}
			tok.WriteByte(ch)
		case ch == '"':
			inQuote, quoted, haveTok = true, true, true
			afterComma = false
		case ch == '#':
			i = len(line)
		case ch == ',':
			if !haveTok {
				return nil, fmt.Errorf("empty item in a list")
			}
			endTok()
			afterComma = true
		case ch == ' ' || ch == '\t':
			// Whitespace after a comma continues the list.
			if !afterComma && haveTok {
				endField()
			}
		default:
			tok.WriteByte(ch)
			haveTok = true
			afterComma = false
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quoted string")
	}
	if afterComma {
		return nil, fmt.Errorf("a list ends with a comma")
	}
	endField()
	return fields, nil
}

func parseRule(fields []field) (Rule, error) {
	var r Rule
	single := func(f field, what string) (Token, error) {
		if len(f) != 1 {
			return Token{}, fmt.Errorf("%s takes one value, not a list", what)
		}
		return f[0], nil
	}
	t, err := single(fields[0], "the connection type")
	if err != nil {
		return r, err
	}
	ct, ok := connTypes[t.Value]
	if !ok || !t.Keyword {
		return r, fmt.Errorf("invalid connection type %q", t.Value)
	}
	r.Type = ct
	if len(fields) < 4 {
		return r, fmt.Errorf("end-of-line before the authentication method")
	}
	if r.Databases, err = checkList(fields[1], "database", map[string]bool{"all": true, "sameuser": true, "replication": true}); err != nil {
		return r, err
	}
	if r.Users, err = checkList(fields[2], "user", map[string]bool{"all": true}); err != nil {
		return r, err
	}
	rest := fields[3:]
	if ct != Local {
		if rest, err = r.parseAddress(rest); err != nil {
			return r, err
		}
	}
	if len(rest) == 0 {
		return r, fmt.Errorf("end-of-line before the authentication method")
	}
	mt, err := single(rest[0], "the authentication method")
	if err != nil {
		return r, err
	}
	m, ok := methods[mt.Value]
	switch {
	case ok && mt.Keyword:
		r.Method = m
	case unsupportedMethods[mt.Value]:
		return r, fmt.Errorf("authentication method %q is not supported by Cairn", mt.Value)
	default:
		return r, fmt.Errorf("invalid authentication method %q", mt.Value)
	}
	if r.Method == Cert {
		if ct != HostSSL {
			return r, fmt.Errorf("cert authentication is only supported on hostssl connections")
		}
		r.ClientCert = VerifyFull
	}
	for _, f := range rest[1:] {
		o, err := single(f, "an option")
		if err != nil {
			return r, err
		}
		name, val, ok := strings.Cut(o.Value, "=")
		if !ok {
			return r, fmt.Errorf("authentication option %q is not in name=value format", o.Value)
		}
		switch name {
		case "clientcert":
			if ct != HostSSL {
				return r, fmt.Errorf("clientcert can only be configured for hostssl rows")
			}
			switch val {
			case "verify-full":
				r.ClientCert = VerifyFull
			case "verify-ca":
				if r.Method == Cert {
					return r, fmt.Errorf("clientcert only accepts verify-full when using cert authentication")
				}
				r.ClientCert = VerifyCA
			default:
				return r, fmt.Errorf("invalid value for clientcert: %q", val)
			}
		default:
			return r, fmt.Errorf("authentication option %q is not supported", name)
		}
	}
	return r, nil
}

// checkList checks a database or user list: keywords are the field's,
// and the PostgreSQL forms Cairn does not implement are errors.
func checkList(f field, what string, keywords map[string]bool) ([]Token, error) {
	out := make([]Token, 0, len(f))
	for _, t := range f {
		if t.Keyword {
			switch {
			case keywords[t.Value]:
			case t.Value == "samerole" || t.Value == "samegroup":
				return nil, fmt.Errorf("%s is not supported by Cairn", t.Value)
			case strings.HasPrefix(t.Value, "+"):
				return nil, fmt.Errorf("role membership (%s) is not supported by Cairn", t.Value)
			case strings.HasPrefix(t.Value, "@"):
				return nil, fmt.Errorf("file inclusion (%s) is not supported by Cairn", t.Value)
			case strings.HasPrefix(t.Value, "/"):
				return nil, fmt.Errorf("regular expressions (%s) are not supported by Cairn", t.Value)
			default:
				t.Keyword = false // a plain name
			}
		}
		if t.Value == "" {
			return nil, fmt.Errorf("empty %s name", what)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseAddress reads a host line's address (one field, or an address and
// a mask) and returns the fields after it.
func (r *Rule) parseAddress(rest []field) ([]field, error) {
	if len(rest[0]) != 1 {
		return nil, fmt.Errorf("the address takes one value, not a list")
	}
	t := rest[0][0]
	rest = rest[1:]
	if t.Keyword {
		switch t.Value {
		case "all":
			r.Addr = Address{Kind: AddrAll}
			return rest, nil
		case "samehost":
			r.Addr = Address{Kind: AddrSameHost}
			return rest, nil
		case "samenet":
			r.Addr = Address{Kind: AddrSameNet}
			return rest, nil
		}
	}
	if strings.Contains(t.Value, "/") {
		p, err := netip.ParsePrefix(t.Value)
		if err != nil {
			return nil, fmt.Errorf("invalid IP address %q", t.Value)
		}
		r.Addr = Address{Kind: AddrPrefix, Prefix: p.Masked()}
		return rest, nil
	}
	a, err := netip.ParseAddr(t.Value)
	if err != nil {
		return nil, fmt.Errorf("invalid IP address %q (host names are not supported by Cairn)", t.Value)
	}
	// An address without /len takes a mask in the next field.
	if len(rest) == 0 || len(rest[0]) != 1 {
		return nil, fmt.Errorf("IP address %q needs a /length or a mask", t.Value)
	}
	m, err := netip.ParseAddr(rest[0][0].Value)
	if err != nil || m.Is4() != a.Is4() {
		return nil, fmt.Errorf("invalid IP mask %q", rest[0][0].Value)
	}
	ones, bits := net.IPMask(m.AsSlice()).Size()
	if bits == 0 {
		return nil, fmt.Errorf("invalid IP mask %q: not a contiguous mask", rest[0][0].Value)
	}
	r.Addr = Address{Kind: AddrPrefix, Prefix: netip.PrefixFrom(a, ones).Masked()}
	return rest[1:], nil
}

// Match returns the first rule that c matches (invariant 1), or nil when
// none does.
func (c *Config) Match(conn Conn) (*Rule, error) {
	conn.Addr = conn.Addr.Unmap()
	for i := range c.Rules {
		r := &c.Rules[i]
		ok, err := c.matches(r, conn)
		if err != nil {
			return nil, err
		}
		if ok {
			return r, nil
		}
	}
	return nil, nil
}

func (c *Config) matches(r *Rule, conn Conn) (bool, error) {
	switch r.Type {
	case Local, HostGSSEnc:
		return false, nil
	case HostSSL:
		if !conn.TLS {
			return false, nil
		}
	case HostNoSSL:
		if conn.TLS {
			return false, nil
		}
	}
	if !matchDatabase(r.Databases, conn) || !matchUser(r.Users, conn.User) {
		return false, nil
	}
	switch r.Addr.Kind {
	case AddrAll:
		return true, nil
	case AddrPrefix:
		return r.Addr.Prefix.Contains(conn.Addr), nil
	}
	nets, err := c.localNets()
	if err != nil {
		return false, fmt.Errorf("listing this host's addresses for %s: %w", r.Text, err)
	}
	for _, n := range nets {
		if r.Addr.Kind == AddrSameHost && n.Addr() == conn.Addr ||
			r.Addr.Kind == AddrSameNet && n.Masked().Contains(conn.Addr) {
			return true, nil
		}
	}
	return false, nil
}

func matchDatabase(list []Token, conn Conn) bool {
	for _, t := range list {
		switch {
		case t.Keyword && t.Value == "all":
			return true
		case t.Keyword && t.Value == "sameuser":
			if conn.Database == conn.User {
				return true
			}
		case t.Keyword && t.Value == "replication":
			// Cairn has no replication connections.
		case t.Value == conn.Database:
			return true
		}
	}
	return false
}

func matchUser(list []Token, user string) bool {
	for _, t := range list {
		if t.Keyword && t.Value == "all" || !t.Keyword && t.Value == user {
			return true
		}
	}
	return false
}

func (c *Config) localNets() ([]netip.Prefix, error) {
	if c.local != nil {
		return c.local()
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		in, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(in.IP)
		if !ok {
			continue
		}
		ones, _ := in.Mask.Size()
		ip = ip.Unmap()
		if ip.Is4() && ones > 32 {
			ones -= 96
		}
		out = append(out, netip.PrefixFrom(ip, ones))
	}
	return out, nil
}
