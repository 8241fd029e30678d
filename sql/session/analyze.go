package session

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/opt"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/stats"
)

// This file connects the session to table statistics (sql/stats): ANALYZE
// collects them, the optimizer reads them through the node's cache, and
// committed DML feeds the automatic refresher.

// autoStatsSetting turns automatic statistics off for the mutations of a
// session (CockroachDB's cluster setting of that name).
const autoStatsSetting = "sql.stats.automatic_collection.enabled"

// optimize runs the optimizer over p with the node's table statistics.
func (s *Session) optimize(ctx context.Context, p *plan.Plan) error {
	return opt.OptimizeStats(ctx, p, s.costs(), func(t *catalog.Table) *stats.Table {
		return s.b.stats.Get(ctx, t)
	}, s.joinLimits())
}

// optimizeEstimated is optimize, also returning the row estimates of the
// optimized plan's nodes (EXPLAIN (COSTS ON)).
func (s *Session) optimizeEstimated(ctx context.Context, p *plan.Plan) (map[plan.Node]float64, error) {
	return opt.OptimizeEstimated(ctx, p, s.costs(), func(t *catalog.Table) *stats.Table {
		return s.b.stats.Get(ctx, t)
	}, s.joinLimits())
}

// optimizeExplained is optimizeEstimated, also returning each join's
// choice of method (EXPLAIN (VERBOSE)).
func (s *Session) optimizeExplained(ctx context.Context, p *plan.Plan) (map[plan.Node]float64, map[plan.Node]opt.JoinChoice, error) {
	return opt.OptimizeExplained(ctx, p, s.costs(), func(t *catalog.Table) *stats.Table {
		return s.b.stats.Get(ctx, t)
	}, s.joinLimits())
}

// verboseAnnotation is EXPLAIN (VERBOSE)'s: the estimate of each node
// when est is not nil (COSTS ON), and under each join the cost of the
// method chosen and of the best one rejected.
func verboseAnnotation(est map[plan.Node]float64, choices map[plan.Node]opt.JoinChoice) func(plan.Node) string {
	rows := estimateAnnotation(est)
	return func(n plan.Node) string {
		out := ""
		if est != nil {
			out = rows(n)
		}
		if c, ok := choices[n]; ok {
			if out != "" {
				out += "\n"
			}
			out += c.String()
		}
		return out
	}
}

// lookupBatch is the batch size of index and lookup joins: the storage
// profile's (opt.Costs.LookupBatch), or sql.testing.lookup_batch's.
func (s *Session) lookupBatch() int {
	if n, _ := strconv.Atoi(s.vars["sql.testing.lookup_batch"]); n > 0 {
		return n
	}
	return int(s.profileCosts().LookupBatch)
}

// readInOrder reports whether the session's storage.profile seeks (hdd):
// then a count reads its span front to back (exec.Context.ReadInOrder).
func (s *Session) readInOrder() bool { return s.profileCosts().Seek > 0 }

// profileCosts is costs without the network's round trips, for what only
// the storage profile sets (every statement asks lookupBatch and
// readInOrder; the round trip walks the node list: 2% of the CPU of
// pgbench's select-only).
func (s *Session) profileCosts() opt.Costs {
	c, _ := opt.ProfileCosts(s.vars["storage.profile"])
	return c
}

// costs is the cost model of the session's storage.profile (the node's
// --store-profile unless SET overrides it; SET has checked the name),
// with the network's round trips of a node in a cluster.
func (s *Session) costs() opt.Costs {
	c, _ := opt.ProfileCosts(s.vars["storage.profile"])
	c.SeqScanOff, c.IndexScanOff = s.vars["enable_seqscan"] == "off", s.vars["enable_indexscan"] == "off"
	c.MergeJoinOff = s.vars["enable_mergejoin"] == "off"
	c.HashJoinOff, c.NestLoopOff = s.vars["enable_hashjoin"] == "off", s.vars["enable_nestloop"] == "off"
	if n := s.b.cfg.BlockCacheBytes; n > 0 {
		c.CacheBytes = float64(n)
	}
	if rtt := s.b.cfg.NetworkRTT; rtt != nil {
		c = c.WithRoundTrip(rtt())
	}
	return c
}

// joinLimits reads the join search settings (join_collapse_limit,
// from_collapse_limit, geqo, geqo_threshold); SET has checked them.
func (s *Session) joinLimits() opt.JoinLimits {
	lim := opt.DefaultJoinLimits
	num := func(name string, v *int) {
		if n, err := strconv.Atoi(s.vars[name]); err == nil {
			*v = n
		}
	}
	num("join_collapse_limit", &lim.JoinCollapse)
	num("from_collapse_limit", &lim.FromCollapse)
	num("geqo_threshold", &lim.GeqoThreshold)
	lim.Geqo = s.vars["geqo"] != "off"
	return lim
}

