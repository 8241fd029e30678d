package session

import (
	"context"
	"reflect"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
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
// copy it with the new values as the span. Anything else re-plans every
// time, as PostgreSQL's custom plans do.
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
	// params[i] is the parameter (0-based) giving primary-key column i.
	params []int
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
	key := make([]types.Datum, len(pp.params))
	for i, j := range pp.params {
		if j >= len(params) || types.IsNull(params[j]) {
			return nil
		}
		key[i] = params[j]
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
// one predicate holding nothing else, with the column of the parameter's
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
		cmp, ok := c.(*sem.Cmp)
		if !ok || cmp.Op != sem.EQ {
			return nil
		}
		ref, rok := cmp.Left.(*sem.ColRef)
		prm, pok := cmp.Right.(*sem.Param)
		if !rok || !pok {
			ref, rok = cmp.Right.(*sem.ColRef)
			prm, pok = cmp.Left.(*sem.Param)
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
		len(sc.Spans) != 1 || len(t.PrimaryIndex.KeyColumnIDs) != len(candidates) {
		return nil
	}
	sp := sc.Spans[0]
	if sp.StartExclusive || !sp.EndInclusive || len(sp.Start) != len(candidates) || len(sp.End) != len(candidates) {
		return nil
	}
	pp := &pointPlan{key: key}
	used := map[int]bool{}
	for i := range sp.Start {
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
