package kv

import (
	"context"
	"testing"
	"time"
)

// TestScanCommittedNeverPushes: a background reader's ScanCommitted that
// meets a live transaction's intents (on two tablets, so it commits in
// two phases) answers the committed rows from below them and leaves the
// transaction's timestamp alone, so its commit is never refused; an
// ordinary Scan, and ScanCommitted once the intents are older than its
// staleAfter, push the transaction instead (the writer's commit is then
// refused once and refreshes).
func TestScanCommittedNeverPushes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		scan       func(e *testEnv, ctx context.Context) (string, error)
		wantBelow  bool // read below the intents
		wantPushed bool // the writer's commit was pushed
	}{
		{"committed", func(e *testEnv, ctx context.Context) (string, error) {
			rows, err := e.db.ScanCommitted(ctx, []byte("a"), []byte("zz"), 0, time.Hour)
			return rowsString(rows), err
		}, true, false},
		{"committed, intents older than staleAfter", func(e *testEnv, ctx context.Context) (string, error) {
			rows, err := e.db.ScanCommitted(ctx, []byte("a"), []byte("zz"), 0, 0)
			return rowsString(rows), err
		}, false, true},
		{"ordinary scan", func(e *testEnv, ctx context.Context) (string, error) {
			rows, err := e.db.Scan(ctx, []byte("a"), []byte("zz"), 0)
			return rowsString(rows), err
		}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newTestEnv(t, envOptions{splits: []string{"m"}})
			e.mustPut("a", "old")
			e.mustPut("z", "old")
			txn := e.db.NewTxn(ctx, "writer", Serializable)
			if err := txn.DisableWriteBuffering(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"a", "z"} {
				if err := txn.Put(ctx, []byte(k), []byte("new")); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(e.intentsOf(txn.ID())); n != 2 {
				t.Fatalf("setup: the writer holds %d intents, want 2", n)
			}
			readAt := txn.ReadTimestamp()
			got, err := tc.scan(e, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got != "a=old z=old" {
				t.Fatalf("scan beside the writer: %q, want the committed rows a=old z=old", got)
			}
			if below := e.db.BelowIntentScans() > 0; below != tc.wantBelow {
				t.Fatalf("read below the intents: %v, want %v", below, tc.wantBelow)
			}
			if err := txn.Commit(ctx); err != nil {
				t.Fatalf("the writer's commit: %v", err)
			}
			if pushed := e.db.PushedCommits() > 0; pushed != tc.wantPushed {
				t.Fatalf("the writer's commit was pushed: %v, want %v", pushed, tc.wantPushed)
			}
			if pushed := readAt.Less(txn.CommitTimestamp()); pushed != tc.wantPushed {
				t.Fatalf("the writer committed at %s having begun reading at %s; pushed %v, want %v", txn.CommitTimestamp(), readAt, pushed, tc.wantPushed)
			}
			if v := e.mustGet("z"); v != "new" {
				t.Fatalf("z = %q after the commit, want new", v)
			}
		})
	}
}
