package chaos

import (
	"math/rand/v2"
	"testing"
)

// TestListAppendRotatesKeys: a key leaves play after MaxAppends appends,
// the next unused key takes its place, and reads only see keys in play.
func TestListAppendRotatesKeys(t *testing.T) {
	for _, tc := range []struct {
		keys, max, appends int
	}{
		{keys: 3, max: 4, appends: 100},
		{keys: 12, max: 256, appends: 10_000},
		{keys: 1, max: 1, appends: 5},
	} {
		l := &ListAppend{Keys: tc.keys, MaxAppends: tc.max}
		l.initKeys()
		rng := rand.New(rand.NewPCG(1, 2))
		got := map[int]int{}
		for range tc.appends {
			got[l.pick(rng, true)]++
			if k := l.pick(rng, false); k < 0 || k >= l.nextKey {
				t.Fatalf("%+v: read key %d, not yet in play (next %d)", tc, k, l.nextKey)
			}
		}
		for k, n := range got {
			if n > tc.max {
				t.Errorf("%+v: key %d took %d appends, more than %d", tc, k, n, tc.max)
			}
		}
		// Every key but those still in play is full.
		if want := tc.appends/tc.max + tc.keys; len(got) > want || len(got) < tc.appends/tc.max {
			t.Errorf("%+v: %d keys used, want about %d", tc, len(got), tc.appends/tc.max)
		}
		if len(l.keys) != tc.keys {
			t.Errorf("%+v: %d keys in play, want %d", tc, len(l.keys), tc.keys)
		}
	}
}
