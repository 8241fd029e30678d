package exec

import (
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// TestHashTable checks the hash join's table against a map of lists:
// every probe key finds exactly the rows with that key, in the order they
// were held; rows with a NULL key are found by nothing. Many rows share
// few keys, and keys of two columns, so chains mix equal and unequal keys.
func TestHashTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 100, 5000} {
		rows := make([][]types.Datum, n)
		want := map[string][]int{}
		var buf []byte
		for i := range rows {
			a, b := types.Datum(types.DInt(rng.IntN(40))), types.Datum(types.DString([]string{"x", "y", ""}[rng.IntN(3)]))
			if rng.IntN(10) == 0 {
				a = types.DNull
			}
			rows[i] = []types.Datum{types.DInt(i), a, b}
			if a != types.DNull {
				buf, _ = hashKey(buf[:0], rows[i], []int{1, 2})
				want[string(buf)] = append(want[string(buf)], i)
			}
		}
		tbl := &hashTable{seed: maphash.MakeSeed()}
		buf = tbl.build(rows, []int{1, 2}, buf)
		for a := -1; a <= 41; a++ {
			for _, b := range []string{"x", "y", "", "z"} {
				probe := []types.Datum{types.DInt(a), types.DString(b)}
				key, _ := hashKey(nil, probe, []int{0, 1})
				c := tbl.lookup(key)
				var got []int
				for i := c.next(); i >= 0; i = c.next() {
					got = append(got, i)
				}
				if w := want[string(key)]; !slices.Equal(got, w) {
					t.Fatalf("n=%d probe (%d, %q): rows %v, want %v", n, a, b, got, w)
				}
			}
		}
	}
}
