// Package diskbench runs one Cairn node on a simulated disk for the read
// planning benchmarks (bench/readplan, bench/joinchoice): a store in a
// directory, opened through storage/simfs so that the disk can play an
// HDD or an object store while the tables load at full speed, restarted
// between timed queries so that every one starts with a cold block cache.
//
// It owns only that harness; what it measures is each program's.
package diskbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cairn-db/cairn/test/proc"
)

// Node is a node on a simulated disk and a connection to it.
type Node struct {
	Disk *simfs.FS
	Conn *pgx.Conn
	s    *server.Server
	cfg  server.Config
}

// Start opens a node whose store is dir, on a disk with no latency, with a
// block cache of cacheMiB (small, so that tables do not fit in it).
func Start(ctx context.Context, dir string, cacheMiB int64) (*Node, error) {
	n := &Node{Disk: simfs.New(vfs.Default, simfs.Options{Profile: simfs.Memory})}
	// No GC loop: its first pass after each restart read every tablet
	// whole and left the tables in the block cache, so the timed
	// queries read warm blocks (seen by tracing the disk's reads to
	// store.GCPass; bench/README.md).
	n.cfg = server.Config{StoreDir: dir, FS: n.Disk, Insecure: true, CacheSize: cacheMiB << 20,
		StoreProfile: "ssd", NoGCLoop: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return n, n.start(ctx)
}

func (n *Node) start(ctx context.Context) error {
	if os.Getenv("CAIRN_TEST_PORTS") != "" {
		// Engineers sharing a machine each keep to their port range
		// (test/proc); without it the kernel picks free ports.
		addrs, err := proc.FreeAddrs(2)
		if err != nil {
			return fmt.Errorf("ports from CAIRN_TEST_PORTS: %w", err)
		}
		n.cfg.SQLAddr, n.cfg.HTTPAddr = addrs[0], addrs[1]
	}
	s, err := server.Start(ctx, n.cfg)
	if err != nil {
		return err
	}
	n.s = s
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		_ = s.Stop(ctx)
		return err
	}
	n.Conn = c
	return nil
}

// Restart stops and starts the node on the same store, which empties the
// block cache (and nothing fills it again before the timed query: the
// node runs no GC loop, see Start).
func (n *Node) Restart(ctx context.Context) error {
	n.Conn.Close(ctx)
	if err := n.s.Stop(ctx); err != nil {
		return err
	}
	return n.start(ctx)
}

// Stop stops the node.
func (n *Node) Stop(ctx context.Context) error {
	n.Conn.Close(ctx)
	return n.s.Stop(ctx)
}

// Compact writes what was loaded into sorted files on disk.
func (n *Node) Compact(ctx context.Context) error { return n.s.CompactStore(ctx) }

