package ddl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/sql/mon"
	"github.com/cairn-db/cairn/sql/rowcontainer"
)

// The backfill's parallel sort returns every entry once, in key order,
// whether its sorters hold everything in memory or spill runs, and two
// equal keys handed to different sorters come out adjacent (the
// uniqueness check reads them there).
func TestEntrySortParallel(t *testing.T) {
	defer SetIndexBuildMemory(SetIndexBuildMemory(IndexBuildMemory))
	temp, err := rowcontainer.NewTempStorage(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "\x89\x12"
	for _, tc := range []struct {
		sorters int
		memory  int64
		entries int
		dup     bool
	}{
		{1, 64 << 20, 5000, false},
		{3, 64 << 20, 5000, false},
		{4, 256 << 10, 20000, false}, // spills
		{2, 64 << 20, 3000, true},
	} {
		t.Run(fmt.Sprintf("%d sorters %d bytes %d entries dup %t", tc.sorters, tc.memory, tc.entries, tc.dup), func(t *testing.T) {
			IndexBuildMemory = tc.memory
			// The node's budget, ample for the merges' read buffers.
			b := &indexBuild{e: &executor{x: &Context{TempStorage: temp, Memory: mon.NewBudget("test", 64<<20)}}}
			ctx := context.Background()
			var failed error
			s := b.newEntrySort(ctx, tc.sorters, []byte(prefix), func(err error) { failed = err })
			defer s.Close()
			rng := rand.New(rand.NewPCG(uint64(tc.sorters), uint64(tc.entries)))
			var want []string
			batch := entryBufs.Get().(*entryBuf)
			for i := range tc.entries {
				k := fmt.Sprintf("%s%08d", prefix, rng.IntN(1<<30)) + fmt.Sprint(i)
				if tc.dup && (i == 10 || i == tc.entries-10) {
					k = prefix + "dup"
				}
				want = append(want, k)
				batch.add([]byte(k), []byte("v"+k))
				if batch.len() == 100 {
					if err := s.Add(ctx, batch); err != nil {
						t.Fatal(err)
					}
					batch = entryBufs.Get().(*entryBuf)
				}
			}
			if err := s.Add(ctx, batch); err != nil {
				t.Fatal(err)
			}
			it, err := s.Sort(ctx)
			if err != nil || failed != nil {
				t.Fatal(err, failed)
			}
			defer it.Close()
			slices.Sort(want)
			var got []string
			for {
				kb, vb, ok, err := it.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				k := string(kb)
				if string(vb) != "v"+k {
					t.Fatalf("entry %q has value %q", k, vb)
				}
				got = append(got, k)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d entries out, %d in, or out of order", len(got), len(want))
			}
			if tc.memory < 1<<20 && s.SortedRuns() < tc.sorters {
				t.Errorf("%d runs spilled by %d sorters under %d bytes", s.SortedRuns(), tc.sorters, tc.memory)
			}
		})
	}
}
