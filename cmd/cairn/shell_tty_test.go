package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/cairn-db/cairn/test/proc"
)

// openPTY opens a pseudo-terminal pair (Linux's /dev/ptmx) sized 24x100,
// so that a child process sees a real terminal on its standard streams.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pty's slave: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}); err != nil {
		t.Fatalf("setting the pty's size: %v", err)
	}
	return m, s
}

// termOutput collects what a terminal's master side reads, and lets the
// test wait for a condition on it (each read wakes the waiters).
type termOutput struct {
	mu   sync.Mutex
	cond *sync.Cond
	b    strings.Builder
	done bool
}

func newTermOutput(r io.Reader) *termOutput {
	o := &termOutput{}
	o.cond = sync.NewCond(&o.mu)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			o.mu.Lock()
			o.b.Write(buf[:n])
			if err != nil {
				o.done = true
			}
			o.cond.Broadcast()
			o.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return o
}

// waitFor blocks until ok holds of the output so far, and fails the test
// if a minute passes first (or the terminal closes without it).
func (o *termOutput) waitFor(t *testing.T, what string, ok func(string) bool) {
	t.Helper()
	expired := false
	timer := time.AfterFunc(time.Minute, func() {
		o.mu.Lock()
		expired = true
		o.cond.Broadcast()
		o.mu.Unlock()
	})
	defer timer.Stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	for !ok(o.b.String()) {
		if expired || o.done {
			t.Fatalf("the terminal never showed %s:\n%q", what, o.b.String())
		}
		o.cond.Wait()
	}
}

// TestShellTerminal runs the built cairn binary's `cairn sql` on a
// pseudo-terminal, as a person would: a line edited with readline's keys
// (Ctrl-A, Ctrl-F, a typed letter) runs as edited, the up arrow recalls
// it from history, the history is kept in ~/.cairn_sql_history, and
// Ctrl-C typed while a statement runs cancels it (the terminal sends
// SIGINT) and the shell goes on. TestShellInterrupt checks the same
// cancel in-process; this checks the keys reach it through a terminal.
func TestShellTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := startNode(t)
	dir := t.TempDir()
	bin, err := proc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	defer master.Close()
	cmd := exec.Command(bin, "sql", "--url", url)
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child holds it now; the master reads EIO once it exits
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	out := newTermOutput(master)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(master, s); err != nil {
			t.Fatal(err)
		}
	}
	result := "   5151\r\n(1 row)"
	out.waitFor(t, "the prompt", func(s string) bool { return strings.Contains(s, "cairn> ") })

	// "SELEC 5151 AS edited;", then Ctrl-A to the line's start, Ctrl-F
	// five times past "SELEC", and a typed "T": the statement sent is
	// the edited line (the unedited one is a syntax error).
	send("SELEC 5151 AS edited;\x01\x06\x06\x06\x06\x06T\r")
	out.waitFor(t, "the edited statement's result", func(s string) bool { return strings.Count(s, result) == 1 })
	// The up arrow recalls the line from history; Enter runs it again.
	send("\x1b[A\r")
	out.waitFor(t, "the recalled statement's result", func(s string) bool { return strings.Count(s, result) == 2 })

	// Ctrl-C while a statement runs: the terminal is out of raw mode
	// then, so it sends SIGINT, and the shell sends a cancel request.
	send("SELECT pg_sleep(60);\r")
	ctx := context.Background()
	watcher, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	for {
		var n int
		if err := watcher.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(60);%' AND state = 'active'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
	}
	send("\x03")
	out.waitFor(t, "the cancel", func(s string) bool {
		return strings.Contains(s, "Cancel request sent") && strings.Contains(s, "ERROR:  canceling statement due to user request")
	})
	send("SELECT 4242 AS after;\r")
	out.waitFor(t, "a statement after the cancel", func(s string) bool { return strings.Contains(s, " 4242\r\n(1 row)") })
	send("\\q\r")
	if err := <-exited; err != nil {
		t.Fatalf("cairn sql: %v", err)
	}
	out.mu.Lock()
	shown := out.b.String()
	out.mu.Unlock()
	if strings.Contains(shown, "syntax error") {
		t.Errorf("a statement ran unedited:\n%q", shown)
	}
	hist, err := os.ReadFile(filepath.Join(home, ".cairn_sql_history"))
	if err != nil {
		t.Fatalf("no history file: %v", err)
	}
	for _, want := range []string{"SELECT 5151 AS edited;\n", "SELECT pg_sleep(60);\n", "SELECT 4242 AS after;\n"} {
		if !strings.Contains(string(hist), want) {
			t.Errorf("~/.cairn_sql_history lacks %q:\n%s", want, hist)
		}
	}
}
