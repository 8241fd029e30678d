package chaos

import (
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
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

func TestCheckCounters(t *testing.T) {
	inc := func(client int, call, ret, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regIn{inc: true}, Call: call, Return: ret, Output: regOut{v: v}}
	}
	lost := func(client int, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regIn{inc: true}, Call: call, Return: -1, Output: regOut{unknown: true}}
	}
	read := func(client int, call, ret, v int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: regIn{}, Call: call, Return: ret, Output: regOut{v: v}}
	}
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{inc(0, 1, 2, 1), read(1, 3, 4, 1), inc(1, 5, 6, 2), read(0, 7, 8, 2)}, porcupine.Ok},
		{"unknown increment never applied", []porcupine.Operation{inc(0, 1, 2, 1), lost(1, 3), read(2, 10, 11, 1)}, porcupine.Ok},
		{"unknown increment applied", []porcupine.Operation{inc(0, 1, 2, 1), lost(1, 3), read(2, 10, 11, 2)}, porcupine.Ok},
		{"stale read", []porcupine.Operation{inc(0, 1, 2, 1), read(1, 3, 4, 0)}, porcupine.Illegal},
		{"read from the future", []porcupine.Operation{read(1, 1, 2, 1), inc(0, 3, 4, 1)}, porcupine.Illegal},
		{"stale read after a read", []porcupine.Operation{inc(0, 1, 10, 1), read(1, 2, 3, 1), read(2, 4, 5, 0)}, porcupine.Illegal},
	} {
		if got := checkCounters(tc.ops, 20); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
