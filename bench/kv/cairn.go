package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/testcluster"
)

// cairnKV is the system under test: a node (engine, store with its
// tablets, kv client) wired as a real node is, on a real directory with
// synced commits.
type cairnKV struct {
	n  *testcluster.Node
	db *kv.DB
}

// splitKeys cut the keyspace so the loaded keys span several tablets and the
// two keys of a txn-2tab transaction always land on different tablets.
var splitKeys = []string{"\x03k/25", "\x03k/50", "\x03k/75", "\x03w/t2b"}

func openCairn(ctx context.Context, dir string) (*cairnKV, error) {
	o := testcluster.Options{Dir: dir, MaxOffset: 500 * time.Millisecond, Raft: *flagRaft}
	for _, k := range splitKeys {
		o.Splits = append(o.Splits, []byte(k))
	}
	n, err := testcluster.Start(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	return &cairnKV{n: n, db: n.DB}, nil
}

func (c *cairnKV) load(ctx context.Context, keys [][]byte, value []byte) error {
	for i := 0; i < len(keys); i += 1000 {
		ba := &kvpb.BatchRequest{}
		for _, k := range keys[i:min(i+1000, len(keys))] {
			ba.Add(&kvpb.PutRequest{Key: k, Value: value})
		}
		if _, err := c.db.Send(ctx, ba); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	return nil
}

func (c *cairnKV) gets(ctx context.Context, keys [][]byte, n int) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		_, ok, err := c.db.Get(ctx, keys[(i*7919)%len(keys)])
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("key %q missing", keys[(i*7919)%len(keys)])
		}
	}
	return time.Since(start), nil
}

// put1PC writes one key per transaction, committed in the same batch as the
// write, which the tablet commits in one phase.
func (c *cairnKV) put1PC(ctx context.Context, prefix string, n, conc int, value []byte) (time.Duration, error) {
	return parallel(n, conc, func(i int) error {
		txn := c.db.NewTxn(ctx, "put", kv.Serializable)
		b := &kv.Batch{}
		b.Put(writeKey(prefix, i, 0), value)
		if err := txn.CommitInBatch(ctx, b); err != nil {
			return err
		}
		if !txn.OnePhaseCommitted() {
			return fmt.Errorf("transaction %d did not commit in one phase", i)
		}
		return nil
	})
}

// txn2Tablets writes two keys on two tablets in one transaction: intents in
// parallel, a record on the first, commit, asynchronous resolution.
func (c *cairnKV) txn2Tablets(ctx context.Context, n, conc int, value []byte) (time.Duration, error) {
	return parallel(n, conc, func(i int) error {
		txn := c.db.NewTxn(ctx, "two", kv.Serializable)
		b := &kv.Batch{}
		b.Put(writeKey("t2a", i, 0), value)
		b.Put(writeKey("t2b", i, 0), value)
		if err := txn.CommitInBatch(ctx, b); err != nil {
			return err
		}
		if txn.OnePhaseCommitted() {
			return fmt.Errorf("two-tablet transaction %d claims a one-phase commit", i)
		}
		return nil
	})
}

func (c *cairnKV) scan(ctx context.Context, lo, hi []byte) (int, time.Duration, error) {
	start := time.Now()
	rows, err := c.db.Scan(ctx, lo, hi, 0)
	if err != nil {
		return 0, 0, err
	}
	return len(rows), time.Since(start), nil
}

func (c *cairnKV) close() error { return c.n.Stop() }
