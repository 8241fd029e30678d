package tablet

import (
	"context"
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// TestOnePCIterBuilds: a one-phase commit as simple-update sends one (a
// row rewritten whole: a Put of its key and a DeleteRange of the rest of
// its span; a ConditionalPut of a new history row) builds one Pebble
// iterator for all its reads (storage's NewReusingBatch): the lock
// table's verification by the harness (Config.VerifyLockTable), the
// range's scan and the writes' reads of their keys' newest versions each
// built their own before (6 for this batch). What it wrote is read back,
// and it committed in one phase.
func TestOnePCIterBuilds(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	for i, tc := range []struct {
		name   string
		builds uint64
	}{
		{name: "a whole-row rewrite and an insert", builds: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := []byte(fmt.Sprintf("\x03onepciters%d/", i))
			hist := []byte(fmt.Sprintf("\x03onepchist%d/", i))
			if _, err := h.sendAt(wallTS(10), &kvpb.PutRequest{Key: row, Value: []byte("v10")}); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("updater%d", i)
			txn := h.newTxn(name, wallTS(20), 0)
			txn.Key = row
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.PutRequest{Key: row, Value: []byte("v20")})
			ba.Add(&kvpb.DeleteRangeRequest{Key: keys.Next(row), EndKey: keys.PrefixEnd(row)})
			ba.Add(&kvpb.ConditionalPutRequest{Key: hist, Value: []byte("h")})
			ba.Add(&kvpb.EndTxnRequest{Key: row, Commit: true, LockSpans: []kvpb.Span{
				{Key: row}, {Key: keys.Next(row), EndKey: keys.PrefixEnd(row)}, {Key: hist}}})
			before := h.eng.IterBuilds()
			br, err := h.send(ctx, ba, name)
			builds := h.eng.IterBuilds() - before
			if err != nil {
				t.Fatal(err)
			}
			if !br.OnePhaseCommit {
				t.Fatal("the batch did not commit in one phase")
			}
			if builds != tc.builds {
				t.Errorf("the one-phase commit built %d iterators, want %d", builds, tc.builds)
			}
			for _, kv := range []struct{ key, want string }{{string(row), "v20"}, {string(hist), "h"}} {
				if got := h.getAt(t, kv.key, wallTS(30)); got != kv.want {
					t.Errorf("%q reads %q, want %q", kv.key, got, kv.want)
				}
			}
		})
	}
}
