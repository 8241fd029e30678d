package mon

import (
	"errors"
	"testing"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

func code(err error) string {
	var pe *pgerror.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestAccount(t *testing.T) {
	node := NewBudget("SQL memory", 100)
	st := node.NewStatement(40)
	a, b := st.NewAccount(), st.NewAccount()
	steps := []struct {
		acc     *Account
		op      string
		n       int64
		wantErr string // "", "workmem" or a SQLSTATE
		used    int64  // node's used after the step
	}{
		{a, "grow", 30, "", 30},
		{a, "grow", 20, "workmem", 30}, // past work_mem: nothing reserved (invariant 3)
		{a, "force", 20, "", 50},       // Force ignores work_mem
		{b, "grow", 40, "", 90},
		{b, "force", 20, pgerrcode.OutOfMemory, 90}, // node budget refuses all of it (invariant 1)
		{a, "shrink", 100, "", 40},                  // shrinks only what it holds (invariant 2)
		{b, "shrink", 10, "", 30},
	}
	for i, s := range steps {
		var err error
		switch s.op {
		case "grow":
			err = s.acc.Grow(s.n)
		case "force":
			err = s.acc.Force(s.n)
		case "shrink":
			s.acc.Shrink(s.n)
		}
		switch {
		case s.wantErr == "" && err != nil:
			t.Fatalf("step %d: %v", i, err)
		case s.wantErr == "workmem" && !errors.Is(err, ErrWorkMem):
			t.Fatalf("step %d: got %v, want ErrWorkMem", i, err)
		case s.wantErr != "" && s.wantErr != "workmem" && code(err) != s.wantErr:
			t.Fatalf("step %d: got %v, want %s", i, err, s.wantErr)
		}
		if got := node.Used(); got != s.used {
			t.Fatalf("step %d: node used %d, want %d", i, got, s.used)
		}
	}
	st.Close()
	if got := node.Used(); got != 0 {
		t.Fatalf("after Statement.Close node holds %d bytes (invariant 4)", got)
	}
	if node.Peak() != 90 {
		t.Fatalf("peak %d, want 90", node.Peak())
	}
}

func TestNilStatement(t *testing.T) {
	var st *Statement
	a := st.NewAccount()
	if err := a.Grow(1 << 40); err != nil {
		t.Fatalf("an account without a budget refused: %v", err)
	}
	st.Close()
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{4 << 20, "4MB"}, {64 << 10, "64kB"}, {1 << 30, "1GB"}, {1000, "1000B"}} {
		if got := FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%d) = %s, want %s", c.n, got, c.want)
		}
	}
}

func TestParseKB(t *testing.T) {
	for _, c := range []struct {
		in   string
		kb   int64
		ok   bool
		show string
	}{
		{"4MB", 4096, true, "4MB"},
		{"64kB", 64, true, "64kB"},
		{"1024", 1024, true, "1MB"},
		{"1GB", 1 << 20, true, "1GB"},
		{"65536B", 64, true, "64kB"},
		{"100kB", 100, true, "100kB"},
		{"4mb", 0, false, ""}, // units are case-sensitive, as in PostgreSQL
		{"lots", 0, false, ""},
		{"", 0, false, ""},
	} {
		kb, _, ok := ParseKB(c.in)
		if ok != c.ok || (ok && kb != c.kb) {
			t.Errorf("ParseKB(%q) = %d, %v; want %d, %v", c.in, kb, ok, c.kb, c.ok)
		}
		if ok && FormatKB(kb) != c.show {
			t.Errorf("FormatKB(%d) = %s, want %s", kb, FormatKB(kb), c.show)
		}
	}
}

// TestStatementPrunesEmptyAccounts: a statement that opens accounts
// without end (a correlated subquery's operators, for every outer row)
// keeps a list as long as what holds memory, and an account that left
// the list while empty rejoins it when it reserves, so Close still
// returns everything (invariant 4).
func TestStatementPrunesEmptyAccounts(t *testing.T) {
	node := NewBudget("SQL memory", 0)
	st := node.NewStatement(1 << 20)
	kept := st.NewAccount()
	if err := kept.Grow(10); err != nil {
		t.Fatal(err)
	}
	idle := st.NewAccount()
	for range 100000 {
		a := st.NewAccount()
		if err := a.Grow(100); err != nil {
			t.Fatal(err)
		}
		a.Clear()
	}
	if n := st.Accounts(); n > 2*minPrune+2 {
		t.Fatalf("%d accounts listed after 100000 emptied ones", n)
	}
	// idle was pruned while empty; reserving brings it back.
	if err := idle.Force(7); err != nil {
		t.Fatal(err)
	}
	if got := node.Used(); got != 17 {
		t.Fatalf("node used %d, want 17", got)
	}
	st.Close()
	if got := node.Used(); got != 0 {
		t.Fatalf("node used %d after Close, want 0", got)
	}
}

// TestAccountPeak: an account's high-water mark is its own, not the
// budget's (which other accounts share), and survives shrinking.
func TestAccountPeak(t *testing.T) {
	node := NewBudget("test", 0)
	a, b := node.NewAccount(100), node.NewAccount(0)
	for _, n := range []int64{30, 50} {
		if err := a.Grow(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Grow(40); !errors.Is(err, ErrWorkMem) {
		t.Fatalf("grow past the limit: %v", err)
	}
	a.Shrink(60)
	if err := b.Force(500); err != nil {
		t.Fatal(err)
	}
	if err := a.Grow(10); err != nil {
		t.Fatal(err)
	}
	a.Clear()
	if a.Peak() != 80 || b.Peak() != 500 || node.Peak() != 530 {
		t.Fatalf("peaks: a %d (want 80), b %d (want 500), budget %d (want 530)", a.Peak(), b.Peak(), node.Peak())
	}
}
