package parser

import (
	"fmt"

	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// CheckDeparse is a test helper for every layer that produces SQL: it
// parses sql (PostgreSQL syntax, no dialect), deparses the tree, and
// checks that parsing and deparsing that text gives the same text again.
// It returns the deparsed text.
func CheckDeparse(sql string) (string, error) {
	tree, err := pg_query.Parse(sql)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", sql, err)
	}
	first, err := pg_query.Deparse(tree)
	if err != nil {
		return "", fmt.Errorf("deparse %q: %w", sql, err)
	}
	tree2, err := pg_query.Parse(first)
	if err != nil {
		return "", fmt.Errorf("reparse deparsed %q: %w", first, err)
	}
	second, err := pg_query.Deparse(tree2)
	if err != nil {
		return "", fmt.Errorf("deparse reparsed %q: %w", first, err)
	}
	if first != second {
		return "", fmt.Errorf("deparse is not stable:\n  first:  %s\n  second: %s", first, second)
	}
	return first, nil
}
