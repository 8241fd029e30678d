package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/storage/simfs"
)

func TestFlagValidation(t *testing.T) {
	// --certs-dir's default is under $HOME: an empty one here.
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{args: nil, code: 2, want: "Usage:"},
		{args: []string{"frobnicate"}, code: 2, want: `unknown command "frobnicate"`},
		{args: []string{"start"}, code: 2, want: "--store is required"},
		{args: []string{"start", "--store", "x", "--join", "10.0.0.1:26357", "--replication-factor", "0"}, code: 2, want: "--replication-factor must be at least 1"},
		{args: []string{"start", "--store", "x", "--dead-after", "10ms"}, code: 2, want: "--dead-after must be at least 1s"},
		{args: []string{"node"}, code: 2, want: "node needs a subcommand"},
		{args: []string{"node", "status"}, code: 2, want: "--host or --url is required"},
		{args: []string{"node", "decommission", "x", "--host", "h:1"}, code: 2, want: `decommission needs a node ID, not "x"`},
		{args: []string{"node", "frob", "--host", "h:1"}, code: 2, want: `unknown node subcommand "frob"`},
		{args: []string{"start", "--store", "x", "--bogus"}, code: 2, want: "flag provided but not defined: -bogus"},
		{args: []string{"start", "--store", "x", "extra"}, code: 2, want: "unexpected arguments: extra"},
		{args: []string{"start", "--store", "x", "--colocation-warn-size", "lots"}, code: 2, want: `--colocation-warn-size: invalid size "lots"`},
		{args: []string{"start", "--store", "x", "--cache-mib", "0"}, code: 2, want: "--cache-mib 0: want 1 to"},
		{args: []string{"start", "--store", "x", "--row-cache-mib", "-2"}, code: 2, want: "--row-cache-mib -2: want 0 to"},
		{args: []string{"start", "--store", "x", "--tablet-split-size", "lots"}, code: 2, want: `--tablet-split-size: invalid size "lots"`},
		{args: []string{"start", "--store", "x", "--tablet-split-qps", "-1"}, code: 2, want: "--tablet-split-qps -1: want 0 (never) or more"},
		{args: []string{"start", "--store", "x", "--debug-sync-latency", "-1ms"}, code: 2, want: "--debug-sync-latency -1ms: want 0 or more"},
		{args: []string{"start", "--store", "x", "--locality", "nokey"}, code: 2, want: "--locality \"nokey\": want key=value"},
		{args: []string{"start", "--store", "x", "--locality", "region="}, code: 2, want: "want key=value"},
		{args: []string{"start", "--store", "x", "--locality", "region=a,region=b"}, code: 2, want: `key "region" given twice`},
		{args: []string{"start", "--store", "x", "--sql-addr", "127.0.0.1:9000", "--http-addr", "127.0.0.1:9000"}, code: 2, want: "--sql-addr and --http-addr are both 127.0.0.1:9000"},
		{args: []string{"start", "--store", "x", "--sql-addr", ":9000", "--rpc-addr", "127.0.0.1:9000"}, code: 2, want: "--sql-addr and --rpc-addr are both"},
		{args: []string{"start", "--store", "x", "--http-addr", "127.0.0.1:9001", "--rpc-addr", "127.0.0.1:9001"}, code: 2, want: "--http-addr and --rpc-addr are both"},
		{args: []string{"start", "--store", "x", "--sql-addr", "nohost"}, code: 2, want: `--sql-addr "nohost": want HOST:PORT`},
		{args: []string{"start", "--store", "x", "--rpc-addr", "10.0.0.1:1", "--join", "10.0.0.1:1,10.0.0.1:1"}, code: 2, want: "lists 10.0.0.1:1 twice"},
		{args: []string{"start", "--store", "x", "--rpc-addr", "10.0.0.1:1", "--join", "10.0.0.1:1,,10.0.0.3:1"}, code: 2, want: "member 2"},
		{args: []string{"start", "--store", "x", "--rpc-addr", "10.0.0.1:1", "--join", "10.0.0.1:1,10.0.0.2"}, code: 2, want: "is not HOST:PORT"},
		{args: []string{"start", "--store", "x", "--in-memory"}, code: 2, want: "flag provided but not defined: -in-memory"},
		{args: []string{"start", "--store", t.TempDir(), "--sql-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--rpc-addr", "127.0.0.1:0"}, code: 1, want: "cannot load certificates: " + filepath.Join(os.Getenv("HOME"), ".cairn-certs") + ": no CA or node certificate"},
		{args: []string{"start", "--store", t.TempDir(), "--sql-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--unreplicated"}, code: 1, want: "or start with --insecure for development"},
		{args: []string{"start", "--store", "x", "--insecure", "--certs-dir", "certs"}, code: 2, want: "--insecure excludes --certs-dir"},
		{args: []string{"start", "--store", "x", "--insecure", "--accept-sql-without-tls"}, code: 2, want: "--insecure excludes --certs-dir and --accept-sql-without-tls"},
		{args: []string{"start", "--store", "x", "--unreplicated", "--join", "10.0.0.1:1"}, code: 2, want: "--unreplicated and --join exclude each other"},
		{args: []string{"start", "--store", "x", "--rpc-addr", "0.0.0.0:26357"}, code: 2, want: `other nodes will join this one at its --rpc-addr, so it needs this host's address, not "0.0.0.0"`},
		{args: []string{"start", "--store", "x", "--rpc-addr", ":26357"}, code: 2, want: `not ""`},
		{args: []string{"sql"}, code: 2, want: "--url is required"},
		{args: []string{"demo", "extra"}, code: 2, want: "unexpected arguments"},
	} {
		t.Setenv("CAIRN_INITIAL_PASSWORD", "")
		var out, errOut bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("cairn %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.code, tc.want)
		}
	}
}

