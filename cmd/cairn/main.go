// Command cairn runs a Cairn node and talks to one.
//
//	cairn start --store DIR (--certs-dir DIR | --insecure) --sql-addr HOST:PORT --rpc-addr HOST:PORT
//	            --http-addr HOST:PORT [--join ADDR,...] [--locality region=R] [--initial-password PW]
//	            [--latency-map R1:R2=RTT,...] [--lease-preferences region=R,...|spread|none]
//	cairn cert create-ca | create-node HOST... | create-client USER | list
//	cairn demo [--no-shell] [--nodes 3 --global]
//	cairn sql --url URL [-e SQL]
//	cairn version
//
// start opens (or creates) the store in DIR, bootstraps a new cluster's
// catalog when the store is empty, serves PostgreSQL clients and HTTP,
// prints a banner with its URLs, and shuts down cleanly on SIGTERM or
// SIGINT. A node is secure unless started with --insecure: it loads the
// certificates `cairn cert` made (cert.go) from --certs-dir and refuses to
// start without them, serves SQL over TLS, HTTPS and mutual TLS between
// nodes (docs/security.md); --insecure prints what it gives up
// (banner.go). On a secure node clients log in with a client certificate
// or with SCRAM-SHA-256; the superuser postgres gets its password when the
// store is bootstrapped, from --initial-password or, so that it stays out
// of the process list, the environment variable CAIRN_INITIAL_PASSWORD
// (later starts ignore both). --join lists the RPC addresses of every
// initial member of a replicated cluster, --rpc-addr among them, in the
// same order on every member (the node's ID is its position); every tablet
// is then a raft group of all members, and any member serves SQL. A node
// whose --rpc-addr is not among the --join addresses joins the running
// cluster they belong to: it gets a new node ID and the tablets'
// leaseholders add replicas on it (--replication-factor voters per
// tablet; a node silent for --dead-after has its replicas replaced).
// Without --join, start is `--join A --rpc-addr A`: a cluster of one that
// others can join later (restart it the same way, with the same
// --rpc-addr). --unreplicated is the single node without raft that no
// other can join; stores a plain start made before one-node clusters
// could grow are such, and the two kinds of store do not open as each
// other.
//
// node status lists the cluster's nodes (liveness, replicas, leaders)
// through a node's HTTP API; node decommission N moves every replica off
// node N and then marks it decommissioned. Against a secure node both log
// in as --user (default postgres; decommission needs a superuser) with
// the password from --password-file or CAIRN_PASSWORD (else PGPASSWORD).
//
// demo starts an in-memory insecure node with a few sample tables, prints
// its URL and opens the SQL shell (or, with --no-shell, serves until
// interrupted). sql is an interactive shell (shell.go: line editing and
// history through chzyer/readline on a terminal, psql-like aligned or
// expanded output, psql's \d, \dt, \l, \x, \timing, \?; Ctrl-C cancels
// the running statement) or, with -e, runs one string.
//
// The command tree, help and shell completion are spf13/cobra's
// (commands.go); each command parses its own flags with package flag.
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
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-db/cairn/security"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
)

