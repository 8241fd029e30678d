package session

import (
	"testing"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/sql/catalog"
)

// TestExecContextAllocs: a statement's first execution context is part
// of its stmtState and allocates nothing of its own: not the catalog
// reader it opens (the statement's first is part of the stmtState too,
// since the sixteenth session), not its catalog writer (exec.CatalogWriterMaker; the
// closure it was cost every statement one allocation) nor pg_settings'
// list (a method value made once per session, as virtualLists' others).
func TestExecContextAllocs(t *testing.T) {
	s := &Session{b: &Backend{}, db: &catalog.Database{Name: "postgres"}, vars: map[string]string{
		"sql.testing.lookup_batch": "0", "storage.packed_rows.size_limit": "0",
	}}
	x := &stmtState{s: s}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	if n := testing.AllocsPerRun(100, func() {
		x.ecUsed, x.rd, x.rdBufUsed = false, nil, false
		_ = s.execContext(x, nil, nil)
	}); n > 0 {
		t.Errorf("execContext: %v allocations, want 0", n)
	}
	// A second reader, over another transaction, is allocated apart:
	// the first may still be in use.
	first := x.reader(nil)
	if second := x.reader(&kv.Txn{}); second == first || x.reader(&kv.Txn{}) == &x.rdBuf {
		t.Errorf("a second catalog reader reused the statement's first")
	}
	if first != &x.rdBuf {
		t.Errorf("the statement's first catalog reader is not its own")
	}
}
