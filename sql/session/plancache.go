package session

import (
	"reflect"
	"strings"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/exec"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// The plan cache of prepared statements: generic plans for the shapes
// whose plan does not depend on the parameter values but through the
// span of one index scan.
//
// Every Execute binds and optimizes its statement again with the
// parameters as constants (custom plans, params.go), which is what lets
// `WHERE k = $1` become a point read; binding and optimizing were a
// quarter of the CPU of a prepared point SELECT. The optimizer derives
// spans from constants only, so a plan cannot in general be reused for
// other values. These shapes can, with no optimizer support:
//
//   - a SELECT, UPDATE or DELETE of one table (no FROM, USING, subquery
//     or CTE) whose WHERE is nothing but `col = e` (or `col IN (e)`)
//     conjuncts, each e made of parameters, constants and casts only, of
//     exactly the column's type, and which optimizes to an UPDATE or
//     DELETE over projections over one scan of an index (or an index
//     join over it) reading one span whose key prefix is, column by
//     column, the values of those e and nothing else: no residual filter,
//     no partial index. The rows such a scan reads are the rows with those
//     values whatever the values are, so the plan serves any of them;
//     only the span is made again at each Execute, from the values (a
//     NULL, or an e that does not evaluate, re-plans: the custom plan
//     reports the error or the empty result);
//   - an INSERT ... VALUES (no subquery): its plan is made without the
//     values at all, so it is the same for every value.
//
// Parameters outside that WHERE (UPDATE's SET, RETURNING, the select
// list, VALUES) stay placeholders in the generic plan and the executor
// reads them (sem.EvalContext.Params). The optimizer never sees a value
// it could derive anything but the span from (the cached plan is also
// checked to hold no constant equal to a key value, in case the
// optimizer copied one somewhere).
//
// The plan is kept at the first Execute that makes it, not after five
// custom plans as PostgreSQL does: PostgreSQL compares the generic plan's
// cost with the custom plans' because its generic plan may be worse;
// this one is the plan the custom plan would be, so there is nothing to
// compare. A hash-sharded key (CockroachDB's USING HASH) is the same
// shape with the shard column in front: the optimizer derives the shard
// from the values (the point lies in one bucket), and so does
// instantiate, with builtins.ShardBucket when the shard column holds the
// expression the DDL writes (an index on an expression re-plans).
// Anything else re-plans every time, as PostgreSQL's custom plans do.
//
// The cached plan is valid for one catalog generation (descriptors,
// hence indexes, column types, defaults and constraints, are those the
// generation names; any descriptor change makes a new generation), one
// database, user and search path (name resolution), and the settings the
// binder folds constants with; planKey holds them all and a mismatch
// re-plans (and caches the new plan). EXPLAIN and EXPLAIN ANALYZE always
// plan afresh.

// planSlot is a prepared statement's plan cache.
type planSlot struct {
	pp *genericPlan
	// misses counts Executes that could not make a cached plan.
	misses int
}

// planKey is what a cached plan depends on besides the statement text.
type planKey struct {
	gen                                         string
	db                                          catalog.ID
	user, searchPath, timeZone, dateStyle, intv string
}

// genericPlan is a cached plan (see above).
type genericPlan struct {
	key planKey
	// p is the optimized plan of the Execute that made it; it is never
	// started itself, only copied.
	p *plan.Plan
	// scan: p reads one span of an index, made of keys; false for an
	// INSERT ... VALUES, which p serves as it is.
	scan bool
	// keys[i] computes the span's key column i (after the shard column of
	// a hash-sharded key) from the parameters: a *sem.Param, or
	// parameters, constants and casts that fold to a constant.
	keys []sem.Expr
	// buckets, for a hash-sharded primary key, is its bucket count: the
	// span starts with the bucket of the key values.
	buckets uint32
	// point is the executor's point-read shape of the plans instantiated
	// from p, kept so that an Execute does not build it again
	// (exec.PointCache).
	point exec.PointCache
	// implicit: p may run without a kv.Txn in an implicit transaction
	// (exec.ImplicitPointRead; implicit.go); implicitRetries counts the
	// tries that ran again in one.
	implicit        bool
	implicitRetries int
	// privChecked: checkPrivileges passed for a plan instantiated from p
	// in a transaction whose plan key was key. What it checks (the
	// user's roles and attributes, the tables' and schemas' ACLs) is
	// catalog state, every change of which makes a new generation
	// (catalog.Writer.bump), and key holds the user, the database and
	// the generation: it holds for every plan of p under key. The
	// implicit read of a user other than the superuser relies on it
	// (implicit.go); a plan made by makeSimplePlan, which checks nothing,
	// starts without it.
	privChecked bool
	// fastKey: an implicit read (above) whose key values are parameters
	// as they are, on no hash-sharded key, that returns no hidden column:
	// an Execute may read it by the fast path (fastread.go).
	fastKey bool
}

// planCacheKey returns the key for statement x of the current
// transaction, and false when the transaction has written the catalog
// (its statements read their own writes, not a generation). The
// generation is read through the statement's catalog reader, which then
// answers the executor's lookups for it without reading it again.
func (s *Session) planCacheKey(x *stmtState, txn *kv.Txn) (planKey, bool, error) {
	if s.txnWroteCatalog {
		return planKey{}, false, nil
	}
	gen, err := x.reader(txn).Generation(x.ctx)
	if err != nil || gen == nil {
		return planKey{}, false, err
	}
	// The same generation as the last statement's, nearly always: its
	// string is kept rather than made from the bytes each time.
	if string(gen) != s.lastGen {
		s.lastGen = string(gen)
	}
	return planKey{
		gen: s.lastGen, db: s.db.ID, user: s.user,
		searchPath: s.vars["search_path"], timeZone: s.vars["timezone"],
		dateStyle: s.vars["datestyle"], intv: s.vars["intervalstyle"],
	}, true, nil
}

// instantiate returns a copy of the cached plan for params, or nil if
// they do not fit it (a NULL key value, a key expression that does not
// evaluate).
//
// x is the statement; its type context is made only for a key expression
// that is not a bare parameter.
func (gp *genericPlan) instantiate(params []types.Datum, x *stmtState) *plan.Plan {
	if !gp.scan {
		p := *gp.p
		p.Root = copyChain(gp.p.Root, nil, nil)
		return &p
	}
	// One allocation for the plan, its chain's nodes, the span and the
	// key: five of the objects every Execute of a point lookup made.
	in := &planInstance{p: *gp.p}
	key := in.key[:0]
	if len(gp.keys)+1 > len(in.key) {
		key = make([]types.Datum, 0, len(gp.keys)+1)
	}
	if gp.buckets > 0 {
		key = append(key, nil) // the shard, below
	}
	for _, e := range gp.keys {
		var d types.Datum
		if pr, ok := e.(*sem.Param); ok {
			d = paramValue(pr, params)
		} else {
			d = keyValue(e, params, x.types())
		}
		if d == nil {
			return nil
		}
		key = append(key, d)
	}
	if gp.buckets > 0 {
		b, err := builtins.ShardBucket(gp.buckets, key[1:]...)
		if err != nil {
			return nil
		}
		key[0] = types.DInt(b)
	}
	in.span[0] = plan.Span{Start: key, End: key, EndInclusive: true}
	// The chain ends in its one Scan, which copyChain copies into
	// in.scan.
	in.p.Root = copyChain(gp.p.Root, nil, in)
	in.scan.Spans = in.span[:]
	return &in.p
}

// planInstance is what instantiate makes for one Execute of a cached
// plan that reads a span: the plan, the Project and Scan its chain holds
// (a point SELECT's whole chain), the span and its key, allocated
// together. It is the Execute's own, as the separate objects were:
// nothing else points into it, and no later Execute reuses it (a
// suspended portal may still be reading an earlier instance).
type planInstance struct {
	p    plan.Plan
	proj plan.Project
	scan plan.Scan
	span [1]plan.Span
	key  [4]types.Datum
	// usedProj: proj holds the chain's first Project (a second one is
	// allocated on its own).
	usedProj bool
}

// keyValue evaluates a key expression of a generic plan over params: nil
// when it is NULL or does not fold to a constant (an error the custom
// plan will report).
func keyValue(e sem.Expr, params []types.Datum, tc *types.Context) types.Datum {
	if pr, ok := e.(*sem.Param); ok {
		return paramValue(pr, params)
	}
	c, ok := bindParams(e, params, tc).(*sem.Const)
	if !ok || types.IsNull(c.Datum) {
		return nil
	}
	return c.Datum
}

// paramValue is keyValue of a bare parameter.
func paramValue(pr *sem.Param, params []types.Datum) types.Datum {
	if pr.Index < 1 || pr.Index > len(params) || types.IsNull(params[pr.Index-1]) {
		return nil
	}
	return params[pr.Index-1]
}

// copyChain copies the nodes of a cached plan's chain down to its Scan,
// and the Scan, applying f (when not nil) to the copy of the Scan. The
// expressions are shared: nothing changes them once built (sem.Map
// copies). in, when not nil, lends its Project and Scan to the copies.
func copyChain(n plan.Node, f func(*plan.Scan), in *planInstance) plan.Node {
	switch v := n.(type) {
	case *plan.Insert:
		c := *v
		return &c
	case *plan.Update:
		c := *v
		c.Input = copyChain(v.Input, f, in)
		return &c
	case *plan.Delete:
		c := *v
		c.Input = copyChain(v.Input, f, in)
		return &c
	case *plan.Project:
		if in != nil && !in.usedProj {
			in.usedProj = true
			in.proj = *v
			in.proj.Input = copyChain(v.Input, f, in)
			return &in.proj
		}
		c := *v
		c.Input = copyChain(v.Input, f, in)
		return &c
	case *plan.IndexJoin:
		c := *v
		c.Input = copyChain(v.Input, f, in)
		return &c
	case *plan.Scan:
		var c *plan.Scan
		if in != nil {
			c = &in.scan
		} else {
			c = new(plan.Scan)
		}
		*c = *v
		if f != nil {
			f(c)
		}
		return c
	}
	panic("session: cached plan of an unexpected shape")
}

// genericShape is what a bound plan, before its parameters are
// substituted, says about a generic plan for it (see above).
type genericShape struct {
	// where is the WHERE over the scanned table (nil: an INSERT ...
	// VALUES, which has no key).
	where *plan.Filter
	// keys maps each table column the WHERE fixes to the expression of
	// parameters giving its value.
	keys map[rowenc.ColumnID]sem.Expr
}

// genericShapeOf returns p's shape if it may keep a generic plan, else
// nil.
func genericShapeOf(p *plan.Plan, nparams int) *genericShape {
	if nparams == 0 || len(p.Subqueries) > 0 || len(p.CTEs) > 0 {
		return nil
	}
	n := p.Root
	switch v := n.(type) {
	case *plan.Insert:
		if _, ok := v.Input.(*plan.Values); !ok {
			return nil
		}
		return &genericShape{}
	case *plan.Update:
		pr, ok := v.Input.(*plan.Project)
		if !ok {
			return nil
		}
		n = pr.Input
	case *plan.Delete:
		n = v.Input
	default:
		if !p.ReadOnly {
			return nil
		}
		for {
			pr, ok := n.(*plan.Project)
			if !ok {
				break
			}
			n = pr.Input
		}
	}
	f, ok := n.(*plan.Filter)
	if !ok {
		return nil
	}
	sc, ok := f.Input.(*plan.Scan)
	if !ok || sc.Table == nil || sc.Inverted != nil || sc.Filter != nil || len(sc.Spans) > 0 {
		return nil
	}
	byID := make(map[sem.ColumnID]rowenc.ColumnID, len(sc.Cols))
	for i, c := range sc.Cols {
		byID[c.ID] = sc.TableCols[i]
	}
	keys := map[rowenc.ColumnID]sem.Expr{}
	for _, c := range conjunctsOf(f.Pred) {
		col, e, ok := keyConjunct(c, byID)
		if !ok || keys[col] != nil {
			return nil
		}
		keys[col] = e
	}
	return &genericShape{where: f, keys: keys}
}

// keyConjunct recognizes `col = e` (either way round) or `col IN (e)`,
// e a parameter expression of col's exact type, col a column of the scan
// (byID maps the scan's column IDs to the table's).
func keyConjunct(c sem.Expr, byID map[sem.ColumnID]rowenc.ColumnID) (rowenc.ColumnID, sem.Expr, bool) {
	var l, r sem.Expr
	switch v := c.(type) {
	case *sem.Cmp:
		if v.Op != sem.EQ {
			return 0, nil, false
		}
		l, r = v.Left, v.Right
	case *sem.In:
		// `col IN ($n)`, one element, is `col = $n` (the kv
		// workload's reads of one key).
		if v.Negated || len(v.List) != 1 {
			return 0, nil, false
		}
		l, r = v.Left, v.List[0]
	default:
		return 0, nil, false
	}
	ref, ok := l.(*sem.ColRef)
	e := r
	if !ok {
		ref, ok = r.(*sem.ColRef)
		e = l
	}
	if !ok || !paramExpr(e) || !ref.T.Identical(e.Type()) || !pointKeyType(ref.T) {
		return 0, nil, false
	}
	col, ok := byID[ref.ID]
	return col, e, ok
}

// paramExpr: e is made of parameters (at least one), constants and
// casts only, so that it folds to a constant once the parameters are
// substituted (unless the cast fails).
func paramExpr(e sem.Expr) bool {
	ok, params := true, false
	sem.Walk(e, func(x sem.Expr) bool {
		switch x.(type) {
		case *sem.Param:
			params = true
		case *sem.Const, *sem.Cast:
		default:
			ok = false
		}
		return ok
	})
	return ok && params
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

// bindWhere substitutes the parameters of the shape's WHERE (and only
// there) in the bound plan, which the optimizer then makes spans of.
func (g *genericShape) bindWhere(params []types.Datum, tc *types.Context) {
	if g.where != nil {
		g.where.Pred = bindParams(g.where.Pred, params, tc)
	}
}

// newGenericPlan checks that p, the plan of shape g optimized with the
// WHERE's parameters as constants (params), is one of the generic shapes
// and returns its cached form, or nil. p is copied, so starting p later
// does not touch the cache.
func newGenericPlan(key planKey, p *plan.Plan, g *genericShape, params []types.Datum, tc *types.Context) *genericPlan {
	gp := &genericPlan{key: key}
	c := *p
	if g.where == nil {
		if _, ok := p.Root.(*plan.Insert); !ok {
			return nil
		}
		c.Root = copyChain(p.Root, nil, nil)
		gp.p = &c
		return gp
	}
	vals := make(map[rowenc.ColumnID]types.Datum, len(g.keys))
	for col, e := range g.keys {
		d := keyValue(e, params, tc)
		if d == nil {
			return nil
		}
		vals[col] = d
	}
	n := p.Root
	switch v := n.(type) {
	case *plan.Update:
		n = v.Input
	case *plan.Delete:
		n = v.Input
	}
	for {
		pr, ok := n.(*plan.Project)
		if !ok {
			break
		}
		n = pr.Input
	}
	if ij, ok := n.(*plan.IndexJoin); ok {
		if ij.Filter != nil {
			return nil
		}
		n = ij.Input
	}
	sc, ok := n.(*plan.Scan)
	if !ok {
		return nil
	}
	t := sc.Table
	idx := sc.Index
	if idx == nil && t != nil {
		idx = &t.PrimaryIndex
	}
	if t == nil || sc.Filter != nil || sc.Inverted != nil || sc.Buckets != nil || idx.Predicate != "" ||
		t.Partitioning.Kind == catalog.PartitionHash || sc.HardLimit != 0 || len(sc.Spans) != 1 {
		return nil
	}
	first := 0 // the first key column a parameter gives
	if hs := idx.HashSharding; hs != nil {
		if idx.ID != t.PrimaryIndex.ID || !standardShard(t, idx) {
			return nil
		}
		gp.buckets, first = uint32(hs.Buckets), 1
	}
	sp := sc.Spans[0]
	n2 := len(sp.Start)
	if n2-first != len(g.keys) || n2 > len(idx.KeyColumnIDs) || len(sp.End) != n2 || sp.StartExclusive || !sp.EndInclusive {
		return nil
	}
	if first == 1 {
		// The optimizer's shard must be the one instantiate computes.
		b, err := builtins.ShardBucket(gp.buckets, sp.Start[1:]...)
		if err != nil || types.IsNull(sp.Start[0]) || types.Compare(sp.Start[0], types.DInt(b)) != 0 || types.Compare(sp.End[0], sp.Start[0]) != 0 {
			return nil
		}
	}
	for i := first; i < n2; i++ {
		col := idx.KeyColumnIDs[i]
		e, ok := g.keys[col]
		d := vals[col]
		if !ok || types.IsNull(sp.Start[i]) || reflect.TypeOf(d) != reflect.TypeOf(sp.Start[i]) ||
			types.Compare(d, sp.Start[i]) != 0 || types.Compare(sp.End[i], sp.Start[i]) != 0 {
			return nil
		}
		gp.keys = append(gp.keys, e)
	}
	c.Root = copyChain(p.Root, func(*plan.Scan) {}, nil)
	gp.p, gp.scan = &c, true
	if holdsValue(gp.p, vals) {
		return nil
	}
	gp.implicit = exec.ImplicitPointRead(gp.p)
	gp.fastKey = gp.implicit && gp.buckets == 0 && len(gp.p.Root.Columns()) == len(gp.p.Columns)
	for _, e := range gp.keys {
		if _, ok := e.(*sem.Param); !ok {
			gp.fastKey = false
		}
	}
	return gp
}

// holdsValue reports whether an expression of p holds a constant equal
// to one of vals: a key value the optimizer copied out of the WHERE,
// which the plan would then keep for other values (the optimizer does
// not do that today; this keeps it from going wrong if it ever does).
func holdsValue(p *plan.Plan, vals map[rowenc.ColumnID]types.Datum) bool {
	found := false
	walkExprs(reflect.ValueOf(p), func(e sem.Expr) sem.Expr {
		sem.Walk(e, func(x sem.Expr) bool {
			if c, ok := x.(*sem.Const); ok && !types.IsNull(c.Datum) {
				for _, d := range vals {
					if reflect.TypeOf(d) == reflect.TypeOf(c.Datum) && types.Compare(d, c.Datum) == 0 {
						found = true
					}
				}
			}
			return !found
		})
		return e
	}, make(map[uintptr]bool))
	return found
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
		var dst []types.Datum
		if sq := g.scanned; sq != nil && !sq.paramsUsed {
			// The first start of the query's statement (a retry makes
			// its own: the earlier attempt's plan read these).
			sq.paramsUsed, dst = true, sq.paramBuf[:0]
		}
		if params, ok := literalParams(x, e.types, lits, dst); ok {
			if c, ok, err := s.startImplicit(x, e.slot.pp, params); ok || err != nil {
				return c, err
			}
			txn, err := x.txn()
			if err != nil {
				return nil, err
			}
			key, ok, err := s.planCacheKey(x, txn)
			if err != nil {
				return nil, err
			}
			if ok && key == e.slot.pp.key {
				if p := e.slot.pp.instantiate(params, x); p != nil {
					if err := s.checkPrivileges(x.ctx, txn, p); err != nil {
						return nil, err
					}
					e.slot.pp.privChecked = true
					s.b.planHits.Add(1)
					x.point = &e.slot.pp.point
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
// single SELECT, UPDATE, DELETE or INSERT of plain text gets a shape (see
// shapeOf); Parameterize says which of their constants become parameters
// (pgbench's simple-protocol UPDATE and INSERT, issue 22, parsed every
// time before: 11% of a write transaction's CPU).

// shapeEntry is what a session knows of one query shape.
type shapeEntry struct {
	// st is a statement of this shape as parsed (its constants are those
	// of the query that made the entry); nil: the shape has no cached plan.
	st     *parser.Statement
	simple *simpleEntry
	uses   []constUse // one per constant of the shape
	nlits  int
	// stat is the shape's pg_stat_statements entry (recordStatement), as
	// a prepared statement keeps its own: every query of the shape has
	// the shape's fingerprint (fingerprintOf).
	stat keptStat
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
	// litBuf holds lits, and paramBuf the parameters the first start of
	// the statement makes of them (paramsUsed), when they fit: one
	// allocation instead of three for each of pgbench's statements.
	litBuf     [scannedInline]parser.Literal
	paramBuf   [scannedInline]types.Datum
	paramsUsed bool
}

// scannedInline is how many constants a scannedQuery holds inline
// (pgbench's INSERT has four).
const scannedInline = 4

// queryShape is a scanned query string. The session scans each Query
// into its own one (Session.shapeBuf), whose key and constants' buffers
// serve the next Query: a map look-up by string(key) copies nothing, and
// a map that keeps the key (noteShape, fingerprints) stores a copy.
type queryShape struct {
	key    []byte
	consts []parser.ScanConst
	// se is the session's entry of the shape once looked up (entryOf).
	se *shapeEntry
}

// shapeOf scans sql into sh if it can be a single SELECT, UPDATE, DELETE
// or INSERT with a cached plan: plain text (parser's own test: no
// comments, nothing the dialect rewrites) starting with one of those
// words. It returns sh, or nil when sql has no shape.
func shapeOf(sql string, sh *queryShape) *queryShape {
	t := strings.TrimLeft(sql, " \t\r\n")
	if len(t) < 6 || !parser.Plain(sql) {
		return nil
	}
	switch w := t[:6]; {
	case strings.EqualFold(w, "select"), strings.EqualFold(w, "update"), strings.EqualFold(w, "delete"), strings.EqualFold(w, "insert"):
	default:
		return nil
	}
	// What the last Query left is cleared (a constant's Str holds its
	// text), and a long one's buffers are not kept.
	clear(sh.consts)
	if cap(sh.key) > maxCachedText || cap(sh.consts) > 64 {
		sh.key, sh.consts = nil, nil
	}
	key, consts, ok := parser.AppendShape(sh.key[:0], sh.consts[:0], sql)
	sh.key, sh.consts, sh.se = key, consts, nil
	if !ok {
		return nil
	}
	return sh
}

// entryOf returns the session's entry of sh's shape (nil: none yet),
// looked up once per Query.
func (s *Session) entryOf(sh *queryShape) *shapeEntry {
	if sh.se == nil {
		sh.se = s.shapes[string(sh.key)]
	}
	return sh.se
}

// shapeGroup returns the statement group of sql without parsing it, when
// sql has a known shape with a cached plan and its constants fit.
func (s *Session) shapeGroup(sql string, sh *queryShape) (stmtGroup, bool) {
	if sh == nil {
		return stmtGroup{}, false
	}
	se := s.entryOf(sh)
	if se == nil || se.st == nil {
		return stmtGroup{}, false
	}
	sq := &scannedQuery{sql: sql, simple: se.simple}
	lits, ok := se.literals(sql, sh, sq.litBuf[:0])
	if !ok {
		return stmtGroup{}, false
	}
	sq.lits = lits
	return stmtGroup{main: se.st, scanned: sq}, true
}

// literals returns the constants of sql, of shape sh, as the parameters
// of se's cached plan, in dst when it has room (its length is ignored);
// false when sql does not fit se (a constant kept in the plan differs).
func (se *shapeEntry) literals(sql string, sh *queryShape, dst []parser.Literal) ([]parser.Literal, bool) {
	if len(sh.consts) != len(se.uses) {
		return nil, false
	}
	lits := dst[:0]
	if se.nlits > cap(lits) {
		lits = make([]parser.Literal, se.nlits)
	} else {
		lits = lits[:se.nlits]
	}
	for k, c := range sh.consts {
		u := se.uses[k]
		if u.param < 0 {
			if sql[c.Start:c.End] != u.text {
				return nil, false
			}
			continue
		}
		l := parser.Literal{IsInt: c.IsInt, Int: c.Int, Str: c.Str}
		if u.neg {
			l.Int = -l.Int
		}
		lits[u.param] = l
	}
	return lits, true
}

// noteShape records what the parsed stmts of sql, of shape sh, say about
// the shape: the statement and the use of each constant when it has a
// parameterized form, else that the shape has none.
func (s *Session) noteShape(sql string, sh *queryShape, stmts []parser.Statement) {
	if sh == nil || s.entryOf(sh) != nil {
		return
	}
	if s.shapes == nil || len(s.shapes) >= maxSimpleEntries {
		s.shapes = map[string]*shapeEntry{}
	}
	se := &shapeEntry{}
	s.shapes[string(sh.key)] = se
	sh.se = se
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
	switch node(st).(type) {
	case *pg_query.Node_SelectStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt, *pg_query.Node_InsertStmt:
	default:
		return nil, nil
	}
	if s.txnWroteCatalog {
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
	key, ok, err := s.planCacheKey(x, txn)
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
	params, ok := literalParams(x, pts, lits, nil)
	if !ok {
		return nil
	}
	shape := genericShapeOf(p, len(params))
	if shape == nil {
		return nil
	}
	shape.bindWhere(params, x.types())
	if err := s.optimize(x.ctx, p); err != nil {
		return nil
	}
	if pp := newGenericPlan(key, p, shape, params, x.types()); pp != nil {
		e.slot.pp, e.types, e.slot.misses = pp, pts, 0
	}
	return nil
}

// literalParams converts a statement's constants to the parameter types
// of its parameterized form, when each stands for its literal exactly
// (see above).
//
// The statement's type context (x.types()) is made only for a literal
// that is not an integer: an integer key needs none. The parameters go
// in dst when it has room (its length is ignored).
func literalParams(x *stmtState, pts []*types.T, lits []parser.Literal, dst []types.Datum) ([]types.Datum, bool) {
	if len(pts) != len(lits) {
		return nil, false
	}
	out := dst[:0]
	if cap(out) < len(lits) {
		out = make([]types.Datum, len(lits))
	} else {
		out = out[:len(lits)]
	}
	for i, l := range lits {
		t := pts[i]
		if !l.IsInt {
			d, err := types.ParseDatum(x.types(), t, l.Str)
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

// Transaction control. pgbench's BEGIN and END, two of the five
// statements of a simple-update transaction, were parsed by libpg_query
// every time (3% of its CPU once its DML kept plans). A query string
// that parsed into a single transaction-control statement (BEGIN, START
// TRANSACTION, COMMIT, END, ROLLBACK, SAVEPOINT, RELEASE, with their
// options) means the same thing whenever it is sent again: it names no
// object and holds no value the catalog or a setting could change, so
// the session keeps its parsed form by the exact text and runs that.
// Nothing changes a parsed Statement once made.

// maxTxnTextLen bounds the texts kept (BEGIN ISOLATION LEVEL ... fits).
const maxTxnTextLen = 128

// parseQuery parses sql (of shape sh, nil: none), through the
// transaction-control cache.
func (s *Session) parseQuery(sql string, sh *queryShape) ([]parser.Statement, error) {
	if sh == nil && len(sql) <= maxTxnTextLen {
		if stmts, ok := s.txnTexts[sql]; ok {
			return stmts, nil
		}
	}
	stmts, err := parse(sql)
	if err != nil || sh != nil || len(sql) > maxTxnTextLen || len(stmts) != 1 || !stmts[0].IsTransactionControl() {
		return stmts, err
	}
	if s.txnTexts == nil || len(s.txnTexts) >= maxSimpleEntries {
		s.txnTexts = map[string][]parser.Statement{}
	}
	s.txnTexts[sql] = stmts
	return stmts, nil
}
