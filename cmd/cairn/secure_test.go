package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/security"
	"github.com/cairn-db/cairn/test/proc"
	"github.com/jackc/pgx/v5"
)

// makeCerts runs `cairn cert` as docs/security.md does: a CA, a node
// certificate for 127.0.0.1 and localhost, and client certificates for
// users, in a new directory of root; it returns the directory.
func makeCerts(t *testing.T, root, name string, users ...string) string {
	t.Helper()
	dir, key := filepath.Join(root, name), filepath.Join(root, name+"-ca.key")
	cmds := [][]string{
		{"cert", "create-ca", "--certs-dir", dir, "--ca-key", key},
		{"cert", "create-node", "127.0.0.1", "localhost", "--certs-dir", dir, "--ca-key", key},
	}
	for _, u := range users {
		cmds = append(cmds, []string{"cert", "create-client", u, "--certs-dir", dir, "--ca-key", key})
	}
	for _, args := range cmds {
		var out, errOut bytes.Buffer
		if code := run(args, nil, &out, &errOut); code != 0 {
			t.Fatalf("cairn %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
	}
	return dir
}

// waitExit waits for a node's process to end by itself and returns its
// log; the test fails if it is still running after a minute.
func waitExit(t *testing.T, m *member) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !m.Exited() {
		if time.Now().After(deadline) {
			t.Fatalf("%s is still running: %s", m.Dir, m.LogTail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return m.LogTail(4000)
}

// TestSecureCluster runs a secure cluster of real processes: SQL over TLS
// with verify-full (pgx and psql) and client certificates, HTTPS on the
// admin port, a second secure node joining through mutual TLS and
// serving the first one's rows, and the attack: an insecure node,
// a node with another CA's certificate, and a SQL user's certificate
// cannot join or call the RPC port; a secure node does not join an
// insecure one either.
func TestSecureCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs several processes")
	}
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatal("psql is needed to check libpq's sslmode=verify-full: apt-get install postgresql-client")
	}
	const password = "s3cret"
	t.Setenv("CAIRN_INITIAL_PASSWORD", password) // the first node's bootstrap
	bin, ms := newMembers(t, 7)
	root := t.TempDir()
	certs := makeCerts(t, root, "certs", "postgres", "alice")
	foreign := makeCerts(t, root, "foreign")
	// Node c's own directory, made as docs/security.md says for a node on
	// another machine: ca.crt copied in, then create-node with the CA key.
	cCerts := filepath.Join(root, "c-certs")
	if err := os.MkdirAll(cCerts, 0o700); err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cCerts, "ca.crt"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"cert", "create-node", "127.0.0.1", "--certs-dir", cCerts, "--ca-key", filepath.Join(root, "certs-ca.key")}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatalf("create-node in c's directory: exit %d", code)
	}
	a, b, c3, intruder, stranger, plain, joiner := ms[0], ms[1], ms[2], ms[3], ms[4], ms[5], ms[6]
	a.CertsDir, b.CertsDir, c3.CertsDir, stranger.CertsDir, joiner.CertsDir = certs, certs, cCerts, foreign, certs
	a.start(t, bin, nil)

	ctx := context.Background()
	ca := filepath.Join(certs, "ca.crt")
	clientCert := func(user string) string {
		return fmt.Sprintf("&sslcert=%s&sslkey=%s", filepath.Join(certs, "client."+user+".crt"), filepath.Join(certs, "client."+user+".key"))
	}
	connect := func(m *member, user, params string) (*pgx.Conn, error) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			c, err := pgx.Connect(ctx, "postgresql://"+user+"@"+m.SQL+"/postgres?connect_timeout=2&"+params)
			if err == nil || time.Now().After(deadline) || strings.Contains(err.Error(), "SQLSTATE") {
				return c, err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The superuser logs in with its client certificate, verify-full.
	c, err := connect(a, "postgres", "sslmode=verify-full&sslrootcert="+ca+clientCert("postgres"))
	if err != nil {
		t.Fatalf("verify-full with a client certificate: %v", err)
	}
	defer c.Close(ctx)
	if _, ok := c.PgConn().Conn().(*tls.Conn); !ok {
		t.Fatal("the session is not over TLS")
	}
	for _, sql := range []string{
		"CREATE TABLE t (k INT PRIMARY KEY, v TEXT)",
		"INSERT INTO t VALUES (1, 'secret'), (2, 'data')",
		"CREATE ROLE alice LOGIN",
		"GRANT SELECT ON t TO alice",
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// A password over sslmode=require; a plaintext login from loopback.
	for _, params := range []string{"sslmode=require&password=" + password, "sslmode=disable&password=" + password} {
		c2, err := connect(a, "postgres", params)
		if err != nil {
			t.Fatalf("%s: %v", params, err)
		}
		c2.Close(ctx)
	}
	// The startup banner's SQL URL works in psql as printed (verify-full
	// with postgres's client certificate), and alice's certificate logs
	// alice in (and only alice).
	url := regexp.MustCompile(`(?m)^sql: +(\S+)$`).FindStringSubmatch(a.LogTail(1 << 20))
	if url == nil || !strings.Contains(url[1], "sslmode=verify-full") {
		t.Fatalf("no verify-full sql URL in the banner: %s", a.LogTail(3000))
	}
	aliceURL := "postgresql://alice@" + a.SQL + "/postgres?sslmode=verify-full&sslrootcert=" + ca + clientCert("alice")
	// psql's default, sslmode=prefer, gets TLS.
	prefer := exec.Command("psql", "postgresql://postgres@"+a.SQL+"/postgres?sslmode=prefer", "-Xc", `\conninfo`)
	prefer.Env = append(os.Environ(), "PGPASSWORD="+password)
	if out, err := prefer.CombinedOutput(); err != nil || !strings.Contains(string(out), "SSL connection (protocol: TLSv1.3") {
		t.Errorf("psql sslmode=prefer: %v: %s", err, out)
	}
	for _, tc := range []struct{ url, want string }{
		{url[1], "postgres"},
		{aliceURL, "alice"},
		{strings.Replace(aliceURL, "alice@", "postgres@", 1), `certificate authentication failed for user "postgres"`},
	} {
		out, _ := exec.Command("psql", tc.url, "-XAtc", "SELECT current_user").CombinedOutput()
		got := strings.TrimSpace(string(out))
		if exact := !strings.Contains(tc.want, " "); exact && got != tc.want || !exact && !strings.Contains(got, tc.want) {
			t.Errorf("psql %s: %q, want %q", tc.url, out, tc.want)
		}
	}

	// HTTPS on the admin port, verified against the CA; plain HTTP is
	// refused.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + a.HTTP + "/health")
	if err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Errorf("https /health: %d %q", resp.StatusCode, body)
	}
	if resp, err := http.Get("http://" + a.HTTP + "/health"); err != nil {
		t.Errorf("plain HTTP to the admin port: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the admin port: %d %q", resp.StatusCode, body)
		}
	}

	// The attack: an insecure node joining the secure one is
	// refused, and says why.
	intruder.start(t, bin, []string{a.RPC})
	if log := waitExit(t, intruder); !strings.Contains(log, "the peer serves TLS and this node is insecure") {
		t.Errorf("the insecure node's log does not say why it could not join:\n%s", log)
	}
	// So is a secure node whose certificate another CA signed.
	stranger.start(t, bin, []string{a.RPC})
	if log := waitExit(t, stranger); !strings.Contains(log, "do not accept each other's certificates") {
		t.Errorf("the foreign node's log does not say why it could not join:\n%s", log)
	}
	// The RPC port answers nobody but a node of the cluster: not a
	// plaintext client, not a SQL user's certificate of the same CA.
	nodeCerts, err := security.Load(certs)
	if err != nil {
		t.Fatal(err)
	}
	aliceCfg := nodeCerts.RPCClient()
	alicePair, err := tls.LoadX509KeyPair(filepath.Join(certs, "client.alice.crt"), filepath.Join(certs, "client.alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	aliceCfg.Certificates = []tls.Certificate{alicePair}
	for _, tc := range []struct {
		name  string
		creds *rpc.Creds
		ok    bool
	}{
		{"plaintext", nil, false},
		{"alice's certificate", rpc.NewCreds(nil, aliceCfg), false},
		{"a node certificate", rpc.NewCreds(nil, nodeCerts.RPCClient()), true},
	} {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := rpc.Call(cctx, tc.creds, a.RPC, "Probe", nil)
		cancel()
		if (err == nil) != tc.ok {
			t.Errorf("Probe with %s: %q, %v; want success %v", tc.name, out, err, tc.ok)
		}
	}

	// Two secure nodes of the cluster join through mutual TLS; the
	// tablets up-replicate to all three (raft and snapshots over TLS), and
	// the joined nodes serve the first one's rows.
	b.start(t, bin, []string{a.RPC})
	c3.start(t, bin, []string{a.RPC})
	cb, err := connect(b, "alice", "sslmode=verify-full&sslrootcert="+ca+clientCert("alice"))
	if err != nil {
		t.Fatalf("alice on the joined node: %v", err)
	}
	defer cb.Close(ctx)
	var v string
	if err := cb.QueryRow(ctx, "SELECT v FROM t WHERE k = 1").Scan(&v); err != nil || v != "secret" {
		t.Errorf("read through the joined node: %q, %v", v, err)
	}
	t.Setenv("CAIRN_PASSWORD", password)
	// id, addresses, (empty) locality, liveness, replicas, leaders.
	row := regexp.MustCompile(`(?m)^(\d+)\s.*\s(\S+)\s+(\d+)\s+(\d+)$`)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var out, errOut bytes.Buffer
		if code := run([]string{"node", "status", "--host", b.HTTP, "--certs-dir", certs}, nil, &out, &errOut); code != 0 {
			t.Fatalf("node status over HTTPS: exit %d: %s", code, errOut.String())
		}
		rows := row.FindAllStringSubmatch(out.String(), -1)
		replicas, holding := map[string]bool{}, 0
		for _, r := range rows {
			if r[2] == "live" && r[3] != "0" {
				replicas[r[3]] = true
				holding++
			}
		}
		if len(rows) == 3 && holding == 3 && len(replicas) == 1 {
			break // three live nodes with the same, nonzero replica count
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tablets did not up-replicate to three live nodes:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cc, err := connect(c3, "alice", "sslmode=verify-full&sslrootcert="+ca+clientCert("alice"))
	if err != nil {
		t.Fatalf("alice on the third node: %v", err)
	}
	defer cc.Close(ctx)
	if err := cc.QueryRow(ctx, "SELECT v FROM t WHERE k = 2").Scan(&v); err != nil || v != "data" {
		t.Errorf("read through the third node: %q, %v", v, err)
	}
	// A distributed scan from the third node runs its fragments on the
	// leaseholders over the same mutual TLS (a plaintext dial is refused).
	if _, err := cc.Exec(ctx, "SET distsql = on"); err != nil {
		t.Fatalf("SET distsql = on: %v", err)
	}
	var n int
	if err := cc.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Errorf("distributed count through the third node: %d, %v; want 2", n, err)
	}

	// And the reverse: a secure node does not join an insecure cluster.
	t.Setenv("CAIRN_INITIAL_PASSWORD", "")
	plain.start(t, bin, nil)
	if _, err := connect(plain, "postgres", "sslmode=disable"); err != nil {
		t.Fatalf("the insecure node: %v", err)
	}
	// It said loudly what it gives up, and its banner says how to reach
	// it; the secure node's banner has https and verify-full.
	checkLog := func(m *member, wants ...string) {
		t.Helper()
		log := m.LogTail(1 << 20)
		for _, w := range wants {
			if !strings.Contains(log, w) {
				t.Errorf("%s's output has no %q:\n%s", m.Dir, w, proc.Tail(log, 3000))
			}
		}
	}
	// It answers SSLRequest with N: psql's sslmode=require gives up.
	if out, err := exec.Command("psql", "postgresql://postgres@"+plain.SQL+"/postgres?sslmode=require", "-Xc", "SELECT 1").CombinedOutput(); err == nil || !strings.Contains(string(out), "server does not support SSL, but SSL was required") {
		t.Errorf("psql sslmode=require against an insecure node: %v: %s", err, out)
	}
	checkLog(plain, "* WARNING: RUNNING IN INSECURE MODE (--insecure)",
		"* - Any client that can reach "+plain.SQL+" logs in as any role, the superuser postgres",
		"* - Any process that can reach "+plain.RPC+" can join the cluster as a node, and read",
		"* - The admin UI and API at "+plain.HTTP+", /debug/pprof included, ask nobody to log in.",
		"* - Nothing is encrypted",
		"CAIRN NODE STARTED",
		"sql:         postgresql://postgres@"+plain.SQL+"/postgres?sslmode=disable",
		"admin UI:    http://"+plain.HTTP+"/",
		"rpc:         "+plain.RPC+" (other nodes join with --join "+plain.RPC+")",
		"security:    INSECURE (--insecure): no TLS, no passwords",
		"node ID:     1\ncluster ID:  ")
	checkLog(a, "CAIRN NODE STARTED", "admin UI:    https://"+a.HTTP+"/", "rpc:         "+a.RPC+" (other nodes join with --join "+a.RPC+")",
		"store:       "+a.Dir, "certs:       "+certs, "node ID:     1\ncluster ID:  ")
	// The joined nodes got IDs 2 and 3, in the order they were admitted.
	if ids := regexp.MustCompile(`node ID: +(\d+)\n`).FindStringSubmatch(b.LogTail(1<<20) + c3.LogTail(1<<20)); ids == nil || ids[1] != "2" && ids[1] != "3" {
		t.Errorf("the joined nodes' banners show node IDs %q", ids)
	}
	if strings.Contains(a.LogTail(1<<20), "INSECURE") {
		t.Error("the secure node warns that it is insecure")
	}
	joiner.start(t, bin, []string{plain.RPC})
	if log := waitExit(t, joiner); !strings.Contains(log, "a secure node does not join an insecure cluster") {
		t.Errorf("the secure node's log does not say why it could not join:\n%s", log)
	}
}
