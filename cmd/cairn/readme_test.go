package main

import (
	"bufio"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/test/proc"
)

// TestReadmeSecureQuickStart runs the README's secure quick start (the sh
// block of its "Security" section) in a fresh directory, as written but
// for the store, moved under the directory, and the default ports, moved
// into the test's range with --sql-addr, --rpc-addr and --http-addr. Then
// it reads the start banner of that real node and connects with psql to
// the SQL URL the banner prints, as the superuser's client certificate
// (made by the block's create-client).
func TestReadmeSecureQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a node")
	}
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatalf("the check needs psql: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n## Security\n.*?```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no sh block under ## Security")
	}
	root := t.TempDir()
	bin, err := proc.Build(root)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "quickstart")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	addrs, err := proc.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+work, "PATH="+root+":"+os.Getenv("PATH"))
	var start string
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		if !strings.HasPrefix(line, "./cairn ") {
			t.Fatalf("a README line this test does not know how to run: %q", line)
		}
		line = bin + strings.TrimPrefix(line, "./cairn")
		if strings.Contains(line, " start ") {
			start = line
			continue
		}
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir, cmd.Env = work, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	if start == "" {
		t.Fatal("the README block starts no node")
	}
	start = strings.Replace(start, "/var/lib/cairn", filepath.Join(work, "store"), 1)
	start += " --sql-addr " + addrs[0] + " --rpc-addr " + addrs[1] + " --http-addr " + addrs[2]
	cmd := exec.Command("bash", "-c", "exec "+start)
	cmd.Dir, cmd.Env = work, env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(root, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	// The banner, line by line, until its last row (the cluster ID).
	banner := map[string]string{}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(2 * time.Minute)
	for banner["cluster ID"] == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				log, _ := os.ReadFile(logf.Name())
				t.Fatalf("the node exited before its banner was complete (%v):\n%s", banner, proc.Tail(string(log), 3000))
			}
			if k, v, ok := strings.Cut(l, ":"); ok {
				banner[k] = strings.TrimSpace(v)
			}
		case <-timeout:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("no complete banner after 2 minutes (%v):\n%s", banner, proc.Tail(string(log), 3000))
		}
	}
	go func() {
		for range lines {
		}
	}()
	certs := filepath.Join(work, "certs")
	u, err := url.Parse(banner["sql"])
	if err != nil {
		t.Fatalf("banner sql %q: %v", banner["sql"], err)
	}
	q := u.Query()
	if u.Scheme != "postgresql" || u.User.Username() != "postgres" || u.Host != addrs[0] || u.Path != "/postgres" ||
		q.Get("sslmode") != "verify-full" || q.Get("sslrootcert") != filepath.Join(certs, "ca.crt") ||
		q.Get("sslcert") != filepath.Join(certs, "client.postgres.crt") || q.Get("sslkey") != filepath.Join(certs, "client.postgres.key") {
		t.Errorf("banner sql: %q, want the superuser on %s with verify-full and its client certificate in %s", banner["sql"], addrs[0], certs)
	}
	for k, want := range map[string]string{
		"admin UI": "https://" + addrs[2] + "/",
		"store":    filepath.Join(work, "store"),
		"certs":    "certs",
		"node ID":  "1",
	} {
		if banner[k] != want {
			t.Errorf("banner %s: %q, want %q", k, banner[k], want)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(banner["cluster ID"]) {
		t.Errorf("banner cluster ID: %q", banner["cluster ID"])
	}
	// verify-full: psql checks the node's certificate against the CA and
	// logs in with the client certificate (no password was set).
	psql := exec.Command("psql", banner["sql"], "-XAtc", "SELECT current_user")
	psql.Env = env
	out, err := psql.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "postgres" {
		t.Fatalf("psql with the banner's URL: %v: %s", err, out)
	}
}

// TestReadmeDefaults: the addresses README.md gives as `cairn start`'s
// defaults, and the --join it tells a second node to use, are the flags'
// defaults in the code (which `cairn start --help` prints), so a user on
// defaults is not sent to the SQL port to join (issue 21).
func TestReadmeDefaults(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	m := regexp.MustCompile("The defaults are SQL on (\\S+), other nodes on (\\S+) \\(`--rpc-addr`\\) and the admin UI on (\\S+) \\(`--http-addr`\\)").FindStringSubmatch(text)
	if m == nil {
		t.Fatal("README.md no longer states start's default addresses in the sentence this test reads")
	}
	fs := startFlagSet(&startFlags{})
	for i, name := range []string{"sql-addr", "rpc-addr", "http-addr"} {
		if def := fs.Lookup(name).DefValue; m[i+1] != def {
			t.Errorf("README.md says --%s defaults to %s; the code's default is %s", name, m[i+1], def)
		}
	}
	if rpc := fs.Lookup("rpc-addr").DefValue; !strings.Contains(text, "`--join "+rpc+"` (the first node's `--rpc-addr`") {
		t.Errorf("README.md does not tell a second node to join %s, the default --rpc-addr", rpc)
	}
}
