package storage

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestIterPoolTakesNearest checks which pooled iterator a read gets
// (iterPool.take): the one whose last use's lower bound lies nearest the
// read's in key order, whatever prefix they share (rows of a
// hash-bucketed table differ from their first bytes on); the most
// recently pooled on a tie or for a read without a lower bound. A taken
// iterator leaves the pool.
func TestIterPoolTakesNearest(t *testing.T) {
	e := openMem(t)
	// Iterators pooled in this order, each last used from its key: one
	// in another keyspace, then rows of a table whose keys share their
	// first ten bytes; the last two from the same key.
	const tbl = "\x03tableidx/"
	keys := []string{"\x01lock", tbl + "\x10\x00r1", tbl + "\x80\x00r2", tbl + "\xf0\x00r3", tbl + "\xf0\x00r3"}
	var its []*Iterator
	for _, k := range keys {
		it, err := e.NewIter(IterOptions{LowerBound: []byte(k), UpperBound: []byte(k + "\x00")})
		if err != nil {
			t.Fatal(err)
		}
		its = append(its, it)
	}
	for _, it := range its {
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		lower string // "" for none
		want  int    // index in its
	}{
		// Shares no more with the one at 0x10 than with the others.
		{tbl + "\x12\x00r9", 1},
		{tbl + "\x7f\xffr9", 2},
		{tbl + "\x81", 2},
		{tbl + "\x10\x00r1", 1},
		{tbl + "\x00", 1},
		// Nearest the last two: the more recently pooled.
		{tbl + "\xff", 4},
		{"\x03u", 4},
		{"\x01lock", 0},
		{"\x01m", 0},
		{"\x02", 0},
		{"\x00", 0},
		{"", 4},
	} {
		var lower []byte
		if tc.lower != "" {
			lower = []byte(tc.lower)
		}
		got := e.iters.take(lower)
		if got != its[tc.want] {
			t.Errorf("take(%q) = the iterator last used at %q, want the one at %q (#%d)", tc.lower, got.near, its[tc.want].near, tc.want)
		}
		if n := len(e.iters.free); n != len(its)-1 {
			t.Errorf("take(%q): %d pooled after, want %d", tc.lower, n, len(its)-1)
		}
		if !e.iters.put(got) {
			t.Fatalf("take(%q): not pooled again", tc.lower)
		}
		// Back in the pooled order, so that the next case sees it.
		e.iters.free = append(e.iters.free[:0], its...)
	}
}

// bucketedKey is row i's key in a table whose rows are spread over
// hash buckets, as a SQL table's primary index (sql/rowenc): a bucket of
// two bytes from a hash of the row's number, then the row's number.
func bucketedKey(i int) []byte {
	h := uint16(uint32(i) * 2654435761 >> 16)
	return fmt.Appendf([]byte{0x03, byte(h >> 8), byte(h)}, "/accounts/%08d", i)
}

