package parser

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// dialectWords are the words without which no rule can rewrite anything:
// each rule needs at least one of them (AS alone only ever errors).
var dialectWords = map[string]bool{
	"string": true, "bytes": true, "hash": true, "index": true,
	"asc": true, "desc": true, "stored": true, "split": true,
	"configure": true, "zone": true, "jobs": true, "job": true, "columns": true,
	"cluster": true, "system": true,
}

// FuzzRewrite checks the rewriter on arbitrary text:
//   - Rewrite and Parse never panic and fail only with a *SyntaxError that
//     is not an internal error, whose position lies within the input;
//   - text without a dialect word comes back byte for byte (invariant 1);
//   - text Postgres parses still parses after the rewrite;
//   - the rewrite is idempotent: output Postgres accepts has nothing left
//     to rewrite.
//
// The seed corpus is every input of testdata/rewrite, testdata/parse and
// the seeds, so plain `go test` runs all of them through these checks.
func FuzzRewrite(f *testing.F) {
	for _, path := range []string{"testdata/rewrite", "testdata/parse"} {
		for _, in := range directiveInputs(f, path) {
			f.Add(in)
		}
	}
	seeds, err := os.ReadFile("testdata/seeds.sql")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(seeds))
	for _, s := range strings.Split(string(seeds), ";") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, notes, err := Rewrite(in)
		checkErr(t, in, err)
		_, perr := Parse(in)
		checkErr(t, in, perr)
		if err != nil {
			return
		}
		for _, n := range notes {
			if n.Position < 1 || n.Position > utf8.RuneCountInString(in) {
				t.Fatalf("annotation %v lies outside %q", n, in)
			}
		}
		if !hasDialectWord(in) && out != in {
			t.Fatalf("text without dialect words was rewritten:\n  in:  %q\n  out: %q", in, out)
		}
		if _, err := pg_query.Parse(in); err == nil {
			if _, err := pg_query.Parse(out); err != nil {
				t.Fatalf("valid Postgres stopped parsing after the rewrite:\n  in:  %q\n  out: %q\n  %v", in, out, err)
			}
		}
		if _, err := pg_query.Parse(out); err != nil {
			return // Postgres rejects it; idempotence on garbage means nothing
		}
		again, _, err := Rewrite(out)
		if err != nil || again != out {
			t.Fatalf("rewrite is not idempotent:\n  in:    %q\n  out:   %q\n  again: %q (%v)", in, out, again, err)
		}
	})
}

func checkErr(t *testing.T, in string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("%q: error %T is not a *SyntaxError: %v", in, err, err)
	}
	if strings.HasPrefix(se.Message, "internal error") {
		t.Fatalf("%q: %v", in, err)
	}
	if se.Position < 0 || se.Position > utf8.RuneCountInString(in)+1 {
		t.Fatalf("%q: position %d outside the input: %v", in, se.Position, err)
	}
}

// hasDialectWord reports whether in has a token that is a dialect word
// (or cannot be scanned, in which case nothing is claimed).
func hasDialectWord(in string) bool {
	toks, err := lex(in)
	if err != nil {
		return true
	}
	for i, t := range toks {
		if dialectWords[t.word] || (t.word == "show" && i+1 < len(toks) && toks[i+1].word == "create") {
			return true
		}
	}
	return false
}

// directiveInputs returns the inputs of a datadriven file: the lines
// between each directive line and its "----".
func directiveInputs(f *testing.F, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	var inputs []string
	var cur []string
	inInput := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "rewrite ") || line == "parse":
			inInput, cur = true, nil
		case line == "----" && inInput:
			inputs = append(inputs, strings.Join(cur, "\n"))
			inInput = false
		case inInput:
			cur = append(cur, line)
		}
	}
	if len(inputs) == 0 {
		f.Fatalf("%s has no inputs", path)
	}
	return inputs
}
