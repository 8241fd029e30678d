package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/server"
	"github.com/jackc/pgx/v5"
)

// TestNodeCommands runs cairn node status and decommission against two
// in-process nodes (one started as a cluster of one, one joining it):
// status lists both as live, decommission of the second (which holds no
// replica: two nodes keep one voter per tablet) finishes and status then
// shows it decommissioned.
func TestNodeCommands(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	startNode := func(profile string, join func(self string) []string) *server.Server {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		s, err := server.Start(ctx, server.Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: join(addr), Logger: quiet,
			LivenessTTL: 400 * time.Millisecond, ReplicateInterval: 100 * time.Millisecond, Locality: "region=r" + addr[len(addr)-1:], StoreProfile: profile})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(ctx) })
		return s
	}
	var first string
	// Each node's storage profile travels in its node record, so node 1
	// lists node 2's.
	n1 := startNode("hdd", func(self string) []string { first = self; return []string{self} })
	startNode("object-store", func(string) []string { return []string{first} })
	host := n1.HTTPAddr().String()
	node := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"node"}, args...), strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("cairn node %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	status := node("status", "--host", host)
	// The cluster version heads the table, and each node's binary version
	// is a column: both nodes run this build.
	bin := regexp.QuoteMeta(clusterversion.Binary.String())
	for _, want := range []string{`(?m)^cluster version: ` + bin + ` \(as node 1 knows it\)$`, `(?m)^id\s+rpc address\s+sql address\s+locality\s+storage\s+binary\s+liveness\s+replicas\s+leaders$`, `(?m)^1\s+\S+\s+\S+\s+region=r\S*\s+hdd\s+` + bin + `\s+live\s+1\s+1$`, `(?m)^2\s+\S+\s+\S+\s+region=r\S*\s+object-store\s+` + bin + `\s+live\s+0\s+0$`} {
		if !regexp.MustCompile(want).MatchString(status) {
			t.Fatalf("cairn node status:\n%s\nwant a line matching %s", status, want)
		}
	}
	if out := node("decommission", "2", "--url", "http://"+host); !strings.Contains(out, "node 2 is decommissioned") {
		t.Fatalf("cairn node decommission 2:\n%s", out)
	}
	if status := node("status", "--host", host); !regexp.MustCompile(`(?m)^2\s.*\s` + bin + `\s+decommissioned\s+0\s+0$`).MatchString(status) {
		t.Fatalf("cairn node status after decommissioning node 2:\n%s", status)
	}
}

// TestNodeCommandsAuth runs cairn node against a secure node (a cluster
// of one): without a password it says the node requires a login, with a
// wrong one that the login failed; a role without SUPERUSER may list
// nodes but not decommission; the superuser, with the password from the
// environment or a file, may.
func TestNodeCommandsAuth(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s, err := server.Start(ctx, server.Config{InitialPassword: "root-pw", RPCAddr: addr, RPCListener: ln, Join: []string{addr},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LivenessTTL: 400 * time.Millisecond, ReplicateInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(ctx) })
	c, err := pgx.Connect(ctx, "postgres://postgres:root-pw@"+s.Addr().String()+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE ROLE viewer LOGIN PASSWORD 'view-pw'"); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("root-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := s.HTTPAddr().String()
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stdout string // a regexp
		stderr string
	}{
		{"no password", nil, []string{"status"}, 1, "", `GET /api/nodes: the node requires a login \(401 Unauthorized\): give --user and the role's password in CAIRN_PASSWORD or --password-file`},
		{"wrong password", map[string]string{"CAIRN_PASSWORD": "nope"}, []string{"status"}, 1, "", `logging in as "postgres" failed \(401 Unauthorized\): password authentication failed for user "postgres"`},
		{"PGPASSWORD", map[string]string{"PGPASSWORD": "root-pw"}, []string{"status"}, 0, `(?m)^1\s+\S+\s+\S+\s+\s+ssd\s+` + regexp.QuoteMeta(clusterversion.Binary.String()) + `\s+live\s+1\s+1$`, ""},
		{"any role may list", map[string]string{"CAIRN_PASSWORD": "view-pw"}, []string{"status", "--user", "viewer"}, 0, `(?m)^1\s.*\slive\s`, ""},
		{"only a superuser may decommission", map[string]string{"CAIRN_PASSWORD": "view-pw"}, []string{"decommission", "1", "--user", "viewer", "--wait", "1s"}, 1, "",
			`POST /api/nodes/1/decommission: role "viewer" is not allowed to \(403 Forbidden\): role "viewer" is not a superuser`},
		// The superuser may: node 1 is marked decommissioning (a cluster
		// of one has nowhere to move its replicas, so the wait times out).
		{"superuser, password file", map[string]string{"CAIRN_PASSWORD": "view-pw"}, []string{"decommission", "1", "--password-file", pwFile, "--wait", "1s"}, 1,
			`node 1 is decommissioning`, `node 1 still holds 1 replicas after 1s`},
		{"missing password file", nil, []string{"status", "--password-file", pwFile + ".missing"}, 1, "", `reading --password-file: open `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CAIRN_PASSWORD", "")
			t.Setenv("PGPASSWORD", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errOut bytes.Buffer
			code := run(append(append([]string{"node"}, tc.args...), "--host", host), strings.NewReader(""), &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			if tc.stdout != "" && !regexp.MustCompile(tc.stdout).MatchString(out.String()) {
				t.Errorf("stdout:\n%s\nwant a match of %s", out.String(), tc.stdout)
			}
			if tc.stderr != "" && !regexp.MustCompile(tc.stderr).MatchString(errOut.String()) {
				t.Errorf("stderr:\n%s\nwant a match of %s", errOut.String(), tc.stderr)
			}
		})
	}
}
