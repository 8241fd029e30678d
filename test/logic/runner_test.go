package logic

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These tests cover the runner without a server: the format's parser
// (including malformed files and their line numbers), rendering and
// comparison of results, error matching, onlyif/skipif, and rewrite. The
// files themselves run against a server in TestLogic (build tag "logic").

func TestParseRecords(t *testing.T) {
	src := `# a comment

statement ok
CREATE TABLE t (a INT)

statement count 2
INSERT INTO t
VALUES (1), (2)

statement error 23505 pos=3 duplicate key
INSERT INTO t VALUES (1)

onlyif cairn
skipif postgres # both say the same here
query IT rowsort colnames
SELECT a, 'x'
FROM t
----
a ?column?
1 x
2 x

query error 42P01
SELECT * FROM nope

query I
SELECT 1 WHERE false

connection other

user alice

let $v
SELECT 1

hash-threshold 8

halt
`
	f, err := Parse("f", src)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []Kind{KindStatement, KindStatement, KindStatement, KindQuery, KindQuery, KindQuery, KindConnection, KindUser, KindLet, KindHalt}
	if len(f.Records) != len(kinds) {
		t.Fatalf("got %d records, want %d", len(f.Records), len(kinds))
	}
	for i, k := range kinds {
		if f.Records[i].Kind != k {
			t.Errorf("record %d: kind %d, want %d", i, f.Records[i].Kind, k)
		}
	}
	r := f.Records
	if r[0].Line != 3 || r[0].SQL != "CREATE TABLE t (a INT)" || r[0].Err != nil || r[0].HasCount {
		t.Errorf("statement ok: %+v", r[0])
	}
	if !r[1].HasCount || r[1].Count != 2 || r[1].SQL != "INSERT INTO t\nVALUES (1), (2)" {
		t.Errorf("statement count: %+v", r[1])
	}
	if e := r[2].Err; e == nil || e.Code != "23505" || e.Pos != 3 || e.Pattern.String() != "duplicate key" {
		t.Errorf("statement error: %+v", r[2].Err)
	}
	q := r[3]
	if q.Line != 15 || q.Types != "IT" || q.Sort != RowSort || !q.ColNames || len(q.Conds) != 2 {
		t.Errorf("query header: %+v", q)
	}
	if q.SQL != "SELECT a, 'x'\nFROM t" || strings.Join(q.Expected, "|") != "a ?column?|1 x|2 x" {
		t.Errorf("query body: %q %q", q.SQL, q.Expected)
	}
	if r[4].Err == nil || r[4].Err.Code != "42P01" || r[4].Err.Pattern != nil {
		t.Errorf("query error: %+v", r[4].Err)
	}
	if r[5].sep != -1 || len(r[5].Expected) != 0 {
		t.Errorf("query without ----: %+v", r[5])
	}
	if r[6].Name != "other" || r[7].Name != "alice" || r[8].Name != "v" || r[8].SQL != "SELECT 1" {
		t.Errorf("names: %q %q %q", r[6].Name, r[7].Name, r[8].Name)
	}
}

func TestParseErrorSpec(t *testing.T) {
	for _, tc := range []struct {
		header  string
		code    string
		pos     int
		pattern string
	}{
		{"statement error 23505", "23505", 0, ""},
		{"statement error 22P02 invalid input", "22P02", 0, "invalid input"},
		{"statement error 42601 pos=10 syntax error at or near \"FORM\"", "42601", 10, "syntax error at or near \"FORM\""},
		{"statement error pos=4 oops", "", 4, "oops"},
		// A regexp that happens to be five capitals is not a SQLSTATE.
		{"statement error ERROR", "", 0, "ERROR"},
		{"statement error relation .* does not exist", "", 0, "relation .* does not exist"},
	} {
		s, err := parseErrorSpec(tc.header, "statement")
		if err != nil {
			t.Errorf("%q: %v", tc.header, err)
			continue
		}
		pat := ""
		if s.Pattern != nil {
			pat = s.Pattern.String()
		}
		if s.Code != tc.code || s.Pos != tc.pos || pat != tc.pattern {
			t.Errorf("%q: got code=%q pos=%d pattern=%q", tc.header, s.Code, s.Pos, pat)
		}
	}
}

