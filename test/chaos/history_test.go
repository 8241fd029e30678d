package chaos

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code} }
	for _, tc := range []struct {
		err        error
		committing bool
		want       Outcome
	}{
		{nil, true, OK},
		{pg("40001"), false, Fail},
		{errors.New("conn closed"), false, Fail}, // before COMMIT: never committed
		{pg("40001"), true, Fail},
		{pg("23505"), true, Fail},
		{pg("40003"), true, Unknown}, // statement_completion_unknown
		{pg("57014"), true, Unknown}, // a cancel may land during the commit
		{pg("XX000"), true, Unknown},
		{errors.New("unexpected EOF"), true, Unknown},
	} {
		if got := Classify(tc.err, tc.committing); got != tc.want {
			t.Errorf("Classify(%v, %v) = %s, want %s", tc.err, tc.committing, got, tc.want)
		}
	}
}

func TestWindows(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c Commits
	for _, ms := range []int{100, 200, 300, 2300, 2400} {
		c.times = append(c.times, start.Add(time.Duration(ms)*time.Millisecond))
	}
	a := c.Windows(start, start.Add(2500*time.Millisecond))
	if a.Commits != 5 || a.Max != 2*time.Second || len(a.Long) != 1 || a.Long[0].From != start.Add(300*time.Millisecond) {
		t.Fatalf("windows: %+v", a)
	}
	// No commit at all: one window, the whole run.
	var none Commits
	if a := none.Windows(start, start.Add(time.Minute)); a.Max != time.Minute || a.Commits != 0 {
		t.Fatalf("no commits: %+v", a)
	}
}
