package rowcontainer

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cairn-db/cairn/sql/mon"
)

// TestEntrySorterRandom: an EntrySorter returns every entry it was given,
// in bytewise key order, in memory (one sorted chunk, or a merge of
// several) and through runs (limits down to a few KiB), and gives back
// all its memory, disk and files when closed. Keys share a prefix, are of 0 to 20 bytes after it (shorter than
// the abbreviation, holding 0x00 bytes, prefixes of one another), and a
// fifth of them repeat an earlier key with another value. Each case
// runs with the entries added one by one (Add) and in batches of 1 to
// 600 (AddBatch, as an index build adds them).
func TestEntrySorterRandom(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) { testEntrySorterRandom(t, batched) })
	}
}

func testEntrySorterRandom(t *testing.T, batched bool) {
	ctx := context.Background()
	prefix := []byte{0xf3, 0x8a, 0x01}
	for _, tc := range []struct {
		workMem  int64
		n        int
		wantRuns bool
		wantSegs int // in memory at the end: at least
	}{
		{0, 5000, false, 1},
		{1 << 20, 5000, false, 2},
		{16 << 20, 200000, false, 3},
		{64 << 10, 5000, true, 1},
		{4 << 10, 3000, true, 1},
	} {
		rng := rand.New(rand.NewPCG(uint64(tc.workMem), 7))
		type kv struct{ k, v []byte }
		in := make([]kv, tc.n)
		for i := range in {
			var k []byte
			if i > 0 && rng.IntN(5) == 0 {
				k = in[rng.IntN(i)].k
			} else {
				k = append([]byte(nil), prefix...)
				for range rng.IntN(21) {
					k = append(k, byte(rng.IntN(4))) // few symbols: long common prefixes
				}
			}
			v := make([]byte, rng.IntN(12))
			for j := range v {
				v[j] = byte(rng.IntN(256))
			}
			in[i] = kv{k, v}
		}
		ts := newTemp(t, 0)
		node := mon.NewBudget("SQL memory", 0)
		acc := node.NewAccount(tc.workMem)
		scope := ts.NewScope()
		s := NewEntrySorter(acc, scope, prefix)
		for i := 0; i < len(in); {
			if !batched {
				if err := s.Add(ctx, in[i].k, in[i].v); err != nil {
					t.Fatal(err)
				}
				i++
				continue
			}
			var buf []byte
			var lens []uint32
			for j := min(i+1+rng.IntN(600), len(in)); i < j; i++ {
				buf = append(append(buf, in[i].k...), in[i].v...)
				lens = append(lens, uint32(len(in[i].k)), uint32(len(in[i].v)))
			}
			if err := s.AddBatch(ctx, buf, lens); err != nil {
				t.Fatal(err)
			}
		}
		it, err := s.Sort(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []kv
		for {
			k, v, ok, err := it.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			if n := len(got); n > 0 && bytes.Compare(got[n-1].k, k) > 0 {
				t.Fatalf("work_mem %d: entry %d's key %x follows %x", tc.workMem, n, k, got[n-1].k)
			}
			got = append(got, kv{slices.Clone(k), slices.Clone(v)})
		}
		if (s.Runs > 0) != tc.wantRuns {
			t.Fatalf("work_mem %d: %d runs, want runs: %v", tc.workMem, s.Runs, tc.wantRuns)
		}
		if !tc.wantRuns && len(s.segs) < tc.wantSegs {
			t.Fatalf("work_mem %d: %d sorted chunks merged, want at least %d", tc.workMem, len(s.segs), tc.wantSegs)
		}
		// The same entries: equal keys come out in no set order, so
		// compare both sorted by key, then value.
		byKV := func(a, b kv) int {
			if c := bytes.Compare(a.k, b.k); c != 0 {
				return c
			}
			return bytes.Compare(a.v, b.v)
		}
		slices.SortFunc(got, byKV)
		slices.SortFunc(in, byKV)
		if len(got) != len(in) {
			t.Fatalf("work_mem %d: %d entries, want %d", tc.workMem, len(got), len(in))
		}
		for i := range in {
			if byKV(got[i], in[i]) != 0 {
				t.Fatalf("work_mem %d: entry %d is %x=%x, want %x=%x", tc.workMem, i, got[i].k, got[i].v, in[i].k, in[i].v)
			}
		}
		it.Close()
		if acc.Used() != 0 || node.Used() != 0 {
			t.Fatalf("after Close: account %d, node %d bytes (invariant 1)", acc.Used(), node.Used())
		}
		if ts.Disk().Used() != 0 {
			t.Fatalf("after Close: %d bytes of disk reserved (invariant 2)", ts.Disk().Used())
		}
		if err := scope.Close(); err != nil {
			t.Fatal(err)
		}
		if n := filesIn(t, ts.Dir()); n != 0 {
			t.Fatalf("%d temporary files left (invariant 4)", n)
		}
	}
}

// TestEntrySorterPrefix: a key without the sorter's prefix is refused
// (its abbreviation would skip bytes that are not the prefix and misorder
// it), and the sorter holds only what it accepted.
func TestEntrySorterPrefix(t *testing.T) {
	ctx := context.Background()
	acc := mon.NewBudget("SQL memory", 0).NewAccount(0)
	s := NewEntrySorter(acc, nil, []byte("ix/"))
	defer s.Close()
	if err := s.Add(ctx, []byte("ix/a"), nil); err != nil {
		t.Fatal(err)
	}
	err := s.Add(ctx, []byte("iy/a"), nil)
	if err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Fatalf("a key without the prefix: %v, want an error naming the prefix", err)
	}
	if s.Len() != 1 {
		t.Fatalf("%d entries held, want 1", s.Len())
	}
	// In a batch: the entries before it are held, it and those after
	// are not.
	buf := []byte("ix/bvix/ciy/dix/e")
	err = s.AddBatch(ctx, buf, []uint32{4, 1, 4, 0, 4, 0, 4, 0})
	if err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Fatalf("a batch with a key without the prefix: %v, want an error naming the prefix", err)
	}
	if s.Len() != 3 {
		t.Fatalf("%d entries held, want 3", s.Len())
	}
	// Lengths that do not match the batch's bytes.
	for _, lens := range [][]uint32{{4}, {4, 0, 4, 1}, {4, 0}} {
		if err := s.AddBatch(ctx, []byte("ix/fix/g"), lens); err == nil {
			t.Fatalf("a batch of 8 bytes with lengths %v: no error", lens)
		}
	}
}

