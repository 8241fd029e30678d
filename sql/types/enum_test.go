package types

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/sql/pgerror"
)

func mustEnum(t *testing.T, labels ...string) *T {
	t.Helper()
	typ, err := MakeEnum(100000, 100001, "public", "mood", labels)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

func labels(m *EnumMeta) string {
	var s []string
	for _, mb := range m.Members {
		s = append(s, mb.Label)
	}
	return strings.Join(s, ",")
}

// checkOrdered verifies the invariants key encoding relies on: PhysReps
// strictly ascending in declaration order, none ending in 0x00.
func checkOrdered(t *testing.T, m *EnumMeta) {
	t.Helper()
	for i, mb := range m.Members {
		if len(mb.PhysRep) == 0 || mb.PhysRep[len(mb.PhysRep)-1] == 0 {
			t.Fatalf("member %q has rep %x", mb.Label, mb.PhysRep)
		}
		if i > 0 && bytes.Compare(m.Members[i-1].PhysRep, mb.PhysRep) >= 0 {
			t.Fatalf("reps out of order at %q: %x >= %x", mb.Label, m.Members[i-1].PhysRep, mb.PhysRep)
		}
		if i > 0 && m.Members[i-1].SortOrder >= mb.SortOrder {
			t.Fatalf("sort orders out of order at %q: %v >= %v", mb.Label, m.Members[i-1].SortOrder, mb.SortOrder)
		}
	}
}

func TestMakeEnum(t *testing.T) {
	if typ := mustEnum(t, ""); typ.Enum.Members[0].Label != "" {
		t.Fatal("PostgreSQL accepts the empty label")
	}
	for _, n := range []int{1, 2, 3, 254, 255, 256, 1000} {
		ls := make([]string, n)
		for i := range ls {
			ls[i] = "l" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
		}
		// Make labels unique regardless of the pattern above.
		for i := range ls {
			ls[i] = ls[i] + "_" + string(rune('A'+i%26)) + strings.Repeat("z", i/26%50)
		}
		seen := map[string]bool{}
		uniq := ls[:0]
		for _, l := range ls {
			if !seen[l] && len(l) <= 63 {
				seen[l] = true
				uniq = append(uniq, l)
			}
		}
		typ := mustEnum(t, uniq...)
		checkOrdered(t, typ.Enum)
		if typ.Name() != "mood" || typ.Family != EnumFamily {
			t.Fatalf("got %s %s", typ.Name(), typ.Family)
		}
	}
}

func TestMakeEnumErrors(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		code   string
		msg    string
	}{
		{[]string{"a", "a"}, "23505", `duplicate key value violates unique constraint "pg_enum_typid_label_index"`},
		{[]string{strings.Repeat("x", 64)}, "42602", `invalid enum label "` + strings.Repeat("x", 64) + `"`},
	} {
		_, err := MakeEnum(1, 2, "public", "e", tc.labels)
		if err == nil || pgerror.Code(err) != tc.code || err.Error() != tc.msg {
			t.Errorf("%q: got %v (%s), want %s %s", tc.labels, err, pgerror.Code(err), tc.code, tc.msg)
		}
	}
}

