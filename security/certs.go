package security

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names in a certificates directory, as CockroachDB names them.
const (
	CACertFile   = "ca.crt"
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// NodeUser is the CommonName of every node certificate (invariant 3).
const NodeUser = "node"

// Default lifetimes, CockroachDB's: the CA outlives the certificates it
// signs, so they can be reissued without a new CA.
const (
	DefaultCALifetime   = 10 * 365 * 24 * time.Hour
	DefaultCertLifetime = 5 * 365 * 24 * time.Hour
)

// ErrExists is returned when a file to be created exists and Overwrite is
// not set (invariant 1).
var ErrExists = errors.New("file exists (use --overwrite to replace it)")

// ClientCertFile and ClientKeyFile name user's client certificate files.
func ClientCertFile(user string) string { return "client." + user + ".crt" }
func ClientKeyFile(user string) string  { return "client." + user + ".key" }

// Options are what every create operation takes.
type Options struct {
	// CertsDir is the certificates directory (created 0700 if missing).
	CertsDir string
	// CAKey is the CA's private key file: written by CreateCA, read by the
	// others to sign.
	CAKey string
	// Lifetime of the new certificate; 0 is the default for its kind.
	Lifetime time.Duration
	// Overwrite replaces existing files instead of refusing.
	Overwrite bool
	// Now is the certificate's start; zero is time.Now() (tests set it).
	Now time.Time
}

func (o Options) start() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

// CreateCA makes a new CA key (at o.CAKey) and self-signed certificate
// (ca.crt in o.CertsDir).
func CreateCA(o Options) error {
	if o.CAKey == "" {
		return errors.New("the CA key's file is required (--ca-key)")
	}
	crtPath := filepath.Join(o.CertsDir, CACertFile)
	if err := o.refuseExisting(o.CAKey, crtPath); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := newSerial()
	if err != nil {
		return err
	}
	start := o.start()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Cairn CA", Organization: []string{"Cairn"}},
		NotBefore:             start.Add(-time.Hour), // tolerate clocks a little behind
		NotAfter:              start.Add(lifetime(o.Lifetime, DefaultCALifetime)),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("signing the CA certificate: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(o.CAKey), 0o700); err != nil {
		return err
	}
	if err := writeKey(o.CAKey, key); err != nil {
		return err
	}
	return writeCert(crtPath, der)
}

// CreateNode makes node.crt and node.key in o.CertsDir, signed by the CA,
// valid for hosts (IP addresses or DNS names: every name other nodes and
// clients will dial this node by).
func CreateNode(o Options, hosts []string) error {
	if len(hosts) == 0 {
		return errors.New("a node certificate needs at least one host (the names and addresses the node is reached at)")
	}
	var ips []net.IP
	var dns []string
	for _, h := range hosts {
		if h == "" {
			return errors.New("empty host name")
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: NodeUser, Organization: []string{"Cairn"}},
		IPAddresses: ips,
		DNSNames:    dns,
		// Invariant 2: a node serves and dials with the same certificate.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	return o.createSigned(tmpl, NodeCertFile, NodeKeyFile)
}

// CreateClient makes client.<user>.crt and .key in o.CertsDir, signed by
// the CA: a certificate that logs in to SQL as user.
func CreateClient(o Options, user string) error {
	if err := checkUser(user); err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: []string{"Cairn"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return o.createSigned(tmpl, ClientCertFile(user), ClientKeyFile(user))
}

// checkUser refuses user names that cannot be a file name part, and the
// node's own name (its certificate is made by CreateNode).
func checkUser(user string) error {
	switch {
	case user == "":
		return errors.New("a client certificate needs a user name")
	case user == NodeUser:
		return fmt.Errorf("%q is the nodes' own certificate name; use create-node", NodeUser)
	case strings.ContainsAny(user, "/\\\x00") || user == "." || user == "..":
		return fmt.Errorf("user name %q cannot be part of a file name", user)
	}
	return nil
}

// createSigned completes tmpl (serial, validity, key usage), signs it with
// the CA and writes it and a new key as certName and keyName.
func (o Options) createSigned(tmpl *x509.Certificate, certName, keyName string) error {
	if o.CAKey == "" {
		return errors.New("the CA key's file is required (--ca-key)")
	}
	crtPath, keyPath := filepath.Join(o.CertsDir, certName), filepath.Join(o.CertsDir, keyName)
	if err := o.refuseExisting(crtPath, keyPath); err != nil {
		return err
	}
	caCert, caKey, err := loadCA(o.CertsDir, o.CAKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return err
	}
	start := o.start()
	tmpl.NotBefore = start.Add(-time.Hour)
	tmpl.NotAfter = start.Add(lifetime(o.Lifetime, DefaultCertLifetime))
	if tmpl.NotAfter.After(caCert.NotAfter) {
		// A certificate cannot outlive its CA; verification would fail
		// from the CA's expiry on anyway.
		tmpl.NotAfter = caCert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("signing %s: %w", certName, err)
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writeCert(crtPath, der)
}

// loadCA reads the CA certificate from dir and its key from keyPath, and
// checks that they belong together.
func loadCA(dir, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	crtPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA certificate (create it with cairn cert create-ca): %w", err)
	}
	certs, err := parseCerts(crtPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", CACertFile, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA key: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	// ca.crt may hold several CAs (during a rotation); sign with the one
	// the key belongs to.
	for _, c := range certs {
		if pub, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && pub.Equal(key.Public()) {
			return c, key, nil
		}
	}
	return nil, nil, fmt.Errorf("the CA key %s does not belong to any certificate in %s", keyPath, filepath.Join(dir, CACertFile))
}

func (o Options) refuseExisting(paths ...string) error {
	if o.Overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s: %w", p, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func lifetime(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// newSerial returns a random 128-bit serial number (RFC 5280 allows up to
// 20 octets; random ones need no state to stay unique).
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func writeCert(path string, der []byte) error {
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// writeFile writes data to path with mode perm, also when the file exists
// with wider permissions (os.WriteFile keeps an existing file's mode).
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

func parseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM key found")
	}
	var k any
	var err error
	switch blk.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}
