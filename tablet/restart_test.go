package tablet

import (
	"context"
	"strings"
	"testing"
)

// The lock table is rebuilt from the stored intents when a replica opens,
// so a restarted tablet still queues writers behind an old intent.
func TestLockTableRebuiltAtOpen(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	old := h.r
	h.open(Config{})
	old.Close()
	got := h.r.locks.String()
	if !strings.HasPrefix(got, `"k" holder=`+h.txn("A").Short()) {
		t.Fatalf("rebuilt lock table = %q", got)
	}
}
