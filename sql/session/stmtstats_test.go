package session

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/sql/catalog"
)

// TestFingerprints: statements differing only in constants and spacing
// share a fingerprint and a normalized text; a long text is cut, a very
// long one is hashed by its normalized text; the kinds label the
// histogram.
func TestFingerprints(t *testing.T) {
	a, b := computeFingerprint("SELECT v FROM kv WHERE k = 1"), computeFingerprint("select v  from kv where k = 42")
	if a.id != b.id || a.query != "SELECT v FROM kv WHERE k = $1" || a.kind != "select" {
		t.Errorf("%+v and %+v", a, b)
	}
	if c := computeFingerprint("SELECT v FROM kv WHERE k > 1"); c.id == a.id {
		t.Errorf("k > 1 has k = 1's fingerprint")
	}
	long := "INSERT INTO t VALUES " + strings.Repeat("(1, 'x'), ", 3000) + "(2, 'y')"
	f := computeFingerprint(long)
	if len(f.query) != maxQueryText+3 || !strings.HasSuffix(f.query, "...") || !strings.HasPrefix(f.query, "INSERT INTO t VALUES ($1, $2), ($3, $4)") || f.kind != "insert" {
		t.Errorf("long text: %d bytes, %q...", len(f.query), f.query[:60])
	}
	huge := func(n int) string {
		var sb strings.Builder
		sb.WriteString("INSERT INTO t VALUES ")
		for i := range 8000 {
			fmt.Fprintf(&sb, "(%d, 'v%d'), ", i*n, i)
		}
		sb.WriteString("(0, 'z')")
		return sb.String()
	}
	if h1, h2 := computeFingerprint(huge(1)), computeFingerprint(huge(7)); len(huge(1)) <= largeText || h1.id != h2.id {
		t.Errorf("huge texts of one shape: ids %d and %d", h1.id, h2.id)
	}
	for sql, kind := range map[string]string{
		"  -- c\n(SELECT 1)": "select", "/* x */ UPDATE t SET a = 1": "update", "DELETE FROM t": "delete",
		"CREATE TABLE t (a int)": "ddl", "BEGIN": "transaction", "COMMIT": "transaction", "SET x = 1": "other",
		"WITH a AS (SELECT 1) SELECT * FROM a": "other", "COPY t FROM STDIN": "other",
	} {
		if got := StatementKind(sql); got != kind {
			t.Errorf("StatementKind(%q) = %s, want %s", sql, got, kind)
		}
	}
}

// TestStatementStats: calls, rows, times and eviction at the bound.
func TestStatementStats(t *testing.T) {
	var st stmtStats
	k := stmtKey{user: "u", db: 1, id: 7}
	for _, ms := range []int{1, 2, 3, 6} {
		st.record(k, "SELECT $1", time.Duration(ms)*time.Millisecond, 2)
	}
	got := st.snapshot()
	if len(got) != 1 {
		t.Fatalf("%d entries", len(got))
	}
	e := got[0]
	if e.Calls != 4 || e.Rows != 8 || e.TotalMs != 12 || e.MinMs != 1 || e.MaxMs != 6 || e.MeanMs != 3 ||
		fmt.Sprintf("%.4f", e.StddevMs) != "1.8708" || e.Query != "SELECT $1" || e.User != "u" || e.DatabaseID != 1 || e.QueryID != 7 {
		t.Errorf("%+v", e)
	}
	for i := range maxStatementEntries {
		st.record(stmtKey{user: "u", db: 1, id: int64(100 + i)}, "q", time.Millisecond, 0)
	}
	got = st.snapshot()
	if len(got) > maxStatementEntries {
		t.Errorf("%d entries, bound %d", len(got), maxStatementEntries)
	}
	found := false
	for _, e := range got {
		found = found || e.QueryID == 7
	}
	if !found {
		t.Errorf("the most called entry was evicted")
	}
}

// TestKeptStatEviction: a kept entry (recordKept) is looked up again
// after an eviction, which may have dropped it from the map, and for
// another user or database; otherwise it is used as it is.
func TestKeptStatEviction(t *testing.T) {
	s := &Session{act: &activity{}, b: &Backend{}, db: &catalog.Database{ID: 1, Name: "postgres"}, user: "u"}
	var k keptStat
	const sql = "SELECT 1"
	calls := func(user string, db catalog.ID) int64 {
		for _, e := range s.b.stmts.snapshot() {
			if e.User == user && e.DatabaseID == uint32(db) && e.Query == "SELECT $1" {
				return e.Calls
			}
		}
		return 0
	}
	for _, c := range []struct {
		name    string
		change  func()
		lookups int64
		user    string
		db      catalog.ID
		want    int64
	}{
		{"first", func() {}, 1, "u", 1, 1},
		{"kept", func() {}, 0, "u", 1, 2},
		{"evicted", func() {
			s.b.stmts.mu.Lock()
			s.b.stmts.evictLocked() // the only entry goes
			s.b.stmts.mu.Unlock()
		}, 1, "u", 1, 1},
		{"kept again", func() {}, 0, "u", 1, 2},
		{"other user", func() { s.user = "v" }, 1, "v", 1, 1},
		{"other database", func() { s.db = &catalog.Database{ID: 2, Name: "d"} }, 1, "v", 2, 1},
	} {
		c.change()
		before := statLookups.Load()
		s.recordKept(&k, sql, nil, time.Millisecond, 1)
		if got := statLookups.Load() - before; got != c.lookups {
			t.Errorf("%s: %d look-ups, want %d", c.name, got, c.lookups)
		}
		if got := calls(c.user, c.db); got != c.want {
			t.Errorf("%s: %d calls, want %d", c.name, got, c.want)
		}
	}
}
