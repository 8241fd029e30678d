package tablet

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// TestLockTableReleaseAll checks releaseAll against the definition it
// optimizes: a lock goes iff one of the releases names its holder and its
// span (a point, or a range, possibly overlapping others) contains its key.
func TestLockTableReleaseAll(t *testing.T) {
	txns := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%03d", i)) }
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 300; iter++ {
		lt := newLockTable()
		held := map[string]uuid.UUID{}
		chans := map[string]<-chan struct{}{}
		for i := 0; i < 60; i++ {
			k := key(rng.Intn(100))
			h := txns[rng.Intn(len(txns))]
			lt.acquire(k, kvpb.TxnMeta{ID: h})
			held[string(k)] = h
		}
		for k, h := range held {
			chans[k] = lt.enqueue(kvpb.Intent{Key: []byte(k), Txn: kvpb.TxnMeta{ID: h}}, uuid.Nil)
		}
		var rels []LockRelease
		for i := rng.Intn(8); i > 0; i-- {
			a := rng.Intn(100)
			sp := kvpb.Span{Key: key(a)}
			if rng.Intn(2) == 0 {
				sp.EndKey = key(a + 1 + rng.Intn(30))
			}
			rels = append(rels, LockRelease{Span: sp, Txn: txns[rng.Intn(len(txns))]})
		}
		want := map[string]bool{}
		for k, h := range held {
			for _, r := range rels {
				if r.Txn == h && k >= string(r.Span.Key) && k < string(spanEnd(r.Span)) {
					want[k] = true
				}
			}
		}
		lt.releaseAll(slices.Clone(rels))
		for k := range held {
			_, still := lt.locks[k]
			if still == want[k] {
				t.Fatalf("iter %d: lock %s held=%v, want released=%v; releases %v", iter, k, still, want[k], rels)
			}
			select {
			case <-chans[k]:
				if !want[k] {
					t.Fatalf("iter %d: waiters of %s woken but the lock stays", iter, k)
				}
			default:
				if want[k] {
					t.Fatalf("iter %d: waiters of released %s not woken", iter, k)
				}
			}
		}
	}
}

// TestLockTableShrinks checks that the map is rebuilt once most of a large
// transaction's locks are released (so that ranging over it costs what it
// holds, not what it once held), and that the locks that stay, and their
// waiters, are unaffected.
func TestLockTableShrinks(t *testing.T) {
	big, other := uuid.New(), uuid.New()
	lt := newLockTable()
	const n = 3 * minShrinkPeak
	for i := 0; i < n; i++ {
		lt.acquire([]byte(fmt.Sprintf("b%06d", i)), kvpb.TxnMeta{ID: big})
	}
	for i := 0; i < 5; i++ {
		lt.acquire([]byte(fmt.Sprintf("o%d", i)), kvpb.TxnMeta{ID: other})
	}
	woken := lt.enqueue(kvpb.Intent{Key: []byte("o1"), Txn: kvpb.TxnMeta{ID: other}}, uuid.Nil)
	if lt.peak != n+5 {
		t.Fatalf("peak %d, want %d", lt.peak, n+5)
	}
	lt.releaseAll([]LockRelease{{Span: kvpb.Span{Key: []byte("b"), EndKey: []byte("c")}, Txn: big}})
	if got := len(lt.locks); got != 5 {
		t.Fatalf("%d locks left, want 5", got)
	}
	if lt.peak != 5 {
		t.Fatalf("peak %d after the release, want the map rebuilt at 5", lt.peak)
	}
	if lt.noneIn([]byte("o0"), []byte("o9")) {
		t.Fatal("noneIn lost the locks that stayed")
	}
	lt.release([]byte("o1"), other)
	select {
	case <-woken:
	default:
		t.Fatal("a waiter of a lock that survived the rebuild was not woken by its release")
	}
}
