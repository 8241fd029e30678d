package session

import (
	"context"
	"reflect"
	"strings"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// The plan cache of prepared statements: a generic plan for one shape,
// the point lookup by primary key.
//
// Every Execute binds and optimizes its statement again with the
// parameters as constants (custom plans, params.go), which is what lets
// `WHERE k = $1` become a point read; binding and optimizing were a
// quarter of the CPU of a prepared point SELECT. The optimizer derives
// spans from constants only, so a plan cannot in general be reused for
// other values. One shape can, with no optimizer support: a SELECT whose
// WHERE is nothing but `pkcol = $n` for every primary-key column (of a
// table without hash buckets), which optimizes to projections over a
// scan of exactly one point span made of the parameter values, whatever
// they are (a NULL parameter aside: the statement then re-plans). For
// such a statement the first Execute keeps the optimized plan; later ones
// copy it with the new values as the span. A hash-sharded primary key
// (CockroachDB's USING HASH) is the same shape with the shard column in
// front: the optimizer derives the shard from the values (the point lies
// in one bucket), and so does instantiate, with builtins.ShardBucket when
// the shard column holds the expression the DDL writes (an index on an
// expression re-plans). Anything else re-plans every time, as
// PostgreSQL's custom plans do.
//
// The cached plan is valid for one catalog generation (descriptors,
// hence indexes and column types, are those the generation names), one
// database, user and search path (name resolution), and the settings the
// binder folds constants with; planKey holds them all and a mismatch
// re-plans (and caches the new plan). EXPLAIN and EXPLAIN ANALYZE always
// plan afresh.

// planSlot is a prepared statement's plan cache.
type planSlot struct {
	pp *pointPlan
	// misses counts Executes that could not make a cached plan.
	misses int
}

// planKey is what a cached plan depends on besides the statement text.
type planKey struct {
	gen                                         string
	db                                          catalog.ID
	user, searchPath, timeZone, dateStyle, intv string
}

// pointPlan is a cached point-lookup plan.
type pointPlan struct {
	key planKey
	// p is the optimized plan of the Execute that made it; it is never
	// started itself, only copied.
	p *plan.Plan
	// params[i] is the parameter (0-based) giving primary-key column i
	// (after the shard column of a hash-sharded key).
	params []int
	// buckets, for a hash-sharded primary key, is its bucket count: the
	// span starts with the bucket of the parameters' values.
	buckets uint32
}

// planCacheKey returns the key for a statement of the current
// transaction, and false when the transaction has written the catalog
// (its statements read their own writes, not a generation).
func (s *Session) planCacheKey(ctx context.Context, txn *kv.Txn) (planKey, bool, error) {
	if s.txnWroteCatalog {
		return planKey{}, false, nil
	}
	gen, err := catalog.NewReader(txn, s.b.cache).UseGeneration().Generation(ctx)
	if err != nil || gen == nil {
		return planKey{}, false, err
	}
	return planKey{
		gen: string(gen), db: s.db.ID, user: s.user,
		searchPath: s.vars["search_path"], timeZone: s.vars["timezone"],
		dateStyle: s.vars["datestyle"], intv: s.vars["intervalstyle"],
	}, true, nil
}

// instantiate returns a copy of the cached plan reading the point the
// parameters name, or nil if they do not fit it (a NULL, a different
// type).
func (pp *pointPlan) instantiate(params []types.Datum) *plan.Plan {
	key := make([]types.Datum, 0, len(pp.params)+1)
	if pp.buckets > 0 {
		key = append(key, nil) // the shard, below
	}
	for _, j := range pp.params {
		if j >= len(params) || types.IsNull(params[j]) {
			return nil
		}
		key = append(key, params[j])
	}
	if pp.buckets > 0 {
		b, err := builtins.ShardBucket(pp.buckets, key[1:]...)
		if err != nil {
			return nil
		}
		key[0] = types.DInt(b)
	}
	p := *pp.p
	p.Root = copyChain(pp.p.Root, func(sc *plan.Scan) {
		sc.Spans = []plan.Span{{Start: key, End: key, EndInclusive: true}}
	})
	return &p
}

// copyChain copies the Project nodes down to the Scan, and the Scan,
// applying f to the copy of the Scan. The expressions are shared: nothing
// changes them once built (sem.Map copies).
func copyChain(n plan.Node, f func(*plan.Scan)) plan.Node {
	switch v := n.(type) {
	case *plan.Project:
		c := *v
		c.Input = copyChain(v.Input, f)
		return &c
	case *plan.Scan:
		c := *v
		f(&c)
		return &c
	}
	panic("session: cached plan of an unexpected shape")
}

// pointParams inspects a bound plan, before its parameters are
// substituted: if its only parameters appear as `col = $n` conjuncts of
// one predicate holding nothing else (or `col IN ($n)` of one element), with the column of the parameter's
// exact type, it returns the parameters so used (0-based; nil: not a
// candidate).
func pointParams(p *plan.Plan, nparams int) []int {
	if nparams == 0 || len(p.Subqueries) > 0 || len(p.CTEs) > 0 || !p.ReadOnly {
		return nil
	}
	var holders []sem.Expr
	walkExprs(reflect.ValueOf(p), func(e sem.Expr) sem.Expr {
		if hasParam(e) {
			holders = append(holders, e)
		}
		return e
	}, make(map[uintptr]bool))
	if len(holders) != 1 {
		return nil
	}
	var out []int
	seen := map[int]bool{}
	for _, c := range conjunctsOf(holders[0]) {
		var l, r sem.Expr
		switch v := c.(type) {
		case *sem.Cmp:
			if v.Op != sem.EQ {
				return nil
			}
			l, r = v.Left, v.Right
		case *sem.In:
			// `col IN ($n)`, one element, is `col = $n` (the kv
			// workload's reads of one key).
			if v.Negated || len(v.List) != 1 {
				return nil
			}
			l, r = v.Left, v.List[0]
		default:
			return nil
		}
		ref, rok := l.(*sem.ColRef)
		prm, pok := r.(*sem.Param)
		if !rok || !pok {
			ref, rok = r.(*sem.ColRef)
			prm, pok = l.(*sem.Param)
		}
		if !rok || !pok || prm.Index < 1 || prm.Index > nparams || seen[prm.Index-1] ||
			!ref.T.Identical(prm.T) || !pointKeyType(prm.T) {
			return nil
		}
		seen[prm.Index-1] = true
		out = append(out, prm.Index-1)
	}
	return out
}

// pointKeyType: key types whose equality is plain value equality (no
// NaN or signed zero as in floats, no collation).
func pointKeyType(t *types.T) bool {
	switch t.Family {
	case types.IntFamily, types.UUIDFamily, types.BoolFamily:
		return true
	case types.StringFamily:
		return t.Oid == types.Text.Oid
	}
	return false
}

func hasParam(e sem.Expr) bool {
	found := false
	sem.Map(e, func(x sem.Expr) sem.Expr {
		if _, ok := x.(*sem.Param); ok {
			found = true
		}
		return x
	})
	return found
}

func conjunctsOf(e sem.Expr) []sem.Expr {
	if a, ok := e.(*sem.And); ok {
		var out []sem.Expr
		for _, x := range a.Args {
			out = append(out, conjunctsOf(x)...)
		}
		return out
	}
	return []sem.Expr{e}
}

// newPointPlan checks that the optimized plan p, made with params, is
// Projects over a Scan of the primary index reading one point whose key
// values are, column by column, those of the parameters used (candidates,
// from pointParams), each parameter once; it returns the cached form, or
// nil. p is copied, so starting p later does not touch the cache.
func newPointPlan(key planKey, p *plan.Plan, candidates []int, params []types.Datum) *pointPlan {
	var sc *plan.Scan
	for n := p.Root; sc == nil; {
		switch v := n.(type) {
		case *plan.Project:
			n = v.Input
		case *plan.Scan:
			sc = v
		default:
			return nil
		}
	}
	t := sc.Table
	if t == nil || (sc.Index != nil && sc.Index.ID != t.PrimaryIndex.ID) || sc.Filter != nil ||
		sc.Buckets != nil || t.Partitioning.Kind == catalog.PartitionHash || sc.HardLimit != 0 ||
		len(sc.Spans) != 1 {
		return nil
	}
	pp := &pointPlan{key: key}
	first := 0 // the first key column a parameter gives
	if hs := t.PrimaryIndex.HashSharding; hs != nil {
		if !standardShard(t, &t.PrimaryIndex) {
			return nil
		}
		pp.buckets, first = uint32(hs.Buckets), 1
	}
	sp := sc.Spans[0]
	n := first + len(candidates)
	if len(t.PrimaryIndex.KeyColumnIDs) != n || sp.StartExclusive || !sp.EndInclusive || len(sp.Start) != n || len(sp.End) != n {
		return nil
	}
	if first == 1 {
		// The optimizer's shard must be the one instantiate computes.
		b, err := builtins.ShardBucket(pp.buckets, sp.Start[1:]...)
		if err != nil || types.IsNull(sp.Start[0]) || types.Compare(sp.Start[0], types.DInt(b)) != 0 || types.Compare(sp.End[0], sp.Start[0]) != 0 {
			return nil
		}
	}
	used := map[int]bool{}
	for i := first; i < n; i++ {
		if types.IsNull(sp.Start[i]) || types.Compare(sp.Start[i], sp.End[i]) != 0 {
			return nil
		}
		// The parameter whose value this is; two candidates with equal
		// values make the column's source ambiguous.
		src := -1
		for _, j := range candidates {
			if j < len(params) && !types.IsNull(params[j]) &&
				reflect.TypeOf(params[j]) == reflect.TypeOf(sp.Start[i]) && types.Compare(params[j], sp.Start[i]) == 0 {
				if src >= 0 {
					return nil
				}
				src = j
			}
		}
		if src < 0 || used[src] {
			return nil
		}
		used[src] = true
		pp.params = append(pp.params, src)
	}
	c := *p
	c.Root = copyChain(p.Root, func(*plan.Scan) {})
	pp.p = &c
	return pp
}

// standardShard reports whether idx's shard column holds the expression
// the DDL writes over its key columns after the shard (builtins.ShardExpr),
// which builtins.ShardBucket computes.
func standardShard(t *catalog.Table, idx *catalog.Index) bool {
	col := t.ColumnByID(idx.HashSharding.ShardColumnID)
	if col == nil || len(idx.KeyColumnIDs) < 2 || idx.KeyColumnIDs[0] != col.ID {
		return false
	}
	args := make([]string, 0, len(idx.KeyColumnIDs)-1)
	for _, id := range idx.KeyColumnIDs[1:] {
		c := t.ColumnByID(id)
		if c == nil || c.IsIndexExpr() {
			return false
		}
		args = append(args, builtins.QuoteIdent(c.Name))
	}
	return col.ComputedExpr == builtins.ShardExpr(args, idx.HashSharding.Buckets)
}

// Simple-protocol statements. A query sent as text carries its values as
// literals, so each one is a new statement to PostgreSQL too; pgbench's
// select-only sends `SELECT abalance FROM pgbench_accounts WHERE aid =
// 48213` with a different number each time. parser.Statement.Parameterize
// turns the WHERE constants of such a statement into $1, $2, ..., and the
// session keeps, per parameterized text, the point plan (above) of the
// parameterized statement, made once by planning it aside. A later
// statement of that text runs the cached plan with its constants as the
// parameters, when they stand for the literals exactly: a quoted string
// is an unknown-typed literal, resolved and read by the column type's
// input function exactly as an untyped parameter is; an integer literal
// must meet an integer column and fit its width (where PostgreSQL would
// compare across widths, e.g. int2 = 100000, the statement plans as
// usual). Otherwise the statement is planned as typed, as before.

// simpleEntry is the cached plan of one parameterized text.
type simpleEntry struct {
	stmt  *parser.Statement // the parameterized form (nil: it did not parse as one statement)
	types []*types.T        // its parameters' types, with slot.pp
	slot  planSlot
}

// maxSimpleEntries bounds a session's cache of parameterized texts (it is
// cleared when full).
const maxSimpleEntries = 256

// startQuery binds, optimizes and starts a plannable statement of the
// simple protocol, through the cached plan of its parameterized form when
// there is one (see above).
func (s *Session) startQuery(x *stmtState, g stmtGroup) (*cursor, error) {
	st := g.main
	var e *simpleEntry
	var lits []parser.Literal
	if sq := g.scanned; sq != nil {
		e, lits = sq.simple, sq.lits
	} else if e, lits = s.simpleEntryFor(st); e == nil {
		return s.startPlan(x, st, nil, nil, nil)
	}
	if e.slot.pp != nil {
		if params, ok := literalParams(x.types(), e.types, lits); ok {
			txn, err := x.txn()
			if err != nil {
				return nil, err
			}
			key, ok, err := s.planCacheKey(x.ctx, txn)
			if err != nil {
				return nil, err
			}
			if ok && key == e.slot.pp.key {
				if p := e.slot.pp.instantiate(params); p != nil {
					if err := s.checkPrivileges(x.ctx, txn, p); err != nil {
						return nil, err
					}
					s.b.planHits.Add(1)
					return s.startExec(x, txn, p, params, nil)
				}
			}
		}
	}
	if sq := g.scanned; sq != nil {
		// st is another query's tree of the same shape: plan the real one.
		stmts, err := parse(sq.sql)
		if err != nil {
			return nil, err
		}
		if len(stmts) != 1 {
			return nil, pgerror.New(pgerrcode.InternalError, "query of a cached shape parsed into %d statements", len(stmts))
		}
		st = &stmts[0]
		if e, lits = s.simpleEntryFor(st); e == nil {
			return s.startPlan(x, st, nil, nil, nil)
		}
	}
	if e.slot.misses < maxPointPlanMisses {
		if err := s.makeSimplePlan(x, e, lits); err != nil {
			return nil, err
		}
	}
	s.b.planMisses.Add(1)
	return s.startPlan(x, st, nil, nil, nil)
}

// Query shapes. Parsing was then the largest cost of a point SELECT sent
// as text (a call into libpg_query and the decoding of the tree it
// returns: a quarter of the CPU). parser.Shape scans a query string
// instead (PostgreSQL's scanner, several times cheaper) into its tokens
// with the integer and quoted string constants taken out; the session
// remembers, per shape, a parsed statement of that shape and which
// constants are the parameters of its cached plan. A query of a known
// shape then runs that plan with its own constants without being parsed;
// when the plan cannot serve it (changed catalog, a NULL, a constant that
// does not convert), the query is parsed and planned after all. Only a
// single SELECT of plain text gets a shape (see shapeOf).

// shapeEntry is what a session knows of one query shape.
type shapeEntry struct {
	// st is a statement of this shape as parsed (its constants are those
	// of the query that made the entry); nil: the shape has no cached plan.
	st     *parser.Statement
	simple *simpleEntry
	uses   []constUse // one per constant of the shape
	nlits  int
}

// constUse says what one constant of a shape is: the parameter of the
// cached plan it gives (neg: negated), or, param < 0, text it must be
// verbatim (a constant outside WHERE col = const, kept in the plan).
type constUse struct {
	param int
	neg   bool
	text  string
}

// scannedQuery is a query a shape matched: its text and its constants as
// the parameters of simple's plan.
type scannedQuery struct {
	sql    string
	lits   []parser.Literal
	simple *simpleEntry
}

// queryShape is a scanned query string.
type queryShape struct {
	key    string
	consts []parser.ScanConst
}

// shapeOf scans sql if it can be a single SELECT with a cached plan:
// plain text (parser's own test: no comments, nothing the dialect
// rewrites) starting with SELECT.
func shapeOf(sql string) *queryShape {
	t := strings.TrimLeft(sql, " \t\r\n")
	if len(t) < 6 || !strings.EqualFold(t[:6], "select") || !parser.Plain(sql) {
		return nil
	}
	key, consts, ok := parser.Shape(sql)
	if !ok {
		return nil
	}
	return &queryShape{key: key, consts: consts}
}

// shapeGroup returns the statement group of sql without parsing it, when
// sql has a known shape with a cached plan and its constants fit.
func (s *Session) shapeGroup(sql string, sh *queryShape) (stmtGroup, bool) {
	if sh == nil {
		return stmtGroup{}, false
	}
	se := s.shapes[sh.key]
	if se == nil || se.st == nil || len(sh.consts) != len(se.uses) {
		return stmtGroup{}, false
	}
	lits := make([]parser.Literal, se.nlits)
	for k, c := range sh.consts {
		u := se.uses[k]
		if u.param < 0 {
			if sql[c.Start:c.End] != u.text {
				return stmtGroup{}, false
			}
			continue
		}
		l := parser.Literal{IsInt: c.IsInt, Int: c.Int, Str: c.Str}
		if u.neg {
			l.Int = -l.Int
		}
		lits[u.param] = l
	}
	return stmtGroup{main: se.st, scanned: &scannedQuery{sql: sql, lits: lits, simple: se.simple}}, true
}

// noteShape records what the parsed stmts of sql, of shape sh, say about
// the shape: the statement and the use of each constant when it has a
// parameterized form, else that the shape has none.
func (s *Session) noteShape(sql string, sh *queryShape, stmts []parser.Statement) {
	if sh == nil || s.shapes[sh.key] != nil {
		return
	}
	if s.shapes == nil || len(s.shapes) >= maxSimpleEntries {
		s.shapes = map[string]*shapeEntry{}
	}
	se := &shapeEntry{}
	s.shapes[sh.key] = se
	if len(stmts) != 1 {
		return
	}
	e, lits := s.simpleEntryFor(&stmts[0])
	if e == nil {
		return
	}
	uses := make([]constUse, len(sh.consts))
	matched := 0
	for k, c := range sh.consts {
		uses[k] = constUse{param: -1, text: sql[c.Start:c.End]}
		for j, l := range lits {
			if l.Pos == c.Start || (c.Neg && l.Pos == c.NegPos) {
				if l.IsInt != c.IsInt {
					return
				}
				uses[k] = constUse{param: j, neg: l.Pos != c.Start}
				matched++
			}
		}
	}
	if matched != len(lits) {
		return
	}
	se.st, se.simple, se.uses, se.nlits = &stmts[0], e, uses, len(lits)
}

// simpleEntryFor returns the cache entry of st's parameterized text and
// st's constants (nil: st has no such form).
func (s *Session) simpleEntryFor(st *parser.Statement) (*simpleEntry, []parser.Literal) {
	if _, ok := node(st).(*pg_query.Node_SelectStmt); !ok || s.txnWroteCatalog {
		return nil, nil
	}
	text, lits, ok := st.Parameterize()
	if !ok {
		return nil, nil
	}
	e := s.simplePlans[text]
	if e == nil {
		e = &simpleEntry{}
		if stmts, err := parser.Parse(text); err == nil && len(stmts) == 1 {
			e.stmt = &stmts[0]
		}
		if s.simplePlans == nil || len(s.simplePlans) >= maxSimpleEntries {
			s.simplePlans = map[string]*simpleEntry{}
		}
		s.simplePlans[text] = e
	}
	if e.stmt == nil {
		return nil, nil
	}
	return e, lits
}

// makeSimplePlan plans e's parameterized statement with lits as its
// parameters and keeps the result if it is a point plan. Only errors of
// the transaction matter; one of planning just leaves no plan (the
// statement itself, planned next, reports what is wrong with it).
func (s *Session) makeSimplePlan(x *stmtState, e *simpleEntry, lits []parser.Literal) error {
	txn, err := x.txn()
	if err != nil {
		return err
	}
	key, ok, err := s.planCacheKey(x.ctx, txn)
	if err != nil || !ok {
		return err
	}
	e.slot.misses++
	pt := sem.NewParamTypes()
	p, err := plan.Build(x.ctx, s.planEnv(txn, pt, x.types()), e.stmt)
	if err != nil {
		return nil
	}
	pts, err := pt.Types()
	if err != nil || len(pts) != len(lits) {
		return nil
	}
	params, ok := literalParams(x.types(), pts, lits)
	if !ok {
		return nil
	}
	candidates := pointParams(p, len(params))
	if candidates == nil {
		return nil
	}
	substituteParams(p, params, x.types())
	if err := s.optimize(x.ctx, p); err != nil {
		return nil
	}
	if pp := newPointPlan(key, p, candidates, params); pp != nil {
		e.slot.pp, e.types, e.slot.misses = pp, pts, 0
	}
	return nil
}

// literalParams converts a statement's constants to the parameter types
// of its parameterized form, when each stands for its literal exactly
// (see above).
func literalParams(tc *types.Context, pts []*types.T, lits []parser.Literal) ([]types.Datum, bool) {
	if len(pts) != len(lits) {
		return nil, false
	}
	out := make([]types.Datum, len(lits))
	for i, l := range lits {
		t := pts[i]
		if !l.IsInt {
			d, err := types.ParseDatum(tc, t, l.Str)
			if err != nil {
				return nil, false
			}
			out[i] = d
			continue
		}
		if t.Family != types.IntFamily {
			return nil, false
		}
		switch t.Width {
		case 16:
			if l.Int < -1<<15 || l.Int >= 1<<15 {
				return nil, false
			}
		case 32:
			if l.Int < -1<<31 || l.Int >= 1<<31 {
				return nil, false
			}
		}
		out[i] = types.DInt(l.Int)
	}
	return out, true
}
