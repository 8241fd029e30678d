package main

import (
	"bufio"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage"
)

// TestGoMemoryLimit: --max-memory less the block cache and memtables is
// the Go limit; GOMEMLIMIT wins unless the flag is given; too little for
// the Go heap is a usage error.
func TestGoMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	mem := 3 * storage.MemTableSize
	for _, tc := range []struct {
		v          string
		given      bool
		gomemlimit string
		cache      int64
		want       int64
		err        string
	}{
		{v: "8GiB", given: true, cache: 256 * mib, want: 8<<30 - 256*mib - int64(mem)},
		{v: "1GiB", given: false, cache: 64 * mib, want: 1<<30 - 64*mib - int64(mem)},
		{v: "1GiB", given: false, gomemlimit: "900MiB", cache: 64 * mib, want: 0},
		{v: "1GiB", given: true, gomemlimit: "900MiB", cache: 64 * mib, want: 1<<30 - 64*mib - int64(mem)},
		{v: "512MiB", given: true, cache: 256 * mib, err: "want at least 256 MiB"},
		{v: "lots", given: true, err: "invalid size"},
		{v: "0%", given: true, err: "percentage of RAM"},
	} {
		got, err := goMemoryLimit(tc.v, tc.given, tc.gomemlimit, tc.cache)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("goMemoryLimit(%q, %v, %q, %d) = %d, %v; want an error with %q", tc.v, tc.given, tc.gomemlimit, tc.cache, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("goMemoryLimit(%q, %v, %q, %d) = %d, %v; want %d", tc.v, tc.given, tc.gomemlimit, tc.cache, got, err, tc.want)
		}
	}
	var out, errOut strings.Builder
	if code := run([]string{"start", "--store", "x", "--max-memory", "300MiB"}, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--max-memory: 300MiB") {
		t.Errorf("cairn start --max-memory 300MiB: exit %d, stderr %q", code, errOut.String())
	}
}

// TestMaxMemoryProcess: a node started with --max-memory runs with the Go
// limit it implies (/metrics, cairn_go_memory_limit_bytes), and one
// started without it under GOMEMLIMIT keeps the operator's.
func TestMaxMemoryProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := buildCairn(t)
	for i, tc := range []struct {
		flags []string
		env   string
		want  int64
	}{
		{flags: []string{"--max-memory", "1GiB", "--cache-mib", "64"}, want: 1<<30 - 64<<20 - 3*storage.MemTableSize},
		{flags: []string{"--cache-mib", "64"}, env: "GOMEMLIMIT=900MiB", want: 900 << 20},
	} {
		args := append([]string{"start", "--store", filepath.Join(dir, "s"+strconv.Itoa(i)), "--insecure", "--unreplicated",
			"--sql-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, tc.flags...)
		cmd := exec.Command(bin, args...)
		cmd.Env = os.Environ()
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		if got := metricOf(t, cmd, "cairn_go_memory_limit_bytes"); got != tc.want {
			t.Errorf("cairn %s (%s): cairn_go_memory_limit_bytes %d, want %d", strings.Join(tc.flags, " "), tc.env, got, tc.want)
		}
	}
}

// metricOf starts cmd, waits until it is ready, reads the gauge name from
// its /metrics and kills it.
func metricOf(t *testing.T, cmd *exec.Cmd, name string) int64 {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := regexp.MustCompile(`cairn node ready: sql=(\S+) http=(\S+?)"`)
	httpAddr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := ready.FindStringSubmatch(sc.Text()); m != nil {
				httpAddr <- m[2]
			}
		}
		close(httpAddr)
	}()
	var addr string
	select {
	case a, ok := <-httpAddr:
		if !ok {
			t.Fatal("cairn exited before it was ready")
		}
		addr = a
	case <-time.After(60 * time.Second):
		t.Fatal("no ready line within 60s")
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("%s %q: %v", name, m[1], err)
	}
	return int64(v)
}

// TestDefaultRowCache: cairn start's row cache is 256 MiB, or a 32nd of
// the Go memory limit when that is less; --row-cache-mib names a size or,
// with 0, turns the cache off (a negative store size).
func TestDefaultRowCache(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		limit, want int64
	}{
		{limit: 18 << 30, want: 256 * mib},
		{limit: 8 << 30, want: 256 * mib},
		{limit: 4 << 30, want: 128 * mib},
		{limit: 1 << 30, want: 32 * mib},
		{limit: math.MaxInt64, want: 256 * mib}, // no limit at all
	} {
		if got := defaultRowCache(tc.limit); got != tc.want {
			t.Errorf("defaultRowCache(%d MiB) = %d MiB, want %d MiB", tc.limit>>20, got>>20, tc.want>>20)
		}
	}
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{args: []string{"--max-memory", "2GiB", "--cache-mib", "64"}, want: (2<<30 - 64*mib - 3*int64(storage.MemTableSize)) / 32},
		{args: []string{"--max-memory", "16GiB"}, want: 256 * mib},
		{args: []string{"--row-cache-mib", "10"}, want: 10 * mib},
		{args: []string{"--row-cache-mib", "0"}, want: -1},
	} {
		f, err := parseStart(append([]string{"--store", "x", "--insecure"}, tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if f.cfg.RowCacheSize != tc.want {
			t.Errorf("%v: row cache %d, want %d", tc.args, f.cfg.RowCacheSize, tc.want)
		}
	}
}
