package plan_test

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
)

// TestExplainAnnotate checks that EXPLAIN ANALYZE figures follow each
// node's own lines, at its detail indentation, and that the steps only
// EXPLAIN shows (Hash) get none.
func TestExplainAnnotate(t *testing.T) {
	cat := withVirtual{testCatalog(t)}
	p, err := build(t, cat, "SELECT * FROM kv JOIN t ON t.a = kv.n WHERE kv.k > 1")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	got := plan.Explain(p, func(n plan.Node) string {
		switch v := n.(type) {
		case *plan.Scan:
			seen = append(seen, "scan "+v.Table.Name)
			return "rows=" + v.Table.Name + "\nloops=1"
		case *plan.Join:
			seen = append(seen, "join")
			return "rows=join"
		}
		return ""
	})
	want := []string{
		"Hash Join",
		"  Hash Cond: (t.a = kv.n)",
		"  Filter: (kv.k > 1)",
		"  rows=join",
		"  ->  Seq Scan on kv",
		"        rows=kv",
		"        loops=1",
		"  ->  Hash",
		"        ->  Seq Scan on t",
		"              rows=t",
		"              loops=1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Join(seen, ",") != "join,scan kv,scan t" {
		t.Errorf("annotated %v", seen)
	}
}

// TestExplainAnnotateOnNodeLine: an annotation whose first line starts
// with "(" is PostgreSQL's "(actual ...)" and goes on the node's own line;
// its other lines stay detail lines.
func TestExplainAnnotateOnNodeLine(t *testing.T) {
	p, err := build(t, withVirtual{testCatalog(t)}, "SELECT * FROM kv WHERE kv.k > 1")
	if err != nil {
		t.Fatal(err)
	}
	got := plan.Explain(p, func(n plan.Node) string {
		if _, ok := n.(*plan.Scan); ok {
			return "(actual rows=2 loops=1)\nKV: 1 request in 1 round trip"
		}
		return ""
	})
	want := []string{
		"Seq Scan on kv (actual rows=2 loops=1)",
		"  Filter: (k > 1)",
		"  KV: 1 request in 1 round trip",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
