// Package server runs one Cairn node: it opens the storage engine, the
// store and the KV client, bootstraps the SQL catalog on an empty store,
// and serves PostgreSQL clients (pgwire over sql/session) and HTTP
// (/health, /metrics, /debug/pprof, and the admin UI and its JSON API:
// admin*.go, ui/).
//
// It owns the wiring of a node's parts and their start and stop order; it
// must not hold SQL or KV logic of its own. cmd/cairn calls Start; tests
// do too (an in-memory node on 127.0.0.1:0).
//
// A node without Join is a whole cluster of one, unreplicated, and does
// not listen on RPCAddr (`cairn start --unreplicated`, tests, demo). With
// Join it is one of a fixed set of initial members replicating every
// tablet through raft (cluster.go), or joins such a cluster; any member
// serves SQL. A plain `cairn start` is Join = [RPCAddr]: a replicated
// cluster of one that others can join. Neither kind of store opens as
// the other (refuseUnreplicatedStore, refuseReplicatedStore).
//
// With Config.Certs the node is secure (tls.go): mutual TLS to other
// nodes, TLS on the SQL port, HTTPS on the HTTP port.
//
// Every node's clock keeps a persisted upper bound on its store
// (clockbound.go), attached before anything reads the clock for a
// timestamp, so that a restarted node never hands out a timestamp at or
// below one it handed out before, however far its physical clock went
// back; a member whose clock is more than the maximum offset behind that
// bound waits before it serves.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	// The TimeZone setting needs the IANA database even on hosts without
	// one (minimal containers).
	_ "time/tzdata"

	"github.com/cairn-db/cairn/clockmon"
	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/membership"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/security"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/ddl"
	"github.com/cairn-db/cairn/sql/distsql"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/session"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/storage/simfs"
	"github.com/cairn-db/cairn/store"
	"github.com/cairn-db/cairn/tablet"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Config configures a node.