func TestStatementComplete(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"SELECT 1;", true},
		{"SELECT 1", false},
		{"SELECT ';'", false},
		{"SELECT ';';  \n", true},
		{"SELECT 1; -- done", true}, // psql sends it at the semicolon
		{"SELECT 1 -- ;", false},
		{"SELECT $$;$$", false},
		{"SELECT $x$;$x$;", true},
		{`SELECT ";"`, false},
	} {
		if got := statementComplete(tc.in); got != tc.want {
			t.Errorf("statementComplete(%q) = %v", tc.in, got)
		}
	}
}

// builtCairn is the cairn binary the process tests run, built once per
// test binary (into a directory TestMain removes): five tests each built
// their own, a minute of the package's run on a 2-core machine.
var builtCairn struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// buildCairn returns the path of this package's binary, built on first
// use.
func buildCairn(t *testing.T) string {
	t.Helper()
	b := &builtCairn
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "cairn-bin-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "cairn")
		if out, err := exec.Command("go", "build", "-o", b.bin, ".").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtCairn.dir != "" {
		os.RemoveAll(builtCairn.dir)
	}
	os.Exit(code)
}

// TestStartProcess builds cairn, makes certificates, starts a secure node
// on a fresh store, logs in with the initial password over TLS, and stops
// it with SIGTERM.
func TestStartProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := buildCairn(t)
	certs := makeCerts(t, dir, "certs")
	cmd := exec.Command(bin, "start", "--store", filepath.Join(dir, "store"), "--certs-dir", certs,
		"--sql-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--rpc-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "CAIRN_INITIAL_PASSWORD=s3cret")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ready := regexp.MustCompile(`cairn node ready: sql=(\S+) http=(\S+?)"`)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var sqlAddr string
	deadline := time.After(30 * time.Second)
	for sqlAddr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("cairn exited before it was ready")
			}
			if m := ready.FindStringSubmatch(l); m != nil {
				sqlAddr = m[1]
			}
		case <-deadline:
			t.Fatal("no ready line within 30s")
		}
	}
	ctx := context.Background()
	if _, err := pgx.Connect(ctx, "postgres://postgres:wrong@"+sqlAddr+"/postgres?sslmode=require"); err == nil {
		t.Error("a wrong password logged in")
	}
	conn, err := pgx.Connect(ctx, "postgres://postgres:s3cret@"+sqlAddr+"/postgres?sslmode=verify-full&sslrootcert="+filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatalf("connect with the initial password: %v", err)
	}
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version", pgx.QueryExecModeSimpleProtocol).Scan(&v); err != nil || v != "15.18" {
		t.Errorf("SHOW server_version = %q, %v", v, err)
	}
	conn.Close(ctx)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("cairn exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cairn did not stop within 30s of SIGTERM")
	}
}

// TestDemo runs cairn demo with a scripted shell session.
func TestDemo(t *testing.T) {
	in := strings.NewReader("SELECT name, city\n  FROM customers\n  WHERE id <= 2 ORDER BY id;\nSELECT 1/0;\nINSERT INTO products VALUES (4, 'marble', 30);\n\\q\nSELECT 'not run';\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"demo"}, in, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	want := ` name  |   city
-------+----------
 Ada   | London
 Grace | New York
(2 rows)

INSERT 0 1
`
	// The first lines announce the node, its admin UI and its URL.
	got := out.String()
	if !strings.Contains(got, "\nadmin UI: http://127.0.0.1:") {
		t.Errorf("stdout does not announce the admin UI:\n%s", got)
	}
	_, got, _ = strings.Cut(got, "sslmode=disable\n")
	if got != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(errOut.String(), "ERROR:  division by zero") {
		t.Errorf("stderr: %q", errOut.String())
	}
}

// TestDebugSyncLatency: --debug-sync-latency opens the store on a simfs
// that adds the latency to every sync (bench/hashshard); without it the
// store is on the OS's filesystem.
func TestDebugSyncLatency(t *testing.T) {
	f, err := parseStart([]string{"--store", "x", "--debug-sync-latency", "2ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sfs, ok := f.cfg.FS.(*simfs.FS)
	if !ok || sfs.Profile().SyncLatency != 2*time.Millisecond {
		t.Fatalf("FS = %#v, want a simfs adding 2ms per sync", f.cfg.FS)
	}
	if f, err = parseStart([]string{"--store", "x"}, io.Discard); err != nil || f.cfg.FS != nil {
		t.Fatalf("without the flag: FS = %v, %v", f.cfg.FS, err)
	}
}

// TestStoreProfileFlags: --store-profile takes the profiles and auto
// (the default), and --debug-store-latency opens the store on a simfs
// that prices reads as the profile says and syncs as --debug-sync-latency
// says; anything else is a usage error.
func TestStoreProfileFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		profile string
		read    simfs.Profile // zero: no simulated disk
		sync    time.Duration
		err     string
	}{
		{args: nil, profile: "auto"},
		{args: []string{"--store-profile", "HDD"}, profile: "hdd"},
		{args: []string{"--store-profile", "object-store"}, profile: "object-store"},
		{args: []string{"--store-profile", "tape"}, err: `--store-profile: unknown storage profile "tape"`},
		{args: []string{"--debug-store-latency", "hdd"}, profile: "auto", read: simfs.HDD},
		{args: []string{"--debug-store-latency", "object-store", "--debug-sync-latency", "3ms"}, profile: "auto", read: simfs.ObjectStore, sync: 3 * time.Millisecond},
		{args: []string{"--debug-store-latency", "ssd"}, err: `--debug-store-latency "ssd": want hdd or object-store`},
	} {
		f, err := parseStart(append([]string{"--store", "x"}, c.args...), io.Discard)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || f.cfg.StoreProfile != c.profile {
			t.Errorf("%v: profile %q, %v; want %q", c.args, f.cfg.StoreProfile, err, c.profile)
			continue
		}
		sfs, ok := f.cfg.FS.(*simfs.FS)
		if c.read.Name == "" {
			if f.cfg.FS != nil {
				t.Errorf("%v: FS %v, want none", c.args, f.cfg.FS)
			}
			continue
		}
		p := sfs.Profile()
		if !ok || p.Name != c.read.Name || p.ReadLatency != c.read.ReadLatency || p.SeekLatency != c.read.SeekLatency ||
			p.Bandwidth != c.read.Bandwidth || p.SyncLatency != c.sync {
			t.Errorf("%v: simulated disk %+v, want the reads of %+v and syncs of %v", c.args, p, c.read, c.sync)
		}
	}
}
