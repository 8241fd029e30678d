package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/security"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestHBA sets host-based authentication rules with ALTER SYSTEM on a
// secure node and logs in with psql (libpq) under each: first match
// decides, each method does what PostgreSQL's does, a bad value changes
// nothing, and RESET brings the built-in rules back.
func TestHBA(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatal("psql is needed to log in as libpq does: apt-get install postgresql-client")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "certs")
	o := security.Options{CertsDir: dir, CAKey: filepath.Join(root, "ca.key")}
	for _, err := range []error{security.CreateCA(o), security.CreateNode(o, []string{"127.0.0.1"}),
		security.CreateClient(o, "postgres"), security.CreateClient(o, "dave"), security.CreateClient(o, "gina")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	certs, err := security.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, Config{Certs: certs})
	defer s.Stop(context.Background())
	ctx := context.Background()
	certURL := func(user string) string {
		return fmt.Sprintf("postgresql://%s@%s/postgres?sslmode=verify-full&sslrootcert=%s&sslcert=%s&sslkey=%s", user, s.Addr(),
			filepath.Join(dir, "ca.crt"), filepath.Join(dir, "client."+user+".crt"), filepath.Join(dir, "client."+user+".key"))
	}
	admin, err := pgx.Connect(ctx, certURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{
		"CREATE ROLE alice LOGIN PASSWORD 'apw'", "CREATE ROLE bob LOGIN PASSWORD 'bpw'",
		"CREATE ROLE carol LOGIN", "CREATE ROLE dave LOGIN", "CREATE ROLE eve LOGIN PASSWORD 'epw'",
		"CREATE ROLE mallory LOGIN PASSWORD 'mpw'", "CREATE ROLE frank LOGIN PASSWORD 'fpw'",
		"CREATE ROLE gina LOGIN PASSWORD 'gpw'",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const rules = `
# TYPE    DATABASE  USER     ADDRESS        METHOD
host      all       carol    127.0.0.1/32   trust
hostnossl all       all      all            reject
hostssl   all       alice    all            password
hostssl   all       bob      all            scram-sha-256
hostssl   all       mallory  all            reject
hostssl   postgres  dave     all            cert
hostssl   all       frank    all            md5
hostssl   all       gina     all            scram-sha-256 clientcert=verify-full
`
	// A bad value is 22023 and changes nothing.
	_, err = admin.Exec(ctx, "ALTER SYSTEM SET server.host_based_authentication.configuration = 'host all all all md6'")
	if code := pgCode(err); code != "22023" || !strings.Contains(err.Error(), `line 1: invalid authentication method "md6"`) {
		t.Fatalf("bad rules: %v", err)
	}
	var shown string
	if err := admin.QueryRow(ctx, "SHOW server.host_based_authentication.configuration").Scan(&shown); err != nil || shown != "" {
		t.Fatalf("SHOW after a bad value: %q, %v", shown, err)
	}
	if _, err := admin.Exec(ctx, "ALTER SYSTEM SET server.host_based_authentication.configuration = $$"+rules+"$$"); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, "SHOW server.host_based_authentication.configuration").Scan(&shown); err != nil || shown != rules {
		t.Fatalf("SHOW: %q, %v", shown, err)
	}

	plain := func(user string) string {
		return fmt.Sprintf("postgresql://%s@%s/postgres?sslmode=disable", user, s.Addr())
	}
	tlsURL := func(user string) string {
		return fmt.Sprintf("postgresql://%s@%s/postgres?sslmode=verify-full&sslrootcert=%s", user, s.Addr(), filepath.Join(dir, "ca.crt"))
	}
	for _, tc := range []struct {
		name, url, password string
		want                string // current_user, or a piece of the error
	}{
		{"trust by address, no password", plain("carol"), "", "carol"},
		{"plaintext reaches hostnossl reject", plain("alice"), "apw", `pg_hba.conf rejects connection for host "127.0.0.1", user "alice", database "postgres", no encryption`},
		{"password method", tlsURL("alice"), "apw", "alice"},
		{"password method, wrong password", tlsURL("alice"), "bpw", `password authentication failed for user "alice"`},
		{"scram-sha-256", tlsURL("bob"), "bpw", "bob"},
		{"scram-sha-256, wrong password", tlsURL("bob"), "apw", `password authentication failed for user "bob"`},
		{"reject over TLS", tlsURL("mallory"), "mpw", `pg_hba.conf rejects connection for host "127.0.0.1", user "mallory", database "postgres", SSL encryption`},
		{"cert without a certificate", tlsURL("dave"), "", "connection requires a valid client certificate"},
		{"cert", certURL("dave"), "", "dave"},
		{"no rule matches", tlsURL("eve"), "epw", `no pg_hba.conf entry for host "127.0.0.1", user "eve", database "postgres", SSL encryption`},
		{"the superuser's certificate always logs in", certURL("postgres"), "", "postgres"},
		{"md5 runs SCRAM", tlsURL("frank"), "fpw", "frank"},
		{"clientcert=verify-full without a certificate", tlsURL("gina"), "gpw", "connection requires a valid client certificate"},
		{"clientcert=verify-full with another user's certificate", strings.Replace(certURL("dave"), "//dave@", "//gina@", 1), "gpw", `certificate authentication failed for user "gina"`},
		{"clientcert=verify-full and the password", certURL("gina"), "gpw", "gina"},
		{"clientcert=verify-full, wrong password", certURL("gina"), "fpw", `password authentication failed for user "gina"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := psqlUser(t, tc.url, tc.password); !strings.Contains(got, tc.want) {
				t.Errorf("psql: %q, want %q", got, tc.want)
			}
		})
	}

	// Only a superuser changes it, and not inside a transaction block.
	alice, err := pgx.Connect(ctx, tlsURL("alice")+"&password=apw")
	if err != nil {
		t.Fatal(err)
	}
	_, err = alice.Exec(ctx, "ALTER SYSTEM RESET server.host_based_authentication.configuration")
	alice.Close(ctx)
	if pgCode(err) != "42501" {
		t.Fatalf("ALTER SYSTEM by a non-superuser: %v", err)
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, "ALTER SYSTEM RESET server.host_based_authentication.configuration")
	tx.Rollback(ctx)
	if pgCode(err) != "25001" {
		t.Fatalf("ALTER SYSTEM in a transaction block: %v", err)
	}
	if _, err := admin.Exec(ctx, "ALTER SYSTEM SET no.such.setting = 'x'"); pgCode(err) != "42704" {
		t.Fatalf("unknown setting: %v", err)
	}

	// RESET: the built-in rules again (a loopback client may use SCRAM
	// without TLS; carol, without a password, cannot log in).
	if _, err := admin.Exec(ctx, "ALTER SYSTEM RESET server.host_based_authentication.configuration"); err != nil {
		t.Fatal(err)
	}
	if got := psqlUser(t, plain("alice"), "apw"); got != "alice" {
		t.Errorf("alice after RESET: %q", got)
	}
	if got := psqlUser(t, plain("carol"), "guess"); !strings.Contains(got, `password authentication failed for user "carol"`) {
		t.Errorf("carol after RESET: %q", got)
	}
}

// TestHBAInsecure: an insecure node trusts every login whatever the
// rules say; SET/SHOW CLUSTER SETTING are ALTER SYSTEM and SHOW.
func TestHBAInsecure(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	ctx := context.Background()
	c := connect(t, s)
	defer c.Close(ctx)
	// CockroachDB's statements work too (parser's cluster-setting rule).
	if _, err := c.Exec(ctx, "SET CLUSTER SETTING server.host_based_authentication.configuration = 'host all all all reject'"); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := c.QueryRow(ctx, "SHOW CLUSTER SETTING server.host_based_authentication.configuration").Scan(&v); err != nil || v != "host all all all reject" {
		t.Fatalf("SHOW CLUSTER SETTING: %q, %v", v, err)
	}
	c2 := connect(t, s)
	c2.Close(ctx)
	if _, err := c.Exec(ctx, "SET CLUSTER SETTING server.host_based_authentication.configuration = DEFAULT"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SHOW server.host_based_authentication.configuration").Scan(&v); err != nil || v != "" {
		t.Fatalf("after = DEFAULT: %q, %v", v, err)
	}
}

// psqlUser runs psql against url with password and returns current_user,
// or psql's error output.
func psqlUser(t *testing.T, url, password string) string {
	t.Helper()
	cmd := exec.Command("psql", url, "-XAtw", "-c", "SELECT current_user")
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=10")
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
