package chaos

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/test/proc"
)

// fakeNodeEnv makes the test binary, run as a node's process, a fake node
// that touches this many MiB and waits to be killed (TestMemWatch).
const fakeNodeEnv = "CHAOS_FAKE_NODE_MIB"

// fakeNode runs the fake node when fakeNodeEnv is set; it returns false
// otherwise.
func fakeNode() bool {
	mib, err := strconv.Atoi(os.Getenv(fakeNodeEnv))
	if err != nil || mib <= 0 {
		return false
	}
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	time.Sleep(time.Minute)
	return b[0] == 1
}

// TestMemWatch: the harness sees a node's resident memory (check 7): a
// process that touches 300 MiB has a peak of at least that, which is an
// anomaly under a bound of 256 MiB and none under 1 GiB, and the summary
// names it.
func TestMemWatch(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	nd, err := proc.NewNode(filepath.Join(t.TempDir(), "n1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeNodeEnv, "300")
	if err := nd.Start(exe, nil); err != nil {
		t.Fatal(err)
	}
	defer nd.Kill()
	c := &Cluster{Nodes: []*proc.Node{nd}, ids: []uint64{1}, dead: []bool{false}}
	w := WatchMemory(c)
	defer w.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for w.Peak(0) < 300<<20 {
		if time.Now().After(deadline) || nd.Exited() {
			t.Fatalf("peak %d MiB, want at least 300 (exited: %v)", w.Peak(0)>>20, nd.Exited())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := w.Anomalies(256 << 20); len(a) != 1 || !strings.Contains(a[0], "node 1 grew to") {
		t.Errorf("anomalies under 256 MiB: %q", a)
	}
	if a := w.Anomalies(1 << 30); len(a) != 0 {
		t.Errorf("anomalies under 1 GiB: %q", a)
	}
	if s := w.Summary(); !strings.Contains(s, "[node 1 ") {
		t.Errorf("summary %q names no node", s)
	}
}

// TestExitState: a process killed by a signal nobody in the harness sent
// (the OOM killer's SIGKILL) says so.
func TestExitState(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "oom")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nkill -9 $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	nd, err := proc.NewNode(filepath.Join(dir, "n1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.Start(script, nil); err != nil {
		t.Fatal(err)
	}
	defer nd.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for !nd.Exited() {
		if time.Now().After(deadline) {
			t.Fatal("the process did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := nd.ExitState(); st != "signal: killed" {
		t.Errorf("ExitState() = %q, want signal: killed", st)
	}
}