type Config struct {
	// StoreDir holds the engine; "" runs in memory (nothing survives Stop).
	StoreDir string
	// SQLAddr and HTTPAddr are listen addresses; "" means 127.0.0.1:0 (a
	// free port, see Addr and HTTPAddr).
	SQLAddr  string
	HTTPAddr string
	// RPCAddr is where other nodes reach this one. A node without Join
	// does not listen on it (a cluster of one needs no RPC).
	RPCAddr string
	// Join lists the RPC addresses of every initial member of a
	// replicated cluster, RPCAddr among them, in the same order on every
	// member (cluster.go). Empty: a single unreplicated node.
	Join []string
	// RPCListener, when set with Join, is used instead of listening on
	// RPCAddr (tests pick free ports this way).
	RPCListener net.Listener
	// CatalogLeaseDuration is how long a catalog generation lease lasts
	// on a replicated node (0: catalog.DefaultLeaseDuration): how long a
	// DDL waits for a node it cannot reach.
	CatalogLeaseDuration time.Duration
	// BinaryVersion and MinSupportedVersion stand in for this build's
	// versions (package clusterversion); zero means the build's own.
	// Tests set them to play a node of an older or a newer build.
	BinaryVersion, MinSupportedVersion clusterversion.Version
	// Insecure lets any existing role with LOGIN connect without a
	// password. Otherwise clients authenticate with SCRAM-SHA-256 (or a
	// client certificate, with Certs).
	Insecure bool
	// Certs, when set, make the node secure (tls.go): mutual TLS between
	// nodes, TLS on the SQL port, HTTPS on the admin port. A node with
	// Certs may bootstrap without InitialPassword (the superuser then logs
	// in with a client certificate). Excludes Insecure.
	Certs *security.Certs
	// AcceptSQLWithoutTLS lets SQL clients from other hosts log in without
	// TLS on a node with Certs (CockroachDB's --accept-sql-without-tls);
	// by default only loopback clients may.
	AcceptSQLWithoutTLS bool
	// MaxConnections bounds the node's SQL sessions (max_connections;
	// zero: pgwire.DefaultMaxConnections, 100), of which
	// SuperuserReservedConnections (zero: 3; negative: none) are kept for
	// superusers. MaxStartupConnections bounds the connections still
	// authenticating (zero: twice MaxConnections; the oldest is closed to
	// make room) and AuthTimeout the time each may take (zero: 10 s).
	MaxConnections               int
	SuperuserReservedConnections int
	MaxStartupConnections        int
	AuthTimeout                  time.Duration
	// StatsRefreshDelay is how long a table that went stale waits for
	// its automatic statistics collection (0: stats.DefaultDelay, a
	// minute; tests that watch the collection shorten it).
	StatsRefreshDelay time.Duration
	// StoreProfile is the kind of device the store is on (storage.Profiles,
	// or storage.ProfileAuto; "" is auto): the planner's cost model for
	// every session (the storage.profile setting's default), shown by the
	// admin UI and cairn node status. Start resolves auto from the
	// device's rotational flag (storage.DetectProfile).
	StoreProfile string
	// Locality is key=value[,key=value...] (region=us-east1), recorded for
	// placement decisions of the cluster issue.
	Locality string
	// LatencyMap is simulated geography (rpc.ParseLatencyMap's form,
	// `us-west:us-east=60ms,...`): messages between members of different
	// regions are delayed by half the round-trip time. Needs Join.
	LatencyMap string
	// LeasePreferences places tablet leaders (store.ParseLeasePreferences:
	// `region=us-west[,...]` in order of preference, `spread` or empty:
	// balanced by count over the nodes, `none`: where elections put
	// them). Needs Join.
	LeasePreferences string
	// InitialPassword is the password of the superuser postgres, set when
	// the node bootstraps an empty store (ignored afterwards). A secure
	// node cannot bootstrap without one: nobody could log in.
	InitialPassword string
	// Logger receives the node's logs; nil means slog.Default().
	Logger *slog.Logger
	// DB tunes the KV client (zero: defaults).
	DB kv.Options
	// ReplicationFactor is the number of voters a tablet of a replicated
	// cluster aims for (0: 3; package membership).
	ReplicationFactor int
	// DeadAfter is how long after its last heartbeat a node is dead and
	// its replicas replaced (0: 60s).
	DeadAfter time.Duration
	// LivenessTTL (how long a heartbeat keeps a node live; 0: 9s, at
	// most half of DeadAfter) and ReplicateInterval (how often the
	// replicate queue runs; 0: 1s) are for tests.
	LivenessTTL, ReplicateInterval time.Duration
	// ZoneRefreshInterval is how often a clustered node rereads the zone
	// records (0: zoneRefresh, a second); tests that run the readers
	// beside DDL shorten it.
	ZoneRefreshInterval time.Duration
	// ColocationWarnSize is the size in bytes past which a colocation
	// tablet logs a warning (once per crossing) and the admin UI flags it:
	// 0 means DefaultColocationWarnSize, negative never warns.
	ColocationWarnSize int64
	// TabletSplitSize and TabletSplitQPS are the split queue's thresholds
	// (store.Config.SplitSize, SplitQPS; splits.go): 0 means the default
	// (512 MiB; 2500 batches/s), negative never.
	TabletSplitSize int64
	TabletSplitQPS  float64
	// GCTTL is how long old versions stay readable where no zone sets
	// gc.ttlseconds (gc.go; 0: store.DefaultGCTTL, 4 hours).
	GCTTL time.Duration
	// NoGCLoop, for benchmarks of cold reads only, runs no background GC
	// loop: its first pass after a start scans every tablet the node
	// leads whole (the GC queue's state is in memory), which fills the
	// block cache with the tables a cold-read benchmark means to read
	// from the disk (bench/internal/diskbench). VACUUM still collects.
	NoGCLoop bool
	// CacheSize is the engine's block cache in bytes; 0 means the
	// storage package's default (64 MiB). cairn start sets 256 MiB.
	CacheSize int64
	// RowCacheSize bounds the store's row cache in bytes
	// (store.Config.RowCacheBytes): 0 is the default, negative is off.
	RowCacheSize int64
	// FS, when set, is the filesystem the store is opened on (tests
	// inject disk faults through storage/simfs); nil: the OS's, or
	// memory for an empty StoreDir.
	FS vfs.FS
	// MaxSQLMemory bounds the memory all statements' operators hold
	// (0: a quarter of RAM; negative: unlimited), and MaxDiskTempStorage
	// the temporary files they spill to past work_mem (0: 32 GiB;
	// negative: unlimited). See sqlmem.go.
	MaxSQLMemory, MaxDiskTempStorage int64
	// FaultInjection serves /debug/faults (debug_faults.go): partitions
	// from chosen peers, a clock offset, lease transfers and splits on
	// demand, for the chaos harness (test/chaos). Never in production.
	FaultInjection bool
	// DiskStallFence is how long one write or sync of the store may hang
	// before the node fences itself: it stops at once, without a graceful
	// stop that would wait on the same disk (ErrDiskStalled), so its
	// leases expire and the other replicas take over. 0: 10 s; negative:
	// never.
	DiskStallFence time.Duration
}

// ErrDiskStalled is the failure of a node whose disk stopped answering
// for longer than Config.DiskStallFence.
var ErrDiskStalled = errors.New("the store's disk stalled")

// defaultDiskStallFence is Config.DiskStallFence's default: well beyond a
// slow fsync on a loaded disk, well within what clients wait.
const defaultDiskStallFence = 10 * time.Second

