package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cairn-db/cairn/security"
	"github.com/spf13/cobra"
)

// The command tree (spf13/cobra): dispatch, every command's description
// and examples, `cairn help`, --help and shell completion (`cairn
// completion bash|zsh|fish|powershell`). Each command still parses its
// own flags with Go's flag package (DisableFlagParsing), so flags may come
// among positional arguments as before and the messages and exit statuses
// stay; its flag set is also given to cobra, which lists the flags in the
// help and completes their names.

// newRootCommand returns the tree, reading stdin and writing stdout and
// stderr.
func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "cairn",
		Short: "Cairn, a distributed SQL database that speaks PostgreSQL",
		Long: `Cairn, a distributed SQL database that speaks PostgreSQL.

A node is secure unless started with --insecure: make a CA and
certificates with 'cairn cert', then 'cairn start --certs-dir DIR'
(docs/security.md, docs/operations.md). Defaults: SQL on 127.0.0.1:26257,
other nodes on 127.0.0.1:26357 (--rpc-addr, the address --join names),
the admin UI and /metrics on 127.0.0.1:8080.`,
		Example: `  cairn demo
  cairn cert create-ca --certs-dir certs --ca-key safe/ca.key
  cairn cert create-node 127.0.0.1 localhost --certs-dir certs --ca-key safe/ca.key
  cairn start --store node1 --certs-dir certs
  cairn sql --url 'postgresql://postgres@127.0.0.1:26257/postgres?sslmode=verify-full&sslrootcert=certs/ca.crt'`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionText(),
	}
	root.SetVersionTemplate(versionText())
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })

	root.AddCommand(
		leaf(&cobra.Command{
			Use:   "start",
			Short: "run a node: serve SQL, the admin UI and other nodes",
			Long: `Start a node on the store in --store (made when empty): it serves
PostgreSQL clients on --sql-addr, the admin UI, /metrics and /debug/pprof
on --http-addr, and other nodes on --rpc-addr, and prints a banner with
its SQL URL (with the sslmode it needs), admin UI URL, store, node ID and
cluster ID. Without --join it is a cluster of one that others join by
naming its --rpc-addr in their --join. It stops cleanly on SIGTERM or
SIGINT.`,
			Example: `  # A secure node (certificates from 'cairn cert'):
  CAIRN_INITIAL_PASSWORD=choose-one cairn start --store node1 --certs-dir certs
  # Two more nodes joining it:
  cairn start --store node2 --certs-dir certs --sql-addr 127.0.0.1:26258 --http-addr 127.0.0.1:8081 --rpc-addr 127.0.0.1:26358 --join 127.0.0.1:26357
  # For development only:
  cairn start --store dev --insecure`,
		}, func() *flag.FlagSet { return startFlagSet(&startFlags{}) },
			func(args []string) error { return cmdStart(args, stdout, stderr) }),
		certCommand(stdout, stderr),
		leaf(&cobra.Command{
			Use:   "sql",
			Short: "a SQL shell on a node (or run one string with -e)",
			Long: `An interactive SQL shell: line editing, history (~/.cairn_sql_history)
and Tab completion of keywords and table names on a terminal, statements
end with ';', Ctrl-C cancels the running statement (or clears the line),
and psql's \d, \dt, \l, \x, \timing and \? work. Without a terminal it
reads statements from stdin; -e runs one string and exits.`,
			Example: `  cairn sql --url 'postgresql://postgres@127.0.0.1:26257/postgres?sslmode=verify-full&sslrootcert=certs/ca.crt&sslcert=certs/client.postgres.crt&sslkey=certs/client.postgres.key'
  cairn sql --url 'postgresql://postgres@127.0.0.1:26257/postgres?sslmode=disable' -e 'SELECT 1'`,
		}, func() *flag.FlagSet { return sqlFlagSet(&sqlFlags{}) },
			func(args []string) error { return cmdSQL(args, stdin, stdout, stderr) }),
		leaf(&cobra.Command{
			Use:   "demo",
			Short: "an in-memory node with sample tables, and a shell on it",
			Long: `Start an in-memory insecure node (or --nodes N of one cluster) with the
tables customers, products and orders, print its URL and open the SQL
shell; nothing is kept when it exits.`,
			Example: `  cairn demo
  cairn demo --nodes 3 --global --no-shell`,
		}, func() *flag.FlagSet { return demoFlagSet(&demoFlags{}) },
			func(args []string) error { return cmdDemo(args, stdin, stdout, stderr) }),
		nodeCommand(stdout, stderr),
		workloadCommand(stdout, stderr),
		&cobra.Command{
			Use:   "version",
			Short: "print this build's version",
			Long:  "Print the release, the commit it was built from and when, and the Go toolchain and platform.",
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				fmt.Fprint(stdout, versionText())
				return nil
			},
		},
	)
	return root
}

// leaf makes c run run with its arguments, flags included, and gives
// cobra the flags flags defines (for the help and completion).
func leaf(c *cobra.Command, flags func() *flag.FlagSet, run func(args []string) error) *cobra.Command {
	c.DisableFlagParsing = true
	if flags != nil {
		c.Flags().AddGoFlagSet(flags())
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		if wantsHelp(args) {
			return c.Help()
		}
		return run(args)
	}
	return c
}

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// group is a command with subcommands; run sees the arguments when none
// of them matched (to say what is missing or unknown).
func group(c *cobra.Command, run func(args []string) error, subs ...*cobra.Command) *cobra.Command {
	c = leaf(c, nil, run)
	c.AddCommand(subs...)
	return c
}

