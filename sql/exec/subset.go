package exec

import (
	"errors"
	"sort"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/rowcontainer"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// IN and NOT IN over an uncorrelated subquery anywhere else than as a
// conjunct of a WHERE (which inset.go runs as a semi/anti join): in a
// select list, under OR or CASE, in a HAVING or a join condition.
//
// sem asks the runner (sem.SubquerySets) whether x is in the subquery's
// column, instead of comparing x with every value of it. The set is built
// once, when a row first asks (as sem would run the subquery), and is:
//
//   - a hash set of the values' keys (hashKey), reserved in its account,
//     while that fits in work_mem;
//   - past work_mem (or when the node budget refuses), the keys go to a
//     rowcontainer.Sorter; once sorted, the distinct keys are written to a
//     Buffer (on disk past work_mem), and the first key of each of its
//     blocks of rowcontainer.BlockRows keys is kept in memory (one key in
//     256, reserved with Force: the only part that grows with the set). A
//     lookup finds x's block by binary search over those keys and reads
//     that block through a RowReader (a few blocks cached), so memory is
//     bounded whatever the set's size, and lookups of nearby values read
//     a block once.
//
// Only where `=` is key equality (keyEquality: equal keys exactly when
// the values are equal), as for inset.go; other types, and correlated
// subqueries, keep their values in memory (subquery.go).

// subquerySet is one uncorrelated subquery's values as a set.
type subquerySet struct {
	n       int64 // values in the column, NULLs included
	hasNull bool
	keys    map[string]struct{} // nil once spilled
	acc     *mon.Account

	// Spilled: the sorted distinct keys, their blocks' first keys
	// (fences, one string of all of them cut at fenceEnds), and a reader.
	buf       *rowcontainer.Buffer
	fences    string
	fenceEnds []int
	rr        *rowcontainer.RowReader
}

// setBlocks is how many blocks of keys a spilled set's reader caches.
const setBlocks = 4

// Member implements sem.SubquerySets for `x IN (uncorrelated subquery)`
// and `x NOT IN (...)` whose equality is key equality.
func (r *runner) Member(ref *sem.SubqueryRef, x types.Datum) (sem.SetMembership, bool, error) {
	set, ok := r.sets[ref.ID]
	if !ok {
		set = nil
		if r.setEligible(ref) {
			var err error
			if set, err = r.buildSet(ref.ID); err != nil {
				return sem.SetMembership{}, false, err
			}
		}
		if r.sets == nil {
			r.sets = map[int]*subquerySet{}
		}
		r.sets[ref.ID] = set
	}
	if set == nil {
		return sem.SetMembership{}, false, nil
	}
	m := sem.SetMembership{Empty: set.n == 0, HasNull: set.hasNull}
	if m.Empty || types.IsNull(x) {
		return m, true, nil
	}
	var err error
	if r.setKey, err = hashKey(r.setKey[:0], []types.Datum{x}, []int{0}); err != nil {
		return m, false, err
	}
	m.Found, err = set.contains(string(r.setKey))
	return m, err == nil, err
}

// setEligible reports whether ref is a lookup Member answers: an
// uncorrelated subquery compared by key equality (inSetOf's rules).
func (r *runner) setEligible(ref *sem.SubqueryRef) bool {
	if ref.Fn == nil || len(ref.Fn.ArgTypes) != 2 || ref.Left == nil {
		return false
	}
	sub := r.subquery(ref.ID)
	if sub == nil || len(sub.Outer) > 0 {
		return false
	}
	a := ref.Fn.ArgTypes
	return keyEquality(ref.Left.Type(), a[0]) && keyEquality(a[0], a[1]) && ref.Col != nil && keyEquality(ref.Col, a[1])
}

// buildSet runs subquery id into a set.
func (r *runner) buildSet(id int) (*subquerySet, error) {
	ctx := r.ctx
	set := &subquerySet{keys: map[string]struct{}{}, acc: r.account()}
	o, err := r.build(r.subquery(id).Root)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	var srt *rowcontainer.Sorter
	defer func() {
		if srt != nil {
			srt.Close()
		}
	}()
	var key []byte
	for k := 0; ; k++ {
		if k%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				set.close()
				return nil, err
			}
		}
		row, err := o.Next(ctx)
		if err != nil {
			set.close()
			return nil, err
		}
		if row == nil {
			break
		}
		set.n++
		if len(row) == 0 || types.IsNull(row[0]) {
			set.hasNull = true
			continue
		}
		if key, err = hashKey(key[:0], row, []int{0}); err != nil {
			set.close()
			return nil, err
		}
		if srt != nil {
			if err := srt.Add(ctx, []types.Datum{types.DBytes(key)}); err != nil {
				set.close()
				return nil, err
			}
			continue
		}
		if _, dup := set.keys[string(key)]; dup {
			continue
		}
		size := int64(len(key)) + 64
		err = set.acc.Grow(size)
		if err != nil && r.tempScope().Spillable() && len(set.keys) >= minSpillRows {
			// Past work_mem, or the node is short: the keys go to a
			// sorter. The set's reservation goes first, so that the
			// sorter is granted what the set held (the set is dropped
			// as its keys move).
			srt = rowcontainer.NewSorter(compareKey, r.account(), r.tempScope())
			keys := set.keys
			set.keys = nil
			set.acc.Clear()
			for k := range keys {
				if err := srt.Add(ctx, []types.Datum{types.DBytes(k)}); err != nil {
					set.close()
					return nil, err
				}
				delete(keys, k)
			}
			if err := srt.Add(ctx, []types.Datum{types.DBytes(key)}); err != nil {
				set.close()
				return nil, err
			}
			continue
		}
		if errors.Is(err, mon.ErrWorkMem) {
			err = set.acc.Force(size)
		}
		if err != nil {
			set.close()
			return nil, err
		}
		set.keys[string(key)] = struct{}{}
	}
	if srt == nil {
		return set, nil
	}
	if err := set.fromSorter(r, srt); err != nil {
		set.close()
		return nil, err
	}
	return set, nil
}

