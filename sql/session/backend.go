package session

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/stats"
	"github.com/jackc/pgerrcode"
)

// Config configures a Backend.
type Config struct {
	// ServerVersion is server_version ("" = pgwire.DefaultServerVersion).
	ServerVersion string
	// ServerPort is reported by inet_server_port() (0: NULL).
	ServerPort int32
	// Logger receives session logs; nil means slog.Default().
	Logger *slog.Logger
	// StatementObserver, when set, returns the observer of the latency
	// of every statement that completed of a kind (StatementKind): the
	// server's histogram. A prepared statement keeps its kind's from one
	// Execute to the next (keptStat); other statements ask at each.
	StatementObserver func(kind string) LatencyObserver
	// Tablets is the node's tablet directory (cairn_catalog.tablets);
	// nil leaves that view empty.
	Tablets plan.TabletDirectory
	// SoleCatalogWriter: every catalog change of the cluster goes through
	// this Backend, so the node may keep the catalog generation in memory
	// instead of reading it per statement (catalog.Cache.
	// UseLocalGeneration). True for a node that is a cluster of one; a
	// node of a cluster with several SQL gateways must leave it false,
	// and a cluster of one must call StopLocalCatalog before it admits a
	// second node (docs/architecture.md, "Catalog generation").
	SoleCatalogWriter bool
	// CatalogLease, when set, lets the node answer statements from memory
	// under generation leases (catalog.Cache.UseGenerationLeases): from
	// the start on a node of several SQL gateways, or once
	// StopLocalCatalog ends SoleCatalogWriter's condition. Every node of
	// the cluster must route its Revoke calls to the others'
	// RevokeCatalogLease.
	CatalogLease *catalog.LeaseConfig
	// MaxConnections, SuperuserReservedConnections and AuthTimeout are the
	// pgwire server's limits, shown (read-only) as max_connections,
	// superuser_reserved_connections and authentication_timeout; zero
	// shows pgwire's defaults.
	MaxConnections               int
	SuperuserReservedConnections int
	AuthTimeout                  time.Duration
	// Memory is the node's SQL memory budget (--max-sql-memory) and
	// TempStorage where statements spill (--max-disk-temp-storage); nil:
	// unaccounted, and nothing spills (sql/exec's spill.go).
	Memory      *mon.Budget
	TempStorage *rowcontainer.TempStorage
	// StoreProfile is the node's storage profile (storage.Profiles; the
	// resolved --store-profile): the default of each session's
	// storage.profile setting. "": ssd.
	StoreProfile string
	// BlockCacheBytes is the node's block cache (the planner reads a
	// table that fits in it once for all of a join's lookup batches,
	// opt.Costs.CacheBytes). 0: the cost model's default.
	BlockCacheBytes int64
	// NetworkRTT, when set, is the round-trip time a batch to the
	// tablets' leaseholders pays on the network (the node's measured RTTs
	// to its peers); the planner adds it to its round trips
	// (opt.Costs.WithRoundTrip). nil: a node that is a cluster of one.
	NetworkRTT func() time.Duration
	// GC runs VACUUM's garbage collection (vacuum.go); nil: VACUUM only
	// checks its tables (a Backend without a store, in unit tests).
	GC GC
	// DrainTimestamp is the cluster-wide bound online schema changes wait
	// on (ddl.Context.DrainTimestamp); nil: this node's kv.DB's.
	DrainTimestamp func(ctx context.Context) (hlc.Timestamp, error)
	// ClusterVersion raises the cluster version (SET CLUSTER SETTING
	// version); nil on an unreplicated node, a cluster of one whose
	// version is its binary's.
	ClusterVersion ClusterVersioner
	// StatsRefreshDelay is how long a table that went stale waits for
	// its automatic statistics collection (stats.Refresher.Delay); 0:
	// stats.DefaultDelay, a minute.
	StatsRefreshDelay time.Duration
}