// Server is a running node.
type Server struct {
	cfg Config
	// version is the node's view of the versions (its binary's, the
	// cluster's).
	version *clusterversion.Handle
	// lastOrphanCheck is when the node last looked for orphaned index
	// builds (indexjobs.go); only the GC loop touches it.
	lastOrphanCheck time.Time
	// orphanJobs lists the jobs for that look, reading from the oldest
	// that may be running on rather than every job ever made.
	orphanJobs jobs.Unfinished
	log        *slog.Logger
	started    time.Time
	// tempCleanup removes the temporary directory of a node without a
	// store dir (sqlmem.go).
	tempCleanup func()
	// sqlMem and tempStorage are the node's SQL memory budget and
	// temporary storage (an adopted index build's sort uses them).
	sqlMem      *mon.Budget
	tempStorage *rowcontainer.TempStorage

	eng *storage.Engine
	// simfs is the store's simulated filesystem: under fault injection,
	// or given as Config.FS (--debug-store-latency); nil otherwise.
	simfs   *simfs.FS
	clock   *hlc.Clock
	store   *store.Store
	repl    *replication
	gc      gcState
	db      *kv.DB
	backend *session.Backend
	// catalogMu orders the backend's creation against a join admitted
	// meanwhile; catalogShared: the node admitted another, so it is no
	// longer its cluster's only SQL gateway (catalogwriter.go).
	catalogMu     sync.Mutex
	catalogShared bool
	pg            *pgwire.Server
	// obs holds the node's histograms and /metrics registry (metrics.go).
	obs *nodeMetrics
	// rpcCreds are the node's RPC transport credentials (tls.go; nil:
	// plaintext).
	rpcCreds *rpc.Creds
	sqlLn    net.Listener
	httpLn   net.Listener
	http     *http.Server

	admin adminState
	// tabletStatsCache holds the tablets' live and total bytes
	// (tabletstats.go).
	tabletStatsCache tabletStatsCache

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error

	// failed receives the error that stopped the node's replication (its
	// engine failed); see Failed.
	failed   chan error
	failOnce sync.Once
}

// Failed yields (to cmd/cairn, which then exits non-zero) the error that made the
// node unable to go on (a failed engine under the raft scheduler), after
// which the node serves nothing and should be stopped and restarted on a
// healthy disk.
func (s *Server) Failed() <-chan error { return s.failed }

func (s *Server) fail(err error) {
	s.failOnce.Do(func() { s.failed <- err })
}

