package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/test/proc"
)

// TestOperationsGuide runs the sh blocks of docs/operations.md, in order,
// as one bash script: certificates, a secure three-node cluster, host-based
// authentication, monitoring, adding and decommissioning a node,
// restarting one, and a pg_dump backup restored into a new database. Only
// the guide's ports are moved into the test's range, and each `go build`
// is a copy of the binary the test built.
func TestOperationsGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs four processes")
	}
	for _, tool := range []string{"bash", "psql", "pg_dump", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the guide needs %s: %v", tool, err)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 8 {
		t.Fatalf("docs/operations.md has %d sh blocks", len(blocks))
	}
	root := t.TempDir()
	bin, err := proc.Build(root)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "guide")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	// The guide's ports, each moved to a free one.
	guidePorts := []string{"26257", "26258", "26259", "26260", "26357", "26358", "26359", "26360", "8080", "8081", "8082", "8083"}
	addrs, err := proc.FreeAddrs(len(guidePorts))
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	for i, p := range guidePorts {
		_, port, _ := net.SplitHostPort(addrs[i])
		ports[p] = port
	}
	script := strings.Join(blocks, "\n")
	script = regexp.MustCompile(`\b(2625[7-9]|26260|2635[7-9]|26360|808[0-3])\b`).ReplaceAllStringFunc(script, func(p string) string { return ports[p] })
	script = regexp.MustCompile(`go build -o (\S+) \./cmd/cairn`).ReplaceAllString(script, "cp "+bin+" $1")
	script = "set -euo pipefail\ntrap 'kill $(cat node*.pid 2> /dev/null) 2> /dev/null || true' EXIT\nset -x\n" + script
	path := filepath.Join(root, "guide.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+work, "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err != nil {
		var logs strings.Builder
		for _, n := range []string{"node1", "node2", "node3", "node4"} {
			b, _ := os.ReadFile(filepath.Join(work, n+".log"))
			logs.WriteString("\n--- " + n + ".log\n" + proc.Tail(string(b), 3000))
		}
		t.Fatalf("the guide failed: %v\n%s\n%s", err, proc.Tail(string(out), 8000), logs.String())
	}
	got := string(out)
	for _, want := range []string{
		"CAIRN NODE STARTED",
		"  1 |     100\n  2 |      50\n", // cairn sql -e on node 3
		" app\n",                         // the app role logged in over TLS
		"cairn_sql_statement_duration_seconds_count{type=",
		" 225\n", // the restored accounts
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the guide's output lacks %q:\n%s", want, proc.Tail(got, 8000))
		}
	}
	if !regexp.MustCompile(`(?m)^4 +\S+ +\S+ .*\blive\b`).MatchString(got) {
		t.Errorf("node status never listed node 4 live:\n%s", proc.Tail(got, 8000))
	}
	// After the upgrade section's restart, node status gives the cluster
	// version and each node's binary (the last status lists nodes 1-3).
	ver := regexp.QuoteMeta(clusterversion.Binary.String())
	if !regexp.MustCompile(`(?m)^cluster version: `+ver+` \(as node 1 knows it\)$`).MatchString(got) ||
		!regexp.MustCompile(`(?m)^3 +\S+ +\S+ .* `+ver+` +live\b`).MatchString(got) {
		t.Errorf("node status never showed cluster version %s and node 3's binary:\n%s", clusterversion.Binary, proc.Tail(got, 8000))
	}
}
