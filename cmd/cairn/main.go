// Command cairn runs a Cairn node and talks to one.
//
//	cairn start --store DIR --sql-addr HOST:PORT --rpc-addr HOST:PORT --http-addr HOST:PORT
//	            [--join ADDR,...] [--locality region=R] [--insecure] [--initial-password PW]
//	cairn demo [--no-shell]
//	cairn sql --url URL [-e SQL]
//
// start opens (or creates) the store in DIR, bootstraps a new cluster's
// catalog when the store is empty, serves PostgreSQL clients and HTTP, and
// shuts down cleanly on SIGTERM or SIGINT. Without --insecure clients log in
// with SCRAM-SHA-256; the superuser postgres gets its password when the
// store is bootstrapped, from --initial-password or, so that it stays out
// of the process list, the environment variable CAIRN_INITIAL_PASSWORD
// (later starts ignore both). --join lists the RPC addresses of every
// initial member of a replicated cluster, --rpc-addr among them, in the
// same order on every member (the node's ID is its position); every tablet
// is then a raft group of all members, and any member serves SQL. Adding
// nodes to a running cluster is not there yet.
//
// demo starts an in-memory insecure node with a few sample tables, prints
// its URL and opens the SQL shell (or, with --no-shell, serves until
// interrupted). sql is a small interactive shell (pgx, psql-like aligned
// output; statements end with ';'; \q quits) or, with -e, runs one string.
//
// This package owns the command line only: flag parsing, signals and the
// shell; the node itself is server.Start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/server"
)

func main() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// gcPercent is the garbage collector's target when GOGC is not set. A
// node's live heap is small next to what it allocates per statement (a
// point SELECT allocates tens of KB and keeps none), so with Go's default
// of 100 the collector ran all the time: 18% of the CPU under pgbench
// select-only. At 400 Cairn spent 60 µs of CPU per prepared point SELECT
// instead of 76, 74 instead of 83 with the simple protocol. The price is
// a heap up to five times the live data between collections (a bulk load
// holding 300 MB peaks near 1.5 GB); GOGC in the environment overrides it.
const gcPercent = 400

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

const usage = `usage:
  cairn start --store DIR [--sql-addr HOST:PORT] [--rpc-addr HOST:PORT] [--http-addr HOST:PORT]
              [--join ADDR,...] [--locality key=value,...] [--insecure] [--initial-password PW]
  cairn demo [--no-shell]
  cairn sql --url URL [-e SQL]
`

// run is main without the process: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "start":
		err = cmdStart(args[1:], stderr)
	case "demo":
		err = cmdDemo(args[1:], stdin, stdout, stderr)
	case "sql":
		err = cmdSQL(args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "cairn: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "cairn %s: %v\n", args[0], err)
		return 2
	}
	fmt.Fprintf(stderr, "cairn %s: %v\n", args[0], err)
	return 1
}

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// startFlags are cairn start's flags, parsed and checked.
type startFlags struct {
	cfg  server.Config
	join string
}

func parseStart(args []string, stderr io.Writer) (startFlags, error) {
	var f startFlags
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.cfg.StoreDir, "store", "", "directory of the node's store (required)")
	fs.StringVar(&f.cfg.SQLAddr, "sql-addr", "127.0.0.1:26257", "address for PostgreSQL clients")
	fs.StringVar(&f.cfg.RPCAddr, "rpc-addr", "127.0.0.1:26357", "address for other nodes (listened on with --join)")
	fs.StringVar(&f.cfg.HTTPAddr, "http-addr", "127.0.0.1:8080", "address for /health, /metrics and /debug/pprof")
	fs.StringVar(&f.join, "join", "", "RPC addresses of all initial members, this one included, in the same order on each")
	fs.StringVar(&f.cfg.Locality, "locality", "", "key=value[,key=value...], e.g. region=us-east1")
	fs.BoolVar(&f.cfg.Insecure, "insecure", false, "accept clients without passwords (trust authentication)")
	fs.StringVar(&f.cfg.InitialPassword, "initial-password", "", "password of the superuser postgres at bootstrap (or CAIRN_INITIAL_PASSWORD)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return f, usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if f.cfg.StoreDir == "" {
		return f, usagef("--store is required")
	}
	if f.join != "" {
		f.cfg.Join = strings.Split(f.join, ",")
		if !slices.Contains(f.cfg.Join, f.cfg.RPCAddr) {
			return f, usagef("--rpc-addr %s is not among the --join addresses %s: every member lists all members, itself included (adding a node to a running cluster is not supported yet)", f.cfg.RPCAddr, f.join)
		}
	}
	if err := checkStartFlags(&f); err != nil {
		return f, err
	}
	if f.cfg.InitialPassword == "" {
		f.cfg.InitialPassword = os.Getenv("CAIRN_INITIAL_PASSWORD")
	}
	return f, nil
}

func cmdStart(args []string, stderr io.Writer) error {
	f, err := parseStart(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	f.cfg.Logger = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := server.Start(ctx, f.cfg)
	if err != nil {
		return err
	}
	var failed error
	select {
	case <-ctx.Done():
		log.Info("cairn: shutting down")
	case failed = <-srv.Failed():
		// Exit non-zero so that a supervisor restarts the node (on a
		// healthy disk); acknowledged writes are durable, nothing else
		// is served meanwhile.
		log.Error("cairn: the node cannot go on; stopping", "err", failed)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Stop(sctx); failed == nil {
		return err
	}
	return fmt.Errorf("the node stopped: %w", failed)
}
