package parser

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cockroachdb/datadriven"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// TestParse runs testdata/parse: statement splitting and error positions
// through the whole pipeline. Mini-language, one directive:
//
//	parse
//	<a query string, as one simple-protocol Query message>
//	----
//	<for each statement:>
//	stmt <n>[ derived]: <its SQL after the rewrite>
//	  original: <the statement as typed>          (when it differs from SQL)
//	  -- <rule> @<position>: <construct>          (its annotations)
//	<or, when parsing fails, the error as in testdata/rewrite>
//
// Whitespace runs in SQL and original are collapsed to one space.
func TestParse(t *testing.T) {
	datadriven.RunTest(t, "testdata/parse", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "parse" {
			d.Fatalf(t, "unknown directive %q", d.Cmd)
		}
		stmts, err := Parse(d.Input)
		if err != nil {
			return formatError(t, d.Input, err)
		}
		var b strings.Builder
		for n, s := range stmts {
			derived := ""
			if s.Derived {
				derived = " derived"
			}
			sql, orig := collapse(s.SQL), collapse(s.Original)
			fmt.Fprintf(&b, "stmt %d%s: %s\n", n+1, derived, sql)
			if orig != sql {
				fmt.Fprintf(&b, "  original: %s\n", orig)
			}
			for _, a := range s.Annotations {
				fmt.Fprintf(&b, "  -- %s @%d: %s\n", a.Rule, a.Position, collapse(a.Text))
			}
		}
		if len(stmts) == 0 {
			b.WriteString("no statements\n")
		}
		return b.String()
	})
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestPosition checks that AST locations map back into the typed text
// across rewrites that change lengths before them and multibyte text.
func TestPosition(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  string // text at the Position of the last target of the last statement
	}{
		{"SELECT a, bar FROM t", "bar FROM"},
		{"SELECT 'ééé', bar", "bar"},
		{"SELECT x::STRING, y::BYTES, bar FROM t", "bar FROM"},
		{"CREATE TABLE t (a STRING, INDEX (a)); SELECT 'é'::STRING, CAST(b AS bytes), bar", "bar"},
		{"SELECT 1; /* ü */ SELECT cast(x AS string), 'ß', bar", "bar"},
	} {
		stmts, err := Parse(tc.query)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		s := stmts[len(stmts)-1]
		targets := s.AST.GetStmt().GetSelectStmt().GetTargetList()
		if len(targets) == 0 {
			t.Fatalf("%q: last statement is not a SELECT with targets", tc.query)
		}
		loc := targets[len(targets)-1].GetResTarget().GetLocation()
		pos := s.Position(loc)
		runes := []rune(tc.query)
		if pos < 1 || pos > len(runes) || !strings.HasPrefix(string(runes[pos-1:]), tc.want) {
			t.Errorf("%q: location %d maps to position %d, want the position of %q", tc.query, loc, pos, tc.want)
		}
	}
	var s Statement
	if got := s.Position(5); got != 0 {
		t.Errorf("Position on a zero Statement = %d, want 0", got)
	}
	stmts, err := Parse("SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	if got := stmts[0].Position(-1); got != 0 {
		t.Errorf("Position(-1) = %d, want 0", got)
	}
}

// TestEncodingErrors: bytes Postgres refuses before parsing.
func TestEncodingErrors(t *testing.T) {
	for _, tc := range []struct {
		query   string
		wantPos int
	}{
		{"SELECT 'a\x00b'", 10},
		{"SELECT 'é\xff'", 10},
		{"\x80", 1},
	} {
		_, err := Parse(tc.query)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%q: got %v, want a *SyntaxError", tc.query, err)
		}
		if se.Code != CodeCharacterNotInRepertoire || se.Position != tc.wantPos {
			t.Errorf("%q: got code %s position %d, want %s at %d", tc.query, se.Code, se.Position, CodeCharacterNotInRepertoire, tc.wantPos)
		}
	}
}

