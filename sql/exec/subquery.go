package exec

import (
	"errors"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// subqueryState caches a subquery's results: one for an uncorrelated
// subquery (run at most once per statement), one per distinct outer
// binding for a correlated one.
type subqueryState struct {
	sub     *plan.Subquery
	results map[string][]types.Datum
	// bytes is what results hold, reserved in the runner's held account.
	bytes int64
}

// maxCorrelatedCache bounds the results a correlated subquery keeps;
// beyond it, or beyond work_mem of values, the cache is dropped and
// refilled, so memory stays bounded when every outer row is distinct.
const maxCorrelatedCache = 10000

func (r *runner) subquery(id int) *plan.Subquery {
	for _, s := range r.p.Subqueries {
		if s != nil && s.ID == id {
			return s
		}
	}
	return nil
}

// Value implements sem.SubqueryValues.
func (r *runner) Value(id int) (types.Datum, error) {
	s, vals, err := r.subqueryRows(id)
	if err != nil {
		return nil, err
	}
	switch s.Kind {
	case sem.ExistsSubquery:
		return types.DBool(len(vals) > 0), nil
	case sem.ScalarSubquery:
		if len(vals) == 0 {
			return types.DNull, nil
		}
		return vals[0], nil
	case sem.ArraySubquery:
		elem := types.Unknown
		if cols := s.Root.Columns(); len(cols) > 0 {
			elem = cols[0].T
		}
		return types.NewArray(elem, vals...), nil
	}
	return nil, pgerror.New(pgerrcode.InternalError, "exec: subquery %d of kind %d has no single value", id, s.Kind)
}

// Column implements sem.SubqueryValues.
func (r *runner) Column(id int) ([]types.Datum, error) {
	_, vals, err := r.subqueryRows(id)
	return vals, err
}

// subqueryRows returns the first column of the subquery's rows under the
// current outer binding (for EXISTS, at most one row; for a scalar
// subquery, at most one or a 21000 error).
func (r *runner) subqueryRows(id int) (*plan.Subquery, []types.Datum, error) {
	st := r.subs[id]
	if st == nil {
		s := r.subquery(id)
		if s == nil {
			return nil, nil, pgerror.New(pgerrcode.InternalError, "exec: subquery %d is not in the plan", id)
		}
		st = &subqueryState{sub: s, results: map[string][]types.Datum{}}
		if r.subs == nil {
			r.subs = map[int]*subqueryState{}
		}
		r.subs[id] = st
	}
	s := st.sub
	var key []byte
	for _, oid := range s.Outer {
		d, ok := r.outer[oid]
		if !ok {
			return nil, nil, pgerror.New(pgerrcode.InternalError, "exec: subquery %d: outer column %d has no binding", id, oid)
		}
		// hashKey, not rowenc.EncodeKey: an outer value of a type
		// without a key encoding (json, jsonb) binds a subquery too.
		var err error
		if key, err = hashKey(key, []types.Datum{d}, []int{0}); err != nil {
			return nil, nil, err
		}
	}
	if vals, ok := st.results[string(key)]; ok {
		return s, vals, nil
	}
	if len(st.results) >= maxCorrelatedCache || (len(st.results) > 0 && st.bytes > r.memStmt().WorkMem() && r.memStmt().WorkMem() > 0) {
		// Past maxCorrelatedCache bindings, or work_mem of cached
		// values, start again: what a correlated subquery holds is one
		// binding's values plus at most work_mem, however many outer
		// rows there are.
		st.results = map[string][]types.Datum{}
		r.heldAccount().Shrink(st.bytes)
		st.bytes = 0
	}
	vals, n, err := r.runSubquery(s)
	if err != nil {
		return nil, nil, err
	}
	// The map entry and its key.
	if err := r.heldAccount().Force(int64(len(key)) + 64); err != nil {
		r.heldAccount().Shrink(n)
		return nil, nil, err
	}
	st.bytes += n + int64(len(key)) + 64
	st.results[string(key)] = vals
	return s, vals, nil
}

// subqueryChunk is how much a subquery's held values reserve at a time.
const subqueryChunk = 64 << 10

// runSubquery runs s and returns the first column of its rows and the
// bytes reserved for them. The values are held for the statement (an IN
// list that subset.go does not look up, an ARRAY, a correlated
// subquery's cached results) and cannot spill: they are reserved in the node budget
// past work_mem as they arrive, so a subquery too large for the budget
// stops with 53200 at the budget instead of growing until the node runs
// out of memory.
func (r *runner) runSubquery(s *plan.Subquery) ([]types.Datum, int64, error) {
	vals, n, err := r.collectSubquery(s)
	if err != nil {
		r.heldAccount().Shrink(n)
		var pe *pgerror.Error
		if errors.As(err, &pe) && pe.Code == pgerrcode.OutOfMemory && pe.Hint == "" {
			err = pe.WithHint("The values of an ARRAY(subquery), of a correlated subquery, and of an IN (subquery) comparing values whose equality is not exact (bpchar) are held in memory; rewrite it as a join, or raise --max-sql-memory.")
		}
		return nil, 0, err
	}
	return vals, n, nil
}

// collectSubquery runs s, reserving what it holds; on error the caller
// shrinks the bytes returned.
func (r *runner) collectSubquery(s *plan.Subquery) ([]types.Datum, int64, error) {
	acc := r.heldAccount()
	var reserved, used int64
	o, err := r.build(s.Root)
	if err != nil {
		return nil, 0, err
	}
	defer o.Close()
	vals := []types.Datum{}
	for {
		row, err := o.Next(r.ctx)
		if err != nil {
			return nil, reserved, err
		}
		if row == nil {
			// Keep what the values hold; give back the rest of the chunk.
			acc.Shrink(reserved - used)
			return vals, used, nil
		}
		var d types.Datum = types.DNull
		if len(row) > 0 {
			d = row[0]
		}
		switch s.Kind {
		case sem.ExistsSubquery:
			return append(vals, types.DBool(true)), used, nil
		case sem.ScalarSubquery:
			if len(vals) == 1 {
				return nil, reserved, sem.ErrScalarSubqueryRows()
			}
		}
		used += 16 + rowcontainer.DatumSize(d)
		if used > reserved {
			grow := max(used-reserved, subqueryChunk)
			if err := acc.Force(grow); err != nil {
				return nil, reserved, err
			}
			reserved += grow
		}
		vals = append(vals, d)
	}
}
