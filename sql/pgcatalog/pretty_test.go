package pgcatalog

import "testing"

// The expected pretty forms are PostgreSQL 15's pg_get_constraintdef(oid,
// true) for constraints whose non-pretty form is the input. (Not handled:
// PostgreSQL parenthesizes a cast of an operator expression that is an
// operand, "((a + 1)::text) <> 'x'::text".)
func TestPrettyExpr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"(total >= (0)::numeric)", "total >= 0::numeric"},
		{"active", "active"},
		{"(code IS NOT NULL)", "code IS NOT NULL"},
		{"((a > 0) AND (b > 0))", "a > 0 AND b > 0"},
		{"((a > 0) OR ((b > 0) AND (c > 0)))", "a > 0 OR b > 0 AND c > 0"},
		{"(((a > 0) OR (b > 0)) AND (c > 0))", "(a > 0 OR b > 0) AND c > 0"},
		{"((a + b) > 0)", "(a + b) > 0"},
		{"(((a * b) + c) > 0)", "(a * b + c) > 0"},
		{"((a - (b - c)) > 0)", "(a - (b - c)) > 0"},
		{"(lower(email) <> ''::text)", "lower(email) <> ''::text"},
		{"(length((a || b)) < 10)", "length(a || b) < 10"},
		{"(a IN (1, 2))", "a IN (1, 2)"},
		{"((a)::text <> 'x'::text)", "a::text <> 'x'::text"},
		{"(NOT (a > 0))", "NOT a > 0"},
		{"(NOT ((a > 0) AND (b > 0)))", "NOT (a > 0 AND b > 0)"},
	} {
		if got := prettyExpr(c.in); got != c.want {
			t.Errorf("prettyExpr(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
