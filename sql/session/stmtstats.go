package session

import (
	"errors"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/plan"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Statement statistics: the node's pg_stat_statements and the statement
// latency the server's histogram observes (Config.StatementObserver).
//
// Each statement that completes without error is recorded under its
// fingerprint, PostgreSQL's queryid computed the same way (libpg_query's
// fingerprint of the parse tree, blind to constants and spacing), its
// user and its database, with the text normalized to $n placeholders. A
// Query message holding several statements is recorded as one entry (an
// approximation: PostgreSQL records each). The fingerprint of a text is
// cached per session, keyed by the text's shape when it has one (the
// text with its constants left out), so a statement repeated with new
// constants costs a map lookup, not a parse. A prepared statement keeps
// its fingerprint and its entry (keptStat), so its Executes look up
// neither.

// maxStatementEntries is pg_stat_statements.max's default. At the bound
// the 5% least called entries are dropped, as PostgreSQL does.
const maxStatementEntries = 5000

// maxSessionFingerprints bounds a session's fingerprint cache; texts
// longer than maxCachedText are not cached (a bulk INSERT's megabytes
// would pin memory for nothing: the next one differs).
const (
	maxSessionFingerprints = 256
	maxCachedText          = 4 << 10
)

// maxQueryText bounds the text an entry keeps (PostgreSQL keeps the whole
// text in a file; here it is memory): a longer normalized text is cut
// there and ends in "...".
const maxQueryText = 16 << 10

// largeText is the length from which a text is fingerprinted by hashing
// its normalized form rather than by libpg_query's fingerprint, which
// would parse it a second time.
const largeText = 64 << 10

type stmtKey struct {
	user string
	db   catalog.ID
	id   int64
}

type stmtEntry struct {
	query string
	mu    sync.Mutex
	calls int64
	rows  int64
	// total, min, max, mean and m2 (Welford's sum of squared deviations)
	// in milliseconds.
	total, min, max, mean, m2 float64
}

// stmtStats is a node's pg_stat_statements.
type stmtStats struct {
	mu sync.RWMutex
	m  map[stmtKey]*stmtEntry
	// evictions counts evictLocked's calls (written under mu): an entry
	// found at one count is still the map's while the count is unchanged
	// (keptStat).
	evictions atomic.Uint64
}

// statLookups counts stmtStats.entry's calls, the map look-ups of
// recorded statements (tests: TestPreparedStatsKept).
var statLookups atomic.Int64

func (st *stmtStats) record(k stmtKey, query string, d time.Duration, rows int64) {
	e, _ := st.entry(k, query)
	e.add(d, rows)
}

// entry returns k's entry, made with query if there is none, and the
// eviction count it was found at.
func (st *stmtStats) entry(k stmtKey, query string) (*stmtEntry, uint64) {
	statLookups.Add(1)
	st.mu.RLock()
	e, gen := st.m[k], st.evictions.Load()
	st.mu.RUnlock()
	if e == nil {
		st.mu.Lock()
		if e = st.m[k]; e == nil {
			if st.m == nil {
				st.m = make(map[stmtKey]*stmtEntry)
			}
			if len(st.m) >= maxStatementEntries {
				st.evictLocked()
			}
			e = &stmtEntry{query: query}
			st.m[k] = e
		}
		gen = st.evictions.Load()
		st.mu.Unlock()
	}
	return e, gen
}

// add records one call of e's statement that took d and returned or
// changed rows.
func (e *stmtEntry) add(d time.Duration, rows int64) {
	ms := float64(d) / float64(time.Millisecond)
	e.mu.Lock()
	e.calls++
	e.rows += rows
	e.total += ms
	if e.calls == 1 || ms < e.min {
		e.min = ms
	}
	e.max = max(e.max, ms)
	delta := ms - e.mean
	e.mean += delta / float64(e.calls)
	e.m2 += delta * (ms - e.mean)
	e.mu.Unlock()
}

// evictLocked drops the least called 5% of the entries.
func (st *stmtStats) evictLocked() {
	st.evictions.Add(1)
	type kc struct {
		k     stmtKey
		calls int64
	}
	all := make([]kc, 0, len(st.m))
	for k, e := range st.m {
		e.mu.Lock()
		all = append(all, kc{k, e.calls})
		e.mu.Unlock()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].calls < all[j].calls })
	for _, x := range all[:max(1, len(all)/20)] {
		delete(st.m, x.k)
	}
}

