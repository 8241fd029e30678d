package session

import (
	"testing"
)

// TestRowsTag: the command tag of every verb that counts rows, for small
// counts (made once) and large ones, and for a verb that counts none; a
// point statement's tag allocates nothing.
func TestRowsTag(t *testing.T) {
	for _, tc := range []struct {
		verb string
		n    int64
		want string
	}{
		{"SELECT", 0, "SELECT 0"},
		{"SELECT", 1, "SELECT 1"},
		{"SELECT", 15, "SELECT 15"},
		{"SELECT", 16, "SELECT 16"},
		{"SELECT", 1234567, "SELECT 1234567"},
		{"UPDATE", 1, "UPDATE 1"},
		{"DELETE", 3, "DELETE 3"},
		{"INSERT", 1, "INSERT 0 1"},
		{"INSERT", 100, "INSERT 0 100"},
		{"MERGE", 2, "MERGE 2"},
		{"FETCH", 0, "FETCH 0"},
		{"MOVE", 5, "MOVE 5"},
		{"COPY", 1000000, "COPY 1000000"},
		{"CREATE TABLE", 0, "CREATE TABLE"},
		{"SELECT", -1, "SELECT -1"},
	} {
		if got := rowsTag(tc.verb, tc.n); got != tc.want {
			t.Errorf("rowsTag(%q, %d) = %q, want %q", tc.verb, tc.n, got, tc.want)
		}
	}
	for _, v := range tagVerbs {
		for n := int64(0); n < smallTagRows+2; n++ {
			if got, want := rowsTag(v, n), makeRowsTag(v, n); got != want {
				t.Errorf("rowsTag(%q, %d) = %q, want %q", v, n, got, want)
			}
		}
	}
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	for _, v := range []string{"SELECT", "UPDATE", "INSERT"} {
		if n := testing.AllocsPerRun(100, func() { _ = rowsTag(v, 1) }); n != 0 {
			t.Errorf("rowsTag(%q, 1): %v allocations, want 0", v, n)
		}
	}
}
