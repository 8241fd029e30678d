package main

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestDemoFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--global"}, "--global needs --nodes 3 or more"},
		{[]string{"demo", "--nodes", "2", "--global"}, "--global needs --nodes 3 or more"},
		{[]string{"demo", "--nodes", "0"}, "--nodes must be at least 1"},
		{[]string{"demo", "--lease-preferences", "spread"}, "--lease-preferences needs --nodes 2 or more"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("cairn %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.want)
		}
	}
}

// TestDemoGlobal runs `cairn demo --nodes 3 --global --no-shell` as a
// process: it prints the three nodes and their regions, the shell's URL
// is the us-west node's, the sample data is there through every node, and
// a write through the us-west node pays at least the 60 ms round trip to
// us-east (its quorum needs another region whichever node leads). It
// stops on SIGTERM.
func TestDemoGlobal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildCairn(t)
	cmd := exec.Command(bin, "demo", "--nodes", "3", "--global", "--no-shell", "--lease-preferences", "region=us-west")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	urlLine := regexp.MustCompile(`^node (\d) \(([a-z-]+)\)(, the shell's)?: (postgres://\S+)$`)
	urls := map[string]string{}
	var shell string
	var out []string
	deadline := time.After(60 * time.Second)
	for shell == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("cairn demo exited before printing the shell's URL: %v\n%s", out, stderr.String())
			}
			out = append(out, l)
			if m := urlLine.FindStringSubmatch(l); m != nil {
				urls[m[2]] = m[4]
				if m[3] != "" {
					shell = m[4]
					if m[2] != "us-west" {
						t.Errorf("the shell's node is in %s, want us-west", m[2])
					}
				}
			}
		case <-deadline:
			t.Fatalf("no URL within 60s: %v\n%s", out, stderr.String())
		}
	}
	if len(urls) != 3 || !strings.Contains(out[0], "regions us-west, us-east, eu") {
		t.Fatalf("demo output: %q", out)
	}
	ctx := context.Background()
	for region, url := range urls {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("connect to the %s node: %v", region, err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM customers").Scan(&n); err != nil || n != 3 {
			t.Errorf("customers through the %s node: %d, %v", region, n, err)
		}
		conn.Close(ctx)
	}
	conn, err := pgx.Connect(ctx, shell)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		if _, err := conn.Exec(ctx, "INSERT INTO products VALUES ($1, 'tuff', 1)", 10+i); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 60*time.Millisecond {
			t.Errorf("a replicated write through the us-west node took %v, less than the 60 ms round trip to us-east", d)
		}
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
			t.Errorf("cairn demo exited with %v after SIGTERM\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cairn demo did not stop within 30s of SIGTERM")
	}
}