// TestSyntaxErrorClassifies checks that pgerror, which pgwire uses to pick
// the SQLSTATE, sees a SyntaxError's code through wrapping.
func TestSyntaxErrorClassifies(t *testing.T) {
	_, err := Parse("SELEC 1")
	wrapped := fmt.Errorf("session: %w", err)
	if got := pgerror.Code(wrapped); got != CodeSyntaxError {
		t.Errorf("pgerror.Code = %q, want %q", got, CodeSyntaxError)
	}
	var se *SyntaxError
	if !errors.As(wrapped, &se) || se.Position != 1 || se.SQLState() != CodeSyntaxError {
		t.Errorf("got %#v, want a SyntaxError at position 1", se)
	}
	if se.Error() != `syntax error at or near "SELEC"` {
		t.Errorf("Error() = %q", se.Error())
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(q string) uint64 {
		t.Helper()
		stmts, err := Parse(q)
		if err != nil || len(stmts) != 1 {
			t.Fatalf("%q: %v (%d statements)", q, err, len(stmts))
		}
		f, err := stmts[0].Fingerprint()
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		return f
	}
	same := [][2]string{
		{"SELECT a FROM t WHERE b = 1", "select  a from t where b = 42;"},
		{"SELECT x::STRING FROM t", "SELECT x::text FROM t"},
		{"CREATE INDEX ON t (a) USING HASH WITH BUCKET_COUNT = 8", "CREATE INDEX ON t (a) WITH (cairn_hash_buckets = 8)"},
	}
	for _, p := range same {
		if fp(p[0]) != fp(p[1]) {
			t.Errorf("fingerprints of %q and %q differ", p[0], p[1])
		}
	}
	if fp("SELECT a FROM t") == fp("SELECT b FROM t") {
		t.Errorf("different statements share a fingerprint")
	}
}

func TestIsTransactionControl(t *testing.T) {
	stmts, err := Parse("BEGIN; SELECT 1; SAVEPOINT s; ROLLBACK TO s; COMMIT; END; START TRANSACTION ISOLATION LEVEL SERIALIZABLE")
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, true, true, true, true, true}
	if len(stmts) != len(want) {
		t.Fatalf("got %d statements, want %d", len(stmts), len(want))
	}
	for i, s := range stmts {
		if got := s.IsTransactionControl(); got != want[i] {
			t.Errorf("%q: IsTransactionControl = %v, want %v", s.SQL, got, want[i])
		}
	}
}

// TestParsePlain: text without dialect words or comments skips the
// dialect rewrite (and its scan); what it parses to must be what the
// rewrite path gives, errors included.
func TestParsePlain(t *testing.T) {
	for _, sql := range []string{
		"SELECT abalance FROM pgbench_accounts WHERE aid = 48213;",
		"select 1; select 2 ;  ",
		"  UPDATE t SET v = v + 1 WHERE k = $1 RETURNING *",
		"INSERT INTO t VALUES (1, 'it''s'), (2, E'x\\ny'); DELETE FROM t",
		"SELECT 'unterminated",
		"SELECT * FROM WHERE",
		"SELECT 'héllo' AS \"Ünï\", $$dollar; quoted$$",
		"BEGIN; SELECT 1; COMMIT;",
		";;",
		"",
	} {
		if !Plain(sql) {
			t.Errorf("%q: not plain", sql)
			continue
		}
		got, gotErr := parsePlain(sql)
		want, wantErr := parseRewritten(sql)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("%q: error %v, want %v", sql, gotErr, wantErr)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%q: %d statements, want %d", sql, len(got), len(want))
			continue
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.SQL != w.SQL || g.Original != w.Original || g.Derived != w.Derived || len(g.Annotations) != len(w.Annotations) {
				t.Errorf("%q #%d: got %q/%q, want %q/%q", sql, i, g.SQL, g.Original, w.SQL, w.Original)
			}
			if g.AST.String() != w.AST.String() {
				t.Errorf("%q #%d: different trees", sql, i)
			}
			if gp, wp := g.Position(int32(len(g.SQL))), w.Position(int32(len(w.SQL))); gp != wp {
				t.Errorf("%q #%d: position %d, want %d", sql, i, gp, wp)
			}
		}
	}
	for _, sql := range []string{
		"CREATE TABLE t (a STRING)", "select x::bytes", "ALTER TABLE t ADD c int",
		"select 1 -- comment", "select /* c */ 1", "SeLeCt 'a'::String",
	} {
		if Plain(sql) {
			t.Errorf("%q: plain, want the rewrite path", sql)
		}
	}
}

