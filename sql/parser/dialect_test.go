package parser

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestRewrite runs testdata/rewrite, the table of dialect rewrites. Its
// mini-language has one directive:
//
//	rewrite rule=<name>
//	<SQL as a user types it; may span lines>
//	----
//	<the rewritten Postgres text>
//	-- <rule> @<position>: <construct as typed, blanks collapsed>   (one per annotation)
//
// rule names the rule of dialect.go the case exercises (TestRulesHaveCases
// checks each rule has some; pass-through cases use rule=none). When the
// rewrite succeeds the test also parses and deparses the rewritten text
// with CheckDeparse; if Postgres rejects it, the output shows that as
// `postgres: <error>` (the rewriter left a non-dialect error to Postgres).
// When the rewrite fails, the output is the error: `error <SQLSTATE>
// @<position>: <message>` followed by the offending line and a caret.
func TestRewrite(t *testing.T) {
	datadriven.RunTest(t, "testdata/rewrite", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "rewrite" {
			d.Fatalf(t, "unknown directive %q", d.Cmd)
		}
		var name string
		d.ScanArgs(t, "rule", &name)
		if name != "none" && ruleByName(name) == nil {
			d.Fatalf(t, "unknown rule %q", name)
		}
		out, notes, err := Rewrite(d.Input)
		if err != nil {
			return formatError(t, d.Input, err)
		}
		var b strings.Builder
		b.WriteString(out)
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "-- %s @%d: %s\n", n.Rule, n.Position, strings.Join(strings.Fields(n.Text), " "))
		}
		if _, err := CheckDeparse(out); err != nil {
			fmt.Fprintf(&b, "postgres: %v\n", err)
		}
		return b.String()
	})
}

// TestRulesHaveCases keeps the rules table and its test table together:
// every rule must be exercised by at least one case in testdata/rewrite.
func TestRulesHaveCases(t *testing.T) {
	seen := map[string]bool{}
	datadriven.RunTest(t, "testdata/rewrite", func(t *testing.T, d *datadriven.TestData) string {
		var name string
		d.ScanArgs(t, "rule", &name)
		seen[name] = true
		return d.Expected
	})
	for _, r := range rules {
		if !seen[r.name] {
			t.Errorf("rule %q has no case in testdata/rewrite", r.name)
		}
		if r.before == "" || r.after == "" || len(r.sites) == 0 {
			t.Errorf("rule %q lacks documentation or sites", r.name)
		}
	}
}

func ruleByName(name string) *rule {
	for i := range rules {
		if rules[i].name == name {
			return &rules[i]
		}
	}
	return nil
}

// formatError renders a SyntaxError with the input line it points at and a
// caret under the character Position names.
func formatError(t *testing.T, input string, err error) string {
	se, ok := err.(*SyntaxError)
	if !ok {
		t.Fatalf("error is %T, not *SyntaxError: %v", err, err)
	}
	s := fmt.Sprintf("error %s @%d: %s\n", se.Code, se.Position, se.Message)
	if se.Position <= 0 {
		return s
	}
	runes := []rune(input)
	p := se.Position - 1 // 0-based rune index
	if p > len(runes) {
		t.Fatalf("position %d is past the end of the input (%d characters)", se.Position, len(runes))
	}
	lineStart := p
	for lineStart > 0 && runes[lineStart-1] != '\n' {
		lineStart--
	}
	lineEnd := p
	for lineEnd < len(runes) && runes[lineEnd] != '\n' {
		lineEnd++
	}
	return s + string(runes[lineStart:lineEnd]) + "\n" + strings.Repeat(" ", p-lineStart) + "^\n"
}