func main() {
	mallocHugePages(os.Args)
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

// usageError is a mistake on the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// startFlags are cairn start's flags, parsed and checked.
type startFlags struct {
	cfg          server.Config
	join         string
	colocWarnStr string
	splitSizeStr string
	cacheMiB     int64
	rowCacheMiB  int64
	// sqlMemStr and tempDiskStr are --max-sql-memory and
	// --max-disk-temp-storage.
	sqlMemStr, tempDiskStr string
	// maxMemStr is --max-memory; goMemLimit is the Go runtime's soft
	// memory limit it makes (memlimit.go; 0: leave the runtime's, which
	// GOMEMLIMIT set).
	maxMemStr  string
	goMemLimit int64
	// unreplicated is --unreplicated; alone is a plain start (no --join):
	// a replicated cluster of one, Join = [--rpc-addr].
	unreplicated, alone bool
	reserved            int
	// certsDir is --certs-dir: where a secure node's certificates are
	// (loaded into cfg.Certs by cmdStart).
	certsDir string
	// storeProfile is --store-profile.
	storeProfile string
	// syncLatency is --debug-sync-latency, storeLatency
	// --debug-store-latency.
	syncLatency  time.Duration
	storeLatency string
}

// startFlagSet defines start's flags into f (the command line parses
// them; the help and shell completion list them).
func startFlagSet(f *startFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.StringVar(&f.cfg.StoreDir, "store", "", "directory of the node's store (required)")
	fs.StringVar(&f.cfg.SQLAddr, "sql-addr", "127.0.0.1:26257", "address for PostgreSQL clients")
	fs.StringVar(&f.cfg.RPCAddr, "rpc-addr", "127.0.0.1:26357", "address for other nodes (listened on with --join)")
	fs.StringVar(&f.cfg.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the admin UI (/, /api/), /health, /metrics and /debug/pprof")
	fs.StringVar(&f.join, "join", "", "RPC addresses of all initial members, this one included, in the same order on each; or of members of a running cluster to join (none: a cluster of one that others can join)")
	fs.BoolVar(&f.unreplicated, "unreplicated", false, "a single node without raft that no other node can join (stores made by a plain start before one-node clusters could grow)")
	fs.IntVar(&f.cfg.ReplicationFactor, "replication-factor", 3, "voters per tablet once that many nodes are live (replicated clusters)")
	fs.DurationVar(&f.cfg.DeadAfter, "dead-after", 60*time.Second, "time without a heartbeat after which a node is dead and its replicas are replaced")
	fs.StringVar(&f.storeProfile, "store-profile", storage.ProfileAuto, "the kind of device the store is on, which the planner prices reads by: ssd, hdd, object-store, or auto (hdd when the store's disk is rotational on Linux, else ssd); the storage.profile setting overrides it per session")
	fs.StringVar(&f.cfg.Locality, "locality", "", "key=value[,key=value...], e.g. region=us-east1")
	fs.StringVar(&f.colocWarnStr, "colocation-warn-size", "1GiB", "size past which a colocation tablet logs a warning and the admin UI flags it (e.g. 512MiB; 0: never)")
	fs.StringVar(&f.cfg.LatencyMap, "latency-map", "", "simulated round-trip times between regions, e.g. us-west:us-east=60ms,us-east:eu=86ms (needs --join)")
	fs.StringVar(&f.cfg.LeasePreferences, "lease-preferences", "", "where tablet leases go: region=NAME[,region=NAME...] in order of preference (balanced by count within it), spread (balanced by count over the nodes: the default) or none (where elections put them); needs --join")
	fs.BoolVar(&f.cfg.Insecure, "insecure", false, "run without TLS or authentication, for development: any client logs in as any role without a password, and anyone who can reach --rpc-addr can join and read everything")
	fs.StringVar(&f.certsDir, "certs-dir", defaultCertsDir(), "directory of the node's certificates: ca.crt, node.crt, node.key (cairn cert); needed unless --insecure")
	fs.BoolVar(&f.cfg.AcceptSQLWithoutTLS, "accept-sql-without-tls", false, "let SQL clients from other hosts log in with a password but without TLS (loopback clients always may)")
	fs.IntVar(&f.cfg.MaxConnections, "max-connections", 100, "maximum concurrent SQL sessions (max_connections)")
	fs.IntVar(&f.reserved, "superuser-reserved-connections", 3, "of --max-connections, slots only superusers may use (superuser_reserved_connections)")
	fs.IntVar(&f.cfg.MaxStartupConnections, "max-startup-connections", 0, "maximum connections still authenticating; the oldest is closed to make room for a new one (0: twice --max-connections)")
	fs.DurationVar(&f.cfg.AuthTimeout, "authentication-timeout", 10*time.Second, "time a connection has to finish authenticating (authentication_timeout)")
	fs.StringVar(&f.cfg.InitialPassword, "initial-password", "", "password of the superuser postgres at bootstrap (or CAIRN_INITIAL_PASSWORD)")
	// 256 MiB: pgbench's scale 10 (1M accounts, ~130 MB of blocks once
	// decompressed) missed a 64 MiB cache on most point reads, and
	// reading, decompressing and caching blocks again took a sixth of the
	// CPU of select-only. The cache only takes memory as it fills.
	fs.Int64Var(&f.cacheMiB, "cache-mib", 256, "block cache size in MiB")
	fs.Int64Var(&f.rowCacheMiB, "row-cache-mib", -1, "row cache size in MiB: rows read by primary key, answered again without a seek while nothing writes them (0: off; -1, the default: 256, or a 32nd of the Go memory limit when that is less)")
	fs.StringVar(&f.splitSizeStr, "tablet-split-size", "512MiB", "data size past which a tablet splits (e.g. 1GiB; 0: never by size)")
	fs.StringVar(&f.sqlMemStr, "max-sql-memory", "25%", "memory all SQL statements' operators may hold, as a size (e.g. 4GiB) or a percentage of RAM; past it a statement fails with 53200")
	fs.StringVar(&f.maxMemStr, "max-memory", defaultMaxMemory, "memory the node should stay within, as a size (e.g. 8GiB) or a percentage of RAM: the Go runtime's soft limit is this less the block cache and memtables (C memory), so garbage is collected harder as the node nears it (docs/architecture.md, \"Node memory\"); GOMEMLIMIT, when set, wins unless this flag is given")
	fs.StringVar(&f.tempDiskStr, "max-disk-temp-storage", "32GiB", "disk the temporary files of spilling SQL operators may use (under the store's cairn-temp directory)")
	fs.DurationVar(&f.cfg.GCTTL, "gc-ttl", 4*time.Hour, "how long old row versions stay readable where no zone sets gc.ttlseconds (the GC queue removes them after)")
	fs.Float64Var(&f.cfg.TabletSplitQPS, "tablet-split-qps", 2500, "batches per second (over 10s) past which a tablet splits by load (0: never by load; 2500 is store.DefaultSplitQPS)")
	fs.DurationVar(&f.cfg.DiskStallFence, "disk-stall-fence", 10*time.Second, "how long one write or sync of the store may hang before the node stops itself, so that its leases move to healthy nodes (negative: never)")
	fs.DurationVar(&f.syncLatency, "debug-sync-latency", 0, "add this much to every sync of the store's files (storage/simfs), so that benchmarks on loopback pay a disk's write latency (bench/hashshard); never in production")
	fs.StringVar(&f.storeLatency, "debug-store-latency", "", "make the store's disk read like an hdd (0.2 ms per read and 150 MiB/s, 10 ms more per seek, short forward gaps at 150 MiB/s) or an object-store (read in 1 MiB chunks: 20 ms per request, 100 MiB/s) (storage/simfs), and count reads, bytes and seeks in /metrics, so that benchmarks on a fast disk show random reads; never in production")
	fs.BoolVar(&f.cfg.FaultInjection, "debug-fault-injection", false, "serve /debug/faults (partitions, clock offsets, lease transfers, splits) for the chaos tests (test/chaos); never in production")
	return fs
}

func parseStart(args []string, stderr io.Writer) (startFlags, error) {
	var f startFlags
	fs := startFlagSet(&f)
	fs.SetOutput(stderr)
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
	if f.cfg.MaxConnections < 1 {
		return f, usagef("--max-connections must be at least 1")
	}
	if f.reserved < 0 || f.reserved >= f.cfg.MaxConnections {
		return f, usagef("--superuser-reserved-connections must be at least 0 and less than --max-connections")
	}
	if f.cfg.SuperuserReservedConnections = f.reserved; f.reserved == 0 {
		f.cfg.SuperuserReservedConnections = -1 // 0 in Config is the default
	}
	if f.cfg.MaxStartupConnections < 0 || f.cfg.AuthTimeout <= 0 {
		return f, usagef("--max-startup-connections must not be negative and --authentication-timeout must be positive")
	}
	n, err := server.ParseByteSize(f.colocWarnStr)
	if err != nil {
		return f, usagef("--colocation-warn-size: %v", err)
	}
	if f.cfg.ColocationWarnSize = n; n == 0 {
		f.cfg.ColocationWarnSize = -1 // 0 in Config is the default
	}
	if f.cfg.TabletSplitSize, err = server.ParseByteSize(f.splitSizeStr); err != nil {
		return f, usagef("--tablet-split-size: %v", err)
	}
	if f.cfg.TabletSplitSize == 0 {
		f.cfg.TabletSplitSize = -1 // 0 in Config is the default
	}
	if f.cfg.TabletSplitQPS < 0 {
		return f, usagef("--tablet-split-qps %v: want 0 (never) or more", f.cfg.TabletSplitQPS)
	}
	if f.cfg.TabletSplitQPS == 0 {
		f.cfg.TabletSplitQPS = -1
	}
	if f.cfg.StoreProfile, err = storage.ParseProfile(f.storeProfile); err != nil {
		return f, usagef("--store-profile: %v", err)
	}
	if f.syncLatency < 0 {
		return f, usagef("--debug-sync-latency %v: want 0 or more", f.syncLatency)
	}
	if f.syncLatency > 0 || f.storeLatency != "" {
		// Reads priced as the profile says, syncs as --debug-sync-latency
		// says (a profile's own sync latency would slow every commit of a
		// benchmark's load).
		p := simfs.Profile{Name: "debug-sync-latency"}
		if f.storeLatency != "" {
			if f.storeLatency != storage.ProfileHDD && f.storeLatency != storage.ProfileObjectStore {
				return f, usagef("--debug-store-latency %q: want hdd or object-store", f.storeLatency)
			}
			if p, err = simfs.Named(f.storeLatency); err != nil {
				return f, usagef("--debug-store-latency: %v", err)
			}
		}
		p.SyncLatency = f.syncLatency
		f.cfg.FS = simfs.New(vfs.Default, simfs.Options{Profile: p})
	}
	if f.cacheMiB < 1 || f.cacheMiB > 1<<20 {
		return f, usagef("--cache-mib %d: want 1 to %d", f.cacheMiB, 1<<20)
	}
	f.cfg.CacheSize = f.cacheMiB << 20
	if f.rowCacheMiB < -1 || f.rowCacheMiB > 1<<20 {
		return f, usagef("--row-cache-mib %d: want 0 to %d, or -1 for the default", f.rowCacheMiB, 1<<20)
	}
	if f.cfg.MaxSQLMemory, err = parseMemoryFlag(f.sqlMemStr); err != nil {
		return f, usagef("--max-sql-memory: %v", err)
	}
	if f.cfg.MaxDiskTempStorage, err = parseMemoryFlag(f.tempDiskStr); err != nil {
		return f, usagef("--max-disk-temp-storage: %v", err)
	}
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "max-memory" })
	if f.goMemLimit, err = goMemoryLimit(f.maxMemStr, given, os.Getenv("GOMEMLIMIT"), f.cfg.CacheSize); err != nil {
		return f, usagef("--max-memory: %v", err)
	}
	switch {
	case f.rowCacheMiB == 0:
		f.cfg.RowCacheSize = -1 // off
	case f.rowCacheMiB > 0:
		f.cfg.RowCacheSize = f.rowCacheMiB << 20
	default:
		limit := f.goMemLimit
		if limit <= 0 {
			limit = debug.SetMemoryLimit(-1) // GOMEMLIMIT's, or none
		}
		f.cfg.RowCacheSize = defaultRowCache(limit)
	}
	switch {
	case f.unreplicated && f.join != "":
		return f, usagef("--unreplicated and --join exclude each other: an unreplicated node cannot be part of a cluster")
	case f.join != "":
		// With --rpc-addr among them: the initial members; without: the
		// members of a running cluster this node joins (server/cluster.go).
		f.cfg.Join = strings.Split(f.join, ",")
	case !f.unreplicated:
		// A plain start: the first node of a cluster others may join, as
		// `--join A --rpc-addr A` (CockroachDB's start-single-node).
		// Its --rpc-addr is what the others will dial, so it must name
		// this host.
		f.alone = true
		if host, _, err := net.SplitHostPort(f.cfg.RPCAddr); err == nil && unspecifiedHost(host) {
			return f, usagef("--rpc-addr %s: other nodes will join this one at its --rpc-addr, so it needs this host's address, not %q (or give --unreplicated)", f.cfg.RPCAddr, host)
		}
		f.cfg.Join = []string{f.cfg.RPCAddr}
	}
	if f.cfg.ReplicationFactor < 1 {
		return f, usagef("--replication-factor must be at least 1, not %d", f.cfg.ReplicationFactor)
	}
	if f.cfg.DeadAfter < time.Second {
		return f, usagef("--dead-after must be at least 1s, not %s", f.cfg.DeadAfter)
	}
	if err := checkStartFlags(&f); err != nil {
		return f, err
	}
	if f.cfg.Insecure {
		explicit := false
		fs.Visit(func(fl *flag.Flag) {
			explicit = explicit || fl.Name == "certs-dir" || fl.Name == "accept-sql-without-tls"
		})
		if explicit {
			return f, usagef("--insecure excludes --certs-dir and --accept-sql-without-tls: an insecure node has no TLS")
		}
		f.certsDir = ""
	}
	if f.cfg.InitialPassword == "" {
		f.cfg.InitialPassword = os.Getenv("CAIRN_INITIAL_PASSWORD")
	}
	return f, nil
}

