package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// newCluster makes a CA, a node certificate for 127.0.0.1 and localhost,
// and a client certificate for alice in a fresh directory; it returns the
// directory and the CA key's path.
func newCluster(t *testing.T) (dir, caKey string) {
	t.Helper()
	root := t.TempDir()
	dir, caKey = filepath.Join(root, "certs"), filepath.Join(root, "safe", "ca.key")
	o := Options{CertsDir: dir, CAKey: caKey}
	if err := CreateCA(o); err != nil {
		t.Fatal(err)
	}
	if err := CreateNode(o, []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	if err := CreateClient(o, "alice"); err != nil {
		t.Fatal(err)
	}
	return dir, caKey
}

// TestCreateFiles checks the files' names and modes (invariant 1) and
// what each certificate is for (invariant 2).
func TestCreateFiles(t *testing.T) {
	dir, caKey := newCluster(t)
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{caKey, 0o600},
		{filepath.Join(dir, "ca.crt"), 0o644},
		{filepath.Join(dir, "node.crt"), 0o644},
		{filepath.Join(dir, "node.key"), 0o600},
		{filepath.Join(dir, "client.alice.crt"), 0o644},
		{filepath.Join(dir, "client.alice.key"), 0o600},
	} {
		st, err := os.Stat(tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if st.Mode().Perm() != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, st.Mode().Perm(), tc.mode)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); err == nil {
		t.Error("the CA key was written into the certificates directory")
	}
	infos, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range infos {
		if i.Err != nil {
			t.Errorf("%s: %v", i.CertFile, i.Err)
		}
		got = append(got, i.Usage+" "+i.CertFile+" "+i.KeyFile+" "+i.Notes)
	}
	want := []string{
		"CA ca.crt  num certs: 1",
		"Node node.crt node.key addresses: localhost,127.0.0.1",
		"Client client.alice.crt client.alice.key user: alice",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("List:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRefuseOverwrite: a second create of any kind fails without
// Overwrite and leaves the files as they were (invariant 1).
func TestRefuseOverwrite(t *testing.T) {
	dir, caKey := newCluster(t)
	o := Options{CertsDir: dir, CAKey: caKey}
	before, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, create := range map[string]func(Options) error{
		"ca":     CreateCA,
		"node":   func(o Options) error { return CreateNode(o, []string{"127.0.0.1"}) },
		"client": func(o Options) error { return CreateClient(o, "alice") },
	} {
		if err := create(o); !errors.Is(err, ErrExists) {
			t.Errorf("second create-%s: %v, want ErrExists", name, err)
		}
	}
	after, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if string(before) != string(after) {
		t.Error("a refused create-ca changed ca.crt")
	}
	o.Overwrite = true
	if err := CreateNode(o, []string{"10.0.0.1"}); err != nil {
		t.Fatalf("create-node --overwrite: %v", err)
	}
	infos, _ := List(dir)
	if infos[1].Notes != "addresses: 10.0.0.1" {
		t.Errorf("after --overwrite the node certificate is %q", infos[1].Notes)
	}
}

func TestCreateErrors(t *testing.T) {
	dir, caKey := newCluster(t)
	other := t.TempDir()
	otherKey := filepath.Join(other, "ca.key")
	if err := CreateCA(Options{CertsDir: other, CAKey: otherKey}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no ca key", CreateCA(Options{CertsDir: t.TempDir()}), "--ca-key"},
		{"no hosts", CreateNode(Options{CertsDir: dir, CAKey: caKey}, nil), "at least one host"},
		{"node as client", CreateClient(Options{CertsDir: dir, CAKey: caKey}, "node"), "use create-node"},
		{"path in user", CreateClient(Options{CertsDir: dir, CAKey: caKey}, "../x"), "file name"},
		{"no ca.crt", CreateClient(Options{CertsDir: t.TempDir(), CAKey: caKey}, "bob"), "create-ca"},
		{"foreign key", CreateClient(Options{CertsDir: dir, CAKey: otherKey}, "bob"), "does not belong"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestLoadChecks: Load refuses a node certificate of another CA and a
// client certificate in node.crt's place.
func TestLoadChecks(t *testing.T) {
	dir, _ := newCluster(t)
	if _, err := Load(dir); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNoCerts) {
		t.Errorf("Load of an empty directory: %v", err)
	}
	// A client certificate where the node's should be.
	swapped := t.TempDir()
	copyFile(t, filepath.Join(dir, "ca.crt"), filepath.Join(swapped, "ca.crt"))
	copyFile(t, filepath.Join(dir, "client.alice.crt"), filepath.Join(swapped, "node.crt"))
	copyFile(t, filepath.Join(dir, "client.alice.key"), filepath.Join(swapped, "node.key"))
	if _, err := Load(swapped); err == nil {
		t.Error("Load accepted a client certificate as the node's")
	}
	// The node certificate of another cluster.
	other, _ := newCluster(t)
	copyFile(t, filepath.Join(dir, "ca.crt"), filepath.Join(other, "ca.crt"))
	if _, err := Load(other); err == nil || !strings.Contains(err.Error(), "not signed by") {
		t.Errorf("Load of a foreign node certificate: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRPCHandshake: the RPC configs let a node of the cluster through and
// refuse a client certificate of the same CA, a node of another CA, and
// no certificate at all (invariant 3).
func TestRPCHandshake(t *testing.T) {
	dir, _ := newCluster(t)
	certs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	otherDir, _ := newCluster(t)
	other, err := Load(otherDir)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.alice.crt"), filepath.Join(dir, "client.alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(c tls.Certificate) *tls.Config {
		cfg := certs.RPCClient()
		cfg.Certificates = []tls.Certificate{c}
		return cfg
	}
	tls12 := certs.RPCClient()
	tls12.MaxVersion = tls.VersionTLS12
	otherName := certs.RPCClient()
	otherName.ServerName = "10.9.9.9" // dialed by an address the certificate does not name
	for _, tc := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"node of the cluster", certs.RPCClient(), true},
		{"client certificate", withCert(alice), false},
		{"no certificate", withCert(tls.Certificate{}), false},
		{"node of another CA", other.RPCClient(), false},
		{"TLS 1.2", tls12, false},
		{"another address", otherName, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srvErr, cliErr := handshake(t, certs.RPCServer(), tc.client)
			if ok := srvErr == nil && cliErr == nil; ok != tc.ok {
				t.Errorf("handshake: server %v, client %v; want success %v", srvErr, cliErr, tc.ok)
			}
		})
	}
	// And a node does not trust a server of another CA, nor one serving a
	// SQL user's certificate of its own CA.
	if srvErr, cliErr := handshake(t, other.RPCServer(), certs.RPCClient()); cliErr == nil && srvErr == nil {
		t.Error("a node accepted the server of another cluster")
	}
	aliceServer := certs.RPCServer()
	aliceServer.Certificates = []tls.Certificate{alice}
	aliceServer.VerifyConnection = nil
	if srvErr, cliErr := handshake(t, aliceServer, certs.RPCClient()); cliErr == nil && srvErr == nil {
		t.Error("a node accepted a server presenting a client certificate")
	}
}

// handshake runs one TLS handshake over a loopback connection and returns
// both sides' errors; each side reads one byte from the other so that
// the server's verdict on the client's certificate (TLS 1.3 sends it
// after the client's handshake returns) reaches the client.
func handshake(t *testing.T, server, client *tls.Config) (srvErr, cliErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			done <- err
			return
		}
		_, err = tc.Write([]byte{1})
		done <- err
	}()
	client = client.Clone()
	if client.ServerName == "" {
		client.ServerName = "127.0.0.1"
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err == nil {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	return <-done, err
}

// TestLifetimes: the CA is valid ten years, the certificates it signs
// five, never past the CA; keys are ECDSA P-256.
func TestLifetimes(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := Options{CertsDir: root, CAKey: filepath.Join(root, "ca.key"), Now: now}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(CreateCA(o))
	must(CreateNode(o, []string{"127.0.0.1"}))
	short := o
	short.Overwrite, short.Lifetime = true, 20*365*24*time.Hour
	must(CreateClient(short, "alice"))
	certs, err := Load(root)
	must(err)
	if k, ok := certs.node.Leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("node key is %T, want ECDSA P-256", certs.node.Leaf.PublicKey)
	}
	// Invariant 2: what each certificate may be used for.
	client, err := tls.LoadX509KeyPair(filepath.Join(root, "client.alice.crt"), filepath.Join(root, "client.alice.key"))
	must(err)
	for _, tc := range []struct {
		name, cn string
		cert     *x509.Certificate
		eku      []x509.ExtKeyUsage
	}{
		{"node", NodeUser, certs.node.Leaf, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{"client", "alice", client.Leaf, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		if tc.cert.Subject.CommonName != tc.cn || !slices.Equal(tc.cert.ExtKeyUsage, tc.eku) || tc.cert.IsCA {
			t.Errorf("%s certificate: CN %q, usages %v, CA %v", tc.name, tc.cert.Subject.CommonName, tc.cert.ExtKeyUsage, tc.cert.IsCA)
		}
	}
	infos, err := List(root)
	must(err)
	want := map[string]time.Time{
		"ca.crt":           now.Add(DefaultCALifetime),
		"node.crt":         now.Add(DefaultCertLifetime),
		"client.alice.crt": now.Add(DefaultCALifetime), // asked for 20 years: capped at the CA's
	}
	for _, i := range infos {
		if !i.Expires.Equal(want[i.CertFile]) {
			t.Errorf("%s expires %v, want %v", i.CertFile, i.Expires, want[i.CertFile])
		}
	}
}
