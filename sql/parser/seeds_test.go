package parser

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestSeeds parses every SQL statement of the seeds (testdata/seeds.sql)
// in one Parse call and checks that each rewritten statement is Postgres
// whose deparse is stable.
func TestSeeds(t *testing.T) {
	src, err := os.ReadFile("testdata/seeds.sql")
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := Parse(string(src))
	if err != nil {
		t.Fatalf("seeds.sql: %v", err)
	}
	if len(stmts) < 50 {
		t.Fatalf("seeds.sql gave %d statements; the file has more", len(stmts))
	}
	rules := map[string]bool{}
	for _, s := range stmts {
		if _, err := CheckDeparse(s.SQL); err != nil {
			t.Errorf("%s\n  rewritten: %s\n  %v", s.Original, s.SQL, err)
		}
		for _, a := range s.Annotations {
			rules[a.Rule] = true
		}
	}
	// The seeds exercise every rule; if one stops firing, a seed
	// statement silently means something else.
	for _, r := range []string{"inline-index", "type-alias", "hash-sharded-primary-key", "primary-key-order", "computed-column", "hash-sharded-index", "split-into-tablets"} {
		if !rules[r] {
			t.Errorf("no seed statement was rewritten by %s", r)
		}
	}
}

// TestSeedTypo: the seed's schema (4) misses a parenthesis; the error must
// point at it.
func TestSeedTypo(t *testing.T) {
	const typo = "CREATE TABLE kv\n    k INT8 NOT NULL,\n    v BYTES NOT NULL,\n    PRIMARY KEY (k),\n    INDEX (v)\n);"
	_, err := Parse(typo)
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a SyntaxError", err)
	}
	if at := string([]rune(typo)[se.Position-1:]); !strings.HasPrefix(at, "k INT8") {
		t.Errorf("error %q points at %q, want the column after the missing parenthesis", se.Message, at)
	}
}
