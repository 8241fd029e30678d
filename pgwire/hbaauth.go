package pgwire

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"

	"github.com/cairn-db/cairn/pgwire/hba"
	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgproto3"
)

// This file applies host-based authentication rules (Config.HBA, package
// hba) to a login: the first rule the connection matches names the
// method, as in PostgreSQL.

// lockoutUser is the bootstrap superuser. Presenting its own client
// certificate, it logs in whatever the rules say, so that no
// configuration can lock the operators out of the cluster (CockroachDB
// keeps the same rule for root).
const lockoutUser = "postgres"

// hbaRule returns the rule that decides this login, or nil when the
// built-in rules apply (an insecure node, no Config.HBA, no rules
// configured, or the lockout user with its certificate). A connection no
// rule matches is refused with 28000 before it sends a password.
func (c *conn) hbaRule(ctx context.Context, user, database string) (*hba.Rule, error) {
	cfg := &c.srv.cfg
	if cfg.Insecure || cfg.HBA == nil {
		return nil, nil
	}
	conf, err := cfg.HBA(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the host-based authentication rules: %w", err)
	}
	if conf == nil {
		return nil, nil
	}
	if certUser, ok := c.certUser(); ok && user == lockoutUser && certUser == user {
		return nil, nil
	}
	if database == "" {
		database = user
	}
	hc := c.hbaConn(user, database)
	r, err := conf.Match(hc)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, pgerror.New(pgerrcode.InvalidAuthorizationSpecification,
			"no pg_hba.conf entry for host %q, user %q, database %q, %s", c.hostString(), user, database, encryption(hc.TLS))
	}
	return r, nil
}

// hbaConn describes the connection for matching.
func (c *conn) hbaConn(user, database string) hba.Conn {
	_, isTLS := c.nc.(*tls.Conn)
	hc := hba.Conn{TLS: isTLS, Database: database, User: user}
	if a, ok := c.raw.RemoteAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			hc.Addr = ip.Unmap()
		}
	}
	return hc
}

// hostString is the client's address as PostgreSQL's messages name it.
func (c *conn) hostString() string {
	if a, ok := c.raw.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.raw.RemoteAddr().String()
}

func encryption(isTLS bool) string {
	if isTLS {
		return "SSL encryption"
	}
	return "no encryption"
}

// authenticateRule authenticates user by the method of rule r.
func (c *conn) authenticateRule(ctx context.Context, r *hba.Rule, user, database string) (Role, error) {
	if database == "" {
		database = user
	}
	if r.Method == hba.Reject {
		_, isTLS := c.nc.(*tls.Conn)
		return Role{}, pgerror.New(pgerrcode.InvalidAuthorizationSpecification,
			"pg_hba.conf rejects connection for host %q, user %q, database %q, %s", c.hostString(), user, database, encryption(isTLS))
	}
	if r.ClientCert != hba.NoClientCert {
		certUser, ok := c.certUser()
		if !ok {
			return Role{}, pgerror.New(pgerrcode.InvalidAuthorizationSpecification, "connection requires a valid client certificate")
		}
		if r.ClientCert == hba.VerifyFull {
			if err := checkCert(user, certUser); err != nil {
				return Role{}, err
			}
		}
	}
	role, exists, err := c.lookupRole(ctx, user)
	if err != nil {
		return Role{}, err
	}
	switch r.Method {
	case hba.Trust, hba.Cert:
		if !exists {
			return Role{}, pgerror.New(pgerrcode.InvalidAuthorizationSpecification, "role %q does not exist", user)
		}
	case hba.SCRAM, hba.MD5:
		if err := c.scramAuth(user, role, exists); err != nil {
			return Role{}, err
		}
	case hba.Password:
		if err := c.passwordAuth(user, role, exists); err != nil {
			return Role{}, err
		}
	default:
		return Role{}, fmt.Errorf("pgwire: host-based authentication method %q has no implementation", r.Method)
	}
	return c.authOK(role)
}

// passwordAuth is PostgreSQL's password method: the client sends its
// password in clear text (AuthenticationCleartextPassword), which is
// checked against the role's SCRAM verifier.
func (c *conn) passwordAuth(user string, role Role, exists bool) error {
	c.be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if err := c.setAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	msg, err := c.receive()
	if err != nil {
		return err
	}
	pm, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return protocolErrorf("expected password response, got %T", msg)
	}
	creds, ok := c.storedCredentials(role, exists)
	if !ok || !pgauth.CheckPassword(pm.Password, creds) {
		return passwordFailed(user)
	}
	return c.setAuthType(pgproto3.AuthTypeOk)
}
