package rowcontainer

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/mon"
)

// TestEntrySorterRandom: an EntrySorter returns every entry it was given,
// in bytewise key order, in memory (one sorted chunk, or a merge of
// several) and through runs (limits down to a few KiB), and gives back
// all its memory, disk and files when closed. Keys share a prefix, are of 0 to 20 bytes after it (shorter than
// the abbreviation, holding 0x00 bytes, prefixes of one another), and a
// fifth of them repeat an earlier key with another value.
func TestEntrySorterRandom(t *testing.T) {
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
		for _, e := range in {
			if err := s.Add(ctx, e.k, e.v); err != nil {
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
}
