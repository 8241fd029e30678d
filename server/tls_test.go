package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/security"
	"github.com/jackc/pgx/v5"
)

// TestSecureNode starts an in-memory node with certificates and no
// initial password: the superuser logs in with its client certificate
// over verify-full, the admin port speaks HTTPS with the node
// certificate, and certificates together with Insecure are refused.
func TestSecureNode(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "certs")
	o := security.Options{CertsDir: dir, CAKey: filepath.Join(root, "ca.key")}
	for _, err := range []error{security.CreateCA(o), security.CreateNode(o, []string{"127.0.0.1"}), security.CreateClient(o, "postgres")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	certs, err := security.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), Config{Certs: certs, Insecure: true, Logger: quiet()}); !errors.Is(err, errInsecureWithCerts) {
		t.Fatalf("Start with Certs and Insecure: %v", err)
	}
	s := start(t, Config{Certs: certs})
	defer s.Stop(context.Background())
	if !s.Secure() {
		t.Error("Secure() = false")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=verify-full&sslrootcert=%s&sslcert=%s&sslkey=%s",
		s.Addr(), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "client.postgres.crt"), filepath.Join(dir, "client.postgres.key")))
	if err != nil {
		t.Fatalf("client certificate login: %v", err)
	}
	var user string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != "postgres" {
		t.Errorf("current_user = %q, %v", user, err)
	}
	conn.Close(ctx)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.CAPool()}}}
	resp, err := hc.Get(fmt.Sprintf("https://%s/health", s.HTTPAddr()))
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.PeerCertificates[0].Subject.CommonName != security.NodeUser {
		t.Errorf("https /health: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
}

// TestUnnamedHosts: a node warns of a listen address its certificate does
// not name, and only of those.
func TestUnnamedHosts(t *testing.T) {
	root := t.TempDir()
	o := security.Options{CertsDir: root, CAKey: filepath.Join(root, "ca.key")}
	if err := security.CreateCA(o); err != nil {
		t.Fatal(err)
	}
	if err := security.CreateNode(o, []string{"127.0.0.1", "db1.example"}); err != nil {
		t.Fatal(err)
	}
	certs, err := security.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	got := unnamedHosts(certs, Config{RPCAddr: "10.1.1.1:26357", SQLAddr: "db1.example:26257", HTTPAddr: "0.0.0.0:8080"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "--rpc-addr 10.1.1.1:26357: node.crt does not name 10.1.1.1") {
		t.Errorf("warnings: %q", got)
	}
	if got := unnamedHosts(certs, Config{RPCAddr: "127.0.0.1:26357", SQLAddr: ":26257"}); len(got) != 0 {
		t.Errorf("warnings for named hosts: %q", got)
	}
}