func cmdStart(args []string, stdout, stderr io.Writer) error {
	f, err := parseStart(args, stderr)
	if err != nil {
		return err
	}
	if f.cfg.Insecure {
		fmt.Fprint(stderr, insecureWarning(f.cfg))
	} else if f.cfg.Certs, err = security.Load(f.certsDir); err != nil {
		return fmt.Errorf("cannot load certificates: %w\n"+
			"A node is secure unless started with --insecure: create a CA and this node's certificate with `cairn cert` (docs/security.md) in --certs-dir (now %s), or start with --insecure for development", err, f.certsDir)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	f.cfg.Logger = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if f.alone {
		// Listen first, so that --rpc-addr HOST:0 names the port chosen
		// (the one the others will dial).
		ln, err := net.Listen("tcp", f.cfg.RPCAddr)
		if err != nil {
			return fmt.Errorf("listening for other nodes on %s: %w", f.cfg.RPCAddr, err)
		}
		f.cfg.RPCListener, f.cfg.RPCAddr = ln, ln.Addr().String()
		f.cfg.Join = []string{f.cfg.RPCAddr}
		log.Info("cairn: no --join: starting as a cluster of one that other nodes can join with --join " + f.cfg.RPCAddr)
	}
	if f.goMemLimit > 0 {
		debug.SetMemoryLimit(f.goMemLimit)
		log.Info("cairn: Go memory limit set from --max-memory", "max_memory", f.maxMemStr, "go_limit_mib", f.goMemLimit>>20)
	}
	srv, err := server.Start(ctx, f.cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, startBanner(srv, f))
	var failed error
	select {
	case <-ctx.Done():
		log.Info("cairn: shutting down")
	case failed = <-srv.Failed():
		// Exit non-zero so that a supervisor restarts the node (on a
		// healthy disk); acknowledged writes are durable, nothing else
		// is served meanwhile.
		log.Error("cairn: the node cannot go on; stopping", "err", failed)
		if errors.Is(failed, server.ErrDiskStalled) {
			// A graceful stop would wait on the stalled disk: leave
			// now, so that the leases expire and the cluster goes on.
			return fmt.Errorf("the node stopped: %w", failed)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Stop(sctx); failed == nil {
		return err
	}
	return fmt.Errorf("the node stopped: %w", failed)
}
