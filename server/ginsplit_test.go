package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// TestLocalGINBlocksSplitUnit: once a distributed table has a local GIN
// index, the split queue's unit in its group is the index's block (the
// shard as it was when the index was made, zone.Config.BucketBlocks), not
// the bucket: a grown shard no longer splits between its rows and their
// GIN entries, which sit at the block's first bucket. Before, the unit is
// the bucket (rowenc.BucketUnit), and a split in the middle of a shard
// succeeds; after, SplitMiddle finds no boundary inside the block.
func TestLocalGINBlocksSplitUnit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}})
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	c := connect(t, s)
	defer c.Close(context.Background())
	ctx := context.Background()
	for _, q := range []string{
		"SET citus.shard_count = 2",
		"CREATE TABLE ev (repo_id INT8, id INT8, payload JSONB, PRIMARY KEY (repo_id, id))",
		"INSERT INTO ev SELECT g % 50, g, jsonb_build_object('n', g % 7) FROM generate_series(1, 2000) g",
		"SELECT create_distributed_table('ev', 'repo_id')",
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	desc := tableDesc(t, s, "ev")
	l, err := desc.Layout()
	if err != nil {
		t.Fatal(err)
	}
	row := []types.Datum{types.DInt(7), types.DInt(7), types.DNull}
	key, err := l.PrimaryKey(nil, row)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := l.Bucket(row)
	if err != nil {
		t.Fatal(err)
	}
	unitIs := func(want func() ([]byte, []byte)) bool {
		u, ok := s.splitUnit(key)
		lo, hi := want()
		return ok && string(u.Key) == string(lo) && string(u.EndKey) == string(hi)
	}
	bucketUnit := func() ([]byte, []byte) {
		sp := rowenc.BucketSpan(desc.GroupID, bucket, bucket)
		return sp.Key, sp.EndKey
	}
	blockUnit := func() ([]byte, []byte) {
		sp, _ := rowenc.BlockUnit(key, 2)
		return sp.Key, sp.EndKey
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the bucket split unit of a distributed table", func() bool { return unitIs(bucketUnit) })
	if _, err := c.Exec(ctx, "CREATE INDEX ev_payload ON ev USING gin (payload)"); err != nil {
		t.Fatal(err)
	}
	// The zone record is written by the build's first step; the node's
	// zone cache follows it.
	waitFor("the block split unit after CREATE INDEX ... USING gin", func() bool { return unitIs(blockUnit) })
	blo, bhi := blockUnit()
	if blo2, bhi2 := bucketUnit(); string(blo) >= string(blo2) || string(bhi) <= string(bhi2) {
		t.Fatalf("the block [%x, %x) does not hold the bucket [%x, %x)", blo, bhi, blo2, bhi2)
	}
	// The shard holding the row is one block: no split inside it.
	for _, d := range s.store.Tablets() {
		if string(d.StartKey) <= string(key) && (len(d.EndKey) == 0 || string(key) < string(d.EndKey)) {
			var splitAt []byte
			waitFor("a split attempt by the row's tablet's leaseholder", func() bool {
				_, right, err := s.store.SplitMiddle(ctx, d.TabletID)
				splitAt = right.StartKey
				return err == nil
			})
			if splitAt != nil {
				t.Fatalf("tablet %d (a shard of ev with a local GIN index) split inside its block at %x", d.TabletID, splitAt)
			}
			return
		}
	}
	t.Fatalf("no tablet holds %x", key)
}