// TestParameterize: the constants of WHERE col = const conjunctions
// become $n in position order; anything else is refused.
func TestParameterize(t *testing.T) {
	for _, tc := range []struct {
		sql, want string
		lits      string
	}{
		{"SELECT abalance FROM pgbench_accounts WHERE aid = 48213;", "SELECT abalance FROM pgbench_accounts WHERE aid = $1", "[{true 48213  50}]"},
		{"select v from t where b = 'it''s' and 7 = a", "select v from t where b = $1 and $2 = a", "[{false 0 it's 26} {true 7  38}]"},
		{"SELECT 1 FROM t WHERE k = -  5", "SELECT 1 FROM t WHERE k = $1", "[{true -5  26}]"},
		{"SELECT * FROM t WHERE a = 1; SELECT 2", "SELECT * FROM t WHERE a = $1", "[{true 1  26}]"},
		{"SELECT * FROM t WHERE a = 1.5", "", ""},
		{"SELECT * FROM t WHERE a = E'x'", "", ""},
		{"SELECT * FROM t WHERE a = 1 OR b = 2", "", ""},
		{"SELECT * FROM t WHERE a > 1", "", ""},
		{"SELECT * FROM t WHERE a = b", "", ""},
		{"SELECT * FROM t WHERE a = $1", "", ""},
		{"SELECT * FROM t", "", ""},
		{"SELECT * FROM t WHERE a = 99999999999", "", ""},
		{"UPDATE t SET v = 1 WHERE k = 2", "UPDATE t SET v = $1 WHERE k = $2", "[{true 1  17} {true 2  29}]"},
		{"UPDATE pgbench_accounts SET abalance = abalance + -1234 WHERE aid = 77;",
			"UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2", "[{true -1234  50} {true 77  68}]"},
		{"UPDATE t SET v = 2 * v, w = 'x', u = u || 'y', f = 1.5, n = NULL WHERE k = 3",
			"UPDATE t SET v = $1 * v, w = $2, u = u || 'y', f = 1.5, n = NULL WHERE k = $3", "[{true 2  17} {false 0 x 28} {true 3  75}]"},
		{"UPDATE t SET v = v + 1 + 2 WHERE k = 3", "UPDATE t SET v = v + 1 + 2 WHERE k = $1", "[{true 3  37}]"},
		{"UPDATE t SET v = 1 WHERE k > 2", "", ""},
		{"UPDATE t SET v = 1 FROM u WHERE t.k = 2", "", ""},
		{"UPDATE t SET v = 1", "", ""},
		{"DELETE FROM t WHERE k = 'a'", "DELETE FROM t WHERE k = $1", "[{false 0 a 24}]"},
		{"DELETE FROM t USING u WHERE k = 1", "", ""},
		{"INSERT INTO h (a, b, c, m) VALUES (1, -2, 'z', CURRENT_TIMESTAMP)",
			"INSERT INTO h (a, b, c, m) VALUES ($1, $2, $3, CURRENT_TIMESTAMP)", "[{true 1  35} {true -2  38} {false 0 z 42}]"},
		{"INSERT INTO h VALUES (1, true, NULL, 2.5, DEFAULT) RETURNING 7", "INSERT INTO h VALUES ($1, true, NULL, 2.5, DEFAULT) RETURNING 7", "[{true 1  22}]"},
		{"UPDATE t SET a[1] = 5, b = 6 WHERE k = 7", "UPDATE t SET a[1] = 5, b = $1 WHERE k = $2", "[{true 6  27} {true 7  39}]"},
		{"INSERT INTO h (a[1], b) VALUES (1, 2)", "", ""},
		{"INSERT INTO h VALUES (1), (2)", "", ""},
		{"INSERT INTO h VALUES (1) ON CONFLICT DO NOTHING", "", ""},
		{"INSERT INTO h VALUES (now())", "", ""},
		{"INSERT INTO h SELECT 1", "", ""},
		{"SELECT 'x' FROM t WHERE a = 'a'\n'b'", "", ""},
	} {
		stmts, err := Parse(tc.sql)
		if err != nil {
			t.Fatalf("%q: %v", tc.sql, err)
		}
		got, lits, ok := stmts[0].Parameterize()
		if tc.want == "" {
			if ok {
				t.Errorf("%q: parameterized as %q %v, want refused", tc.sql, got, lits)
			}
			continue
		}
		if !ok || got != tc.want || fmt.Sprint(lits) != tc.lits {
			t.Errorf("%q: %q %v %v, want %q %s", tc.sql, got, lits, ok, tc.want, tc.lits)
		}
	}
}

