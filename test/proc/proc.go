// Package proc runs real `cairn start` processes for tests: it builds the
// binary once, picks loopback addresses, starts a node on its own store
// directory (fresh or restarted), and signals it (SIGKILL, SIGSTOP,
// SIGCONT). cmd/cairn's process tests and the chaos harness (test/chaos)
// share it.
//
// It owns only process lifecycle; what the processes serve and how a test
// checks them is the caller's.
//
// Invariants:
//
//  1. A Node has at most one process at a time: Start on a running node is
//     an error, and Kill waits for the process to be reaped, so a restart
//     never races its predecessor for the store's lock or its ports.
//  2. A node's stderr (its log) is appended to Dir+".log" across restarts,
//     so a failed test can show the whole life of a node.
package proc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Build compiles cmd/cairn into dir and returns the binary's path. It runs
// `go build` from the module, wherever the calling test's package is.
func Build(dir string) (string, error) { return BuildNamed(dir, "cairn") }

// BuildNamed is Build into dir/name, with extra flags for go build (such
// as -ldflags).
func BuildNamed(dir, name string, flags ...string) (string, error) {
	bin := filepath.Join(dir, name)
	args := append(append([]string{"build", "-o", bin}, flags...), "github.com/cairn-db/cairn/cmd/cairn")
	cmd := exec.Command("go", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cmd/cairn: %v\n%s", err, out)
	}
	return bin, nil
}

// DefaultPorts is the range FreeAddrs draws from when CAIRN_TEST_PORTS is
// not set. It lies below Linux's ephemeral range (32768-60999 by default):
// a port the kernel picked for a probe and released is the kind it hands
// to the next outgoing connection, so a node started on it a moment later
// could find it taken ("bind: address already in use"); ports outside that
// range are only ever taken by a listener that asks for them.
const DefaultPorts = "10000-19999"

// FreeAddrs returns n loopback addresses that were free a moment ago,
// drawn from CAIRN_TEST_PORTS=lo-hi when it is set (tests sharing a
// machine each keep to their own range) and from DefaultPorts otherwise.
//
// A port is handed out once per process until the whole range has been:
// the probe listeners close when FreeAddrs returns, and a cluster's nodes
// are given their addresses one by one before any of them binds, so a
// port free to the second call may be the first call's, not yet taken.
// Two nodes given one port fail in ways that look like a bug in cairn
// (a client of node 3 talking to node 1's RPC port is reset).
func FreeAddrs(n int) ([]string, error) {
	handed.Lock()
	defer handed.Unlock()
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	lo, hi, ranged := portRange(os.Getenv("CAIRN_TEST_PORTS"))
	if !ranged {
		lo, hi, _ = portRange(DefaultPorts)
	}
	if handed.ports == nil {
		handed.ports = map[int]bool{}
		// Start anywhere in the range: a node's old ports may still be
		// in TIME_WAIT, and the test packages of one `go test ./...`
		// run, each a process of its own, pick at once.
		handed.next = lo + rand.IntN(hi-lo+1)
	}
	mine := map[int]bool{}
	for range n {
		var ln net.Listener
		var err error
		for pass := 0; pass < 2 && ln == nil; pass++ {
			if pass == 1 {
				// Every port of the range was handed out once: start the
				// cycle over, the oldest holders being the likeliest gone.
				clear(handed.ports)
			}
			for tries := 0; tries <= hi-lo; tries++ {
				p := handed.next
				if p < lo || p > hi {
					p = lo
				}
				handed.next = p + 1
				if handed.ports[p] || mine[p] {
					continue
				}
				if ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
					mine[p] = true
					break
				}
			}
		}
		if ln == nil {
			if err == nil {
				err = fmt.Errorf("proc: no free port in %d-%d", lo, hi)
			}
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for p := range mine {
		handed.ports[p] = true
	}
	return out, nil
}

// handed is the process's record of the ports FreeAddrs gave out and
// where its next search starts.
var handed struct {
	sync.Mutex
	ports map[int]bool
	next  int
}

// portRange parses "lo-hi"; ok is false when s is empty or malformed.
func portRange(s string) (lo, hi int, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo <= 0 || hi < lo || hi > 65535 {
		return 0, 0, false
	}
	return lo, hi, true
}

// Node is one cairn process and its store. Its methods are safe for
// concurrent use.
type Node struct {
	// Dir is the store directory; SQL, RPC and HTTP its listen addresses.
	Dir, SQL, RPC, HTTP string
	// CertsDir, when set, starts the node secure with --certs-dir
	// instead of --insecure.
	CertsDir string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has been reaped
	log  *os.File
}

// NewNode returns a node whose three addresses are fresh loopback ones.
func NewNode(dir string) (*Node, error) {
	a, err := FreeAddrs(3)
	if err != nil {
		return nil, err
	}
	return &Node{Dir: dir, RPC: a[0], SQL: a[1], HTTP: a[2]}, nil
}

// Start starts the node's process: `cairn start` on its store, insecure
// (or secure with CertsDir), with --join join when join is not empty (none: a cluster of one that
// others can join), and extra flags after those.
func (n *Node) Start(bin string, join []string, extra ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("proc: node %s is already running", n.Dir)
	}
	security := []string{"--insecure"}
	if n.CertsDir != "" {
		security = []string{"--certs-dir", n.CertsDir}
	}
	args := append([]string{"start", "--store", n.Dir}, security...)
	args = append(args, "--sql-addr", n.SQL, "--http-addr", n.HTTP, "--rpc-addr", n.RPC)
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	args = append(args, extra...)
	f, err := os.OpenFile(n.Dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s proc: %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stderr, cmd.Stdout = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("proc: starting %s: %w", n.Dir, err)
	}
	n.cmd, n.log, n.done = cmd, f, make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(cmd, n.done)
	return nil
}

// Running reports whether the node has a process (possibly stopped).
// Pid is the running process's ID (0 when it is not running).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Kill SIGKILLs the process (continuing it first if stopped) and waits
// until it is reaped. A node with no process is left as it is.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	fmt.Fprintf(n.log, "=== %s proc: killed\n", time.Now().UTC().Format(time.RFC3339Nano))
	n.log.Close()
	n.cmd, n.log = nil, nil
}

// Signal sends sig to the process (SIGSTOP, SIGCONT); an error if there
// is none.
func (n *Node) Signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("proc: node %s is not running", n.Dir)
	}
	fmt.Fprintf(n.log, "=== %s proc: %s\n", time.Now().UTC().Format(time.RFC3339Nano), sig)
	return n.cmd.Process.Signal(sig)
}

// Exited reports whether the process ended by itself (not through Kill).
func (n *Node) Exited() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// ExitState is how the process ended when it exited by itself (Exited:
// "exit status 1", "signal: killed"), else "".
func (n *Node) ExitState() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return ""
	}
	select {
	case <-n.done:
		return n.cmd.ProcessState.String()
	default:
		return ""
	}
}

// URL is the node's PostgreSQL URL (user postgres, no TLS).
func (n *Node) URL() string {
	return "postgres://postgres@" + n.SQL + "/postgres?sslmode=disable&connect_timeout=2"
}

// Connect connects to the node's SQL port, retrying until timeout.
func (n *Node) Connect(ctx context.Context, timeout time.Duration) (*pgx.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := pgx.Connect(ctx, n.URL())
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("proc: connecting to %s: %w", n.SQL, errors.Join(err, ctx.Err()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// LogTail returns the last max bytes of the node's log.
func (n *Node) LogTail(max int) string {
	b, _ := os.ReadFile(n.Dir + ".log")
	return Tail(string(b), max)
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
