package chaos

import (
	"errors"
	"slices"
	"strings"
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
	if a.Commits != 5 || a.Max != 2*time.Second || len(a.Long) != 1 || a.Long[0].From != start.Add(300*time.Millisecond) || !slices.Equal(a.PerMinute, []int{5}) {
		t.Fatalf("windows: %+v", a)
	}
	// The window 0.3s..2.3s is charged to the kill at 0.2s, not to the
	// pause that began after it ended.
	a.Charge(start, []Fault{{At: 200 * time.Millisecond, Kind: Kill}, {At: 2350 * time.Millisecond, Kind: Pause}})
	if a.Long[0].Fault != Kill || a.MaxOf(Kill) != 2*time.Second || a.MaxOf(Pause) != 0 {
		t.Fatalf("charged: %+v", a.Long)
	}
	if s := a.String(); !strings.Contains(s, "2-3s:1") || !strings.Contains(s, "kill 2s") {
		t.Fatalf("distribution not printed: %s", s)
	}
	// What the clients met: a failure inside the window is listed with
	// it, one before it is not.
	c.Fail(1, errors.New("before"))
	c.fails[0].at = start.Add(250 * time.Millisecond)
	c.Fail(1, &pgconn.PgError{Code: "40001"})
	c.fails[1].at = start.Add(time.Second)
	a = c.Windows(start, start.Add(2500*time.Millisecond))
	a.Charge(start, []Fault{{At: 200 * time.Millisecond, Kind: Kill}})
	if e := a.Explain(); len(e) != 1 || !strings.Contains(e[0], "[node 2: 40001 x1]") || strings.Contains(e[0], "before") {
		t.Fatalf("explained: %q", e)
	}
	// Where the clients were held: an operation longer than SlowOp that
	// overlaps the window is listed, with its times from the window's
	// start; a slow one that ended before the window, or a quick one, is
	// not.
	c.slow = append(c.slow,
		slowOp{client: "bank/1", node: 0, start: start.Add(-900 * time.Millisecond), end: start.Add(200 * time.Millisecond), err: "ok"},
		slowOp{client: "bank/2", node: 2, start: start.Add(100 * time.Millisecond), end: start.Add(2300 * time.Millisecond), err: "40003"})
	c.Took("sets/0", 1, time.Now(), nil)
	a = c.Windows(start, start.Add(2500*time.Millisecond))
	if e := a.Explain(); len(e) != 1 || !strings.Contains(e[0], "held: [bank/2 on node 3 -0.2s..+2.0s 40003]") || strings.Contains(e[0], "bank/1") || len(c.slow) != 2 {
		t.Fatalf("explained: %q", e)
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
		if got := checkCounters(tc.ops, 20, time.Minute); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		// The verdict the run reports: an anomaly exactly when the
		// history is not shown linearizable.
		verdict, anomalies := judgeCounters(tc.ops, 20, time.Now(), time.Minute)
		if (tc.want == porcupine.Ok) != (len(anomalies) == 0) {
			t.Errorf("%s: judged %q with anomalies %q", tc.name, verdict, anomalies)
		}
	}
}

// TestCheckCountersUndecided: a history porcupine cannot decide in time
// is an anomaly, never a pass. Thirty increments whose answers were lost
// and then a read of a value none of them can reach make porcupine try
// every subset of the thirty (2^30) before it could say Illegal; with a
// nanosecond to do it, it says nothing.
func TestCheckCountersUndecided(t *testing.T) {
	var ops []porcupine.Operation
	for i := range 30 {
		ops = append(ops, porcupine.Operation{ClientId: i, Input: regIn{inc: true}, Call: int64(i), Return: -1, Output: regOut{unknown: true}})
	}
	ops = append(ops, porcupine.Operation{ClientId: 99, Input: regIn{}, Call: 100, Return: 101, Output: regOut{v: 31}})
	verdict, anomalies := judgeCounters(ops, 200, time.Now(), time.Nanosecond)
	if verdict != "undecided" || len(anomalies) != 1 {
		t.Fatalf("judged %q with anomalies %q; want undecided, one anomaly", verdict, anomalies)
	}
}

// TestCheckCountersPartitioned: counters are checked one by one, so a
// history of many counters, each with lost increments, is decided (the
// long run's 71,000 operations on one history were not), and one bad
// counter among them still fails the whole history.
func TestCheckCountersPartitioned(t *testing.T) {
	var ops []porcupine.Operation
	var now int64
	for k := range 200 {
		v := int64(0)
		for i := range 60 {
			now += 10
			c := i % 6
			if i >= 12 && (c == 2 || c == 3) {
				c = 4 // lost answers are rare: a few per counter
			}
			switch c {
			case 0, 1: // concurrent increments, both acknowledged
				v++
				ops = append(ops, porcupine.Operation{ClientId: i % 2, Input: regIn{inc: true, key: k}, Call: now, Return: now + 15, Output: regOut{v: v}})
			case 2: // an increment whose answer was lost, applied
				v++
				ops = append(ops, porcupine.Operation{ClientId: 2, Input: regIn{inc: true, key: k}, Call: now, Return: -1, Output: regOut{unknown: true}})
			case 3: // one lost and never applied
				ops = append(ops, porcupine.Operation{ClientId: 3, Input: regIn{inc: true, key: k}, Call: now, Return: -1, Output: regOut{unknown: true}})
			default:
				ops = append(ops, porcupine.Operation{ClientId: 4, Input: regIn{key: k}, Call: now + 16, Return: now + 20, Output: regOut{v: v}})
			}
		}
	}
	end := now + 100
	if verdict, anomalies := judgeCounters(ops, end, time.Now(), time.Minute); len(anomalies) != 0 {
		t.Fatalf("good history judged %q: %q", verdict, anomalies)
	}
	// Counter 137's last read goes back one version.
	for i := len(ops) - 1; i >= 0; i-- {
		if in := ops[i].Input.(regIn); in.key == 137 && !in.inc {
			ops[i].Output = regOut{v: ops[i].Output.(regOut).v - 1}
			break
		}
	}
	if verdict, anomalies := judgeCounters(ops, end, time.Now(), time.Minute); verdict != "NOT linearizable" || len(anomalies) == 0 {
		t.Fatalf("bad history judged %q: %q", verdict, anomalies)
	}
}
