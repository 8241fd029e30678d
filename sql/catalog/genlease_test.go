package catalog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/pgerror"
)

// leaseNodes are caches over one kv.DB standing in for the SQL gateways
// of a cluster: each has its own generation lease, and revocations reach
// the others' caches unless the target is partitioned.
type leaseNodes struct {
	db     *kv.DB
	caches map[string]*Cache
	mu     sync.Mutex
	cut    map[string]bool
}

func newLeaseNodes(t *testing.T, d time.Duration, addrs ...string) *leaseNodes {
	n := &leaseNodes{db: newTestDB(t), caches: map[string]*Cache{}, cut: map[string]bool{}}
	for i, addr := range addrs {
		c := NewCache()
		c.UseGenerationLeases(n.db, LeaseConfig{Node: uint64(i + 1), Addr: addr, Duration: d, Revoke: n.revoke})
		n.caches[addr] = c
	}
	return n
}

func (n *leaseNodes) revoke(_ context.Context, addr string, gen []byte) (hlc.Timestamp, error) {
	n.mu.Lock()
	cut := n.cut[addr]
	n.mu.Unlock()
	if cut {
		return hlc.Timestamp{}, errors.New("partitioned")
	}
	return n.caches[addr].RevokeGenerationLease(gen), nil
}

func (n *leaseNodes) partition(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[addr] = true
}

// lookup resolves table name in a statement of its own on node addr and
// reports whether it exists and the statement's read timestamp.
func (n *leaseNodes) lookup(t *testing.T, addr, name string) (found bool, ts hlc.Timestamp) {
	t.Helper()
	run(t, n.db, func(ctx context.Context, txn *kv.Txn) error {
		_, err := NewReader(txn, n.caches[addr]).UseGeneration().Table(ctx, PostgresDatabaseID, PublicSchemaID, name)
		if err != nil && pgerror.Code(err) != "42P01" {
			return err
		}
		found, ts = err == nil, txn.ReadTimestamp()
		return nil
	})
	return found, ts
}

// create runs CREATE TABLE name through node addr and returns the DDL's
// commit timestamp.
func (n *leaseNodes) create(t *testing.T, addr, name string) hlc.Timestamp {
	t.Helper()
	var last *kv.Txn
	run(t, n.db, func(ctx context.Context, txn *kv.Txn) error {
		last = txn
		return NewWriter(txn, n.caches[addr]).Create(ctx, simpleTable(name))
	})
	n.caches[addr].EndDDL(last)
	return last.CommitTimestamp()
}

// leased makes node addr acquire a lease (its first statement asks for
// one) and waits until it holds it.
func (n *leaseNodes) leased(t *testing.T, addr string) {
	t.Helper()
	n.lookup(t, addr, "a")
	deadline := time.Now().Add(30 * time.Second)
	for !n.caches[addr].HoldsGenerationLease() {
		if time.Now().After(deadline) {
			t.Fatalf("node %s acquired no generation lease (stats %+v)", addr, n.caches[addr].LocalGenStats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGenerationLeases: a node holding a lease answers statements with no
// catalog read at all; a DDL through another node revokes it and its next
// statement sees the DDL; a node that cannot be reached keeps its lease
// only until it expires, the DDL waits that long and commits above it,
// and the node's statements past the expiration read the catalog again.
func TestGenerationLeases(t *testing.T) {
	n := newLeaseNodes(t, 2*time.Second, "n1", "n2", "n3")
	n.create(t, "n1", "a")

	// A lease, then statements that read nothing of the catalog: no
	// generation read, no descriptor or name read.
	n.leased(t, "n2")
	gen, cache := n.caches["n2"].LocalGenStats(), n.caches["n2"].Stats()
	for range 3 {
		if found, _ := n.lookup(t, "n2", "a"); !found {
			t.Fatal("table a not found on n2")
		}
	}
	if s := n.caches["n2"].LocalGenStats(); s.Hits != gen.Hits+3 || s.Reads != gen.Reads {
		t.Fatalf("n2 stats %+v -> %+v: want three statements answered under the lease", gen, s)
	}
	if s := n.caches["n2"].Stats(); s.Misses != cache.Misses {
		t.Fatalf("n2 cache %+v -> %+v: a statement under the lease read a descriptor", cache, s)
	}

	// A DDL through n1 revokes n2's lease; n2's next statement sees it.
	n.create(t, "n1", "b")
	if s := n.caches["n2"].LocalGenStats(); s.Revoked == 0 {
		t.Fatalf("n2 stats %+v: the DDL did not revoke n2's lease", s)
	}
	if found, _ := n.lookup(t, "n2", "b"); !found {
		t.Fatal("n2 does not see the table n1 created")
	}

	// n3 holds a lease and is cut off: the DDL through n1 cannot revoke
	// it, waits for it to expire, and commits above its expiration.
	n.leased(t, "n3")
	n3 := n.caches["n3"].local
	n3.mu.Lock()
	exp := n3.exp
	n3.mu.Unlock()
	n.partition("n3")
	if commit := n.create(t, "n1", "c"); !exp.Less(commit) {
		t.Fatalf("the DDL committed at %s, not above the unreachable n3's lease expiration %s", commit, exp)
	}
	if n.caches["n3"].HoldsGenerationLease() {
		t.Fatal("n3 still holds its lease after it expired")
	}
	before := n.caches["n3"].LocalGenStats()
	found, ts := n.lookup(t, "n3", "c")
	if !found {
		t.Fatal("n3 does not see the table created while it was cut off")
	}
	if !exp.Less(ts) {
		t.Fatalf("n3's statement read at %s, not past its lease's expiration %s", ts, exp)
	}
	if s := n.caches["n3"].LocalGenStats(); s.Hits != before.Hits || s.Reads != before.Reads+1 {
		t.Fatalf("n3 stats %+v -> %+v: a statement past the lease's expiration was answered from memory", before, s)
	}
}

// TestGenerationLeaseRevokedDuringDDL: while a DDL through another node is
// pending, a revoked node neither answers from memory nor acquires a new
// lease on the generation being replaced; once it reads the new
// generation it leases that one.
func TestGenerationLeaseRevokedDuringDDL(t *testing.T) {
	ctx := context.Background()
	n := newLeaseNodes(t, 10*time.Second, "n1", "n2")
	n.create(t, "n1", "a")
	n.leased(t, "n2")

	ddl := n.db.NewTxn(ctx, "ddl", kv.Serializable)
	if err := NewWriter(ddl, n.caches["n1"]).Create(ctx, simpleTable("b")); err != nil {
		t.Fatal(err)
	}
	if n.caches["n2"].HoldsGenerationLease() {
		t.Fatal("n2 holds its lease while a DDL that revoked it is pending")
	}
	// n2's statement waits for the DDL's write of the generation key, so
	// run it after the commit; the lease it asks for stays held off only
	// until it reads the new generation.
	if err := ddl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	n.caches["n1"].EndDDL(ddl)
	if found, _ := n.lookup(t, "n2", "b"); !found {
		t.Fatal("n2 does not see b")
	}
	n.leased(t, "n2")
	if found, _ := n.lookup(t, "n2", "b"); !found {
		t.Fatal("n2 does not see b under its new lease")
	}
}