// TestEntrySorterRanges: the sorted entries, in memory or spilled into
// runs (a work_mem of a few KiB to 1 MiB, then Finish), read as key
// ranges whose bounds come from SampleKeys, read concurrently, are every
// entry once, each range in key order and within its bounds, and equal
// keys all in one range; the sorter's Close gives back all its memory.
func TestEntrySorterRanges(t *testing.T) {
	ctx := context.Background()
	prefix := []byte{0xf3, 0x8a}
	for _, tc := range []struct {
		n, ranges int
		workMem   int64 // > 0: spills
	}{
		{0, 3, 0},
		{1, 2, 0},
		{5000, 2, 0},
		{200000, 4, 0},
		{200000, 7, 0},
		{5000, 3, 16 << 10},
		{200000, 4, 1 << 20},
		{200000, 2, 256 << 10},
	} {
		rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.ranges)))
		node := mon.NewBudget("SQL memory", 0)
		limit, scope := int64(64<<20), (*Scope)(nil)
		if tc.workMem > 0 {
			limit, scope = tc.workMem, newTemp(t, 0).NewScope()
		}
		s := NewEntrySorter(node.NewAccount(limit), scope, prefix)
		want := map[string]int{}
		var keys [][]byte
		for i := range tc.n {
			var k []byte
			if i > 0 && rng.IntN(4) == 0 {
				k = keys[rng.IntN(len(keys))] // duplicates: must share a range
			} else {
				k = append(slices.Clone(prefix), byte(rng.IntN(3)))
				for range rng.IntN(12) {
					k = append(k, byte(rng.IntN(256)))
				}
				keys = append(keys, k)
			}
			want[string(k)]++
			if err := s.Add(ctx, k, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if spilled := !s.InMemory(); spilled != (tc.workMem > 0) {
			t.Fatalf("n %d, work_mem %d: spilled %v", tc.n, tc.workMem, spilled)
		}
		if err := s.Finish(ctx); err != nil {
			t.Fatal(err)
		}
		sample := s.SampleKeys(nil, 16)
		slices.SortFunc(sample, bytes.Compare)
		var bounds [][]byte
		for i := 1; i < tc.ranges && len(sample) > 0; i++ {
			if b := sample[i*len(sample)/tc.ranges]; len(bounds) == 0 || bytes.Compare(bounds[len(bounds)-1], b) < 0 {
				bounds = append(bounds, b)
			}
		}
		if tc.n >= 5000 && len(bounds) != tc.ranges-1 {
			t.Fatalf("n %d: %d bounds from %d sampled keys, want %d", tc.n, len(bounds), len(sample), tc.ranges-1)
		}
		got := make([][][]byte, len(bounds)+1)
		var wg sync.WaitGroup
		errs := make([]error, len(got))
		for i := range got {
			var lo, hi []byte
			if i > 0 {
				lo = bounds[i-1]
			}
			if i < len(bounds) {
				hi = bounds[i]
			}
			it := s.Range(lo, hi)
			wg.Go(func() {
				defer it.Close()
				for {
					k, _, ok, err := it.Next(ctx)
					if err != nil || !ok {
						errs[i] = err
						return
					}
					if (lo != nil && bytes.Compare(k, lo) < 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
						errs[i] = fmt.Errorf("range %d [%x, %x) holds %x", i, lo, hi, k)
						return
					}
					if n := len(got[i]); n > 0 && bytes.Compare(got[i][n-1], k) > 0 {
						errs[i] = fmt.Errorf("range %d: %x follows %x", i, k, got[i][n-1])
						return
					}
					got[i] = append(got[i], slices.Clone(k))
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("n %d: %v", tc.n, err)
			}
		}
		seen := map[string]int{}
		for i, r := range got {
			if tc.n >= 5000 && len(r) == 0 {
				t.Errorf("n %d: range %d is empty", tc.n, i)
			}
			inRange := map[string]bool{}
			for _, k := range r {
				if seen[string(k)] > 0 && !inRange[string(k)] {
					t.Fatalf("n %d: key %x in two ranges", tc.n, k)
				}
				inRange[string(k)] = true
				seen[string(k)]++
			}
		}
		if !maps.Equal(seen, want) {
			t.Fatalf("n %d, work_mem %d: the ranges hold %d distinct keys, want %d (or counts differ)", tc.n, tc.workMem, len(seen), len(want))
		}
		s.Close()
		if u := node.Used(); u != 0 {
			t.Errorf("n %d, work_mem %d: %d bytes still reserved after Close", tc.n, tc.workMem, u)
		}
	}
}

// TestEntrySorterMergeRange: MergeRange over several sorters in memory
// (an index build's, each given a random part of the entries) returns,
// for each key range, every entry of every sorter in the range once, in
// key order, equal keys of different sorters included; its ranges
// together are every entry, and closing them leaves the sorters to give
// back their memory.
func TestEntrySorterMergeRange(t *testing.T) {
	ctx := context.Background()
	prefix := []byte{0xf3, 0x8a}
	for _, tc := range []struct {
		n, sorters int
		bounds     []string // after the prefix
	}{
		{0, 2, nil},
		{1, 3, nil},
		{3000, 1, []string{"\x01"}},
		{3000, 2, nil},
		{100000, 2, []string{"\x01"}},
		{100000, 3, []string{"\x00\x80", "\x01", "\x01\x00", "\x02\xff"}},
	} {
		rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.sorters)))
		node := mon.NewBudget("SQL memory", 0)
		var ss []*EntrySorter
		for range tc.sorters {
			ss = append(ss, NewEntrySorter(node.NewAccount(64<<20), nil, prefix))
		}
		want := map[string]int{}
		var keys [][]byte
		for i := range tc.n {
			var k []byte
			if i > 0 && rng.IntN(4) == 0 {
				k = keys[rng.IntN(len(keys))] // equal keys, often in another sorter
			} else {
				k = append(slices.Clone(prefix), byte(rng.IntN(3)))
				for range rng.IntN(12) {
					k = append(k, byte(rng.IntN(256)))
				}
				keys = append(keys, k)
			}
			v := []byte(fmt.Sprint(i))
			want[string(k)+"="+string(v)]++
			if err := ss[rng.IntN(len(ss))].Add(ctx, k, v); err != nil {
				t.Fatal(err)
			}
		}
		var bounds [][]byte
		for _, b := range tc.bounds {
			var x []byte
			if _, err := fmt.Sscanf(`"`+b+`"`, "%q", &x); err != nil {
				t.Fatal(err)
			}
			bounds = append(bounds, append(slices.Clone(prefix), x...))
		}
		got := map[string]int{}
		for i := 0; i <= len(bounds); i++ {
			var lo, hi []byte
			if i > 0 {
				lo = bounds[i-1]
			}
			if i < len(bounds) {
				hi = bounds[i]
			}
			it := MergeRange(ss, lo, hi)
			var prev []byte
			for {
				k, v, ok, err := it.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				if (lo != nil && bytes.Compare(k, lo) < 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
					t.Fatalf("n %d: range [%x, %x) holds %x", tc.n, lo, hi, k)
				}
				if prev != nil && bytes.Compare(prev, k) > 0 {
					t.Fatalf("n %d: range [%x, %x): %x follows %x", tc.n, lo, hi, k, prev)
				}
				prev = append(prev[:0], k...)
				got[string(k)+"="+string(v)]++
			}
			it.Close()
		}
		if !maps.Equal(got, want) {
			t.Fatalf("n %d, %d sorters: the ranges hold %d distinct entries, want %d (or counts differ)", tc.n, tc.sorters, len(got), len(want))
		}
		for _, s := range ss {
			s.Close()
		}
		if u := node.Used(); u != 0 {
			t.Errorf("n %d: %d bytes still reserved after the sorters' Close", tc.n, u)
		}
	}
}

