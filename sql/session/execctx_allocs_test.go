package session

import (
	"testing"

	"github.com/cairn-db/cairn/sql/catalog"
)

// TestExecContextAllocs: a statement's first execution context is part
// of its stmtState and allocates nothing of its own but the catalog
// reader it opens: not its catalog writer (exec.CatalogWriterMaker; the
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
		x.ecUsed, x.rd = false, nil
		_ = s.execContext(x, nil, nil)
	}); n > 1 {
		t.Errorf("execContext: %v allocations, want 1 (the catalog reader)", n)
	}
}
