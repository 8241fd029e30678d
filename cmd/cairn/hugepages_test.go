package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestHugePagesExecEnv(t *testing.T) {
	start := []string{"cairn", "start", "--store", "x"}
	for _, tc := range []struct {
		name    string
		args    []string
		environ []string
		mode    string
		want    []string // nil: no exec
	}{
		{"start", start, []string{"A=1"}, "madvise", []string{"A=1", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "CAIRN_MALLOC_HUGEPAGES=on"}},
		{"demo", []string{"cairn", "demo"}, nil, "madvise", []string{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "CAIRN_MALLOC_HUGEPAGES=on"}},
		{"other tunables kept", start, []string{"GLIBC_TUNABLES=glibc.malloc.arena_max=2", "B=2"}, "madvise",
			[]string{"B=2", "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1", "CAIRN_MALLOC_HUGEPAGES=on"}},
		{"sql shell", []string{"cairn", "sql"}, nil, "madvise", nil},
		{"no command", []string{"cairn"}, nil, "madvise", nil},
		{"always", start, nil, "always", nil},
		{"never", start, nil, "never", nil},
		{"unknown mode", start, nil, "", nil},
		{"turned off", start, []string{"CAIRN_MALLOC_HUGEPAGES=off"}, "madvise", nil},
		{"run again already", start, []string{"CAIRN_MALLOC_HUGEPAGES=on"}, "madvise", nil},
		{"operator's value", start, []string{"GLIBC_TUNABLES=glibc.malloc.hugetlb=0"}, "madvise", nil},
	} {
		got, ok := hugePagesExecEnv(tc.args, tc.environ, tc.mode)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: hugePagesExecEnv = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// TestStartHugePages starts the binary and checks that the node runs with
// glibc's huge-page tunable in its environment, under its own process ID.
func TestStartHugePages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if m := readTHPMode(); m != "madvise" {
		t.Skipf("the kernel's THP mode is %q, not madvise: nothing to ask for", m)
	}
	dir := t.TempDir()
	bin := buildCairn(t)
	cmd := exec.Command(bin, "start", "--insecure", "--store", filepath.Join(dir, "store"),
		"--sql-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--rpc-addr", "127.0.0.1:0")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GLIBC_TUNABLES=") && !strings.HasPrefix(kv, hugePagesEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	ready := regexp.MustCompile(`cairn node ready: sql=`)
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		ok := false
		for sc.Scan() {
			if !ok && ready.MatchString(sc.Text()) {
				ok = true
				found <- true
			}
		}
		if !ok {
			found <- false
		}
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Fatal("cairn exited before it was ready")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line within 30s")
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	vars := bytes.Split(environ, []byte{0})
	i := slices.IndexFunc(vars, func(v []byte) bool { return bytes.HasPrefix(v, []byte("GLIBC_TUNABLES=")) })
	if i < 0 || string(vars[i]) != "GLIBC_TUNABLES="+hugePagesTunable {
		// The environment's other variables are not printed: it is the
		// test runner's.
		t.Errorf("the node's environment has no GLIBC_TUNABLES=%s (GLIBC_TUNABLES present: %v)", hugePagesTunable, i >= 0)
	}
	if rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", cmd.Process.Pid)); err == nil {
		for _, l := range strings.Split(string(rollup), "\n") {
			if strings.HasPrefix(l, "AnonHugePages:") {
				t.Logf("node %s", l)
			}
		}
	}
}
