// Package benchnode starts the one-node `cairn start` process that the
// bench/ programs measure (ddl, indexbuild, joinorder, packedrows,
// parallelindex, spill), so that each program's main says only what is
// particular to it: its extra flags, what it runs against the node.
//
// It owns building the binary, the process and its log, and waiting for
// SQL. It does not time anything and does not touch the bench lock or
// the node's scheduling priority: those stay with the programs.
//
// Invariants:
//  1. A node listens on 127.0.0.1 only: SQL on Port, HTTP on Port+1,
//     RPC on Port+2 (the programs' -port flags document three ports).
//  2. Every flag a program passes in Args comes after the common ones,
//     in the order given, so a program's command line is what it was.
//  3. Kill and Stop both wait for the process, so no node outlives the
//     program that started it.
package benchnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// Build compiles ./cmd/cairn (the program runs from the repository root)
// into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "cairn")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/cairn").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cairn: %v\n%s", err, out)
	}
	return bin, nil
}

// Options say how to start a node.
type Options struct {
	// Bin is the cairn binary (Build's, or a program's -cairn flag).
	Bin string
	// Store is the --store directory.
	Store string
	// Log receives the process's stdout and stderr (created).
	Log string
	// Port is the first of three ports (invariant 1).
	Port int
	// Args are further flags, after the common ones (invariant 2).
	Args []string
}

// Node is a running `cairn start` process.
type Node struct {
	Cmd *exec.Cmd
	// URL is the node's SQL URL, user postgres, database postgres.
	URL string
	// SQLAddr is host:port of its SQL listener.
	SQLAddr string
	log     *os.File
}

// Start starts a node; it does not wait for it to serve (Connect does).
// The command line is
//
//	cairn start --store S --insecure --sql-addr A --http-addr A+1 --rpc-addr A+2 Args...
func Start(o Options) (*Node, error) {
	sql := fmt.Sprintf("127.0.0.1:%d", o.Port)
	args := append([]string{"start", "--store", o.Store, "--insecure",
		"--sql-addr", sql, "--http-addr", fmt.Sprintf("127.0.0.1:%d", o.Port+1),
		"--rpc-addr", fmt.Sprintf("127.0.0.1:%d", o.Port+2)}, o.Args...)
	logf, err := os.Create(o.Log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	return &Node{Cmd: cmd, URL: fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", sql), SQLAddr: sql, log: logf}, nil
}

// Pid is the node's process ID.
func (n *Node) Pid() int { return n.Cmd.Process.Pid }

// readyWait bounds how long Connect retries while a node starts.
const readyWait = time.Minute

// Connect opens a connection to the node, retrying every 100 ms for up to
// a minute while it starts; the error is the last attempt's.
func (n *Node) Connect(ctx context.Context) (*pgx.Conn, error) {
	return ConnectURL(ctx, n.URL)
}

// ConnectURL is Connect for any server's URL (the programs that compare
// against PostgreSQL wait for it the same way).
func ConnectURL(ctx context.Context, url string) (*pgx.Conn, error) {
	deadline := time.Now().Add(readyWait)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill kills the process and waits for it (a program's deferred
// clean-up: the store is thrown away).
func (n *Node) Kill() {
	_ = n.Cmd.Process.Kill()
	_, _ = n.Cmd.Process.Wait()
	n.log.Close()
}

// Stop sends SIGINT and waits up to a minute for the process to exit, so
// that its store is closed cleanly and can be opened again; past that it
// kills it and says so.
func (n *Node) Stop() error {
	defer n.log.Close()
	if err := n.Cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- n.Cmd.Wait() }()
	select {
	case <-done:
		return nil
	case <-time.After(60 * time.Second):
		_ = n.Cmd.Process.Kill()
		<-done
		return errors.New("cairn did not stop within 60s of SIGINT")
	}
}
