package pgwire

import (
	"crypto/tls"
	"net"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// This file holds what TLS changes about who may log in: certificate
// authentication and the refusal of plaintext clients from other hosts
// (Config.TLS, Config.RefuseRemotePlaintext). The handshake itself is in
// startup.go and tls.go.

// checkTransport refuses a client that did not upgrade to TLS, on a node
// that has TLS and RefuseRemotePlaintext, unless it connects from this
// host: PostgreSQL's `hostssl all all all` for other hosts, `host` for
// loopback, so a password never crosses a network in the clear. It runs
// before authentication, so the refused client sends no password.
func (c *conn) checkTransport(user, database string) error {
	cfg := &c.srv.cfg
	if cfg.TLS == nil || !cfg.RefuseRemotePlaintext {
		return nil
	}
	if _, ok := c.nc.(*tls.Conn); ok {
		return nil
	}
	host := c.raw.RemoteAddr().String()
	if a, ok := c.raw.RemoteAddr().(*net.TCPAddr); ok {
		if a.IP.IsLoopback() {
			return nil
		}
		host = a.IP.String()
	}
	return pgerror.New(pgerrcode.InvalidAuthorizationSpecification,
		"no pg_hba.conf entry for host %q, user %q, database %q, no encryption", host, user, database).
		WithHint("This node accepts connections from other hosts over TLS only: connect with sslmode=require or stricter.")
}

// certUser returns the CommonName of the client certificate the TLS
// handshake verified against Config.TLS's ClientCAs, if the client sent
// one. A certificate that did not verify never gets here: the handshake
// failed.
func (c *conn) certUser() (string, bool) {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return "", false
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return "", false
	}
	return st.PeerCertificates[0].Subject.CommonName, true
}

// checkCert is certificate authentication (PostgreSQL's `cert` method,
// CockroachDB's cert-password when a certificate is given): the
// certificate's CommonName must be the user logging in.
func checkCert(user, certUser string) error {
	if user != certUser {
		return pgerror.New(pgerrcode.InvalidAuthorizationSpecification,
			"certificate authentication failed for user %q", user).
			WithDetail("The client certificate is for user %q.", certUser)
	}
	return nil
}
