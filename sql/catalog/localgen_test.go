package catalog

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// TestLocalGeneration: statements are answered from the node's memory
// once a read primed it, never while a DDL is pending, and a DDL whose
// transaction began before a statement answered from memory still
// commits above that statement's timestamp (the fence), so the
// statement's snapshot and the catalog it used agree.
func TestLocalGeneration(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	cache := NewCache()
	cache.UseLocalGeneration(db)

	// lookup resolves table name in a statement of its own and reports
	// whether it exists.
	lookup := func(name string) (found bool) {
		t.Helper()
		run(t, db, func(ctx context.Context, txn *kv.Txn) error {
			r := NewReader(txn, cache).UseGeneration()
			_, err := r.Table(ctx, PostgresDatabaseID, PublicSchemaID, name)
			if err != nil && pgerror.Code(err) != "42P01" {
				return err
			}
			found = err == nil
			return nil
		})
		return found
	}
	create := func(txn *kv.Txn, name string) error {
		return NewWriter(txn, cache).Create(ctx, simpleTable(name))
	}
	var first *kv.Txn
	run(t, db, func(ctx context.Context, txn *kv.Txn) error { first = txn; return create(txn, "a") })
	cache.EndDDL(first)

	// The first statement reads the generation and primes memory; the
	// next ones are answered from it.
	if !lookup("a") {
		t.Fatal("table a not found")
	}
	before := cache.LocalGenStats()
	for range 3 {
		if !lookup("a") {
			t.Fatal("table a not found")
		}
	}
	if s := cache.LocalGenStats(); s.Hits != before.Hits+3 || s.Reads != before.Reads {
		t.Fatalf("stats %+v -> %+v: want three statements answered from memory", before, s)
	}

	// A DDL transaction starts (its timestamp is fixed now), then a
	// statement is answered from memory at a later timestamp, then the
	// DDL writes the catalog and commits.
	ddl := db.NewTxn(ctx, "ddl", kv.Serializable)
	start := ddl.ReadTimestamp()
	hits := cache.LocalGenStats().Hits
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		if !start.Less(txn.ReadTimestamp()) {
			return errors.New("the statement did not read after the DDL began")
		}
		_, err := NewReader(txn, cache).UseGeneration().Table(ctx, PostgresDatabaseID, PublicSchemaID, "a")
		return err
	})
	if cache.LocalGenStats().Hits != hits+1 {
		t.Fatal("the statement was not answered from memory")
	}
	served := cache.local.served
	if err := create(ddl, "b"); err != nil {
		t.Fatal(err)
	}
	if s := cache.LocalGenStats(); s.Fences == 0 {
		t.Errorf("no fence before the DDL's first write (stats %+v)", s)
	}
	if err := ddl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cache.EndDDL(ddl)
	if c := ddl.CommitTimestamp(); !served.Less(c) {
		t.Fatalf("DDL (begun at %s) committed at %s, not above the timestamp %s served from memory", start, c, served)
	}
	// While a DDL is pending, statements read the generation key (which
	// pushes the DDL above them, or waits for it).
	ddl2 := db.NewTxn(ctx, "ddl2", kv.Serializable)
	if err := create(ddl2, "b2"); err != nil {
		t.Fatal(err)
	}
	mid := cache.LocalGenStats()
	if lookup("b2") {
		t.Error("b2 visible before the DDL committed")
	}
	if s := cache.LocalGenStats(); s.Reads != mid.Reads+1 || s.Hits != mid.Hits {
		t.Errorf("stats %+v -> %+v: a statement was answered from memory while a DDL was pending", mid, s)
	}
	if err := ddl2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cache.EndDDL(ddl2)
	// The next statement sees b, and primes memory again.
	if !lookup("b") {
		t.Fatal("b not visible after the DDL committed")
	}
	after := cache.LocalGenStats()
	if !lookup("b2") || !lookup("a") {
		t.Fatal("tables lost")
	}
	if s := cache.LocalGenStats(); s.Hits != after.Hits+2 {
		t.Errorf("stats %+v -> %+v: memory not primed again after the DDL", after, s)
	}

	// A rolled-back DDL leaves nothing, and memory is primed again.
	rb := db.NewTxn(ctx, "rolled back", kv.Serializable)
	if err := create(rb, "c"); err != nil {
		t.Fatal(err)
	}
	if err := rb.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	cache.EndDDL(rb)
	if lookup("c") || lookup("c") {
		t.Error("a rolled-back table is visible")
	}
}

// TestStopLocalGeneration: after StopLocalGeneration no statement is
// answered from memory, and a DDL through another node's cache (one
// without the local generation) whose transaction began before the stop
// still commits above every timestamp the first cache served from memory
// (the stop's fence), and is seen by the first cache's next statement.
func TestStopLocalGeneration(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	cache, other := NewCache(), NewCache()
	cache.UseLocalGeneration(db)
	lookup := func(name string) (found bool) {
		t.Helper()
		run(t, db, func(ctx context.Context, txn *kv.Txn) error {
			_, err := NewReader(txn, cache).UseGeneration().Table(ctx, PostgresDatabaseID, PublicSchemaID, name)
			if err != nil && pgerror.Code(err) != "42P01" {
				return err
			}
			found = err == nil
			return nil
		})
		return found
	}
	var first *kv.Txn
	run(t, db, func(ctx context.Context, txn *kv.Txn) error {
		first = txn
		return NewWriter(txn, cache).Create(ctx, simpleTable("a"))
	})
	cache.EndDDL(first)

	ddl := db.NewTxn(ctx, "ddl through another node", kv.Serializable)
	// b first: the lookups from memory that follow read no key the DDL
	// writes, so only the fence can push the DDL above them.
	if lookup("b") || !lookup("a") || !lookup("a") {
		t.Fatal("want a and not b")
	}
	if s := cache.LocalGenStats(); s.Hits == 0 {
		t.Fatalf("stats %+v: nothing answered from memory before the stop", s)
	}
	served := cache.local.served
	if cache.LocalGenerationStopped() {
		t.Fatal("stopped before StopLocalGeneration")
	}
	if err := cache.StopLocalGeneration(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := cache.LocalGenStats()
	if stopped.Fences == 0 || !cache.LocalGenerationStopped() {
		t.Fatalf("stats %+v, stopped %v: want a fence and the cache stopped", stopped, cache.LocalGenerationStopped())
	}
	if err := NewWriter(ddl, other).Create(ctx, simpleTable("b")); err != nil {
		t.Fatal(err)
	}
	if err := ddl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if c := ddl.CommitTimestamp(); !served.Less(c) {
		t.Fatalf("the other node's DDL committed at %s, not above %s served from memory", c, served)
	}
	if !lookup("b") || !lookup("a") {
		t.Fatal("the first cache misses the other node's table or its own")
	}
	if s := cache.LocalGenStats(); s.Hits != stopped.Hits || s.Reads != stopped.Reads+2 {
		t.Fatalf("stats %+v -> %+v: want both statements to read the generation key", stopped, s)
	}
	// A second stop (another join) has nothing left to fence.
	if err := cache.StopLocalGeneration(ctx); err != nil {
		t.Fatal(err)
	}
	if s := cache.LocalGenStats(); s.Fences != stopped.Fences {
		t.Fatalf("stats %+v: a second stop fenced again with nothing served", s)
	}
}
