package ddl

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// The backfill's sort abbreviates entry keys past the index's prefix:
// for keys of every shape (shorter than the abbreviation, equal in their
// first 8 bytes after the prefix, without the prefix at all) the order
// it gives, the abbreviation first and compareEntries on ties as
// rowcontainer.Sorter uses them, is the keys' bytewise order.
func TestEntryKeyAfterOrdersAsBytes(t *testing.T) {
	prefix := "\x89\x12\x34"
	key := entryKeyAfter(prefix)
	rng := rand.New(rand.NewPCG(1, 2))
	ks := []string{prefix, prefix + "\x00", prefix + "\x00\x00", prefix + "\xff", "\x89\x12", "\x89\x12\x35", "",
		prefix + "12345678", prefix + "12345678\x00", prefix + "12345679"}
	for range 2000 {
		b := make([]byte, rng.IntN(14))
		for i := range b {
			b[i] = byte(rng.IntN(4)) // few symbols: many shared abbreviations
		}
		k := prefix + string(b)
		if rng.IntN(20) == 0 {
			k = string(b) // no prefix
		}
		ks = append(ks, k)
	}
	rows := make([][]types.Datum, len(ks))
	for i, k := range ks {
		rows[i] = []types.Datum{types.DBytes(k), types.DBytes("")}
	}
	slices.SortFunc(rows, func(a, b []types.Datum) int {
		ka, oka := key(a)
		kb, okb := key(b)
		if oka && okb && ka != kb {
			if ka < kb {
				return -1
			}
			return 1
		}
		return compareEntries(a, b)
	})
	for i := 1; i < len(rows); i++ {
		a, b := []byte(rows[i-1][0].(types.DBytes)), []byte(rows[i][0].(types.DBytes))
		if bytes.Compare(a, b) > 0 {
			t.Fatalf("%q sorted before %q", a, b)
		}
	}
	if _, ok := key([]types.Datum{types.DBytes("\x89"), nil}); ok {
		t.Errorf("a key without the prefix was abbreviated")
	}
}