// TestParseFormatErrors checks that a malformed file is rejected with the
// line of the mistake, before anything runs.
func TestParseFormatErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		line int
		msg  string
	}{
		{"unknown directive", "statement ok\nSELECT 1\n\nselect 1\n", 4, `unknown directive "select"`},
		{"statement without kind", "statement\nSELECT 1\n", 1, "statement needs ok"},
		{"bad statement kind", "statement maybe\nSELECT 1\n", 1, `not "maybe"`},
		{"bad count", "statement count x\nSELECT 1\n", 1, "bad number"},
		{"no SQL", "statement ok\n\nstatement ok\nSELECT 1\n", 1, "record has no SQL"},
		{"statement with results", "statement ok\nSELECT 1\n----\n1\n", 3, "a statement has no results"},
		{"error without spec", "statement error\nSELECT 1\n", 1, "needs a SQLSTATE or a regexp"},
		{"bad regexp", "query error 42601 (\nSELECT 1\n", 1, "bad error regexp"},
		{"unknown type", "query IX\nSELECT 1\n----\n1\n", 1, `unknown column type 'X'`},
		{"unknown option", "query I sorted\nSELECT 1\n", 1, `unknown query option "sorted"`},
		{"two sort modes", "query I rowsort nosort\nSELECT 1\n", 1, "more than one sort mode"},
		{"query error with results", "query error 42601\nSELECT\n----\n", 3, "query error has no results"},
		{"cond then blank", "\nskipif cairn\n\nstatement ok\nSELECT 1\n", 2, "must be followed directly"},
		{"cond at end", "statement ok\nSELECT 1\n\nonlyif postgres", 4, "at end of file"},
		{"unknown engine", "onlyif mysql\nstatement ok\nSELECT 1\n", 1, `unknown engine "mysql"`},
		{"let without var", "let v\nSELECT 1\n", 1, "let takes one $variable"},
		{"let with results", "let $v\nSELECT 1\n----\n1\n", 3, "let has no results"},
		{"connection without name", "connection\n", 1, "connection takes one name"},
		{"halt with argument", "halt now\n", 1, "halt takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.test", tc.src)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a ParseError", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) || pe.File != "f.test" {
				t.Fatalf("got %v, want line %d and %q", pe, tc.line, tc.msg)
			}
		})
	}
}

func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		conds    []Cond
		postgres bool // skipped on postgres
		cairn    bool // skipped on cairn
	}{
		{nil, false, false},
		{[]Cond{{Only: true, Engine: EngineCairn}}, true, false},
		{[]Cond{{Only: false, Engine: EngineCairn}}, false, true},
		{[]Cond{{Only: true, Engine: EnginePostgres}}, false, true},
		{[]Cond{{Only: false, Engine: EnginePostgres}, {Only: true, Engine: EngineCairn}}, true, false},
	} {
		r := Record{Conds: tc.conds}
		if got := r.Skip(EnginePostgres); got != tc.postgres {
			t.Errorf("%+v on postgres: skip=%v", tc.conds, got)
		}
		if got := r.Skip(EngineCairn); got != tc.cairn {
			t.Errorf("%+v on cairn: skip=%v", tc.conds, got)
		}
	}
}