// Start opens the node's storage, bootstraps the catalog if the store is
// empty, and starts serving SQL and HTTP. It logs "cairn node ready:
// sql=HOST:PORT http=HOST:PORT" once clients can connect.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := validate(cfg); err != nil {
		return nil, err
	}
	if cfg.ColocationWarnSize == 0 {
		cfg.ColocationWarnSize = DefaultColocationWarnSize
	}
	profileWhy := "given by --store-profile"
	if cfg.StoreProfile == "" || cfg.StoreProfile == storage.ProfileAuto {
		cfg.StoreProfile, profileWhy = storage.DetectProfile(cfg.StoreDir)
	}
	s := &Server{cfg: cfg, log: log, started: time.Now(), failed: make(chan error, 1), obs: newNodeMetrics(),
		version: clusterversion.NewHandle(cfg.BinaryVersion, cfg.MinSupportedVersion)}
	s.admin.warnSize.Store(cfg.ColocationWarnSize)
	defer func() {
		if err != nil {
			s.closeStorage()
		}
	}()

	// A single node has no clock offset to bound; members of a cluster
	// do.
	maxOffset := time.Duration(0)
	if len(cfg.Join) > 0 {
		maxOffset = clusterMaxOffset
	}
	clock := hlc.NewClock(hlc.UnixNano, maxOffset)
	s.clock = clock
	fs := cfg.FS
	if fs == nil && cfg.StoreDir == "" {
		fs = vfs.NewMem()
	}
	onFatal := func(err error) {
		log.Error("cairn: the storage engine failed; the node stops serving and must be restarted on a healthy disk", "err", err)
		s.fail(err)
	}
	if sfs, ok := fs.(*simfs.FS); ok {
		// A simulated disk given (cairn start --debug-store-latency,
		// --debug-sync-latency): /metrics shows its counters and
		// /debug/faults/disk may slow or stall it.
		s.simfs = sfs
	} else if cfg.FaultInjection && fs == nil {
		// /debug/faults/disk slows or stalls this disk.
		// Over the OS's files as storage.Open would use them, WAL
		// syncs waiting in the poller included.
		s.simfs = simfs.New(storage.NewPollSyncFS(vfs.Default), simfs.Options{})
		fs = s.simfs
	}
	fence := cfg.DiskStallFence
	if fence == 0 {
		fence = defaultDiskStallFence
	}
	// The watcher reports an operation in flight past a second (or the
	// fence, if shorter) on each of its ticks: slow ones are logged, so
	// that a stretch with no commit can be laid at a slow disk's door;
	// one past the fence, reported on two ticks, fences the node
	// (stallJudge).
	judge := newStallJudge(fence, nil)
	onStall := func(info vfs.DiskSlowInfo) {
		if !judge.report(info) {
			log.Warn("cairn: the store's disk is slow", "op", info.String())
			return
		}
		log.Error("cairn: the store's disk stalled; the node fences itself and stops", "op", info.String(), "fence", fence)
		s.fail(fmt.Errorf("%w: %s", ErrDiskStalled, info))
	}
	if fence < 0 {
		onStall = nil
	}
	s.initTLS()
	// A store on disk, or on a simulated one, reads SSTs ahead in
	// windows its profile sizes (storage/readahead.go); one in memory
	// has nothing to gain.
	readAhead := int64(0)
	if _, sim := fs.(*simfs.FS); cfg.StoreDir != "" || sim {
		readAhead = storage.ReadAheadFor(cfg.StoreProfile)
	}
	// A store on disk writes its WAL files with zeros before using them,
	// so that a synced commit overwrites (storage/walfill.go).
	walFill := int64(0)
	if cfg.StoreDir != "" {
		walFill = storage.WALFillFor()
	}
	if s.eng, err = storage.Open(cfg.StoreDir, storage.Options{FS: fs, CacheSize: cfg.CacheSize, OnFatal: onFatal,
		DiskStallThreshold: min(time.Second, fence), OnDiskStall: onStall, ReadAhead: readAhead, WALFill: walFill}); err != nil {
		return nil, fmt.Errorf("opening the store in %q: %w", cfg.StoreDir, err)
	}
	// No timestamp this incarnation hands out may be at or below one an
	// earlier incarnation handed out, even when the physical clock went
	// back across the restart: a read at such a timestamp would miss
	// acknowledged writes (hlc invariant 4).
	if err := restoreClockBound(ctx, clock, engineClockBound{s.eng}, log); err != nil {
		return nil, err
	}
	if len(cfg.Join) > 0 {
		ln := cfg.RPCListener
		if ln == nil {
			if ln, err = net.Listen("tcp", cfg.RPCAddr); err != nil {
				return nil, fmt.Errorf("listening for other nodes on %s: %w", cfg.RPCAddr, err)
			}
		}
		if err := s.startReplicated(ctx, clock, ln); err != nil {
			ln.Close()
			return nil, err
		}
	} else {
		if err := refuseReplicatedStore(s.eng); err != nil {
			return nil, err
		}
		// A cluster of one runs at its binary's version: no other node
		// can be too old for what it writes.
		s.version.SetActive(s.version.Binary())
		if s.store, err = store.Open(ctx, s.eng, clock, s.gcConfig(s.splitConfig(store.Config{Observe: s.obs.tabletObservers(), Version: s.version, RowCacheBytes: cfg.RowCacheSize}))); err != nil {
			return nil, fmt.Errorf("opening tablets: %w", err)
		}
		s.db = kv.NewDB(s.obs.timed(s.store), s.store, clock, cfg.DB)
	}
	if s.repl != nil {
		// The first own request waits for the clock's first verdict: with
		// its only peer dead, a restarted survivor of a two-node cluster
		// is unverified until --dead-after (clockmon), longer than a
		// batch waits at the gateway. Refused for a bad clock, it tries
		// anyway and fails as before.
		if err := s.repl.clock.WaitVerified(ctx); errors.Is(err, clockmon.ErrUnverified) {
			return nil, err
		}
	}
	if err := s.bootstrap(ctx); err != nil {
		return nil, err
	}

	sqlAddr := orLoopback(cfg.SQLAddr)
	if s.sqlLn, err = net.Listen("tcp", sqlAddr); err != nil {
		return nil, fmt.Errorf("listening for SQL on %s: %w", sqlAddr, err)
	}
	httpAddr := orLoopback(cfg.HTTPAddr)
	if s.httpLn, err = net.Listen("tcp", httpAddr); err != nil {
		s.sqlLn.Close()
		return nil, fmt.Errorf("listening for HTTP on %s: %w", httpAddr, err)
	}
	port := int32(0)
	if a, ok := s.sqlLn.Addr().(*net.TCPAddr); ok {
		port = int32(a.Port)
	}
	sqlMem, tempStorage, tempCleanup, err := sqlMemory(cfg)
	if err != nil {
		s.sqlLn.Close()
		s.httpLn.Close()
		return nil, err
	}
	s.tempCleanup = tempCleanup
	s.sqlMem, s.tempStorage = sqlMem, tempStorage
	if s.repl != nil {
		// Fragments other gateways send run their SQL here, under this
		// node's SQL memory and temporary storage.
		s.repl.distsql.SetProcessor(&exec.FragmentProcessor{DB: s.db, Memory: sqlMem, TempStorage: tempStorage, Runner: s.repl.dist})
		// So do the readers of other nodes' index backfills.
		s.repl.backfill = &ddl.BackfillProcessor{DB: s.db}
		s.repl.distsql.SetProcessorFor(ddl.BackfillProcessorName, s.repl.backfill)
	}
	sole, err := s.soleCatalogWriter(ctx)
	if err != nil {
		s.sqlLn.Close()
		s.httpLn.Close()
		return nil, err
	}
	var lease *catalog.LeaseConfig
	if s.repl != nil {
		lease = s.catalogLease()
	}
	s.catalogMu.Lock()
	sole = sole && !s.catalogShared
	s.backend = session.NewBackend(s.db, session.Config{ServerPort: port, Logger: log, Tablets: tabletDirectory{s},
		Memory: sqlMem, TempStorage: tempStorage, StatementObserver: s.obs.statementObserver,
		// A cluster of one (no Join, or only its own address with no
		// other node registered) is the only SQL gateway: all DDL comes
		// through it, so it keeps the catalog generation in memory until
		// it admits a second node (catalogwriter.go). Members of a
		// larger cluster, and a cluster of one once it admitted another
		// node, hold generation leases (docs/architecture.md, "Catalog
		// generation").
		SoleCatalogWriter:            sole,
		CatalogLease:                 lease,
		MaxConnections:               cfg.MaxConnections,
		SuperuserReservedConnections: cfg.SuperuserReservedConnections,
		AuthTimeout:                  cfg.AuthTimeout,
		StatsRefreshDelay:            cfg.StatsRefreshDelay,
		StoreProfile:                 s.cfg.StoreProfile,
		BlockCacheBytes:              storage.CacheSizeOr(cfg.CacheSize),
		NetworkRTT:                   s.NetworkRTT,
		GC:                           gcRunner{s},
		DrainTimestamp:               s.drainTimestamp,
		ClusterVersion:               s.clusterVersion()})
	s.catalogMu.Unlock()
	pgcfg := pgwire.Config{Backend: s.backend, Insecure: cfg.Insecure, Logger: log,
		MaxConnections: cfg.MaxConnections, SuperuserReservedConnections: cfg.SuperuserReservedConnections,
		MaxStartupConnections: cfg.MaxStartupConnections, AuthTimeout: cfg.AuthTimeout}
	if cfg.Certs != nil {
		pgcfg.TLS, pgcfg.RefuseRemotePlaintext = cfg.Certs.SQLServer(), !cfg.AcceptSQLWithoutTLS
		// The cluster setting's rules, when set, decide logins instead.
		pgcfg.HBA = s.backend.HBAConfig
	}
	if s.pg, err = pgwire.NewServer(pgcfg); err != nil {
		s.sqlLn.Close()
		s.httpLn.Close()
		return nil, err
	}
	if err := s.startMembership(ctx); err != nil {
		s.sqlLn.Close()
		s.httpLn.Close()
		return nil, err
	}
	s.http = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 10 * time.Second}

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	// Statements are clients' requests: the leaseholders they reach
	// count them by this node, so leases follow them (the node's own
	// loops run on runCtx and are not counted).
	sqlCtx := kv.WithClientRequests(runCtx)
	if s.repl != nil {
		// Statements find the node's distributed execution here.
		sqlCtx = distsql.WithRunner(sqlCtx, s.repl.dist)
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.pg.Serve(sqlCtx, s.sqlLn); err != nil && !errors.Is(err, pgwire.ErrServerClosed) {
			log.Error("cairn: SQL server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.serveHTTP(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("cairn: HTTP server stopped", "err", err)
		}
	}()
	if fence >= 0 {
		// Watched for stalls: probe, so that a node that only reads is
		// watched too (diskstall.go).
		s.startDiskProbe(runCtx)
	}
	s.startAdmin(runCtx)
	s.startSplitQueue(runCtx)
	if !cfg.NoGCLoop {
		s.startGCQueue(runCtx)
	}
	log.Info(fmt.Sprintf("cairn node ready: sql=%s http=%s", s.sqlLn.Addr(), s.httpLn.Addr()),
		"store", storeName(cfg.StoreDir), "insecure", cfg.Insecure, "locality", cfg.Locality,
		"store_profile", s.cfg.StoreProfile, "store_profile_source", profileWhy)
	return s, nil
}

