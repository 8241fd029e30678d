// Package wiretest checks a wire schema against its golden file, so that a
// field number, once used, is never given to another field (wire
// invariant 1). Tests only.
package wiretest

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// CheckSchema compares schema (wire.Codec.Schema's lines, plus any the
// caller adds) with the golden file at path, which only grows:
//
//   - a line of schema whose "Type N" is not in the file is a new field:
//     the test fails until it is recorded (rewrite appends it);
//   - a line whose "Type N" is in the file with another name or Go type
//     means number N was given to another field, or its type changed: the
//     test fails, and rewrite does not change that line (give the field a
//     new number; a type change that keeps the wire form is recorded by
//     editing the file by hand, knowingly);
//   - a line of the file no longer in schema is a removed field: it stays,
//     so that its number is never reused.
//
// Lines starting with '#' are comments.
func CheckSchema(t testing.TB, path string, schema []string, rewrite bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !(rewrite && os.IsNotExist(err)) {
		t.Fatalf("reading the golden schema: %v (run with -rewrite to create it)", err)
	}
	var header []string
	golden := map[string]string{}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
			header = append(header, l)
		case strings.TrimSpace(l) != "":
			golden[key(l)] = l
			lines = append(lines, l)
		}
	}
	added := false
	for _, l := range schema {
		g, ok := golden[key(l)]
		switch {
		case !ok:
			if rewrite {
				lines = append(lines, l)
				golden[key(l)] = l
				added = true
				continue
			}
			t.Errorf("new wire field %q: record it in %s (go test -run %s -rewrite-schema)", l, path, t.Name())
		case g != l:
			t.Errorf("wire field number reused or retyped: %s records %q, the code has %q; give the field a new number", path, g, l)
		}
	}
	if added {
		sort.SliceStable(lines, func(i, j int) bool { return less(lines[i], lines[j]) })
		out := strings.Join(append(header, lines...), "\n") + "\n"
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// key is a line's "Type N" (or "Type -" for an empty struct).
func key(l string) string {
	f := strings.Fields(l)
	if len(f) < 2 {
		return l
	}
	return f[0] + " " + f[1]
}

func less(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if fa[0] != fb[0] {
		return fa[0] < fb[0]
	}
	na, _ := strconv.Atoi(fa[1])
	nb, _ := strconv.Atoi(fb[1])
	return na < nb
}