// Exec runs statements, failing on the first error.
func (n *Node) Exec(ctx context.Context, sqls ...string) error {
	for _, q := range sqls {
		if _, err := n.Conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// Explain returns the plan of q.
func (n *Node) Explain(ctx context.Context, q string) (string, error) {
	rows, err := n.Conn.Query(ctx, "EXPLAIN "+q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// Result is one timed query: its wall time, the disk's counters over it,
// and the first column of its one row (checked equal across variants).
type Result struct {
	Wall   time.Duration
	Disk   simfs.Stats
	Answer string
}

// Time restarts the node (a cold block cache) with --store-profile of
// the disk's profile (its read-ahead, its sessions' default costs; setup
// may SET storage.profile otherwise), runs setup, switches the disk to
// profile and times q, whose one row it returns as text.
func (n *Node) Time(ctx context.Context, profile simfs.Profile, setup []string, q string) (Result, error) {
	n.cfg.StoreProfile = "ssd"
	if _, err := storage.ParseProfile(profile.Name); err == nil {
		n.cfg.StoreProfile = profile.Name
	}
	if err := n.Restart(ctx); err != nil {
		return Result{}, err
	}
	if err := n.Exec(ctx, setup...); err != nil {
		return Result{}, err
	}
	n.Disk.SetProfile(profile)
	defer n.Disk.SetProfile(simfs.Memory)
	before := n.Disk.Stats()
	start := time.Now()
	var vals []any
	rows, err := n.Conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		for rows.Next() {
			vals, err = rows.Values()
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	wall := time.Since(start)
	after := n.Disk.Stats()
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", q, err)
	}
	d := simfs.Stats{Reads: after.Reads - before.Reads, ReadBytes: after.ReadBytes - before.ReadBytes,
		Seeks: after.Seeks - before.Seeks, Skips: after.Skips - before.Skips, Requests: after.Requests - before.Requests,
		Charged: after.Charged - before.Charged}
	return Result{Wall: wall, Disk: d, Answer: fmt.Sprint(vals...)}, nil
}

// Median is the run of median wall time.
func Median(rs []Result) Result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b Result) int { return int(a.Wall - b.Wall) })
	return s[len(s)/2]
}

// Load is the 1-minute load average (/proc/loadavg).
func Load() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// CheckLoad refuses to benchmark on a machine busier than max (the
// project's rule: benchmarks run below a load of 4) unless force.
func CheckLoad(max float64, force bool) error {
	if l := Load(); l >= max && !force {
		return fmt.Errorf("load average %.1f is not below %.1f: the figures would measure the other processes (-force to run anyway)", l, max)
	}
	return nil
}

// Setup is both programs' start: the load check, a store directory (dir,
// or a temporary one that done removes), a node on it, and the tables
// they read, loaded and compacted into sorted files:
//
//	t (k INT8 PRIMARY KEY, v INT8, pad TEXT): rows rows, k = 1..rows
//	p (id INT8 PRIMARY KEY, k INT8): lookups rows, k a permutation of t's
//	  keys (Spread) in no order a disk could read ahead
//
// done stops the node and removes a temporary directory.
func Setup(ctx context.Context, name, dir string, cacheMiB int64, rows, lookups int, maxLoad float64, force bool) (n *Node, done func(), err error) {
	if err := CheckLoad(maxLoad, force); err != nil {
		return nil, nil, err
	}
	cleanup := func() {}
	if dir == "" {
		d, err := os.MkdirTemp("", name)
		if err != nil {
			return nil, nil, err
		}
		dir, cleanup = d, func() { os.RemoveAll(d) }
	}
	if n, err = Start(ctx, dir, cacheMiB); err != nil {
		cleanup()
		return nil, nil, err
	}
	done = func() { _ = n.Stop(ctx); cleanup() }
	// Each table created and loaded in one transaction: the bulk path;
	// no automatic ANALYZE racing the one below.
	if err := n.Exec(ctx, "SET sql.stats.automatic_collection.enabled = off",
		"BEGIN", "CREATE TABLE t (k INT8 PRIMARY KEY, v INT8, pad TEXT)",
		fmt.Sprintf("INSERT INTO t SELECT g, g %% 1000, repeat('x', 40) FROM generate_series(1, %d) g", rows), "COMMIT",
		"BEGIN", "CREATE TABLE p (id INT8 PRIMARY KEY, k INT8)",
		fmt.Sprintf("INSERT INTO p SELECT g, (g::int8 * %d) %% %d + 1 FROM generate_series(1, %d) g", Spread(rows), rows, lookups), "COMMIT"); err != nil {
		done()
		return nil, nil, err
	}
	if err := n.Compact(ctx); err != nil {
		done()
		return nil, nil, err
	}
	// After the compaction, so that the statistics see the tables' files
	// as the timed queries will (their size on disk, stats.Table.DiskBytes).
	if err := n.Exec(ctx, "ANALYZE t", "ANALYZE p"); err != nil {
		done()
		return nil, nil, err
	}
	return n, done, nil
}

// Spread is a multiplier m for which g ↦ g·m mod n is a permutation of
// 0..n-1 that scatters consecutive g over the range (m near n/φ, prime to
// n): probe keys in no order a disk could read ahead, unlike a small prime
// multiplier, whose images of consecutive g ascend in runs of n/m.
func Spread(n int) int {
	gcd := func(a, b int) int {
		for b != 0 {
			a, b = b, a%b
		}
		return a
	}
	m := max(int(float64(n)*0.6180339887), 1)
	for gcd(m, n) != 1 {
		m--
	}
	return m
}
