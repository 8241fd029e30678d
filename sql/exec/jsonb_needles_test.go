package exec

import (
	"slices"
	"testing"

	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/sem"
	"github.com/cairn-db/cairn/sql/types"
)

// TestJSONBNeedles: the needles of a scan's filter are the canonical
// encodings of the strings and keys of each top-level `col @> constant`
// (or `constant <@ col`) over a jsonb column of the scan, and there are
// none for anything else.
func TestJSONBNeedles(t *testing.T) {
	jb := func(s string) *sem.Const {
		j, err := types.ParseJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		return &sem.Const{Datum: types.NewJSON(j), T: types.JSONB}
	}
	payload := &sem.ColRef{ID: 1, T: types.JSONB, Name: "payload"}
	other := &sem.ColRef{ID: 9, T: types.JSONB, Name: "elsewhere"}
	text := &sem.ColRef{ID: 2, T: types.JSONText, Name: "raw"}
	seed := jb(`{"commits": [{"author": {"email": "test@gmail.com"}}]}`)
	contains := func(l, r sem.Expr) sem.Expr { return &sem.BinOp{Op: "@>", Left: l, Right: r} }
	for _, tc := range []struct {
		name   string
		filter sem.Expr
		want   []string
	}{
		{"the seed's filter", &sem.And{Args: []sem.Expr{&sem.BinOp{Op: "=", Left: &sem.ColRef{ID: 3, T: types.Text}, Right: &sem.Const{Datum: types.DString("PushEvent"), T: types.Text}}, contains(payload, seed)}},
			[]string{`"commits"`, `"author"`, `"email"`, `"test@gmail.com"`}},
		{"reversed", &sem.BinOp{Op: "<@", Left: jb(`["x", {"k": "\u00e9"}]`), Right: payload}, []string{`"x"`, `"k"`, `"é"`}},
		{"escapes", contains(payload, jb(`{"q\"uote": "a\\b\n"}`)), []string{`"q\"uote"`, `"a\\b\n"`}},
		{"numbers, booleans and nulls give none", contains(payload, jb(`{"n": [1.0, true, null]}`)), []string{`"n"`}},
		{"under OR", &sem.Or{Args: []sem.Expr{contains(payload, seed), &sem.Const{Datum: types.DBool(true), T: types.Bool}}}, nil},
		{"under NOT", &sem.Not{Arg: contains(payload, seed)}, nil},
		{"a column the scan does not read", contains(other, seed), nil},
		{"json, not jsonb", contains(text, seed), nil},
		{"no constant", contains(payload, payload), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &plan.Scan{Cols: []plan.Column{{ID: 1, T: types.JSONB}, {ID: 2, T: types.JSONText}, {ID: 3, T: types.Text}}, Filter: tc.filter}
			var got []string
			for _, b := range jsonbNeedles(n) {
				got = append(got, string(b))
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("needles %q, want %q", got, want)
			}
		})
	}
}