// TestPooledIteratorStaysInItsFiles counts what a point read of a
// compacted store looks up in the block cache when several iterators
// are pooled: the read gets the one last used nearest its row
// (iterPool.take), whose level most likely still has the row's SST
// open, with its index block; the most recently pooled one (as before)
// mostly stood in another file, and the read opened the row's and
// looked up its index block as well as the data block.
func TestPooledIteratorStaysInItsFiles(t *testing.T) {
	const rows = 100000
	e, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < rows; i += 100 {
		b := e.NewWriteOnlyBatch()
		for j := i; j < i+100; j++ {
			value := make([]byte, 100)
			rng.Read(value)
			if err := b.Put(MVCCKey{Key: bucketedKey(j), Timestamp: ts(1, 0)}, value); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.CommitNoSync(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := e.Compact(context.Background(), []byte{0}, []byte{0xff}); err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, l := range e.Metrics().Levels {
		files += int(l.TablesCount)
	}
	if files < 4 {
		t.Fatalf("%d SSTs, want several", files)
	}
	read := func(k []byte) {
		it, err := e.NewIter(IterOptions{LowerBound: k, UpperBound: append(k[:len(k):len(k)], 0)})
		if err != nil {
			t.Fatal(err)
		}
		if !it.First() {
			t.Fatalf("row %q not found: %v", k, it.Err())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Pool maxPooledIters iterators, last used at rows spread over the
	// keyspace (as concurrent reads leave them), one first read each.
	var held []*Iterator
	for i := 0; i < maxPooledIters; i++ {
		k := bucketedKey(i * rows / maxPooledIters)
		it, err := e.NewIter(IterOptions{LowerBound: k, UpperBound: append(k[:len(k):len(k)], 0)})
		if err != nil {
			t.Fatal(err)
		}
		if !it.First() {
			t.Fatalf("row %q not found: %v", k, it.Err())
		}
		held = append(held, it)
	}
	for _, it := range held {
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.iters.free); n != maxPooledIters {
		t.Fatalf("%d iterators pooled, want %d", n, maxPooledIters)
	}
	const reads = 2000
	before := e.Metrics().BlockCache
	builds := e.IterBuilds()
	for i := 0; i < reads; i++ {
		read(bucketedKey(rng.Intn(rows)))
	}
	after := e.Metrics().BlockCache
	if b := e.IterBuilds() - builds; b != 0 {
		t.Fatalf("%d iterators built during the reads, want every read served by the pool", b)
	}
	lookups := (after.Hits + after.Misses) - (before.Hits + before.Misses)
	perRead := float64(lookups) / reads
	// The data block alone, but when the nearest iterator stood in
	// another file (a row near a file's edge): then its index block too.
	if perRead > 1.3 {
		t.Errorf("%.2f block cache lookups per point read (%d in %d reads), want at most 1.3: the reads opened files", perRead, lookups, reads)
	}
	t.Logf("%d files; %.2f block cache lookups per point read", files, perRead)
}

func TestCommonPrefixLen(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 0},
		{"abc", "abc", 3},
		{"abc", "abd", 2},
		{"abcdefgh", "abcdefgh", 8},
		{"abcdefghij", "abcdefghiX", 9},
		{"abcdefgXij", "abcdefghij", 7},
		{"abcdefghijklmnopq", "abcdefghijklmnopqrs", 17},
		{"Xbcdefghijklmnopq", "abcdefghijklmnopqrs", 0},
		{"abcdefghijkXmnopq", "abcdefghijklmnopqrs", 11},
	} {
		if got := commonPrefixLen([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("commonPrefixLen(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := commonPrefixLen([]byte(tc.b), []byte(tc.a)); got != tc.want {
			t.Errorf("commonPrefixLen(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

// TestIterPoolGrows checks growAfter: one reader at a time keeps one
// pooled iterator until the write generation has served growAfter reads;
// then the pool grows to maxPooledIters by at most that many builds, and
// reads go on from it without building; a write starts the count again,
// and a generation of fewer reads builds one iterator, as before.
func TestIterPoolGrows(t *testing.T) {
	e, err := Open("db", Options{FS: vfs.NewMem(), CountSeeks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	put := func(k string) {
		b := e.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(MVCCKey{Key: []byte(k)}, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(n int) (builds uint64) {
		before := e.IterBuilds()
		for i := 0; i < n; i++ {
			if _, ok := readKey(t, e, fmt.Sprintf("k%03d", i%100)); !ok {
				t.Fatalf("k%03d not found", i%100)
			}
		}
		return e.IterBuilds() - before
	}
	for i := 0; i < 100; i++ {
		put(fmt.Sprintf("k%03d", i))
	}
	for _, tc := range []struct {
		name         string
		reads        int
		minB, maxB   uint64
		pooled       int
		writeBetween bool
	}{
		{"up to growAfter", growAfter, 1, 1, 1, false},
		{"growing", 2 * maxPooledIters, maxPooledIters - 1, maxPooledIters, maxPooledIters, false},
		{"grown", 1000, 0, 0, maxPooledIters, false},
		{"after a write", growAfter / 2, 1, 1, 1, true},
		{"again", growAfter / 2, 0, 0, 1, false},
	} {
		if tc.writeBetween {
			put("zz")
		}
		b := read(tc.reads)
		if b < tc.minB || b > tc.maxB {
			t.Errorf("%s: %d reads built %d iterators, want %d to %d", tc.name, tc.reads, b, tc.minB, tc.maxB)
		}
		if n := len(e.iters.free); n != tc.pooled {
			t.Errorf("%s: %d pooled after, want %d", tc.name, n, tc.pooled)
		}
	}
}

// TestIterPoolNeighboursRandom checks take's choice against its
// definition on random keys over a small alphabet (prefixes of each other,
// equal keys, keys of every length): the nearer, by keyPos past their
// shared prefix, of the greatest pooled bound at or below lower and the
// least above it; the most recently pooled of equal bounds.
func TestIterPoolNeighboursRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	key := func() []byte {
		k := make([]byte, rng.Intn(5))
		for i := range k {
			k[i] = "\x00\x01\x7f\xff"[rng.Intn(4)]
		}
		return k
	}
	for round := 0; round < 2000; round++ {
		p := &iterPool{}
		for i := 0; i < 1+rng.Intn(maxPooledIters); i++ {
			p.free = append(p.free, &Iterator{near: key()})
		}
		lower := key()
		if len(lower) == 0 {
			lower = []byte{0}
		}
		// The definition, by comparisons.
		below, above := -1, -1
		for i := len(p.free) - 1; i >= 0; i-- {
			k := p.free[i].near
			if bytes.Compare(k, lower) <= 0 {
				if below < 0 || bytes.Compare(k, p.free[below].near) > 0 {
					below = i
				}
			} else if above < 0 || bytes.Compare(k, p.free[above].near) < 0 {
				above = i
			}
		}
		want := below
		switch {
		case below < 0:
			want = above
		case above >= 0:
			b, a := p.free[below].near, p.free[above].near
			shared := min(commonPrefixLen(b, lower), commonPrefixLen(a, lower))
			at := keyPos(lower, shared)
			if keyPos(a, shared)-at < at-keyPos(b, shared) ||
				keyPos(a, shared)-at == at-keyPos(b, shared) && above > below {
				want = above
			}
		}
		wantIt := p.free[want]
		p.n.Store(int32(len(p.free)))
		if got := p.take(lower); got != wantIt {
			t.Fatalf("round %d: take(%x) from %d pooled = the one at %x, want the one at %x", round, lower, len(p.free)+1, got.near, wantIt.near)
		}
	}
}
