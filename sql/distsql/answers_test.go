package distsql_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Tests that distribute tables on three servers check that every answer
// is the one from before the distribution: answers takes the answers
// before, sameAnswers (or sameAnswersDistSQL) compares after.

// answers runs each query on c and keeps its rows, joined by ";".
func answers(t *testing.T, c *pgx.Conn, queries []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(queries))
	for _, q := range queries {
		out[q] = strings.Join(rows(t, c, q), ";")
	}
	return out
}

// sameAnswers runs queries on c again and reports each whose answer is
// not the one in before; when says what happened in between.
func sameAnswers(t *testing.T, c *pgx.Conn, when string, queries []string, before map[string]string) {
	t.Helper()
	for _, q := range queries {
		if got := strings.Join(rows(t, c, q), ";"); got != before[q] {
			t.Errorf("%s, %s:\n%s\nbefore:\n%s", when, q, got, before[q])
		}
	}
}

// sameAnswersDistSQL is sameAnswers after a distribution, with distsql
// off and then on (left on).
func sameAnswersDistSQL(t *testing.T, c *pgx.Conn, queries []string, before map[string]string) {
	t.Helper()
	for _, mode := range []string{"off", "on"} {
		mustExec(t, c, "SET distsql = "+mode)
		sameAnswers(t, c, "after distribution, distsql = "+mode, queries, before)
	}
}

// routerQuery checks that q, which fixes the distribution column, reads
// one bucket of one tablet and runs no fragment; it returns the plan.
func routerQuery(t *testing.T, c *pgx.Conn, q string) string {
	t.Helper()
	plan := strings.Join(rows(t, c, "EXPLAIN ANALYZE "+q), "\n")
	if strings.Contains(plan, "Distribution") || !strings.Contains(plan, "Buckets: 1 of 65536") || !strings.Contains(plan, "to 1 tablet") {
		t.Errorf("router query on the distribution column:\n%s", plan)
	}
	return plan
}

// colocatedJoin checks that q, a join on the distribution columns of
// tables colocated in shards shards, pairs each tablet with itself: one
// fragment per shard. It returns the plan.
func colocatedJoin(t *testing.T, c *pgx.Conn, q string, shards int) string {
	t.Helper()
	plan := strings.Join(rows(t, c, "EXPLAIN ANALYZE "+q), "\n")
	if !strings.Contains(plan, "Join: colocated") || len(fragmentStats(plan)) != shards {
		t.Errorf("the join on the distribution column, %d fragments, want %d:\n%s", len(fragmentStats(plan)), shards, plan)
	}
	return plan
}
