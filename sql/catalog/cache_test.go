package catalog

import (
	"context"
	"testing"

	"github.com/cairn-db/cairn/kv"
)

// TestCacheVersions: a cache hit needs the stamp the transaction reads to
// match; every write makes a new stamp, so a change is never served from
// a stale entry, and an unchanged descriptor is decoded once.
func TestCacheVersions(t *testing.T) {
	db := newTestDB(t)
	cache := NewCache()
	var id ID
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		tbl := simpleTable("t")
		if err := NewWriter(txn, cache).Create(ctx, tbl); err != nil {
			return err
		}
		id = tbl.ID
		return nil
	})
	get := func() *Table {
		t.Helper()
		var out *Table
		run(t, db, func(ctx context.Context, txn *kv.Txn) error {
			d, err := cache.Get(ctx, txn, id)
			if err != nil {
				return err
			}
			out = d.(*Table)
			return nil
		})
		return out
	}
	first := get()
	if again := get(); again != first {
		t.Errorf("second read of an unchanged descriptor was not a cache hit")
	}
	before := cache.Stats()
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		c, err := Clone(first)
		if err != nil {
			return err
		}
		c.Comment = "v2"
		return NewWriter(txn, cache).Update(ctx, c)
	})
	second := get()
	if second.Version != 2 || second.Comment != "v2" {
		t.Errorf("after update the cache returned version %d comment %q", second.Version, second.Comment)
	}
	if s := cache.Stats(); s.Misses != before.Misses+1 {
		t.Errorf("stats %+v -> %+v: want exactly one miss for the new version", before, s)
	}
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		return NewWriter(txn, cache).Drop(ctx, second)
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		if _, ok, err := cache.get(ctx, txn, id); ok || err != nil {
			t.Errorf("dropped descriptor served from the cache: ok=%v err=%v", ok, err)
		}
		return nil
	})
}

// TestCacheFollowsSnapshot: a transaction that started before a change
// keeps seeing the old version through the cache, even after a newer
// transaction has cached the new one; and a version written by a
// transaction that rolled back is never served to others.
func TestCacheFollowsSnapshot(t *testing.T) {
	db := newTestDB(t)
	cache := NewCache()
	ctx := context.Background()
	var tbl *Table
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		tbl = simpleTable("t")
		return NewWriter(txn, cache).Create(ctx, tbl)
	})
	old := db.NewTxn(ctx, "old", kv.Snapshot)
	defer func() { _ = old.Rollback(ctx) }()
	if d, err := cache.Get(ctx, old, tbl.ID); err != nil || d.DescVersion() != 1 {
		t.Fatalf("old txn first read: %v, %v", d, err)
	}
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		c, _ := Clone(tbl)
		c.Comment = "new"
		return NewWriter(txn, cache).Update(ctx, c)
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		d, err := cache.Get(ctx, txn, tbl.ID)
		if err != nil || d.DescVersion() != 2 {
			t.Errorf("new txn: %v, %v", d, err)
		}
		return err
	})
	if d, err := cache.Get(ctx, old, tbl.ID); err != nil || d.DescVersion() != 1 || d.(*Table).Comment != "" {
		t.Errorf("old txn after the change: %+v, %v", d, err)
	}

	// A rolled-back version 3 is cached by its own transaction ...
	rb := db.NewTxn(ctx, "rolled back", kv.Serializable)
	cur, err := cache.Get(ctx, rb, tbl.ID)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := Clone(cur.(*Table))
	c.Comment = "never committed"
	if err := NewWriter(rb, cache).Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	if d, err := cache.Get(ctx, rb, tbl.ID); err != nil || d.(*Table).Comment != "never committed" {
		t.Fatalf("own write through the cache: %+v, %v", d, err)
	}
	if err := rb.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// ... and a committed version 3 with other content is not confused
	// with it.
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		c, _ := Clone(cur.(*Table))
		c.Comment = "committed"
		return NewWriter(txn, cache).Update(ctx, c)
	})
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		d, err := cache.Get(ctx, txn, tbl.ID)
		if err != nil || d.DescVersion() != 3 || d.(*Table).Comment != "committed" {
			t.Errorf("after rollback and commit: %+v, %v", d, err)
		}
		return err
	})
}
