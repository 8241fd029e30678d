package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/clusterversion"
)

// TestCertCommands runs the cert commands as a user following
// docs/security.md would, flags after the positional arguments as
// CockroachDB's docs write them, and checks each one's exit status and
// output.
func TestCertCommands(t *testing.T) {
	root := t.TempDir()
	certs, caKey := filepath.Join(root, "certs"), filepath.Join(root, "safe", "ca.key")
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout (exit 0) or stderr
	}{
		{[]string{"cert", "create-ca", "--certs-dir", certs}, 2, "--ca-key is required"},
		{[]string{"cert", "create-ca", "--certs-dir", certs, "--ca-key", caKey}, 0, "wrote " + filepath.Join(certs, "ca.crt")},
		{[]string{"cert", "create-ca", "--certs-dir", certs, "--ca-key", caKey}, 1, "file exists (use --overwrite to replace it)"},
		{[]string{"cert", "create-node", "localhost", "127.0.0.1", "--certs-dir", certs, "--ca-key", caKey}, 0, "for localhost, 127.0.0.1"},
		{[]string{"cert", "create-node", "--certs-dir", certs, "--ca-key", caKey}, 2, "create-node needs the node's hosts"},
		{[]string{"cert", "create-client", "alice", "--certs-dir", certs, "--ca-key", caKey}, 0, "client.alice.crt"},
		{[]string{"cert", "create-client", "alice", "--certs-dir", certs, "--ca-key", caKey, "--overwrite"}, 0, "client.alice.key"},
		{[]string{"cert", "create-client", "--certs-dir", certs, "--ca-key", caKey}, 2, "needs one user name"},
		{[]string{"cert", "frob"}, 2, `unknown cert subcommand "frob"`},
		{[]string{"cert"}, 2, "cert needs a subcommand"},
		{[]string{"cert", "list", "--certs-dir", certs}, 0, "Client  client.alice.crt  client.alice.key"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &out, &errOut)
		got := errOut.String()
		if code == 0 {
			got = out.String()
		}
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("cairn %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.code, tc.want)
		}
	}
	var out bytes.Buffer
	run([]string{"cert", "list", "--certs-dir", certs}, nil, &out, &out)
	for _, want := range []string{"CA      ca.crt", "Node    node.crt          node.key", "addresses: localhost,127.0.0.1", "user: alice"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("cert list does not show %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{filepath.Join(certs, "node.key"), filepath.Join(certs, "client.alice.key"), caKey} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", f, st.Mode(), err)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("version: exit %d", code)
	}
	if !regexp.MustCompile(`^cairn \S+\ncommit: +\S+\nbuilt: +\S+\ngo: +` + regexp.QuoteMeta(runtime.Version()) + `\b.*\nbinary: +version ` +
		regexp.QuoteMeta(clusterversion.Binary.String()) + `, runs in clusters at version ` + regexp.QuoteMeta(clusterversion.MinSupported.String()) + ` or later\n$`).MatchString(out.String()) {
		t.Errorf("version:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"--help"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	// Every command the dispatcher knows has a line with a description.
	for _, cmd := range []string{"start", "cert", "sql", "demo", "node", "workload", "version", "help"} {
		if !regexp.MustCompile(`(?m)^  ` + cmd + ` +\S.*$`).MatchString(out.String()) {
			t.Errorf("--help has no description of %s:\n%s", cmd, out.String())
		}
	}
}