// TestShape: queries that differ only in integer and plain string
// constants share a shape; the constants come back with their values.
func TestShape(t *testing.T) {
	shape := func(sql string) (string, []ScanConst) {
		t.Helper()
		k, c, ok := Shape(sql)
		if !ok {
			t.Fatalf("%q: no shape", sql)
		}
		return k, c
	}
	k1, c1 := shape("SELECT v FROM t WHERE a = 5 AND b = 'it''s'")
	k2, c2 := shape("select v from t where a = -12 and b = ''")
	if k1 == k2 {
		t.Errorf("case and a minus sign must change the shape: %q", k1)
	}
	k3, c3 := shape("SELECT v FROM t WHERE a = 77 AND b = 'x'")
	if k1 != k3 {
		t.Errorf("%q and %q: want one shape", k1, k3)
	}
	if fmt.Sprint(c1) != "[{26 27 false 0 true 5 } {36 43 false 0 false 0 it's}]" ||
		fmt.Sprint(c3) != "[{26 28 false 0 true 77 } {37 40 false 0 false 0 x}]" ||
		fmt.Sprint(c2) != "[{27 29 true 26 true 12 } {38 40 false 0 false 0 }]" {
		t.Errorf("constants: %v %v %v", c1, c2, c3)
	}
	for _, sql := range []string{
		"SELECT 1.5", "SELECT E'x'", "SELECT $1", "SELECT 1 -- c", "SELECT 'a'\n'b'",
		"SELECT 99999999999", "SELECT B'101'", "SELECT $$x$$", "SELECT 0x1f",
	} {
		if k, c, ok := Shape(sql); ok {
			t.Errorf("%q: shape %q %v, want none", sql, k, c)
		}
	}
}

// TestScanTokens: the direct decoding of the scanner's answer gives what
// pg_query.Scan's generated messages give.
func TestScanTokens(t *testing.T) {
	for _, sql := range []string{
		"SELECT abalance FROM pgbench_accounts WHERE aid = 48213;",
		"select 'it''s', E'\\n', 1.5, $1, \"Q\" /* c */ -- d\n from t where x <= -3",
		"",
	} {
		res, err := pg_query.Scan(sql)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := scanTokens(sql)
		if !ok || len(got) != len(res.Tokens) {
			t.Fatalf("%q: %d tokens (%v), want %d", sql, len(got), ok, len(res.Tokens))
		}
		for i, w := range res.Tokens {
			if g := got[i]; g.start != int(w.Start) || g.end != int(w.End) || g.kind != w.Token {
				t.Errorf("%q token %d: %+v, want %v", sql, i, g, w)
			}
		}
	}
}

// TestParseAsOf: a SELECT's AS OF SYSTEM TIME, explained or not, leaves
// the tree (the binder never sees the carrier CTE) for Statement.AsOf,
// and a WITH the user wrote keeps its own CTEs.
func TestParseAsOf(t *testing.T) {
	for _, tc := range []struct {
		sql      string
		asOf     string // the expression's string constant; "" when none
		userCTEs int
	}{
		{"SELECT * FROM t AS OF SYSTEM TIME '-10s' WHERE k = 1", "-10s", 0},
		{"WITH x AS (SELECT 1) SELECT * FROM x AS OF SYSTEM TIME '-1s'", "-1s", 1},
		{"SELECT * FROM t", "", 0},
		{"WITH cairn_as_of_system_time AS (SELECT '-2s') SELECT * FROM t", "-2s", 0},
		{"EXPLAIN SELECT * FROM t AS OF SYSTEM TIME '-3s'", "-3s", 0},
		{"EXPLAIN ANALYZE WITH x AS (SELECT 1) SELECT * FROM x AS OF SYSTEM TIME '-4s'", "-4s", 1},
	} {
		stmts, err := Parse(tc.sql)
		if err != nil || len(stmts) != 1 {
			t.Fatalf("%s: %v (%d statements)", tc.sql, err, len(stmts))
		}
		st := stmts[0]
		got := ""
		if st.AsOf != nil {
			got = st.AsOf.GetAConst().GetSval().GetSval()
		}
		if got != tc.asOf {
			t.Errorf("%s: AsOf %q, want %q", tc.sql, got, tc.asOf)
		}
		stmt := st.AST.GetStmt()
		if ex := stmt.GetExplainStmt(); ex != nil {
			stmt = ex.Query
		}
		ctes := len(stmt.GetSelectStmt().GetWithClause().GetCtes())
		if ctes != tc.userCTEs {
			t.Errorf("%s: %d CTEs left, want %d", tc.sql, ctes, tc.userCTEs)
		}
	}
}