func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

func storeName(dir string) string {
	if dir == "" {
		return "(in memory)"
	}
	return dir
}

func validate(cfg Config) error {
	if cfg.Insecure && cfg.Certs != nil {
		return errInsecureWithCerts
	}
	if cfg.StoreProfile != "" {
		if _, err := storage.ParseProfile(cfg.StoreProfile); err != nil {
			return err
		}
	}
	if len(cfg.Join) > 0 && cfg.RPCAddr == "" {
		return errors.New("--join needs --rpc-addr, this node's address among the members")
	}
	if cfg.RPCAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.RPCAddr); err != nil {
			return fmt.Errorf("rpc address %q: %w", cfg.RPCAddr, err)
		}
	}
	if cfg.Locality != "" {
		for _, kv := range strings.Split(cfg.Locality, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return fmt.Errorf("locality %q: want key=value[,key=value...]", cfg.Locality)
			}
		}
	}
	if err := validateGeo(cfg); err != nil {
		return err
	}
	return nil
}

// bootstrap writes a fresh cluster's catalog when the store has none.
func (s *Server) bootstrap(ctx context.Context) error {
	verifier := ""
	if s.cfg.InitialPassword != "" {
		v, err := pgauth.Verifier(s.cfg.InitialPassword)
		if err != nil {
			return fmt.Errorf("initial password: %w", err)
		}
		verifier = v
	}
	fresh := false
	err := retryPinned(ctx, s.clock, func() error {
		return s.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
			err := catalog.Bootstrap(ctx, txn, verifier)
			if errors.Is(err, catalog.ErrAlreadyBootstrapped) {
				fresh = false
				return nil
			}
			if err == nil && verifier == "" && !s.cfg.Insecure && s.cfg.Certs == nil {
				// Refuse before committing: a cluster whose superuser has no
				// password and no way to present a client certificate could
				// never be logged into.
				return errNoPassword
			}
			fresh = err == nil
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("bootstrapping the catalog: %w", err)
	}
	if fresh {
		s.log.Info("cairn: bootstrapped a new cluster", "superuser", catalog.SuperuserName)
	}
	return nil
}

var errNoPassword = errors.New("a secure node needs an initial password for the superuser postgres (--initial-password or CAIRN_INITIAL_PASSWORD), or --insecure")

// Addr is the SQL listener's address.
func (s *Server) Addr() net.Addr { return s.sqlLn.Addr() }

// HTTPAddr is the HTTP listener's address.
func (s *Server) HTTPAddr() net.Addr { return s.httpLn.Addr() }

// DB is the node's KV client (for tests and tools in the same process).
func (s *Server) DB() *kv.DB { return s.db }

// SQLCommits are the SQL transactions this node's sessions committed,
// by the phases their commit took (cairn_sql_commits_total): for tests
// in the same process.
func (s *Server) SQLCommits() (readOnly, onePhase, twoPhase uint64) {
	return s.backend.CommitStats()
}

// DistSQLMetrics are this node's distributed execution figures: the
// fragments it runs now, those waiting for credit, batches sent (zero
// for a node that is not replicated).
func (s *Server) DistSQLMetrics() distsql.Metrics {
	if s.repl == nil || s.repl.distsql == nil {
		return distsql.Metrics{}
	}
	return s.repl.distsql.Metrics()
}

// Replica is this node's replica of tablet (nil: none here), for tests
// in the same process.
func (s *Server) Replica(id kvpb.TabletID) *tablet.Replica {
	if s.store == nil {
		return nil
	}
	return s.store.Replica(id)
}

// RemoteKVBatches is how many KV batches for tablet this node has sent
// to other nodes (zero for a node that is not replicated).
func (s *Server) RemoteKVBatches(tablet kvpb.TabletID) int64 {
	if s.repl == nil {
		return 0
	}
	return s.repl.transport.KVBatchesSent(tablet)
}

// Stop ends client connections (57P01 to each), stops HTTP, then closes
// the KV client, the store and the engine, in that order.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		err := s.pg.Close()
		if herr := s.stopHTTP(ctx); herr != nil && err == nil {
			err = herr
		}
		s.cancel()
		s.wg.Wait()
		s.backend.Close()
		if s.tempCleanup != nil {
			s.tempCleanup()
		}
		if cerr := s.closeStorage(); cerr != nil && err == nil {
			err = cerr
		}
		s.stopErr = err
		s.log.Info("cairn: node stopped")
	})
	return s.stopErr
}

