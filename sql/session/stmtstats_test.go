package session

import (
	"fmt"
	"strings"
	"testing"
	"time"
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
