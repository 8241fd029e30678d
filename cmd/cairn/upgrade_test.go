package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/test/proc"
)

// TestUpgradeProcesses upgrades a cluster of real `cairn start` processes
// from a build claiming binary version 1.0 (this code linked with
// clusterversion.testingBinary=1.0) to this build (1.2): node 1 starts on
// 1.0 and node 2, on 1.2, joins; `cairn node status` shows both binaries
// and the cluster at 1.0. Node 1 restarted on the 1.2 binary, the cluster
// version rises by itself, and status shows it; a 1.0 binary then joining
// is refused, and its process exits saying why.
func TestUpgradeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries and runs three processes")
	}
	if clusterversion.Binary != clusterversion.SideloadedLog {
		t.Fatalf("this test upgrades from 1.0 to %s; update it for binary %s", clusterversion.SideloadedLog, clusterversion.Binary)
	}
	bin, ms := newMembers(t, 3, "--dead-after", "4s")
	old, err := proc.BuildNamed(filepath.Dir(bin), "cairn-1.0", "-ldflags=-X github.com/cairn-db/cairn/clusterversion.testingBinary=1.0")
	if err != nil {
		t.Fatal(err)
	}
	// waitStatus waits until `cairn node status` on node 2 matches every
	// pattern.
	waitStatus := func(what string, patterns ...string) string {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			var out, errOut bytes.Buffer
			run([]string{"node", "status", "--host", ms[1].HTTP}, strings.NewReader(""), &out, &errOut)
			ok := true
			for _, p := range patterns {
				ok = ok && regexp.MustCompile(p).MatchString(out.String())
			}
			if ok {
				return out.String()
			}
			if time.Now().After(deadline) {
				t.Fatalf("cairn node status never showed %s:\n%s%s", what, out.String(), errOut.String())
			}
			time.Sleep(300 * time.Millisecond)
		}
	}

	ms[0].start(t, old, nil)
	ms[1].start(t, bin, []string{ms[0].RPC})
	s := waitStatus("a 1.0 and a 1.2 node in a cluster at 1.0",
		`(?m)^cluster version: 1\.0 \(as node 2 knows it\)$`, `(?m)^1\s.*\s1\.0\s+live\s`, `(?m)^2\s.*\s1\.2\s+live\s`)
	t.Logf("mixed:\n%s", s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := ms[1].Connect(ctx, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY); INSERT INTO t VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}

	// Node 1 restarts on the new binary: every node runs 1.2, and the
	// version loop raises the cluster version.
	ms[0].kill()
	ms[0].start(t, bin, nil)
	s = waitStatus("the cluster at 1.2 with both nodes on 1.2",
		`(?m)^cluster version: 1\.2 \(as node 2 knows it\)$`, `(?m)^1\s.*\s1\.2\s+live\s`, `(?m)^2\s.*\s1\.2\s+live\s`)
	t.Logf("upgraded:\n%s", s)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after the upgrade: %d rows, %v", n, err)
	}

	// A 1.0 binary can no longer join.
	ms[2].start(t, old, []string{ms[0].RPC})
	deadline := time.Now().Add(60 * time.Second)
	for !ms[2].Exited() {
		if time.Now().After(deadline) {
			t.Fatalf("a 1.0 binary joining a 1.2 cluster still runs:\n%s", ms[2].LogTail(3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if log := ms[2].LogTail(3000); !strings.Contains(log, "binary is version 1.0 and the cluster version is 1.2: run a binary of version 1.2 or newer") {
		t.Fatalf("the refused 1.0 node's log does not say why:\n%s", log)
	}
}
