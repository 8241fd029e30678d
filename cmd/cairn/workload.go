package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-db/cairn/workload"
	"github.com/cairn-db/cairn/workload/githubevents"
	"github.com/jackc/pgx/v5"
)

// workloadFlags are workload init|run kv's flags.
type workloadFlags struct {
	cfg          workload.KVConfig
	url          string
	searchMean   time.Duration
	searchRounds int
}

func workloadFlagSet(verb string, f *workloadFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("workload "+verb+" kv", flag.ContinueOnError)
	fs.StringVar(&f.url, "url", "postgres://postgres@127.0.0.1:26257/postgres?sslmode=disable", "PostgreSQL URL of a node")
	fs.BoolVar(&f.cfg.HashSharded, "hash-sharded", false, "give kv a hash-sharded primary key (USING HASH)")
	fs.IntVar(&f.cfg.Buckets, "buckets", 0, "bucket count of the hash-sharded key (0: the server's default)")
	fs.BoolVar(&f.cfg.SecondaryIndex, "secondary-index", false, "give kv an index on v too")
	if verb == "init" {
		fs.BoolVar(&f.cfg.Drop, "drop", false, "drop an existing kv table first")
	} else {
		fs.BoolVar(&f.cfg.Sequential, "sequential", false, "write keys in sequence (the hot spot hash sharding spreads)")
		fs.IntVar(&f.cfg.ReadPercent, "read-percent", 0, "percentage of operations that read")
		fs.IntVar(&f.cfg.Concurrency, "concurrency", 8, "workers, each with its own connection")
		fs.DurationVar(&f.cfg.Duration, "duration", 0, "how long to run (0: until interrupted)")
		fs.IntVar(&f.cfg.Batch, "batch", 1, "keys per operation")
		fs.BoolVar(&f.cfg.Drop, "init", false, "create the kv table first if it does not exist")
		fs.Float64Var(&f.cfg.MaxRate, "max-rate", 0, "cap on operations per second, all workers together (0: none)")
	}
	if verb == "run" {
		fs.DurationVar(&f.searchMean, "search-avg-latency", 0, "search for the highest rate whose mean latency stays under this (kv0bench), each round --duration long")
		fs.IntVar(&f.searchRounds, "search-rounds", 6, "bisection rounds of a search after the unthrottled one")
	}
	return fs
}

// cmdWorkload is `cairn workload init|run kv [flags] [URL]`, CockroachDB's
// `cockroach workload` for its kv workload (package workload). The URL
// may come as the last argument, as in CockroachDB, or as --url.
func cmdWorkload(args []string, stdout, stderr io.Writer) error {
	if len(args) >= 2 && (args[0] == "github-events" || args[1] == "github-events") {
		return cmdGitHubEvents(args, stdout, stderr)
	}
	if len(args) < 2 || (args[0] != "init" && args[0] != "run") || args[1] != "kv" {
		return usagef("want: workload init kv [flags] [URL] | workload run kv [flags] [URL]")
	}
	verb := args[0]
	wf := workloadFlags{cfg: workload.KVConfig{Out: stdout}}
	fs := workloadFlagSet(verb, &wf)
	fs.SetOutput(stderr)
	url := &wf.url
	if err := parseWithURL(fs, args[2:], url); err != nil {
		return err
	}
	cfg, searchMean, searchRounds := wf.cfg, wf.searchMean, wf.searchRounds
	cfg.URL = *url
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if verb == "init" {
		return workload.InitKV(ctx, cfg)
	}
	if cfg.Drop {
		// --init on run: create the table if missing, never drop it.
		init := cfg
		init.Drop = false
		if err := workload.InitKV(ctx, init); err != nil {
			return err
		}
	}
	cfg.Drop = false
	if cfg.Duration < 0 {
		return usagef("--duration must not be negative")
	}
	if searchMean > 0 {
		_, err := workload.SearchKV(ctx, cfg, searchMean, searchRounds)
		return err
	}
	return workload.RunKV(ctx, cfg)
}

// parseWithURL parses a workload command's flags and its one optional
// argument, the node's URL, into url. Flags may follow the URL, as in
// CockroachDB's examples.
func parseWithURL(fs *flag.FlagSet, args []string, url *string) error {
	var rest []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(rest) {
	case 0:
	case 1:
		*url = rest[0]
	default:
		return usagef("unexpected arguments: %s", strings.Join(rest[1:], " "))
	}
	return nil
}

// cmdGitHubEvents is `cairn workload github-events init --rows N [flags]
// [URL]` (also `workload init github-events`): the seed's github_events
// table, loaded with COPY (package workload/githubevents).
func cmdGitHubEvents(args []string, stdout, stderr io.Writer) error {
	if args[0] != "init" && args[1] != "init" {
		return usagef("want: workload github-events init --rows N [--table T] [--drop] [--distributed [--shards N]] [URL]")
	}
	fs := flag.NewFlagSet("workload github-events init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "postgres://postgres@127.0.0.1:26257/postgres?sslmode=disable", "PostgreSQL URL of a node")
	var cfg githubevents.Config
	fs.Int64Var(&cfg.Rows, "rows", 100_000, "events to load")
	fs.StringVar(&cfg.Table, "table", "github_events", "table name")
	fs.BoolVar(&cfg.Drop, "drop", false, "drop an existing table first")
	fs.BoolVar(&cfg.Distributed, "distributed", false, "create_distributed_table on repo_id before loading")
	fs.IntVar(&cfg.Shards, "shards", 0, "shard count with --distributed (0: citus.shard_count)")
	fs.Int64Var(&cfg.Batch, "batch", 10_000, "rows per COPY")
	if err := parseWithURL(fs, args[2:], url); err != nil {
		return err
	}
	if cfg.Rows < 0 {
		return usagef("--rows must not be negative")
	}
	cfg.Out = stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	conn, err := pgx.Connect(ctx, *url)
	if err != nil {
		return fmt.Errorf("workload github-events: %w", err)
	}
	defer conn.Close(context.Background())
	return githubevents.Init(ctx, conn, cfg)
}