// ClusterVersioner raises the cluster version (membership.Member). An
// error wrapping clusterversion.ErrSetRefused is the user's: the version
// cannot be taken now.
type ClusterVersioner interface {
	SetClusterVersion(ctx context.Context, version string) error
}

// Backend implements pgwire.Backend over a kv.DB. One Backend serves a
// node: its catalog cache and advisory lock table are shared by every
// session.
type Backend struct {
	db    *kv.DB
	cfg   Config
	cache *catalog.Cache
	locks *AdvisoryLocks
	log   *slog.Logger
	// stats caches table statistics for the optimizer; refresher
	// collects them in the background when tables go stale (analyze.go).
	stats     *stats.Cache
	refresher *stats.Refresher
	// planHits and planMisses count prepared Executes by whether they
	// reused a cached plan.
	planHits, planMisses atomic.Uint64
	// implicitReads counts statements read without a kv.Txn, and
	// implicitRetries those that tried and ran again in one
	// (implicit.go).
	implicitReads, implicitRetries atomic.Uint64
	// fastReads counts the Executes of kept point reads answered by the
	// fast path (fastread.go).
	fastReads atomic.Uint64
	// fastDML counts the simple-protocol statements of kept plans run
	// without the executor (fastupdate.go).
	fastDML atomic.Uint64
	// commits counts committed SQL transactions by the phases their
	// commit took: [0] read-only, [1] one phase, [2] two phases.
	commits [3]atomic.Uint64
	// sessions are the node's open sessions (activity.go).
	sessions registry
	// notify is the node's LISTEN/NOTIFY channels (notify.go).
	notify notifyHub
	// stmts is the node's pg_stat_statements (stmtstats.go).
	stmts stmtStats
	// bg is the background work that outlives its statement
	// (citus_rebalance_start, rebalance.go): Close ends its context and
	// waits for it.
	bg struct {
		ctx    context.Context
		cancel context.CancelFunc
		wg     sync.WaitGroup
	}
}

var _ pgwire.Backend = (*Backend)(nil)

// NewBackend returns a Backend reading the catalog through db.
func NewBackend(db *kv.DB, cfg Config) *Backend {
	if cfg.ServerVersion == "" {
		cfg.ServerVersion = pgwire.DefaultServerVersion
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = pgwire.DefaultMaxConnections
	}
	if cfg.SuperuserReservedConnections == 0 {
		cfg.SuperuserReservedConnections = min(pgwire.DefaultSuperuserReservedConnections, cfg.MaxConnections-1)
	} else if cfg.SuperuserReservedConnections < 0 {
		cfg.SuperuserReservedConnections = 0
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = pgwire.DefaultAuthTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Backend{db: db, cfg: cfg, cache: catalog.NewCache(), locks: NewAdvisoryLocks(), log: log, stats: stats.NewCache(db)}
	if cfg.SoleCatalogWriter {
		b.cache.UseLocalGeneration(db)
	}
	if cfg.CatalogLease != nil {
		b.cache.UseGenerationLeases(db, *cfg.CatalogLease)
	}
	b.refresher = stats.NewRefresher(db, b.stats, b.cache, log)
	if cfg.StatsRefreshDelay > 0 {
		b.refresher.Delay = cfg.StatsRefreshDelay
	}
	b.bg.ctx, b.bg.cancel = context.WithCancel(context.Background())
	return b
}

// StopLocalCatalog ends the in-memory catalog generation of a
// SoleCatalogWriter node for good (catalog.Cache.StopLocalGeneration):
// once it returns nil, another node may write the catalog. A no-op on
// other nodes.
func (b *Backend) StopLocalCatalog(ctx context.Context) error {
	return b.cache.StopLocalGeneration(ctx)
}

// RevokeCatalogLease gives up the node's catalog generation lease for a
// DDL of another node about to replace generation gen, and returns a
// timestamp at or above every statement answered under it
// (catalog.Cache.RevokeGenerationLease).
func (b *Backend) RevokeCatalogLease(gen []byte) hlc.Timestamp {
	return b.cache.RevokeGenerationLease(gen)
}

// CatalogStats reports the node's catalog generation counters and its
// descriptor cache's (tests assert that a statement under a lease reads
// no catalog key).
func (b *Backend) CatalogStats() (catalog.LocalGenStats, catalog.CacheStats) {
	return b.cache.LocalGenStats(), b.cache.Stats()
}

// CatalogLeased reports whether the node holds an unexpired catalog
// generation lease.
func (b *Backend) CatalogLeased() bool { return b.cache.HoldsGenerationLease() }

// LocalCatalog reports whether statements may still be answered from the
// in-memory catalog generation (SoleCatalogWriter, and StopLocalCatalog
// not called).
func (b *Backend) LocalCatalog() bool {
	return b.cfg.SoleCatalogWriter && !b.cache.LocalGenerationStopped()
}

// readCatalog runs f in a short read transaction of its own.
func (b *Backend) readCatalog(ctx context.Context, f func(r *catalog.Reader) error) error {
	return b.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		return f(catalog.NewReader(txn, b.cache))
	})
}