// TestEntrySorterSlotsDouble: the slots of entries in memory grow by
// doubling (growSlots), so adding n entries allocates at most about 2n
// slots besides the arena's chunks; append's growth of a slice this
// large (about 1.25× a step) allocated about 5n, a quarter of a 1M-row
// index build's allocations.
func TestEntrySorterSlotsDouble(t *testing.T) {
	ctx := context.Background()
	prefix := []byte{0xf3, 0x8a}
	const n = 1 << 19
	keys := make([]byte, 0, n*10)
	for i := range n {
		keys = append(keys, prefix...)
		x := uint64(i) * 0x9e3779b97f4a7c15 // scattered, as an index on a non-key column
		keys = append(keys, byte(x>>56), byte(x>>48), byte(x>>40), byte(x>>32), byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	node := mon.NewBudget("SQL memory", 0)
	acc := node.NewAccount(0)
	s := NewEntrySorter(acc, nil, prefix)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		if err := s.Add(ctx, keys[i*10:i*10+10], nil); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	slots := int64(unsafe.Sizeof(entrySlot{}))
	arena := int64(len(s.chunks)+1)*int64(s.chunk) + int64(s.slots)*slots // chunks, seal's spare and scratch
	allocated := int64(after.TotalAlloc - before.TotalAlloc)
	if limit := arena + 3*n*slots + 1<<20; allocated > limit {
		t.Fatalf("adding %d entries allocated %d bytes, want at most %d (arena %d, slots about %d)",
			n, allocated, limit, arena, 2*n*slots)
	}
	if s.Len() != n {
		t.Fatalf("%d entries held, want %d", s.Len(), n)
	}
	s.Close()
	if acc.Used() != 0 || node.Used() != 0 {
		t.Fatalf("after Close: account %d, node %d bytes", acc.Used(), node.Used())
	}
}
