package parser

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// quickScanInputs are texts the quick scanner handles and texts it must
// leave to the real scanner.
var quickScanInputs = []string{
	"SELECT abalance FROM pgbench_accounts WHERE aid = 48213;",
	"select v from t where a = -12 and b = 'it''s'",
	"SELECT a.b, t.* FROM s.t AS x WHERE (a <= 3 OR b >= 4) AND c <> 5 AND d != 6 AND e < 7 AND f > 8",
	"SELECT x::int8, y[1], 1+2-3*4/5%6 FROM t;SELECT 2",
	"SELECT a$b, _x1 FROM t WHERE z = ''",
	"SELECT 'a' 'b'", "SELECT 'a'\n'b'", "SELECT 'a'  \n  'b'", "SELECT 'x'  ", "SELECT ''''",
	"SELECT 1.5", "SELECT .5", "SELECT 1e5", "SELECT 1_000", "SELECT 0x1f", "SELECT 12abc",
	"SELECT E'x'", "SELECT e 'x'", "SELECT B'101'", "SELECT U&'x'", "SELECT N'x'", "SELECT x'1f'",
	"SELECT $1", "SELECT $$x$$", "SELECT 1 -- c", "SELECT /* c */ 1", "SELECT \"Q\" FROM t",
	"SELECT 'a\\b'", "SELECT 'unterminated", "SELECT 99999999999", "SELECT a=-1", "SELECT a<-1",
	"SELECT a := 1", "SELECT a:::b", "SELECT a => 1", "SELECT 1..2", "SELECT a @> b", "SELECT a || b",
	"SELECT ~1", "SELECT 'é'", "SELECT é", "SELECT aé", "SELECT 1\f", "SELECT -", "SELECT *",
	"", " ", ";", "SELECT 2147483647, 2147483648", "SELECT 007", "SELECT a.1", "SELECT t.\"x\"",
}

// checkQuickTokens: where quickTokens answers, Shape over its tokens is
// Shape over the real scanner's tokens.
func checkQuickTokens(t *testing.T, sql string) bool {
	t.Helper()
	q, ok := quickTokens(sql, nil)
	if !ok {
		return false
	}
	real, rok := scanTokens(sql)
	if !rok {
		t.Fatalf("%q: quick scanner answered, PostgreSQL's failed", sql)
	}
	k1, c1, ok1 := shapeOfTokens(sql, q)
	k2, c2, ok2 := shapeOfTokens(sql, real)
	if k1 != k2 || fmt.Sprint(c1) != fmt.Sprint(c2) || ok1 != ok2 {
		t.Fatalf("%q: quick shape %q %v %v, real %q %v %v", sql, k1, c1, ok1, k2, c2, ok2)
	}
	return true
}

func TestQuickTokens(t *testing.T) {
	answered := 0
	for _, sql := range quickScanInputs {
		if checkQuickTokens(t, sql) {
			answered++
		}
	}
	// The point of the quick scanner: pgbench's query is its business.
	if _, ok := quickTokens(quickScanInputs[0], nil); !ok {
		t.Errorf("quick scanner declined pgbench's select-only query")
	}
	t.Logf("quick scanner answered %d of %d inputs", answered, len(quickScanInputs))
}

// FuzzQuickTokens holds the quick scanner to PostgreSQL's on arbitrary
// text; the seed corpus runs in plain `go test`.
func FuzzQuickTokens(f *testing.F) {
	for _, s := range quickScanInputs {
		f.Add(s)
	}
	if seeds, err := os.ReadFile("testdata/seeds.sql"); err == nil {
		for _, s := range strings.Split(string(seeds), ";") {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, sql string) {
		checkQuickTokens(t, sql)
	})
}