// snapshot returns every entry, by query id.
func (st *stmtStats) snapshot() []plan.StatementStats {
	st.mu.RLock()
	out := make([]plan.StatementStats, 0, len(st.m))
	for k, e := range st.m {
		e.mu.Lock()
		out = append(out, plan.StatementStats{
			User: k.user, DatabaseID: uint32(k.db), QueryID: k.id, Query: e.query,
			Calls: e.calls, Rows: e.rows, TotalMs: e.total, MinMs: e.min, MaxMs: e.max,
			MeanMs: e.mean, StddevMs: math.Sqrt(e.m2 / float64(max(e.calls, 1))),
		})
		e.mu.Unlock()
	}
	st.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].QueryID != out[j].QueryID {
			return out[i].QueryID < out[j].QueryID
		}
		return out[i].User < out[j].User
	})
	return out
}

// Statements returns the node's statement statistics.
func (b *Backend) Statements() []plan.StatementStats { return b.stmts.snapshot() }

// fingerprint is what a statement text is recorded under.
type fingerprint struct {
	id    int64
	query string
	kind  string
}

// fingerprintOf returns sql's fingerprint; sh is its shape when the
// caller already scanned it. A text seen before costs a map lookup; a
// new text of a known shape (new constants) a scan; only a new shape a
// parse.
func (s *Session) fingerprintOf(sql string, sh *queryShape) fingerprint {
	if len(sql) > maxCachedText {
		return computeFingerprint(sql)
	}
	if sh != nil {
		if f, ok := s.fps.byShape[string(sh.key)]; ok {
			return f
		}
	} else if f, ok := s.fps.byText[sql]; ok {
		return f
	}
	shape := ""
	if sh != nil {
		shape = string(sh.key)
	} else if parser.Plain(sql) {
		if k, _, ok := parser.Shape(sql); ok {
			shape = k
		}
	}
	f, ok := s.fps.byShape[shape]
	if shape == "" || !ok {
		f = computeFingerprint(sql)
	}
	s.fps.put(sql, shape, f)
	return f
}

// fingerprints is a session's cache of fingerprints, by text and by
// shape, each bounded by maxSessionFingerprints.
type fingerprints struct {
	byText, byShape map[string]fingerprint
}

func (c *fingerprints) put(text, shape string, f fingerprint) {
	if c.byText == nil || len(c.byText) >= maxSessionFingerprints {
		c.byText = make(map[string]fingerprint)
	}
	c.byText[text] = f
	if shape != "" {
		if c.byShape == nil || len(c.byShape) >= maxSessionFingerprints {
			c.byShape = make(map[string]fingerprint)
		}
		c.byShape[shape] = f
	}
}

func computeFingerprint(sql string) fingerprint {
	f := fingerprint{kind: StatementKind(sql)}
	norm, err := pg_query.Normalize(sql)
	if err != nil {
		norm = sql // dialect syntax libpg_query does not parse
	}
	norm = strings.TrimSpace(norm)
	var id uint64
	if len(sql) > largeText {
		err = errors.New("hashed")
	} else {
		id, err = pg_query.FingerprintToUInt64(sql)
	}
	if err != nil {
		h := fnv.New64a()
		h.Write([]byte(norm))
		id = h.Sum64()
	}
	f.id = int64(id)
	if len(norm) > maxQueryText {
		cut := maxQueryText
		for cut > 0 && !utf8.RuneStart(norm[cut]) {
			cut--
		}
		norm = norm[:cut] + "..."
	}
	f.query = norm
	return f
}

// StatementKind is the type label of the statement latency histogram:
// select, insert, update, delete, ddl, transaction or other, from the
// statement's first keyword.
func StatementKind(sql string) string {
	w := firstKeyword(sql)
	switch w {
	case "select", "insert", "update", "delete":
		return w
	case "values", "table", "show", "explain", "fetch":
		return "select"
	case "upsert":
		return "insert"
	case "create", "alter", "drop", "truncate", "grant", "revoke", "comment", "reindex":
		return "ddl"
	case "begin", "start", "commit", "end", "rollback", "abort", "savepoint", "release", "prepare":
		return "transaction"
	}
	return "other"
}

