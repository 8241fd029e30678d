package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AvailabilityTarget is the longest window with no commit anywhere in the
// cluster that single-node kills may cause (issue 13: lease expiry plus
// recovery).
const AvailabilityTarget = 5 * time.Second

// Outcome is what a client knows of a transaction.
type Outcome int

const (
	// OK: acknowledged; it must be visible.
	OK Outcome = iota
	// Fail: the database said it did not commit; it must not be visible.
	Fail
	// Unknown: the connection or the COMMIT's answer was lost (or the
	// database said 40003); it may or may not be visible.
	Unknown
)

func (o Outcome) String() string { return [...]string{"ok", "fail", "unknown"}[o] }

// definiteFailure reports whether a SQLSTATE says a transaction did not
// commit. Everything else (57014: a cancel that may have come during the
// commit; XX000; I/O errors) leaves the outcome unknown.
func definiteFailure(code string) bool {
	switch {
	case code == "40003": // statement_completion_unknown
		return false
	case strings.HasPrefix(code, "40"), strings.HasPrefix(code, "23"), strings.HasPrefix(code, "42"),
		strings.HasPrefix(code, "22"), code == "25P02", code == "58000", code == "53300":
		return true
	}
	return false
}

// Classify turns a transaction's error into its outcome. committing says
// whether the error came from COMMIT (or from an autocommit statement):
// before COMMIT, any error leaves the transaction uncommitted.
func Classify(err error, committing bool) Outcome {
	if err == nil {
		return OK
	}
	if !committing {
		return Fail
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && definiteFailure(pe.Code) {
		return Fail
	}
	return Unknown
}

// errCode is err's SQLSTATE, or "-" for an error without one.
func errCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "-"
}

// Txn runs stmts in one transaction on conn (BEGIN [isolation]; stmts;
// COMMIT) and returns its outcome and error. A COMMIT answered ROLLBACK
// is a failure. ctx bounds the whole transaction.
func Txn(ctx context.Context, conn *pgx.Conn, begin string, body func(ctx context.Context) error) (Outcome, error) {
	if _, err := conn.Exec(ctx, begin); err != nil {
		return Fail, err
	}
	if err := body(ctx); err != nil {
		if !conn.IsClosed() {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
		return Fail, err
	}
	tag, err := conn.Exec(ctx, "COMMIT")
	if err != nil {
		return Classify(err, true), err
	}
	if tag.String() != "COMMIT" {
		return Fail, fmt.Errorf("COMMIT answered %q", tag.String())
	}
	return OK, nil
}

// Commits records when transactions committed, for availability, and
// when and where they failed, to say what the clients met during a long
// window without a commit.
type Commits struct {
	mu    sync.Mutex
	times []time.Time
	fails []failure
	slow  []slowOp
}

// slowOp is one operation that took longer than SlowOp: which client ran
// it through which node, when it started and ended, and how it ended
// ("ok" or its error in short). A window with no commit anywhere is one
// in which every client is inside such an operation, so the slow ones
// that overlap a window say where each client was held, and by what.
type slowOp struct {
	client     string
	node       int
	start, end time.Time
	err        string
}

// SlowOp is how long an operation must take to be kept for the
// explanation of the windows it overlaps.
const SlowOp = time.Second

// failure is one failed or unknown operation: when it returned, through
// which node, and its error in short.
type failure struct {
	at   time.Time
	node int
	err  string
}

// Fail records an operation through node that failed with err.
func (c *Commits) Fail(node int, err error) {
	if err == nil {
		return
	}
	msg := shortError(err)
	c.mu.Lock()
	c.fails = append(c.fails, failure{at: time.Now(), node: node, err: msg})
	c.mu.Unlock()
}

// shortError is err in short: its SQLSTATE, or the start of its message
// when it has none.
func shortError(err error) string {
	msg := errCode(err)
	if msg == "-" {
		msg = err.Error()
		if len(msg) > 60 {
			msg = msg[:60]
		}
	}
	// An internal error names no cause by its code: keep the start of its
	// message, so a window's explanation says which internal error it was.
	var pe *pgconn.PgError
	if msg == "XX000" && errors.As(err, &pe) {
		m := pe.Message
		if len(m) > 100 {
			m = m[:100]
		}
		msg += " " + m
	}
	return msg
}

// Took records, if it took longer than SlowOp, the operation that client
// began through node at start and that has just ended with err (nil: it
// succeeded).
func (c *Commits) Took(client string, node int, start time.Time, err error) {
	end := time.Now()
	if end.Sub(start) <= SlowOp {
		return
	}
	msg := "ok"
	if err != nil {
		msg = shortError(err)
	}
	c.mu.Lock()
	c.slow = append(c.slow, slowOp{client: client, node: node, start: start, end: end, err: msg})
	c.mu.Unlock()
}

// Add records a commit now.
func (c *Commits) Add() {
	c.mu.Lock()
	c.times = append(c.times, time.Now())
	c.mu.Unlock()
}

// Count is the number of commits recorded.
func (c *Commits) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.times)
}

// Gap is a window with no commit.
type Gap struct {
	From time.Time
	Len  time.Duration
	// Fault is the kind of the last fault begun before the window ended
	// ("" when none had): what the window is charged to.
	Fault string
	// Errors are the failures that returned during the window (and the
	// second after it), by node and error, for the longest windows.
	Errors map[string]int
	// Held are the operations longer than SlowOp that overlapped the
	// window, for the longest windows, in the order they began: where
	// each client was held.
	Held []string
}

// Availability summarises the windows without a commit between start
// and end.
type Availability struct {
	Commits       int
	Max, P50, P99 time.Duration
	// Long are the windows over a second, longest first.
	Long []Gap
	// PerMinute counts the commits in each minute of the run (the last
	// one possibly partial): whether throughput falls as a run goes on
	// (its tables grow, nodes come and go) or with the machine's load.
	PerMinute []int
}