func TestRender(t *testing.T) {
	rows := [][][]byte{
		{[]byte("2"), nil},
		{[]byte("1"), []byte{}},
		{[]byte("10"), []byte("two\n  lines ")},
	}
	cols := []string{"a", "b"}
	for _, tc := range []struct {
		name     string
		mode     SortMode
		colNames bool
		want     []string
	}{
		{"nosort", NoSort, false, []string{"2 NULL", "1 ·", "10 two", "  lines"}},
		{"rowsort", RowSort, true, []string{"a b", "1 ·", "10 two", "  lines", "2 NULL"}},
		{"valuesort", ValueSort, false, []string{"1", "10", "2", "NULL", "two", "  lines", "·"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(cols, rows, tc.mode, tc.colNames)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestEqualLines(t *testing.T) {
	for _, tc := range []struct {
		exp, act []string
		want     bool
	}{
		{nil, nil, true},
		{[]string{"1 a"}, []string{"1 a"}, true},
		{[]string{"1 a  "}, []string{"1 a"}, true},
		// Leading space is part of a value (pg_get_viewdef indents).
		{[]string{" SELECT"}, []string{"SELECT"}, false},
		{[]string{"1 a"}, []string{"1  a"}, false},
		{[]string{"1"}, []string{"1", "2"}, false},
		{[]string{"NULL"}, []string{"·"}, false},
	} {
		if got := EqualLines(tc.exp, tc.act); got != tc.want {
			t.Errorf("EqualLines(%q, %q) = %v", tc.exp, tc.act, got)
		}
	}
}

func TestCheckTypes(t *testing.T) {
	oids := []uint32{oidInt4, oidNumeric, oidBool, 25 /* text */, oidInt8, oidFloat8}
	if got := TypeLetters(oids); got != "IRBTIR" {
		t.Fatalf("TypeLetters = %q", got)
	}
	if err := CheckTypes("IRBTIR", oids); err != nil {
		t.Fatal(err)
	}
	if err := CheckTypes("IIBTIR", oids); err == nil || !strings.Contains(err.Error(), "expected IIBTIR, got IRBTIR") {
		t.Fatalf("wrong letter: %v", err)
	}
	if err := CheckTypes("IR", oids); err == nil || !strings.Contains(err.Error(), "expected 2 columns") {
		t.Fatalf("wrong count: %v", err)
	}
}

func TestErrorMatch(t *testing.T) {
	spec := func(header string) *ErrorSpec {
		s, err := parseErrorSpec(header, "statement")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dup := ServerError{Code: "23505", Message: `duplicate key value violates unique constraint "t_pkey"`}
	syn := ServerError{Code: "42601", Message: `syntax error at or near "FORM"`, Position: 10}
	for _, tc := range []struct {
		header string
		err    ServerError
		ok     bool
		why    string
	}{
		{"statement error 23505", dup, true, ""},
		{"statement error 23505 unique constraint \"t_pkey\"", dup, true, ""},
		{"statement error 23503", dup, false, "expected SQLSTATE 23503"},
		{"statement error 23505 foreign key", dup, false, "expected error matching"},
		{"statement error duplicate", dup, true, ""},
		{"statement error 42601 pos=10", syn, true, ""},
		{"statement error 42601 pos=9", syn, false, "expected error position 9, got 42601 pos=10"},
	} {
		ok, why := spec(tc.header).Match(tc.err)
		if ok != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("%q against %s: ok=%v why=%q", tc.header, tc.err, ok, why)
		}
	}
	// A rewrite writes a spec that matches the error exactly, even when
	// the message holds regexp metacharacters.
	odd := ServerError{Code: "22001", Message: "value too long for type character varying(3)", Position: 0}
	if ok, why := spec("statement error " + specFor(odd)).Match(odd); !ok {
		t.Errorf("specFor round trip: %s", why)
	}
}

func TestRewrite(t *testing.T) {
	src := `# header comment
query I
SELECT 1
----
2

statement ok
SELECT 1/0

query T
SELECT 'kept'
----
kept

query I rowsort
SELECT 1

statement count 9
DELETE FROM t

query error 42601
SELECT 'now fine'
`
	f, err := Parse("f", src)
	if err != nil {
		t.Fatal(err)
	}
	r := &fileRun{f: f, edits: map[int]edit{
		0: {results: []string{"1"}, hasResults: true},
		1: {header: "statement error 22012 division by zero"},
		3: {header: "query IT rowsort", results: []string{"1 x", "2 y"}, hasResults: true},
		4: {header: "statement count 0"},
		5: {header: "query T", results: []string{"now fine"}, hasResults: true},
	}}
	want := `# header comment
query I
SELECT 1
----
1

statement error 22012 division by zero
SELECT 1/0

query T
SELECT 'kept'
----
kept

query IT rowsort
SELECT 1
----
1 x
2 y

statement count 0
DELETE FROM t

query T
SELECT 'now fine'
----
now fine
`
	if got := r.rewrite(); got != want {
		t.Fatalf("rewrite:\n%s\nwant:\n%s", got, want)
	}
	// A query that now fails loses its results.
	f, err = Parse("g", "query I\nSELECT x\n----\n1\n2\n\nstatement ok\nSELECT 1\n")
	if err != nil {
		t.Fatal(err)
	}
	r = &fileRun{f: f, edits: map[int]edit{0: {header: "query error 42703 column \"x\" does not exist", dropResults: true}}}
	want = "query error 42703 column \"x\" does not exist\nSELECT x\n\nstatement ok\nSELECT 1\n"
	if got := r.rewrite(); got != want {
		t.Fatalf("rewrite to error:\n%q\nwant:\n%q", got, want)
	}
	// Rewritten files parse again.
	if _, err := Parse("g", want); err != nil {
		t.Fatal(err)
	}
}

func TestExpand(t *testing.T) {
	r := &fileRun{vars: map[string]string{"oid": "16384"}}
	got := r.expand(`SELECT '$oid', $1, '$user', $oidx`)
	if want := `SELECT '16384', $1, '$user', $oidx`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestDatabaseName(t *testing.T) {
	if got := databaseName("functions_Date-Time"); got != "logic_functions_date_time" {
		t.Fatalf("got %q", got)
	}
}

// TestFilesParse keeps every logic file well-formed in the default test run,
// even though running them needs a server.
func TestFilesParse(t *testing.T) {
	paths, err := Files("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no logic files")
	}
	total := 0
	for _, p := range paths {
		f, err := ParseFile(p)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, r := range f.Records {
			if r.Kind == KindStatement || r.Kind == KindQuery {
				total++
			}
		}
	}
	// Issue #3 asks for at least 600 statements and queries.
	if total < 600 {
		t.Errorf("%d statements and queries, want at least 600", total)
	}
}

// FuzzParse checks that the parser never panics and that any format error
// names a line of the input.
func FuzzParse(f *testing.F) {
	f.Add("statement ok\nSELECT 1\n")
	f.Add("query IT rowsort colnames\nSELECT 1, 'a'\n----\na b\n1 a\n")
	f.Add("skipif cairn\nstatement error 42601 pos=3 x(\nSELEC\n")
	f.Add("let $x\nSELECT 1\n\nconnection b\nuser u\nhalt\n")
	if src, err := os.ReadFile(filepath.Join("testdata", "transactions")); err == nil {
		f.Add(string(src))
	}
	f.Fuzz(func(t *testing.T, src string) {
		file, err := Parse("fuzz", src)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("non-ParseError %T: %v", err, err)
			}
			if n := strings.Count(src, "\n") + 1; pe.Line < 1 || pe.Line > n {
				t.Fatalf("line %d outside 1..%d: %v", pe.Line, n, err)
			}
			return
		}
		for _, r := range file.Records {
			if r.Line < 1 || r.Line > len(file.Lines) {
				t.Fatalf("record line %d outside 1..%d", r.Line, len(file.Lines))
			}
		}
	})
}