// firstKeyword is sql's first word in lower case, after spaces,
// comments and opening parentheses.
func firstKeyword(sql string) string {
	i := 0
	for i < len(sql) {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				return ""
			}
			i += j + 1
		case strings.HasPrefix(sql[i:], "/*"):
			j := strings.Index(sql[i:], "*/")
			if j < 0 {
				return ""
			}
			i += j + 2
		default:
			j := i
			for j < len(sql) && (sql[j]|0x20 >= 'a' && sql[j]|0x20 <= 'z') {
				j++
			}
			return strings.ToLower(sql[i:j])
		}
	}
	return ""
}

// recordStatement records a statement that completed: in
// pg_stat_statements and in the latency histogram.
func (s *Session) recordStatement(sql string, sh *queryShape, d time.Duration, rows int64) {
	if sh != nil && sh.se != nil {
		// The shape's kept entry (shapeEntry.stat).
		s.recordKept(&sh.se.stat, sql, sh, d, rows)
		return
	}
	f := s.fingerprintOf(sql, sh)
	s.b.stmts.record(stmtKey{user: s.user, db: s.db.ID, id: f.id}, f.query, d, rows)
	if obs := s.b.statementObserver(f.kind); obs != nil {
		obs.Observe(d.Seconds())
	}
}

// LatencyObserver receives latencies in seconds (a prometheus.Observer).
type LatencyObserver interface{ Observe(seconds float64) }

// observerLookups counts Config.StatementObserver's calls
// (TestPreparedStatsKept).
var observerLookups atomic.Int64

// statementObserver is the observer of kind's latencies (nil: none).
func (b *Backend) statementObserver(kind string) LatencyObserver {
	if b.cfg.StatementObserver == nil {
		return nil
	}
	observerLookups.Add(1)
	return b.cfg.StatementObserver(kind)
}

// keptStat is a prepared statement's pg_stat_statements entry and
// fingerprint, kept from one Execute to the next (issue 22, nineteenth
// session): the fingerprint's look-up by text (hashing the text) and the
// entry's in the node's map (hashing the key, under its lock) were done
// for every Execute. It is looked up again when the session's user or
// database is not the one it was found for, or when an eviction may have
// dropped the entry from the map (stmtStats.evictions moved).
type keptStat struct {
	key  stmtKey
	kind string
	e    *stmtEntry
	gen  uint64
	// obs is kind's latency observer (Config.StatementObserver), kept
	// with the entry since the twentieth session: the server found it in
	// a sync.Map for every Execute.
	obs LatencyObserver
}

// recordKept is recordStatement for a prepared statement's Execute of
// sql, or a Query of shape sh (nil: none), through its kept entry k.
func (s *Session) recordKept(k *keptStat, sql string, sh *queryShape, d time.Duration, rows int64) {
	st := &s.b.stmts
	if k.e == nil || k.key.user != s.user || k.key.db != s.db.ID || k.gen != st.evictions.Load() {
		f := s.fingerprintOf(sql, sh)
		k.key, k.kind = stmtKey{user: s.user, db: s.db.ID, id: f.id}, f.kind
		k.e, k.gen = st.entry(k.key, f.query)
		k.obs = s.b.statementObserver(k.kind)
	}
	k.e.add(d, rows)
	if k.obs != nil {
		k.obs.Observe(d.Seconds())
	}
}

// statsWriter counts the rows a statement returned or changed, from its
// command tags ("SELECT 3", "INSERT 0 1", "COPY 10").
type statsWriter struct {
	pgwire.ResultWriter
	rows  int64
	empty bool
}

func (w *statsWriter) Complete(tag string) error {
	w.count(tag)
	return w.ResultWriter.Complete(tag)
}

// count adds the rows of a command tag ("UPDATE 3"), whether it is sent
// now or held until Sync (heldExecute).
func (w *statsWriter) count(tag string) {
	if i := strings.LastIndexByte(tag, ' '); i >= 0 {
		if n, err := strconv.ParseInt(tag[i+1:], 10, 64); err == nil {
			w.rows += n
		}
	}
}

func (w *statsWriter) EmptyQuery() error {
	w.empty = true
	return w.ResultWriter.EmptyQuery()
}

// Sessions returns the node's sessions as pg_stat_activity shows them.
func (b *Backend) Sessions() []plan.SessionActivity { return b.sessions.snapshot() }