func (a Availability) String() string {
	s := fmt.Sprintf("%d commits; windows with no commit: max %s, p50 %s, p99 %s; %d over 1s",
		a.Commits, a.Max.Round(time.Millisecond), a.P50.Round(time.Microsecond), a.P99.Round(time.Millisecond), len(a.Long))
	for i, g := range a.Long {
		if i == 8 {
			s += " ..."
			break
		}
		s += fmt.Sprintf(" [%s at %s", g.Len.Round(time.Millisecond), g.From.Format("15:04:05.000"))
		if g.Fault != "" {
			s += " " + g.Fault
		}
		s += "]"
	}
	if len(a.Long) > 0 {
		// How many windows of each length, in whole seconds, and the
		// longest by the fault it is charged to.
		hist := map[int]int{}
		worst := map[string]time.Duration{}
		for _, g := range a.Long {
			hist[min(int(g.Len/time.Second), 10)]++
			worst[g.Fault] = max(worst[g.Fault], g.Len)
		}
		s += "; windows over 1s by length:"
		for _, b := range slices.Sorted(maps.Keys(hist)) {
			if b == 10 {
				s += fmt.Sprintf(" >=10s:%d", hist[b])
			} else {
				s += fmt.Sprintf(" %d-%ds:%d", b, b+1, hist[b])
			}
		}
		s += "; longest by fault:"
		for _, f := range slices.Sorted(maps.Keys(worst)) {
			name := f
			if name == "" {
				name = "none"
			}
			s += fmt.Sprintf(" %s %s", name, worst[f].Round(time.Millisecond))
		}
	}
	return s
}

// Charge names, for each long window, the kind of the last fault begun
// before it ended (faults are offsets from start).
func (a *Availability) Charge(start time.Time, faults []Fault) {
	for i := range a.Long {
		g := &a.Long[i]
		end := g.From.Add(g.Len)
		for _, f := range faults {
			if start.Add(f.At).Before(end) {
				g.Fault = f.Kind
			}
		}
	}
}

// MaxOf is the longest window charged to a fault of kind.
func (a Availability) MaxOf(kind string) time.Duration {
	var m time.Duration
	for _, g := range a.Long {
		if g.Fault == kind {
			m = max(m, g.Len)
		}
	}
	return m
}

// Windows computes the distribution of windows with no commit between
// start and end (the edges count: a run that never commits is one window).
func (c *Commits) Windows(start, end time.Time) Availability {
	c.mu.Lock()
	ts := slices.Clone(c.times)
	c.mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var gaps []Gap
	prev := start
	for _, t := range ts {
		if t.Before(start) || t.After(end) {
			continue
		}
		gaps = append(gaps, Gap{From: prev, Len: t.Sub(prev)})
		prev = t
	}
	gaps = append(gaps, Gap{From: prev, Len: end.Sub(prev)})
	perMinute := make([]int, int(end.Sub(start)/time.Minute)+1)
	for _, t := range ts {
		if !t.Before(start) && !t.After(end) {
			perMinute[int(t.Sub(start)/time.Minute)]++
		}
	}
	lens := make([]time.Duration, len(gaps))
	for i, g := range gaps {
		lens[i] = g.Len
	}
	slices.Sort(lens)
	a := Availability{Commits: len(ts), Max: lens[len(lens)-1], P50: lens[len(lens)/2], P99: lens[len(lens)*99/100], PerMinute: perMinute}
	for _, g := range gaps {
		if g.Len > time.Second {
			a.Long = append(a.Long, g)
		}
	}
	slices.SortFunc(a.Long, func(x, y Gap) int { return int(y.Len - x.Len) })
	c.mu.Lock()
	fails := slices.Clone(c.fails)
	slow := slices.Clone(c.slow)
	c.mu.Unlock()
	slices.SortFunc(slow, func(x, y slowOp) int { return x.start.Compare(y.start) })
	for i := range a.Long[:min(len(a.Long), 5)] {
		g := &a.Long[i]
		end := g.From.Add(g.Len)
		for _, o := range slow {
			if o.start.Before(end) && o.end.After(g.From) {
				// Times from the window's start: a client held since
				// before the window shows a negative start.
				g.Held = append(g.Held, fmt.Sprintf("%s on node %d %+.1fs..%+.1fs %s", o.client, o.node+1,
					o.start.Sub(g.From).Seconds(), o.end.Sub(g.From).Seconds(), o.err))
			}
		}
		for _, f := range fails {
			if !f.at.Before(g.From) && f.at.Before(g.From.Add(g.Len+time.Second)) {
				if g.Errors == nil {
					g.Errors = map[string]int{}
				}
				g.Errors[fmt.Sprintf("node %d: %s", f.node+1, f.err)]++
			}
		}
	}
	return a
}

// Explain lists what the clients met during the longest windows.
func (a Availability) Explain() []string {
	var out []string
	for _, g := range a.Long[:min(len(a.Long), 5)] {
		s := fmt.Sprintf("window of %s at %s (%s):", g.Len.Round(time.Millisecond), g.From.Format("15:04:05.000"), g.Fault)
		if len(g.Errors) == 0 {
			s += " no failures, the clients waited"
		}
		for _, e := range slices.Sorted(maps.Keys(g.Errors)) {
			s += fmt.Sprintf(" [%s x%d]", e, g.Errors[e])
		}
		if len(g.Held) > 0 {
			s += "; held:"
			for _, h := range g.Held {
				s += " [" + h + "]"
			}
		}
		out = append(out, s)
	}
	return out
}