// httpDrain is how long Stop lets the HTTP requests in flight finish
// before it closes their connections.
const httpDrain = 2 * time.Second

// stopHTTP stops the HTTP server: the requests in flight get httpDrain to
// finish, then their connections are closed, which ends their contexts.
// A CPU profile or a trace (/debug/pprof) runs for as many seconds as it
// was asked for, and Shutdown alone waited for it: a SIGTERM during a
// 20 s profile stopped the node 16 s later (TestStopEndsProfile).
func (s *Server) stopHTTP(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, httpDrain)
	defer cancel()
	err := s.http.Shutdown(dctx)
	if err == nil {
		return nil
	}
	cerr := s.http.Close()
	if ctx.Err() != nil {
		return err // the caller's deadline, not the drain's
	}
	return cerr
}

func (s *Server) closeStorage() error {
	if s.repl != nil && s.repl.rpc != nil {
		s.repl.stopServing()
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	var err error
	if s.repl != nil && s.repl.runDone != nil {
		err = s.repl.stop()
	}
	if s.eng != nil {
		// The clock saves its upper bound on the engine in the
		// background (hlc invariant 5): no save may reach a closed one.
		s.clock.StopPersisting()
		if cerr := s.eng.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/metrics", s.metricsHandler())
	mux.HandleFunc("GET /api/gc/sizes", s.gcSizes)
	// The store's LSM as Pebble reports it (levels, L0 sublevels, read
	// amplification, memtables, flushable ingests): what a read of the
	// store merges (bench/parallelindex -lsm).
	mux.HandleFunc("GET /debug/lsm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		m := s.eng.Metrics()
		fmt.Fprintf(w, "%s\nread amplification %d, L0 sublevels %d, L0 files %d, memtables %d (%d bytes), flushable ingests %d\n",
			m.String(), m.ReadAmp(), m.Levels[0].Sublevels, m.Levels[0].TablesCount, m.MemTable.Count, m.MemTable.Size, m.Flush.AsIngestCount)
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s.adminRoutes(mux)
	s.nodeRoutes(mux)
	s.versionRoutes(mux)
	if s.cfg.FaultInjection {
		s.faultRoutes(mux)
	}
	// Who may use which endpoint (admin_auth.go).
	return s.withAuth(mux)
}

// writeMetrics writes the node's counters and gauges in the Prometheus
// text format, for metricsHandler to gather with the registry's
// histograms and the Go and process collectors (metrics.go).
func (s *Server) writeMetrics(w io.Writer) {
	hits, misses := s.backend.CacheStats()
	planHits, planMisses, genHits, genReads := s.backend.PlanStats()
	implicitReads, implicitRetries := s.backend.ImplicitReadStats()
	for _, m := range []struct {
		name, typ, help string
		v               float64
	}{
		{"cairn_up", "gauge", "Whether the node is serving.", 1},
		{"cairn_uptime_seconds", "gauge", "Seconds since the node started.", time.Since(s.started).Seconds()},
		{"cairn_sql_catalog_cache_hits_total", "counter", "Descriptor cache hits.", float64(hits)},
		{"cairn_sql_catalog_cache_misses_total", "counter", "Descriptor cache misses.", float64(misses)},
		{"cairn_sql_plan_cache_hits_total", "counter", "Prepared-statement executions that reused a cached plan.", float64(planHits)},
		{"cairn_sql_plan_cache_misses_total", "counter", "Prepared-statement executions that planned.", float64(planMisses)},
		{"cairn_sql_catalog_generation_local_total", "counter", "Statements answered from the node-local catalog generation.", float64(genHits)},
		{"cairn_sql_catalog_generation_reads_total", "counter", "Statements that read the catalog generation key.", float64(genReads)},
		{"cairn_sql_implicit_reads_total", "counter", "Point SELECTs read without a KV transaction.", float64(implicitReads)},
		{"cairn_sql_implicit_read_retries_total", "counter", "Point SELECTs that tried to read without a KV transaction and ran again in one.", float64(implicitRetries)},
		{"cairn_clock_pinned_readings_total", "counter", "Readings of the clock handed out held at its persisted upper bound because the disk had not saved the next bound yet; a gateway restarts (or, on a stalled disk, refuses) the transactions that got one.", float64(s.clock.PinnedReadings())},
		{"cairn_sql_fast_point_reads_total", "counter", "Executes of kept point SELECTs answered without an executor (sql/session, fastread.go).", float64(s.backend.FastReads())},
		{"cairn_sql_fast_dml_total", "counter", "Simple-protocol point UPDATEs, INSERT ... VALUES and point SELECTs in a block of kept plans run without an executor (sql/session, fastupdate.go).", float64(s.backend.FastDML())},
		// What cairn start's --max-memory (or GOMEMLIMIT) made the
		// runtime's soft limit; math.MaxInt64 when none was set.
		{"cairn_go_memory_limit_bytes", "gauge", "The Go runtime's soft memory limit (--max-memory less the block cache and memtables, or GOMEMLIMIT).", float64(debug.SetMemoryLimit(-1))},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %g\n", m.name, m.help, m.name, m.typ, m.name, m.v)
	}
	if rc := s.rowCache(); rc != nil {
		fmt.Fprintf(w, "# HELP cairn_row_cache_hits_total Reads of a row answered from the row cache (tablet/rowcache.go).\n# TYPE cairn_row_cache_hits_total counter\ncairn_row_cache_hits_total %d\n", rc.Hits())
		fmt.Fprintf(w, "# HELP cairn_row_cache_bytes Bytes the row cache holds (--row-cache-mib bounds them).\n# TYPE cairn_row_cache_bytes gauge\ncairn_row_cache_bytes %d\n", rc.Used())
	}
	readOnly, onePhase, twoPhase := s.backend.CommitStats()
	fmt.Fprintf(w, "# HELP cairn_sql_commits_total Committed SQL transactions by the phases their commit took (none: wrote nothing).\n# TYPE cairn_sql_commits_total counter\n")
	fmt.Fprintf(w, "cairn_sql_commits_total{phase=\"none\"} %d\ncairn_sql_commits_total{phase=\"one\"} %d\ncairn_sql_commits_total{phase=\"two\"} %d\n", readOnly, onePhase, twoPhase)
	s.tabletMetrics(w)
	s.raftMetrics(w)
	s.closerMetrics(w)
	s.diskMetrics(w)
}

// CompactStore flushes the store's memtables and compacts its whole
// keyspace into sorted files, so that what a benchmark loaded is read from
// the files on disk in key order (bench/readplan) rather than from memory
// or from overlapping flushes.
func (s *Server) CompactStore(ctx context.Context) error {
	if err := s.eng.Flush(); err != nil {
		return fmt.Errorf("flushing the store: %w", err)
	}
	if err := s.eng.Compact(ctx, []byte{0}, []byte{0xff, 0xff, 0xff, 0xff}); err != nil {
		return fmt.Errorf("compacting the store: %w", err)
	}
	return nil
}

// NetworkRTT is the round trip the planner expects a batch to pay on the
// network (session.Config.NetworkRTT): the mean over the cluster's nodes,
// this one at zero, of the round-trip time to each, since leaseholders
// are spread over the nodes. A peer's is what the clock monitor's probes
// measured (the network's own) plus what --latency-map adds to every
// message between the two regions (the probes do not pay it). A node
// without peers pays none.
func (s *Server) NetworkRTT() time.Duration {
	if s.repl == nil || s.repl.clock == nil || s.repl.registry == nil {
		return 0
	}
	offs := s.repl.clock.Offsets()
	var sum time.Duration
	n := 0
	for _, rec := range s.repl.registry.Nodes() {
		if rec.Status == membership.StatusDecommissioned {
			continue
		}
		n++
		id := rec.NodeID
		if id == s.repl.id {
			continue
		}
		// Uncertainty is half the probe's round trip.
		sum += 2*offs[id].Uncertainty + 2*s.repl.geo.OneWay(id)
	}
	if n <= 1 {
		return 0
	}
	return sum / time.Duration(n)
}

// diskMetrics appends the counters of a simulated disk (storage/simfs,
// cairn start --debug-store-latency) to /metrics: reads that reached the
// filesystem, their bytes, the seeks among them, and the latency the
// profile charged. A node on a real disk has none.
func (s *Server) diskMetrics(w io.Writer) {
	if s.simfs == nil {
		return
	}
	st := s.simfs.Stats()
	fmt.Fprintf(w, "# HELP cairn_store_simulated_profile The profile the simulated disk plays (1 for the one in force).\n# TYPE cairn_store_simulated_profile gauge\ncairn_store_simulated_profile{profile=%q} 1\n", s.simfs.Profile().Name)
	for _, m := range []struct {
		name, help string
		v          float64
	}{
		{"cairn_store_reads_total", "Read calls that reached the store's (simulated) filesystem: block cache misses, an object store's requests.", float64(st.Reads)},
		{"cairn_store_requests_total", "What the storage was asked for: each read, or on an object store each chunk fetched.", float64(st.Requests)},
		{"cairn_store_read_bytes_total", "Bytes those reads asked for.", float64(st.ReadBytes)},
		{"cairn_store_seeks_total", "Reads that did not continue where the previous read of their file ended (a disk's seeks).", float64(st.Seeks)},
		{"cairn_store_skips_total", "Reads a short way ahead of where the previous read of their file ended, which a disk passes over rather than seeks.", float64(st.Skips)},
		{"cairn_store_read_latency_charged_seconds_total", "Latency the simulated disk's profile added to reads.", st.Charged.Seconds()},
		{"cairn_store_syncs_total", "Syncs of the store's (simulated) files, each paying the profile's sync latency.", float64(st.Syncs)},
		{"cairn_store_wal_syncs_total", "Those syncs that were of write-ahead log files: the store's commits made durable, one at a time.", float64(st.WALSyncs)},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %g\n", m.name, m.help, m.name, m.name, m.v)
	}
}

// rowCache is the store's row cache budget, nil before the store opened or
// with the cache off.
func (s *Server) rowCache() *tablet.RowCache {
	if s.store == nil {
		return nil
	}
	return s.store.RowCache()
}
