package kv

import (
	"context"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestIncrement: DB.Inc adds atomically, starts from 0 on a missing key,
// is refused inside a transaction, survives the transaction that ran
// alongside it rolling back, and under concurrency hands out every value
// exactly once.
func TestIncrement(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	for i, tc := range []struct {
		by, want int64
	}{{1, 1}, {1, 2}, {10, 12}, {-5, 7}} {
		got, err := e.db.Inc(ctx, []byte("ctr"), tc.by)
		if err != nil || got != tc.want {
			t.Fatalf("step %d: Inc(%d) = %d, %v; want %d", i, tc.by, got, err, tc.want)
		}
	}
	if v, err := kvpb.DecodeIncrementValue([]byte(e.mustGet("ctr"))); err != nil || v != 7 {
		t.Fatalf("stored counter = %d, %v; want 7", v, err)
	}

	// A value that is not a counter is refused, and left alone.
	e.mustPut("notctr", "abc")
	if _, err := e.db.Inc(ctx, []byte("notctr"), 1); err == nil {
		t.Fatal("Inc of a 3-byte value succeeded")
	}
	if got := e.mustGet("notctr"); got != "abc" {
		t.Fatalf("refused Inc changed the value to %q", got)
	}

	// Overflow is an error, not a wrap-around.
	if err := e.db.Put(ctx, []byte("big"), kvpb.EncodeIncrementValue(1<<62)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Inc(ctx, []byte("big"), 1<<62); err == nil {
		t.Fatal("Inc overflowing int64 succeeded")
	}

	// Not transactional: inside a transaction the request is refused.
	txn := e.db.NewTxn(ctx, "inc", Serializable)
	b := &Batch{}
	b.Inc([]byte("ctr"), 1)
	if err := txn.Run(ctx, b); err == nil {
		t.Fatal("Increment inside a transaction succeeded")
	}
	_ = txn.Rollback(ctx)

	// Concurrency: every returned value is distinct and the final value
	// counts every call.
	const workers, each = 8, 50
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				v, err := e.db.Inc(ctx, []byte("conc"), 1)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[v] {
					t.Errorf("value %d returned twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if v, err := e.db.Inc(ctx, []byte("conc"), 0); err != nil || v != workers*each {
		t.Fatalf("final counter = %d, %v; want %d", v, err, workers*each)
	}
}