// LookupRole implements pgwire.Backend.
func (b *Backend) LookupRole(ctx context.Context, name string) (pgwire.Role, error) {
	var role *catalog.Role
	err := b.readCatalog(ctx, func(r *catalog.Reader) error {
		var err error
		role, err = r.Role(ctx, name)
		return err
	})
	if err != nil {
		if pgerror.Code(err) == pgerrcode.UndefinedObject {
			return pgwire.Role{}, fmt.Errorf("%w: %q", pgwire.ErrRoleNotFound, name)
		}
		return pgwire.Role{}, err
	}
	return pgwire.Role{Name: role.Name, CanLogin: role.Login, SCRAMVerifier: role.Verifier, Superuser: role.Superuser}, nil
}

// NewSession implements pgwire.Backend.
func (b *Backend) NewSession(ctx context.Context, info pgwire.StartupInfo) (pgwire.Session, error) {
	dbName := info.Database
	if dbName == "" {
		dbName = info.User // libpq's default, which PostgreSQL applies too
	}
	var role *catalog.Role
	var db *catalog.Database
	err := b.readCatalog(ctx, func(r *catalog.Reader) error {
		var err error
		if role, err = r.Role(ctx, info.User); err != nil {
			return err
		}
		if db, err = r.Database(ctx, dbName); err != nil {
			return err
		}
		return checkConnect(ctx, r, role, db)
	})
	if err != nil {
		if pgerror.Code(err) == pgerrcode.UndefinedObject {
			return nil, pgerror.New(pgerrcode.InvalidAuthorizationSpecification, "role %q does not exist", info.User)
		}
		return nil, err
	}
	if !role.Login {
		return nil, pgerror.New(pgerrcode.InvalidAuthorizationSpecification, "role %q is not permitted to log in", info.User)
	}
	s := &Session{
		b:        b,
		user:     role.Name,
		super:    role.Superuser,
		db:       db,
		pid:      info.ProcessID,
		vars:     make(map[string]string, len(settingsList)),
		loc:      time.UTC,
		rng:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		locks:    b.locks.holder(),
		prepared: make(map[string]*sqlPrepared),
		log:      b.log.With("pid", info.ProcessID, "user", role.Name),
	}
	s.seqs = s.newSequences()
	for _, st := range settingsList {
		s.vars[strings.ToLower(st.name)] = st.def
	}
	s.vars["server_version"] = b.cfg.ServerVersion
	s.vars["server_version_num"] = versionNum(b.cfg.ServerVersion)
	s.vars["max_connections"] = strconv.Itoa(b.cfg.MaxConnections)
	s.vars["superuser_reserved_connections"] = strconv.Itoa(b.cfg.SuperuserReservedConnections)
	s.vars["authentication_timeout"] = formatDuration(b.cfg.AuthTimeout)
	s.vars["session_authorization"] = role.Name
	if b.cfg.StoreProfile != "" {
		s.vars["storage.profile"] = b.cfg.StoreProfile
	}
	if role.Superuser {
		s.vars["is_superuser"] = "on"
	}
	if err := s.applyStartup(info.Params); err != nil {
		return nil, err
	}
	s.defaults = cloneVars(s.vars)
	s.reported = make([]string, len(reportedSettings))
	now := time.Now()
	s.act = &activity{pid: info.ProcessID, user: role.Name, super: role.Superuser, dbID: db.ID, dbName: db.Name,
		clientAddr: info.RemoteAddr, start: info.ConnectedAt, control: info.Control,
		appName: s.vars["application_name"], state: "idle", stateChange: now}
	if s.act.start.IsZero() {
		s.act.start = now
	}
	b.sessions.add(s.act)
	return s, nil
}

