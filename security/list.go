package security

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CertInfo describes one certificate file of a certificates directory.
type CertInfo struct {
	// Usage is CA, Node or Client.
	Usage string
	// CertFile and KeyFile are file names in the directory; KeyFile is ""
	// for the CA (its key lives elsewhere) or when the key is missing.
	CertFile, KeyFile string
	// Expires is the earliest NotAfter of the file's certificates.
	Expires time.Time
	// Notes: the CA's count, a node's hosts, a client's user.
	Notes string
	// Err is why the file could not be read, if it could not.
	Err error
}

// List describes the certificates in dir: ca.crt, node.crt, then the
// client certificates by user, in that order.
func List(dir string) ([]CertInfo, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var clients []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "client.") && strings.HasSuffix(name, ".crt") {
			clients = append(clients, name)
		}
	}
	slices.Sort(clients)
	var out []CertInfo
	add := func(usage, crt, key string, notes func(certs []*x509.Certificate) string) {
		info := CertInfo{Usage: usage, CertFile: crt}
		b, err := os.ReadFile(filepath.Join(dir, crt))
		if os.IsNotExist(err) {
			return
		}
		var certs []*x509.Certificate
		if err == nil {
			certs, err = parseCerts(b)
		}
		if err != nil {
			info.Err = err
			out = append(out, info)
			return
		}
		info.Expires = certs[0].NotAfter
		for _, c := range certs[1:] {
			if c.NotAfter.Before(info.Expires) {
				info.Expires = c.NotAfter
			}
		}
		info.Notes = notes(certs)
		if key != "" {
			if _, err := os.Stat(filepath.Join(dir, key)); err == nil {
				info.KeyFile = key
			} else {
				info.Err = fmt.Errorf("no key file %s", key)
			}
		}
		out = append(out, info)
	}
	add("CA", CACertFile, "", func(c []*x509.Certificate) string { return fmt.Sprintf("num certs: %d", len(c)) })
	add("Node", NodeCertFile, NodeKeyFile, func(c []*x509.Certificate) string {
		hosts := slices.Clone(c[0].DNSNames)
		for _, ip := range c[0].IPAddresses {
			hosts = append(hosts, ip.String())
		}
		return "addresses: " + strings.Join(hosts, ",")
	})
	for _, crt := range clients {
		user := strings.TrimSuffix(strings.TrimPrefix(crt, "client."), ".crt")
		add("Client", crt, ClientKeyFile(user), func(c []*x509.Certificate) string { return "user: " + c[0].Subject.CommonName })
	}
	return out, nil
}