func TestEnumAddValue(t *testing.T) {
	typ := mustEnum(t, "sad", "ok", "happy")
	m := typ.Enum
	steps := []struct {
		label, nbr string
		before     bool
		want       string
		order      float32
	}{
		{"ecstatic", "", false, "sad,ok,happy,ecstatic", 4},
		{"meh", "ok", false, "sad,ok,meh,happy,ecstatic", 2.5},
		{"awful", "sad", true, "awful,sad,ok,meh,happy,ecstatic", 0},
		{"fine", "meh", true, "awful,sad,ok,fine,meh,happy,ecstatic", 2.25},
	}
	for _, s := range steps {
		var err error
		old := m
		m, _, err = m.AddValue(s.label, s.nbr, s.before, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(m); got != s.want {
			t.Fatalf("after %s: %s, want %s", s.label, got, s.want)
		}
		checkOrdered(t, m)
		// Existing members keep their representation: stored keys stay valid.
		for _, mb := range old.Members {
			d, err := EnumFromPhysRep(typ.WithEnum(m), mb.PhysRep)
			if err != nil || d.Label != mb.Label {
				t.Fatalf("rep of %s: %v %v", mb.Label, d, err)
			}
		}
		if i := m.index(s.label); m.Members[i].SortOrder != s.order {
			t.Fatalf("sort order of %s = %v, want %v", s.label, m.Members[i].SortOrder, s.order)
		}
	}
	// Repeated insertion right after one label: reps stay ordered past the
	// point float4 sort orders run out (they are renumbered then).
	for i := 0; i < 300; i++ {
		var err error
		m, _, err = m.AddValue("x"+strings.Repeat("i", i%40)+string(rune('a'+i/40)), "sad", false, false)
		if err != nil {
			t.Fatal(err)
		}
		checkOrdered(t, m)
	}
	if _, _, err := m.AddValue("ok", "", false, false); pgerror.Code(err) != "42710" || err.Error() != `enum label "ok" already exists` {
		t.Errorf("dup: %v", err)
	}
	if m2, exists, err := m.AddValue("ok", "", false, true); err != nil || !exists || m2 != m {
		t.Errorf("if not exists: %v %v", exists, err)
	}
	if _, _, err := m.AddValue("new", "nope", true, false); pgerror.Code(err) != "22023" || err.Error() != `"nope" is not an existing enum label` {
		t.Errorf("bad neighbour: %v", err)
	}
}

func TestEnumRenameParseCompare(t *testing.T) {
	typ := mustEnum(t, "sad", "ok", "happy")
	sad, err := ParseDatum(nil, typ, "sad")
	if err != nil {
		t.Fatal(err)
	}
	happy, _ := ParseDatum(nil, typ, "happy")
	if Compare(sad, happy) >= 0 || Compare(happy, sad) <= 0 || Compare(sad, sad) != 0 {
		t.Fatal("enum order is declaration order")
	}
	if Hash(sad) == Hash(happy) {
		t.Fatal("hash collision between members")
	}
	if _, err := ParseDatum(nil, typ, "x"); pgerror.Code(err) != "22P02" || err.Error() != `invalid input value for enum mood: "x"` {
		t.Fatalf("bad label: %v", err)
	}
	m, err := typ.Enum.RenameValue("sad", "blue")
	if err != nil {
		t.Fatal(err)
	}
	renamed := typ.WithEnum(m)
	// The stored representation of 'sad' now reads as 'blue'.
	d, err := EnumFromPhysRep(renamed, []byte(sad.(DEnum).PhysRep))
	if err != nil || d.Label != "blue" || Format(nil, renamed, d) != "blue" {
		t.Fatalf("renamed: %v %v", d, err)
	}
	if _, err := m.RenameValue("sad", "x"); pgerror.Code(err) != "22023" {
		t.Errorf("rename missing: %v", err)
	}
	if _, err := m.RenameValue("blue", "ok"); pgerror.Code(err) != "42710" {
		t.Errorf("rename onto existing: %v", err)
	}
	if _, err := m.RenameValue("nope", strings.Repeat("x", 64)); pgerror.Code(err) != "42602" {
		t.Errorf("long label is checked first, as in PostgreSQL: %v", err)
	}
	if _, err := EnumFromPhysRep(typ, []byte{0x01, 0x01}); err == nil {
		t.Error("unknown rep decoded")
	}
}

func TestEnumWire(t *testing.T) {
	typ := mustEnum(t, "sad", "ok")
	d, _ := ParseDatum(nil, typ, "ok")
	b, err := EncodeBinary(nil, typ, d)
	if err != nil || string(b) != "ok" {
		t.Fatalf("binary: %q %v", b, err)
	}
	back, err := DecodeBinary(typ, b)
	if err != nil || Compare(back, d) != 0 {
		t.Fatalf("decode: %v %v", back, err)
	}
	if _, err := DecodeBinary(typ, []byte("nope")); err == nil {
		t.Fatal("bad binary label accepted")
	}
	if c, _ := typ.Category(); c != 'E' {
		t.Fatalf("category %c", c)
	}
}

func TestEnumRepBetween(t *testing.T) {
	cases := [][2][]byte{
		{nil, nil}, {nil, {1}}, {{1}, {2}}, {{255}, nil}, {{1, 255, 255}, {2}},
		{{5}, {5, 1}}, {nil, {0, 0, 1}}, {{7, 3}, {7, 4}},
	}
	for _, c := range cases {
		got := enumRepBetween(c[0], c[1])
		if (c[0] != nil && bytes.Compare(got, c[0]) <= 0) || (c[1] != nil && bytes.Compare(got, c[1]) >= 0) || got[len(got)-1] == 0 {
			t.Errorf("between(%x, %x) = %x", c[0], c[1], got)
		}
	}
}

// TestEnumCasts: text → enum is an explicit I/O cast, enum → text an
// assignment one, and two enum types do not cast to each other, as in
// PostgreSQL's pg_cast.
func TestEnumCasts(t *testing.T) {
	mood := mustEnum(t, "sad", "ok")
	other, err := MakeEnum(100002, 100003, "public", "color", []string{"ok"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to *T
		want     CastKind
	}{
		{Text, mood, CastExplicit},
		{mood, Text, CastAssignment},
		{mood, VarChar, CastAssignment},
		{Unknown, mood, CastImplicit},
		{mood, mood, CastImplicit},
		{mood, other, CastNone},
		{mood, Int4, CastNone},
	} {
		if got := CastKindOf(tc.from, tc.to); got != tc.want {
			t.Errorf("%s -> %s: %v, want %v", tc.from.Name(), tc.to.Name(), got, tc.want)
		}
	}
	d, err := Cast(nil, DString("ok"), Text, mood)
	if err != nil || d.(DEnum).Label != "ok" {
		t.Fatalf("text to enum: %v %v", d, err)
	}
	s, err := Cast(nil, d, mood, Text)
	if err != nil || s != DString("ok") {
		t.Fatalf("enum to text: %v %v", s, err)
	}
	if _, err := Cast(nil, DString("nope"), Text, mood); pgerror.Code(err) != "22P02" {
		t.Fatalf("bad label cast: %v", err)
	}
}