// applyStartup applies the settings a client sent in its startup packet,
// including "options" (-c name=value or --name=value, as libpq sends
// PGOPTIONS).
func (s *Session) applyStartup(params map[string]string) error {
	for k, v := range params {
		switch strings.ToLower(k) {
		case "options":
			if err := s.applyOptions(v); err != nil {
				return err
			}
			continue
		case "replication":
			return pgerror.New(pgerrcode.FeatureNotSupported, "replication connections are not supported")
		}
		st, err := lookupSetting(k)
		if err != nil {
			// PostgreSQL refuses unknown startup parameters too.
			return err
		}
		if err := s.setVar(st, v); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) applyOptions(opts string) error {
	fields := strings.Fields(opts)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		var kv string
		switch {
		case f == "-c" && i+1 < len(fields):
			i++
			kv = fields[i]
		case strings.HasPrefix(f, "-c"):
			kv = f[2:]
		case strings.HasPrefix(f, "--"):
			kv = f[2:]
		default:
			return pgerror.New(pgerrcode.ProtocolViolation, "invalid command-line argument for server process: %s", f)
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			return pgerror.New(pgerrcode.SyntaxError, "-c %s requires a value", name)
		}
		st, err := lookupSetting(strings.ReplaceAll(name, "-", "_"))
		if err != nil {
			return err
		}
		if err := s.setVar(st, val); err != nil {
			return err
		}
	}
	return nil
}

func cloneVars(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// CacheStats reports the catalog cache's hits and misses (for /metrics).
func (b *Backend) CacheStats() (hits, misses uint64) {
	st := b.cache.Stats()
	return st.Hits, st.Misses
}

// CommitStats reports the committed SQL transactions that wrote nothing,
// that committed in one phase (no intents, no record: kv/txn_buffer.go)
// and in two (for /metrics).
func (b *Backend) CommitStats() (readOnly, onePhase, twoPhase uint64) {
	return b.commits[0].Load(), b.commits[1].Load(), b.commits[2].Load()
}

// PlanStats reports the Executes of prepared statements that reused a
// cached plan and those that planned (plancache.go), and the statements
// answered from the node-local catalog generation and those that read it
// (for /metrics).
func (b *Backend) PlanStats() (planHits, planMisses, genHits, genReads uint64) {
	g := b.cache.LocalGenStats()
	return b.planHits.Load(), b.planMisses.Load(), g.Hits, g.Reads
}

// versionNum is server_version_num for a version "major.minor"
// (15.18 → 150018), as Postgres computes it since version 10.
func versionNum(v string) string {
	major, minor, _ := strings.Cut(v, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(strings.TrimFunc(minor, func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return "150018"
	}
	return strconv.Itoa(ma*10000 + mi)
}

// CatalogWriter returns a catalog writer over txn (nil: one to derive
// per-transaction writers from with InTxn) that goes through the node's
// cache, for schema work the node runs outside any session (rolling back
// an orphaned index build, sql/ddl).
func (b *Backend) CatalogWriter(txn *kv.Txn) *catalog.Writer { return catalog.NewWriter(txn, b.cache) }
