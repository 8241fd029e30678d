package exec

import (
	"bytes"
	"hash/maphash"
	"math/bits"

	"github.com/cairn-db/cairn/sql/types"
)

// hashTable is a hash join's table over the right rows held in memory:
// chained hashing over flat arrays (PostgreSQL's hash join keeps a
// bucket array of tuple chains the same way). A map[string][]int cost an
// allocation for each distinct key (its string) and for each key's slice
// of row indexes; this holds the encoded keys in one byte arena and the
// chains in int32 arrays, so building it allocates O(1) slices.
//
// A chain lists its rows in ascending order (rows are linked from the
// last to the first), so rows with equal keys come out in the order they
// were held, as they did from the map.
type hashTable struct {
	seed    maphash.Seed
	mask    uint64
	buckets []int32  // 1 + the first row of the bucket's chain; 0: none
	next    []int32  // 1 + the next row of row i's chain; 0: the end
	hashes  []uint64 // row i's key's hash
	keys    []byte   // the rows' encoded keys (hashKey), one after another
	ends    []int32  // row i's key is keys[ends[i-1]:ends[i]]
}

// hashTableRowSize is what the table costs per row, besides the key's
// bytes: next, hashes, ends and two buckets (rowCost's 64 covers it).
const hashTableRowSize = 4 + 8 + 4 + 2*4

// build indexes rows by their values at pos; rows with a NULL among them
// (or no key encoding) are left out: they match nothing. keybuf is
// scratch.
func (t *hashTable) build(rows [][]types.Datum, pos []int, keybuf []byte) []byte {
	n := len(rows)
	size := uint64(1) << bits.Len(uint(max(2*n, 16)-1))
	t.mask = size - 1
	t.buckets = make([]int32, size)
	t.next = make([]int32, n)
	t.hashes = make([]uint64, n)
	t.ends = make([]int32, n)
	t.keys = t.keys[:0]
	in := make([]bool, n)
	for i, row := range rows {
		if !hasNull(row, pos) {
			var err error
			if keybuf, err = hashKey(keybuf[:0], row, pos); err == nil {
				t.hashes[i] = maphash.Bytes(t.seed, keybuf)
				t.keys = append(t.keys, keybuf...)
				in[i] = true
			}
		}
		t.ends[i] = int32(len(t.keys))
	}
	for i := n - 1; i >= 0; i-- {
		if in[i] {
			b := t.hashes[i] & t.mask
			t.next[i] = t.buckets[b]
			t.buckets[b] = int32(i + 1)
		}
	}
	return keybuf
}

func (t *hashTable) key(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.keys[start:t.ends[i]]
}

// chain is an iteration over the rows whose key is one probe key.
type chain struct {
	t   *hashTable
	h   uint64
	key []byte
	at  int32 // 1 + the next row to look at; 0: done
}

// lookup starts the iteration over the rows whose encoded key is key
// (which must stay unchanged until the iteration ends).
func (t *hashTable) lookup(key []byte) chain {
	h := maphash.Bytes(t.seed, key)
	return chain{t: t, h: h, key: key, at: t.buckets[h&t.mask]}
}

// next returns the next matching row, or -1.
func (c *chain) next() int {
	for c.at != 0 {
		i := int(c.at - 1)
		c.at = c.t.next[i]
		if c.t.hashes[i] == c.h && bytes.Equal(c.t.key(i), c.key) {
			return i
		}
	}
	return -1
}
