package rowenc_test

import (
	"errors"
	"sort"
	"testing"

	"github.com/jackc/pgerrcode"
	"pgregory.net/rapid"

	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// TestIndexModel runs random inserts, updates and deletes (alone or a few
// to a transaction, under random packing settings) against testTable and
// a map kept as the model. After every transaction the table must read
// like the model, every secondary index must hold exactly the entries
// recomputed from the model's rows, and a transaction the model says
// violates a unique constraint must fail with 23505 and change nothing.
func TestIndexModel(t *testing.T) {
	db := newKVDB(t)
	next := catalog.ID(1000)
	rapid.Check(t, func(rt *rapid.T) {
		next += 10 // a fresh table (and index groups) per run
		l := mustLayout(t, testTable(next))
		model := map[int64][]types.Datum{}
		val := func(label string, vals ...any) any {
			return rapid.SampledFrom(vals).Draw(rt, label)
		}
		genRow := func() []types.Datum {
			return row(int64(rapid.IntRange(0, 7).Draw(rt, "a")),
				val("b", nil, "x", "y", "z", "w"),
				val("c", nil, -1, 0, 1, 2),
				val("d", nil, "p", "q", "a much longer value than the size limit allows"))
		}
		for range rapid.IntRange(1, 25).Draw(rt, "txns") {
			w := newWriter(l, rapid.Bool().Draw(rt, "packed"), rapid.SampledFrom([]int{0, 12}).Draw(rt, "limit"))
			trial := clone(model)
			var changes [][2][]types.Datum
			conflict := false
			for range rapid.IntRange(1, 3).Draw(rt, "ops") {
				var old, new []types.Datum
				switch keysOf := sortedKeys(trial); {
				case len(keysOf) == 0 || rapid.IntRange(0, 2).Draw(rt, "op") == 0:
					new = genRow()
				case rapid.Bool().Draw(rt, "delete"):
					old = trial[rapid.SampledFrom(keysOf).Draw(rt, "victim")]
				default:
					old = trial[rapid.SampledFrom(keysOf).Draw(rt, "target")]
					new = genRow()
					if rapid.Bool().Draw(rt, "keepPK") {
						new[0] = old[0]
					}
				}
				if old != nil {
					delete(trial, int64(old[0].(types.DInt)))
				}
				if new != nil {
					conflict = conflict || violates(trial, new)
					trial[int64(new[0].(types.DInt))] = new
				}
				changes = append(changes, [2][]types.Datum{old, new})
			}
			err := write(t, db, w, changes...)
			if conflict {
				var pe *pgerror.Error
				if !errors.As(err, &pe) || pe.Code != pgerrcode.UniqueViolation {
					rt.Fatalf("changes %v: want a unique violation, got %v", changes, err)
				}
			} else {
				if err != nil {
					rt.Fatalf("changes %v: %v", changes, err)
				}
				model = trial
			}
			want := make([][]types.Datum, 0, len(model))
			for _, k := range sortedKeys(model) {
				want = append(want, model[k])
			}
			if got := rowsString(fetch(t, db, l, &l.Primary, nil)); got != rowsString(want) {
				rt.Fatalf("after %v (err %v):\ntable %s\nmodel %s", changes, err, got, rowsString(want))
			}
			if msg := indexMismatch(t, db, l, want); msg != "" {
				rt.Fatalf("after %v: %s", changes, msg)
			}
		}
	})
}

// violates reports whether adding r to rows breaks the primary key or
// the unique index on b (NULLs distinct).
func violates(rows map[int64][]types.Datum, r []types.Datum) bool {
	if _, ok := rows[int64(r[0].(types.DInt))]; ok {
		return true
	}
	if types.IsNull(r[1]) {
		return false
	}
	for _, o := range rows {
		if !types.IsNull(o[1]) && types.Compare(o[1], r[1]) == 0 {
			return true
		}
	}
	return false
}

func clone(m map[int64][]types.Datum) map[int64][]types.Datum {
	c := make(map[int64][]types.Datum, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func sortedKeys(m map[int64][]types.Datum) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}