// estimateAnnotation prints a node's estimate on its EXPLAIN line, in
// PostgreSQL's words: "(rows=N)" (Cairn has no cost or width to show).
func estimateAnnotation(est map[plan.Node]float64) func(plan.Node) string {
	return func(n plan.Node) string {
		r, ok := est[n]
		if !ok {
			return ""
		}
		return fmt.Sprintf("(rows=%.0f)", r)
	}
}

// analyze runs ANALYZE [table [(columns)], ...]: every table named (bare
// ANALYZE: every table of the database) is read in the statement's
// transaction and its statistics stored there, so they commit or roll
// back with it as in PostgreSQL. Views and other non-tables are skipped
// with PostgreSQL's warning.
func (s *Session) analyze(x *stmtState, n *pg_query.VacuumStmt, w pgwire.ResultWriter) error {
	txn, err := x.txn()
	if err != nil {
		return err
	}
	type target struct {
		t    *catalog.Table
		cols []rowenc.ColumnID
	}
	var targets []target
	if len(n.Rels) == 0 {
		r := catalog.NewReader(txn, s.b.cache)
		schemas, err := r.Schemas(x.ctx, s.db.ID)
		if err != nil {
			return err
		}
		for _, sc := range schemas {
			rels, err := r.Relations(x.ctx, s.db.ID, sc.ID)
			if err != nil {
				return err
			}
			for _, d := range rels {
				if t, ok := d.(*catalog.Table); ok {
					targets = append(targets, target{t: t})
				}
			}
		}
	}
	cat := s.resolver(txn)
	for _, r := range n.Rels {
		vr := r.GetVacuumRelation()
		rv := vr.GetRelation()
		if rv == nil {
			continue
		}
		rel, err := cat.LookupRelation(x.ctx, rv.Schemaname, rv.Relname)
		if err != nil {
			return err
		}
		if rel.Virtual != nil {
			continue // PostgreSQL analyzes its catalogs quietly; Cairn's are computed
		}
		if rel.Table == nil {
			s.notice(w, "WARNING", "01000", fmt.Sprintf("skipping %q --- cannot analyze non-tables or special system tables", rv.Relname))
			continue
		}
		tg := target{t: rel.Table}
		seen := map[rowenc.ColumnID]bool{}
		for _, cn := range vr.GetVaCols() {
			name := cn.GetString_().GetSval()
			c := rel.Table.ColumnByName(name)
			if c == nil {
				return pgerror.New(pgerrcode.UndefinedColumn, "column %q of relation %q does not exist", name, rel.Table.Name)
			}
			if seen[c.ID] {
				return pgerror.New(pgerrcode.DuplicateColumn, "column %q of relation %q appears more than once", name, rel.Table.Name)
			}
			seen[c.ID] = true
			tg.cols = append(tg.cols, c.ID)
		}
		targets = append(targets, tg)
	}
	verbose := hasOption(n.Options, "verbose")
	rd := catalog.NewReader(txn, s.b.cache)
	for _, tg := range targets {
		if verbose {
			schema := ""
			if d, err := rd.ByID(x.ctx, tg.t.SchemaID); err == nil {
				schema = d.DescName() + "."
			}
			s.notice(w, "INFO", "00000", fmt.Sprintf("analyzing \"%s%s\"", schema, tg.t.Name))
		}
		if tg.cols == nil {
			// Read before the collection: every change counted by now
			// is in what it reads (endTxnStats hands it to the
			// refresher once the transaction commits). ANALYZE of some
			// columns leaves the count, as PostgreSQL's does.
			if s.analyzed == nil {
				s.analyzed = map[catalog.ID]int64{}
			}
			s.analyzed[tg.t.ID] = s.b.refresher.Changed(tg.t.ID)
		}
		ts, err := stats.Collect(x.ctx, txn, tg.t, tg.cols, stats.Options{})
		if err != nil {
			return err
		}
		ts.DiskBytes = diskBytes(x.ctx, s.b.cfg.Tablets, tg.t, ts.Bytes)
		if verbose {
			// PostgreSQL's summary, in its units (8 kB pages); Cairn
			// keeps no dead rows in the table (MVCC garbage is KV's).
			pages := (ts.Bytes + 8191) / 8192
			s.notice(w, "INFO", "00000", fmt.Sprintf("%q: scanned %d of %d pages, containing %.0f live rows and 0 dead rows; %d rows in sample, %.0f estimated total rows",
				tg.t.Name, pages, pages, ts.RowCount, min(int64(ts.RowCount), stats.SampleSize), ts.RowCount))
		}
		if tg.cols != nil {
			// ANALYZE t (cols) replaces those columns' statistics and
			// keeps the others', as PostgreSQL's pg_statistic rows do.
			if old, err := stats.Load(x.ctx, txn, tg.t); err == nil && old != nil {
				for _, c := range old.Columns {
					if ts.Column(c.ID) == nil {
						ts.Columns = append(ts.Columns, c)
					}
				}
			}
		}
		if err := stats.Save(x.ctx, txn, ts); err != nil {
			return err
		}
		s.statsWritten = append(s.statsWritten, tg.t.ID)
	}
	return nil
}

