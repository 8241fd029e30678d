package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Certs are a node's loaded certificates: the cluster CA and its own.
type Certs struct {
	// Dir is where they were loaded from.
	Dir  string
	ca   *x509.CertPool
	node tls.Certificate
}

// ErrNoCerts is returned by Load for a directory without a CA or node
// certificate.
var ErrNoCerts = errors.New("no CA or node certificate")

// Load reads ca.crt, node.crt and node.key from dir and checks that the
// node certificate chains to the CA and is a node certificate
// (invariants 2, 3): a misplaced file fails here, at start, and not at the
// first connection.
func Load(dir string) (*Certs, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: %w: %s missing (cairn cert create-ca)", dir, ErrNoCerts, CACertFile)
		}
		return nil, err
	}
	cas, err := parseCerts(caPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CACertFile, err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	node, err := tls.LoadX509KeyPair(filepath.Join(dir, NodeCertFile), filepath.Join(dir, NodeKeyFile))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: %w: %s or %s missing (cairn cert create-node)", dir, ErrNoCerts, NodeCertFile, NodeKeyFile)
		}
		return nil, fmt.Errorf("node certificate: %w", err)
	}
	if _, err := node.Leaf.Verify(x509.VerifyOptions{Roots: pool,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%s is not signed by %s: %w", NodeCertFile, CACertFile, err)
	}
	if cn := node.Leaf.Subject.CommonName; cn != NodeUser {
		return nil, fmt.Errorf("%s has CommonName %q, not %q: not a node certificate", NodeCertFile, cn, NodeUser)
	}
	return &Certs{Dir: dir, ca: pool, node: node}, nil
}

// CAPool is the cluster CA, for clients of this node (cairn node).
func (c *Certs) CAPool() *x509.CertPool { return c.ca }

// SQLServer is the TLS config of the SQL port: the node certificate, and
// client certificates asked for and verified against the CA when given
// (invariant 4).
func (c *Certs) SQLServer() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.node},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    c.ca,
		MinVersion:   tls.VersionTLS12,
	}
}

// HTTPServer is the TLS config of the admin port.
func (c *Certs) HTTPServer() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.node},
		MinVersion:   tls.VersionTLS12,
	}
}

// RPCServer is the TLS config of the RPC port: only a peer with a node
// certificate of this cluster's CA gets through the handshake
// (invariant 3).
func (c *Certs) RPCServer() *tls.Config {
	return &tls.Config{
		Certificates:     []tls.Certificate{c.node},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        c.ca,
		MinVersion:       tls.VersionTLS13,
		VerifyConnection: requireNode,
	}
}

// RPCClient is the TLS config for dialing other nodes: their certificate
// must chain to the CA, name the dialed host and be a node certificate;
// this node presents its own (invariant 3).
func (c *Certs) RPCClient() *tls.Config {
	return &tls.Config{
		Certificates:     []tls.Certificate{c.node},
		RootCAs:          c.ca,
		MinVersion:       tls.VersionTLS13,
		VerifyConnection: requireNode,
	}
}

// requireNode refuses a peer whose verified certificate is not a node's.
// It runs after chain verification (and, on the client side, host name
// verification), so PeerCertificates[0] is the verified leaf.
func requireNode(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("security: the peer presented no certificate")
	}
	if cn := cs.PeerCertificates[0].Subject.CommonName; cn != NodeUser {
		return fmt.Errorf("security: the peer's certificate is for %q, not a node", cn)
	}
	return nil
}

// Names reports whether the node certificate is valid for host (an IP
// address or DNS name), as a client dialing host would check it.
func (c *Certs) Names(host string) bool {
	return c.node.Leaf.VerifyHostname(host) == nil
}
