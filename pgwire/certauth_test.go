package pgwire

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/cairn-db/cairn/security"
	"github.com/jackc/pgx/v5"
)

// nonLoopbackIP returns an address of this host that is not loopback, to
// connect from "another host" (the kernel uses it as the source address
// when it is the destination).
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("this host has no non-loopback IPv4 address to test remote clients with")
	return ""
}

// TestCertAuth runs a server with a cluster's certificates, as a secure
// node serves SQL (security.Certs.SQLServer, RefuseRemotePlaintext), and
// connects with pgx in the sslmodes and with the certificates libpq users
// would use.
func TestCertAuth(t *testing.T) {
	remote := nonLoopbackIP(t)
	root := t.TempDir()
	dir := filepath.Join(root, "certs")
	o := security.Options{CertsDir: dir, CAKey: filepath.Join(root, "ca.key")}
	must(t, security.CreateCA(o))
	must(t, security.CreateNode(o, []string{"127.0.0.1", remote, "localhost"}))
	must(t, security.CreateClient(o, "alice"))
	certs, err := security.Load(dir)
	must(t, err)
	// A client certificate for alice from another CA.
	otherDir := filepath.Join(root, "other")
	oo := security.Options{CertsDir: otherDir, CAKey: filepath.Join(root, "other.key")}
	must(t, security.CreateCA(oo))
	must(t, security.CreateClient(oo, "alice"))

	b := newTestBackend()
	v, err := pgauth.Verifier("pw")
	must(t, err)
	b.setRole(Role{Name: "alice", CanLogin: true})
	b.setRole(Role{Name: "bob", CanLogin: true, SCRAMVerifier: v})
	srv, err := NewServer(Config{Backend: b, TLS: certs.SQLServer(), RefuseRemotePlaintext: true})
	must(t, err)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	must(t, err)
	go srv.Serve(context.Background(), ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	ca := filepath.Join(dir, "ca.crt")
	aliceCert := fmt.Sprintf(" sslcert=%s sslkey=%s", filepath.Join(dir, "client.alice.crt"), filepath.Join(dir, "client.alice.key"))
	foreignCert := fmt.Sprintf(" sslcert=%s sslkey=%s", filepath.Join(otherDir, "client.alice.crt"), filepath.Join(otherDir, "client.alice.key"))
	for _, tc := range []struct {
		name, host, user, params string
		tls                      bool   // the session runs over TLS
		code                     string // SQLSTATE, or "fail" for a failure before any
	}{
		{"verify-full with a password", "127.0.0.1", "bob", "password=pw sslmode=verify-full sslrootcert=" + ca, true, ""},
		{"verify-full by DNS name", "localhost", "bob", "password=pw sslmode=verify-full sslrootcert=" + ca, true, ""},
		{"require from another host", remote, "bob", "password=pw sslmode=require", true, ""},
		{"prefer upgrades", remote, "bob", "password=pw sslmode=prefer", true, ""},
		{"verify-ca", remote, "bob", "password=pw sslmode=verify-ca sslrootcert=" + ca, true, ""},
		{"wrong password over TLS", remote, "bob", "password=nope sslmode=require", true, "28P01"},
		{"client certificate", remote, "alice", "sslmode=verify-full sslrootcert=" + ca + aliceCert, true, ""},
		{"certificate of another user", remote, "bob", "sslmode=verify-full sslrootcert=" + ca + aliceCert, true, "28000"},
		{"certificate of another CA", remote, "alice", "sslmode=verify-full sslrootcert=" + ca + foreignCert, true, "fail"},
		{"alice has no password", remote, "alice", "password=pw sslmode=require", true, "28P01"},
		{"plaintext from another host", remote, "bob", "password=pw sslmode=disable", false, "28000"},
		{"plaintext from loopback", "127.0.0.1", "bob", "password=pw sslmode=disable", false, ""},
		{"verify-full against a wrong name", "127.0.0.2", "bob", "password=pw sslmode=verify-full sslrootcert=" + ca, true, "fail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres connect_timeout=10 %s", tc.host, port, tc.user, tc.params)
			conn, err := pgx.Connect(context.Background(), cs)
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("connect: %v", err)
			case tc.code == "":
				defer conn.Close(context.Background())
				if _, isTLS := conn.PgConn().Conn().(*tls.Conn); isTLS != tc.tls {
					t.Errorf("TLS: %v, want %v", isTLS, tc.tls)
				}
			case err == nil:
				conn.Close(context.Background())
				t.Fatalf("logged in; want %s", tc.code)
			case tc.code != "fail" && pgCode(err) != tc.code:
				t.Fatalf("got %v, want SQLSTATE %s", err, tc.code)
			case tc.code == "fail" && pgCode(err) != "":
				t.Fatalf("got %v, want a failure before the server answers", err)
			}
		})
	}
}

// TestAcceptPlaintext: without RefuseRemotePlaintext (cairn start
// --accept-sql-without-tls) a client from another host logs in with a
// password and no TLS.
func TestAcceptPlaintext(t *testing.T) {
	remote := nonLoopbackIP(t)
	root := t.TempDir()
	o := security.Options{CertsDir: root, CAKey: filepath.Join(root, "ca.key")}
	must(t, security.CreateCA(o))
	must(t, security.CreateNode(o, []string{remote}))
	certs, err := security.Load(root)
	must(t, err)
	b := newTestBackend()
	v, err := pgauth.Verifier("pw")
	must(t, err)
	b.setRole(Role{Name: "bob", CanLogin: true, SCRAMVerifier: v})
	srv, err := NewServer(Config{Backend: b, TLS: certs.SQLServer()})
	must(t, err)
	ln, err := net.Listen("tcp", net.JoinHostPort(remote, "0"))
	must(t, err)
	go srv.Serve(context.Background(), ln)
	t.Cleanup(func() { srv.Close() })
	conn, err := pgx.Connect(context.Background(), fmt.Sprintf("host=%s port=%d user=bob password=pw dbname=postgres sslmode=disable", remote, ln.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatalf("plaintext from another host: %v", err)
	}
	conn.Close(context.Background())
}

func TestCheckCert(t *testing.T) {
	for _, tc := range []struct {
		user, certUser string
		ok             bool
	}{
		{"alice", "alice", true},
		{"alice", "Alice", false},
		{"bob", "alice", false},
	} {
		if err := checkCert(tc.user, tc.certUser); (err == nil) != tc.ok {
			t.Errorf("checkCert(%q, %q) = %v", tc.user, tc.certUser, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