// fromSorter writes the sorter's distinct keys to the set's buffer,
// noting each block's first key.
func (set *subquerySet) fromSorter(r *runner, srt *rowcontainer.Sorter) error {
	ctx := r.ctx
	it, err := srt.Sort(ctx)
	if err != nil {
		return err
	}
	defer it.Close()
	set.buf = rowcontainer.NewBuffer(r.account(), r.tempScope())
	var prev []byte
	var fences []byte
	for {
		row, err := it.Next(ctx)
		if err != nil {
			return err
		}
		if row == nil {
			break
		}
		k := row[0].(types.DBytes)
		if prev != nil && string(prev) == string(k) {
			continue
		}
		prev = append(prev[:0], k...)
		if set.buf.Len()%rowcontainer.BlockRows == 0 {
			// The fence: reserved past work_mem (it is what lets the
			// rest live on disk).
			if err := set.acc.Force(int64(len(k)) + 8); err != nil {
				return setHint(err)
			}
			fences = append(fences, k...)
			set.fenceEnds = append(set.fenceEnds, len(fences))
		}
		if err := set.buf.Add(row); err != nil {
			return err
		}
	}
	set.fences = string(fences)
	set.rr, err = set.buf.RowReader(set.acc, setBlocks, nil)
	return err
}

// setHint explains a 53200 refusal of a spilled set's block keys.
func setHint(err error) error {
	var pe *pgerror.Error
	if errors.As(err, &pe) && pe.Code == pgerrcode.OutOfMemory && pe.Hint == "" {
		return pe.WithHint("An IN (subquery) set on disk keeps one value in 256 in memory to find the rest; raise --max-sql-memory.")
	}
	return err
}

// fence is the first key of block i.
func (set *subquerySet) fence(i int) string {
	start := 0
	if i > 0 {
		start = set.fenceEnds[i-1]
	}
	return set.fences[start:set.fenceEnds[i]]
}

// contains reports whether key is in the set.
func (set *subquerySet) contains(key string) (bool, error) {
	if set.buf == nil {
		_, ok := set.keys[key]
		return ok, nil
	}
	nb := len(set.fenceEnds)
	// The last block whose first key is <= key.
	b := sort.Search(nb, func(i int) bool { return set.fence(i) > key }) - 1
	if b < 0 {
		return false, nil
	}
	lo := int64(b) * rowcontainer.BlockRows
	hi := min(lo+rowcontainer.BlockRows, set.buf.Len())
	var err error
	i := sort.Search(int(hi-lo), func(j int) bool {
		if err != nil {
			return true
		}
		row, rerr := set.rr.Row(lo + int64(j))
		if rerr != nil {
			err = rerr
			return true
		}
		return string(row[0].(types.DBytes)) >= key
	})
	if err != nil {
		return false, err
	}
	if i == int(hi-lo) {
		return false, nil
	}
	row, err := set.rr.Row(lo + int64(i))
	if err != nil {
		return false, err
	}
	return string(row[0].(types.DBytes)) == key, nil
}

// close releases the set's memory, reader and file.
func (set *subquerySet) close() {
	if set.rr != nil {
		set.rr.Close()
		set.rr = nil
	}
	if set.buf != nil {
		set.buf.Close()
		set.buf = nil
	}
	set.keys = nil
	set.acc.Clear()
}

// closeSets closes the statement's subquery sets.
func (r *runner) closeSets() {
	for _, s := range r.sets {
		if s != nil {
			s.close()
		}
	}
	r.sets = nil
}