// diskBytes estimates what t's primary index takes on disk (stats.Table's
// DiskBytes): the bytes of this node's disk holding its span, as the
// directory estimates them (flushed files only), at most logical, its
// keys and values as stored. 0 when it cannot tell: a directory without
// the estimate, an error, nothing flushed. The object-store cost model
// counts chunks by it: bench/joinchoice's table is 61 MiB of keys and
// values in 19 MiB of SSTs, and a request fetches 1 MiB of the file. On
// a node holding only some of the table's replicas the estimate sees only
// those, and is low.
func diskBytes(ctx context.Context, dir plan.TabletDirectory, t *catalog.Table, logical int64) int64 {
	du, ok := dir.(plan.SpanDiskUsage)
	if !ok || logical <= 0 {
		return 0
	}
	layout, err := t.Layout()
	if err != nil {
		return 0
	}
	span := layout.IndexSpan(&layout.Primary)
	n, err := du.SpanDiskBytes(ctx, span.Key, span.EndKey)
	if err != nil || n <= 0 {
		return 0
	}
	return min(n, logical)
}

// noteMutations remembers the rows a DML statement changed, for the
// refresher once the transaction commits.
func (s *Session) noteMutations(p *plan.Plan, rows int64) {
	if p == nil || rows <= 0 || s.vars[autoStatsSetting] == "off" {
		return
	}
	var t *catalog.Table
	switch v := p.Root.(type) {
	case *plan.Insert:
		t = v.Table
	case *plan.Update:
		t = v.Table
	case *plan.Delete:
		t = v.Table
	default:
		return
	}
	s.noteTable(t, rows)
}

func (s *Session) noteTable(t *catalog.Table, rows int64) {
	if s.vars[autoStatsSetting] == "off" {
		return
	}
	if s.mutations == nil {
		s.mutations = map[*catalog.Table]int64{}
	}
	s.mutations[t] += rows
}

// noteCopy remembers the rows COPY FROM inserted, as noteMutations does
// for DML.
func (s *Session) noteCopy(x *stmtState, env *plan.Env, n *pg_query.CopyStmt, rows int64) {
	rv := n.GetRelation()
	if rv == nil || rows <= 0 {
		return
	}
	rel, err := env.Catalog.LookupRelation(x.ctx, rv.Schemaname, rv.Relname)
	if err != nil || rel.Table == nil {
		return
	}
	s.noteTable(rel.Table, rows)
}

// endTxnStats runs when a transaction ends: the cache forgets the
// statistics the transaction wrote (other sessions then read what
// committed), and a commit reports its mutations to the refresher, which
// collects stale tables in transactions of its own, and what its ANALYZEs
// read past (Refresher.Analyzed).
func (s *Session) endTxnStats(committed bool) {
	for _, id := range s.statsWritten {
		s.b.stats.Invalidate(id)
	}
	if committed {
		for id, n := range s.analyzed {
			if h := analyzedHook.Load(); h != nil {
				(*h)(id, n)
			}
			s.b.refresher.Analyzed(id, n)
		}
		for t, n := range s.mutations {
			s.b.refresher.NotifyMutations(t, n)
		}
	}
	s.statsWritten, s.mutations, s.analyzed = nil, nil, nil
}

// analyzedHook, when set, sees what each committed ANALYZE of a whole
// table hands to the refresher (tests: SetAnalyzedHook).
var analyzedHook atomic.Pointer[func(id catalog.ID, n int64)]

// vacuumAnalyzes reports whether VACUUM's options include ANALYZE.
func vacuumAnalyzes(n *pg_query.VacuumStmt) bool {
	return hasOption(n.Options, "analyze")
}

// hasOption reports whether a VACUUM/ANALYZE option list turns name on.
func hasOption(opts []*pg_query.Node, name string) bool {
	for _, o := range opts {
		if de := o.GetDefElem(); de != nil && de.Defname == name {
			if de.Arg == nil {
				return true
			}
			v, _ := constText(de.Arg)
			return v != "false" && v != "off" && v != "0"
		}
	}
	return false
}

// Close stops the Backend's background work (automatic statistics
// collections, background rebalances), waiting for what is running: the
// server calls it before closing the storage they read.
func (b *Backend) Close() {
	b.refresher.Stop()
	b.bg.cancel()
	b.bg.wg.Wait()
}
