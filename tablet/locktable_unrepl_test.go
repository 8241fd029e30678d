package tablet

import (
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// TestLockTableUnreplicated: unreplicated locks conflict with other
// transactions only, are invisible to noneIn (reads), wake their waiters
// when released, become replicated when their holder writes an intent,
// are dropped (not moved) by a split, and survive no reset.
func TestLockTableUnreplicated(t *testing.T) {
	a := kvpb.TxnMeta{ID: uuid.New()}
	b := kvpb.TxnMeta{ID: uuid.New()}
	lt := newLockTable()
	lt.acquireUnreplicated([]byte("k"), a)
	lt.acquireUnreplicated([]byte("x"), a)

	if _, ok := lt.unreplConflict([]byte("k"), nil, a.ID); ok {
		t.Fatal("a's own lock is a conflict for a")
	}
	if in, ok := lt.unreplConflict([]byte("k"), nil, b.ID); !ok || in.Txn.ID != a.ID {
		t.Fatalf("b writing k: conflict %v %v, want a's lock", in, ok)
	}
	if in, ok := lt.unreplConflict([]byte("j"), []byte("l"), b.ID); !ok || string(in.Key) != "k" {
		t.Fatalf("b writing [j, l): conflict %v %v, want k", in, ok)
	}
	if _, ok := lt.unreplConflict([]byte("l"), []byte("w"), b.ID); ok {
		t.Fatal("conflict in [l, w), which holds no lock")
	}
	if !lt.noneIn([]byte("k"), nil) || !lt.noneIn([]byte("a"), []byte("z")) {
		t.Fatal("noneIn counts unreplicated locks (which hold no value and no intent)")
	}

	// A waiter on k is woken by the release of a's locks.
	ch := lt.enqueue(kvpb.Intent{Key: []byte("k"), Txn: a}, b.ID)
	lt.releaseUnreplicated(a.ID, &kvpb.Span{Key: []byte("k")})
	select {
	case <-ch:
	default:
		t.Fatal("waiter not woken by the release")
	}
	if got := lt.keys(); len(got) != 1 || got[0] != "x" {
		t.Fatalf("locks after releasing k: %q", got)
	}

	// An intent of the holder makes the lock replicated: noneIn sees it,
	// and releasing the unreplicated locks leaves it.
	lt.acquire([]byte("x"), a)
	if lt.noneIn([]byte("x"), nil) {
		t.Fatal("an intent is invisible to noneIn")
	}
	lt.releaseUnreplicated(a.ID, nil)
	if got := lt.keys(); len(got) != 1 {
		t.Fatalf("the intent went with the unreplicated locks: %q", got)
	}
	lt.release([]byte("x"), a.ID)

	// A split drops the right side's unreplicated locks and keeps intents.
	lt.acquireUnreplicated([]byte("c"), a)
	lt.acquireUnreplicated([]byte("p"), a)
	lt.acquire([]byte("q"), b)
	right := lt.splitOff([]byte("m"))
	if got := right.keys(); len(got) != 1 || got[0] != "q" {
		t.Fatalf("right side after split: %q, want only the intent q", got)
	}
	if got := lt.keys(); len(got) != 1 || got[0] != "c" {
		t.Fatalf("left side after split: %q", got)
	}

	// A reset (leader change) loses them; the stale index entry is no
	// conflict.
	lt.reset(nil)
	if _, ok := lt.unreplConflict([]byte("c"), nil, b.ID); ok {
		t.Fatal("an unreplicated lock survived a reset")
	}
	if _, ok := lt.unreplConflict([]byte("a"), []byte("z"), b.ID); ok {
		t.Fatal("an unreplicated lock survived a reset (range check)")
	}
}

// TestLockTableContendedHold: the table tells observeHold how long an
// unreplicated lock was held when it is released after another request
// waited for it, by any release path; an uncontended lock, an intent
// (not timed) and a lock lost to a split are not observed.
func TestLockTableContendedHold(t *testing.T) {
	a := kvpb.TxnMeta{ID: uuid.New()}
	w := uuid.New()
	k := []byte("k")
	for _, tc := range []struct {
		name    string
		intent  bool // an intent instead of an unreplicated lock
		waited  bool
		release func(lt *lockTable)
		want    int
	}{
		{name: "contended, released", waited: true, release: func(lt *lockTable) { lt.release(k, a.ID) }, want: 1},
		{name: "contended, released unreplicated", waited: true, release: func(lt *lockTable) { lt.releaseUnreplicated(a.ID, nil) }, want: 1},
		{name: "contended, released by range", waited: true, release: func(lt *lockTable) {
			lt.releaseAll([]LockRelease{{Txn: a.ID, Span: kvpb.Span{Key: []byte("a"), EndKey: []byte("z")}}})
		}, want: 1},
		{name: "uncontended", release: func(lt *lockTable) { lt.release(k, a.ID) }},
		{name: "an intent, contended", intent: true, waited: true, release: func(lt *lockTable) { lt.release(k, a.ID) }},
		{name: "contended, lost to a split", waited: true, release: func(lt *lockTable) { lt.splitOff([]byte("a")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLockTable()
			var held []time.Duration
			lt.observeHold = func(d time.Duration) { held = append(held, d) }
			if tc.intent {
				lt.acquire(k, a)
			} else {
				lt.acquireUnreplicated(k, a)
			}
			if tc.waited {
				lt.enqueue(kvpb.Intent{Key: k, Txn: a}, w)
			}
			tc.release(lt)
			if len(held) != tc.want {
				t.Fatalf("%d holds observed, want %d", len(held), tc.want)
			}
			if lt.len() != 0 && tc.name != "contended, lost to a split" {
				t.Fatalf("the lock is still in the table: %s", lt)
			}
		})
	}
}