func certCommand(stdout, stderr io.Writer) *cobra.Command {
	run := func(args []string) error { return cmdCert(args, stdout, stderr) }
	sub := func(name, use, short, example string) *cobra.Command {
		return leaf(&cobra.Command{Use: use, Short: short, Example: example},
			func() *flag.FlagSet { return certFlagSet(name, &security.Options{}) },
			func(args []string) error { return run(append([]string{name}, args...)) })
	}
	return group(&cobra.Command{
		Use:   "cert",
		Short: "create and list the certificates of a secure cluster",
		Long: `Make the certificates of a secure cluster as CockroachDB lays them out: a
CA (ca.crt in --certs-dir, its key at --ca-key, which belongs off the
nodes), each node's node.crt and node.key for every host and address it
is reached at, and client.USER.crt and .key for client-certificate
logins. Keys are ECDSA P-256; key files are mode 0600.`,
	}, run,
		sub("create-ca", "create-ca --ca-key FILE", "create the cluster's CA certificate and key",
			"  cairn cert create-ca --certs-dir certs --ca-key safe/ca.key"),
		sub("create-node", "create-node HOST... --ca-key FILE", "create a node's certificate for the hosts it is reached at",
			"  cairn cert create-node 10.0.0.1 db1.example.com localhost 127.0.0.1 --certs-dir certs --ca-key safe/ca.key"),
		sub("create-client", "create-client USER --ca-key FILE", "create a SQL user's client certificate",
			"  cairn cert create-client postgres --certs-dir certs --ca-key safe/ca.key"),
		sub("list", "list", "list the certificates in --certs-dir", "  cairn cert list --certs-dir certs"),
	)
}

func nodeCommand(stdout, stderr io.Writer) *cobra.Command {
	run := func(args []string) error { return cmdNode(args, stdout, stderr) }
	sub := func(name, use, short, example string) *cobra.Command {
		return leaf(&cobra.Command{Use: use, Short: short, Example: example},
			func() *flag.FlagSet { return nodeFlagSet(name, &nodeFlags{}) },
			func(args []string) error { return run(append([]string{name}, args...)) })
	}
	return group(&cobra.Command{
		Use:   "node",
		Short: "list a cluster's nodes, or decommission one",
		Long: `Talk to a node's HTTP API (its --http-addr). Against a secure node give
--certs-dir (its ca.crt verifies the node) and log in as --user with the
password from --password-file, else CAIRN_PASSWORD, else PGPASSWORD.`,
	}, run,
		sub("status", "status --host HTTP-HOST:PORT", "list the cluster's nodes: liveness, replicas, leaders",
			"  cairn node status --host 127.0.0.1:8080 --certs-dir certs"),
		sub("decommission", "decommission N --host HTTP-HOST:PORT", "move every replica off node N, then mark it decommissioned",
			"  CAIRN_PASSWORD=... cairn node decommission 3 --host 127.0.0.1:8080 --certs-dir certs"),
	)
}

func workloadCommand(stdout, stderr io.Writer) *cobra.Command {
	run := func(args []string) error { return cmdWorkload(args, stdout, stderr) }
	sub := func(verb, short, example string) *cobra.Command {
		return leaf(&cobra.Command{Use: verb + " kv [URL]", Short: short, Example: example},
			func() *flag.FlagSet { return workloadFlagSet(verb, &workloadFlags{}) },
			func(args []string) error { return run(append([]string{verb}, args...)) })
	}
	return group(&cobra.Command{
		Use:   "workload",
		Short: "load generators (kv, github-events) against a node",
		Long: `CockroachDB's kv workload: a table kv (k, v) and a mix of point reads and
writes; and github-events: rows shaped like the distributed-tables seed's
github_events (jsonb payloads of PushEvents), to load a table.`,
	}, run,
		sub("init", "create the kv table", "  cairn workload init kv 'postgresql://postgres@127.0.0.1:26257/postgres?sslmode=disable'"),
		sub("run", "run the kv workload", "  cairn workload run kv --read-percent 95 --concurrency 16 --duration 1m 'postgresql://postgres@127.0.0.1:26257/postgres?sslmode=disable'"),
		leaf(&cobra.Command{
			Use:     "github-events init --rows N [--table T] [--drop] [--distributed [--shards N]] [--batch N] [URL]",
			Short:   "create and fill a github_events table like the seed's",
			Example: "  cairn workload github-events init --rows 100000 --distributed --shards 32 'postgresql://postgres@127.0.0.1:26257/postgres?sslmode=disable'",
		}, nil, func(args []string) error { return run(append([]string{"github-events"}, args...)) }),
	)
}

// run is main without the process: it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	if len(args) == 0 {
		root.SetOut(stderr)
		_ = root.Help()
		return 2
	}
	root.SetArgs(args)
	c, err := root.ExecuteC()
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	prefix := "cairn"
	if c != nil && c != root {
		prefix = c.CommandPath()
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return 2
	case strings.HasPrefix(err.Error(), "unknown command "):
		fmt.Fprintf(stderr, "cairn: %v\nRun 'cairn --help' for the commands.\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	return 1
}
