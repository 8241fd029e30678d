package elle

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parse reads a history written one transaction per line:
//
//	T1 ok: a x 1; r y [1 2]
//	T2 fail: a x 3
//	T3 unknown: a y 4
//	final x [1 2]
//
// "a k v" appends v to k; "r k [..]" read k's list.
func parse(t *testing.T, s string) ([]Txn, map[string][]int) {
	t.Helper()
	var h []Txn
	final := map[string][]int{}
	list := func(f string) []int {
		f = strings.Trim(strings.TrimSpace(f), "[]")
		out := []int{}
		for _, x := range strings.Fields(f) {
			v, err := strconv.Atoi(x)
			if err != nil {
				t.Fatalf("bad list %q", f)
			}
			out = append(out, v)
		}
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "final "); ok {
			k, l, _ := strings.Cut(rest, " ")
			final[k] = list(l)
			continue
		}
		head, body, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		var id int
		var status string
		if _, err := fmt.Sscanf(head, "T%d %s", &id, &status); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		tx := Txn{ID: id, Status: map[string]Status{"ok": OK, "fail": Fail, "unknown": Unknown}[status]}
		for _, m := range strings.Split(body, ";") {
			f := strings.Fields(m)
			switch f[0] {
			case "a":
				v, _ := strconv.Atoi(f[2])
				tx.Mops = append(tx.Mops, Mop{Append: true, Key: f[1], Value: v})
			case "r":
				tx.Mops = append(tx.Mops, Mop{Key: f[1], List: list(strings.Join(f[2:], " "))})
			default:
				t.Fatalf("bad mop %q", m)
			}
		}
		h = append(h, tx)
	}
	return h, final
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, history string
		// found: every kind Check must report, and no other.
		found []string
		// serializable and si: what each level forbids of it.
		serializable, si []string
	}{
		{name: "serial", history: `
			T1 ok: a x 1; r y []
			T2 ok: r x [1]; a x 2; a y 1
			T3 ok: r x [1 2]; r y [1]
			final x [1 2]
			final y [1]`},
		{name: "own appends read back", history: `
			T1 ok: a x 1; r x [1]; a x 2; r x [1 2]
			T2 ok: r x [1 2]; a x 3; r x [1 2 3]
			final x [1 2 3]`},
		{name: "unknown unobserved is not committed", history: `
			T1 unknown: r x []; a y 1
			T2 ok: r y []; a x 1
			final x [1]`},
		{name: "G0 write cycle", history: `
			T1 ok: a x 1; a y 2
			T2 ok: a x 3; a y 4
			T3 ok: r x [1 3]; r y [4 2]
			final x [1 3]
			final y [4 2]`,
			found: []string{G0}, serializable: []string{G0}, si: []string{G0}},
		{name: "G1a aborted read", history: `
			T1 fail: a x 1
			T2 ok: r x [1]`,
			found: []string{G1a}, serializable: []string{G1a}, si: []string{G1a}},
		{name: "G1b intermediate read", history: `
			T1 ok: a x 1; a x 2
			T2 ok: r x [1]
			final x [1 2]`,
			found: []string{G1b}, serializable: []string{G1b}, si: []string{G1b}},
		{name: "G1c circular information flow", history: `
			T1 ok: a x 1; r y [2]
			T2 ok: a y 2; r x [1]
			final x [1]
			final y [2]`,
			found: []string{G1c}, serializable: []string{G1c}, si: []string{G1c}},
		{name: "G-single read skew", history: `
			T1 ok: r x []; r y [1]
			T2 ok: a x 1; a y 1
			final x [1]
			final y [1]`,
			found: []string{GSingle}, serializable: []string{GSingle}, si: []string{GSingle}},
		{name: "G2-item write skew", history: `
			T1 ok: r x []; a y 1
			T2 ok: r y []; a x 1
			final x [1]
			final y [1]`,
			found: []string{G2Item}, serializable: []string{G2Item}},
		{name: "unknown observed is committed", history: `
			T1 unknown: r x []; a y 1
			T2 ok: r y []; a x 1
			T3 ok: r y [1]
			final x [1]
			final y [1]`,
			found: []string{G2Item}, serializable: []string{G2Item}},
		{name: "lost append", history: `
			T1 ok: a x 1
			T2 ok: a x 2
			final x [2]`,
			found: []string{Lost}, serializable: []string{Lost}, si: []string{Lost}},
		{name: "duplicate", history: `
			T1 ok: a x 1
			T2 ok: r x [1 1]
			final x [1]`,
			found: []string{Duplicate}, serializable: []string{Duplicate}, si: []string{Duplicate}},
		{name: "garbage", history: `
			T1 ok: r x [9]`,
			found: []string{Garbage}, serializable: []string{Garbage}, si: []string{Garbage}},
		{name: "internal", history: `
			T1 ok: a x 1; r x []`,
			found: []string{Internal}, serializable: []string{Internal}, si: []string{Internal}},
		{name: "incompatible order", history: `
			T1 ok: a x 1
			T2 ok: a x 2
			T3 ok: r x [1 2]
			T4 ok: r x [2 1]`,
			found: []string{IncompatibleOrder}, serializable: []string{IncompatibleOrder}, si: []string{IncompatibleOrder}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, final := parse(t, tc.history)
			res := Check(h, final)
			var found []string
			for k := range res {
				found = append(found, k)
			}
			slices.Sort(found)
			if !slices.Equal(found, tc.found) {
				t.Fatalf("found %v, want %v: %v", found, tc.found, res)
			}
			if got := res.Forbidden(Serializable); !slices.Equal(got, tc.serializable) {
				t.Errorf("serializable forbids %v, want %v", got, tc.serializable)
			}
			if got := res.Forbidden(SnapshotIsolation); !slices.Equal(got, tc.si) {
				t.Errorf("snapshot isolation forbids %v, want %v", got, tc.si)
			}
			t.Log(res)
		})
	}
}
