package chaos

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Registers is the register workload (invariants 3 and 5): Keys counters
// at a time, each read (SELECT) or incremented (UPDATE ... RETURNING) in
// autocommit by Clients clients through the nodes in turn. Increments make
// a register's versions strictly increasing, so a session reading a lower
// value than it read before has gone back in time (monotonic reads); and
// the whole history must be linearizable (porcupine).
//
// Every Epoch the clients move on to Keys fresh counters. Porcupine checks
// each counter's history on its own (a partitioned model), and its search
// grows exponentially with the increments whose answer was lost (they stay
// open to the end of the history); one counter for a whole 30-minute run
// gathered too many of them to be decided. An epoch bounds every
// partition to a few hundred operations, so a long run is checked whole.
type Registers struct {
	Keys, Clients int
	// Epoch is how long the clients use one set of counters (0: 15 s).
	Epoch time.Duration

	mu  sync.Mutex
	ops []porcupine.Operation
	// incErrors counts the increments' errors by outcome and SQLSTATE.
	incErrors    map[string]int
	monotonicErr []string
	start        time.Time
}

type regIn struct {
	inc bool
	key int
}

type regOut struct {
	v       int64
	unknown bool // an increment whose answer was lost
	node    int  // the node that served it (for diagnostics)
}

// registerEpochs is how many sets of counters Setup makes; a run longer
// than registerEpochs epochs stays on the last set.
const registerEpochs = 256

// Name implements Workload.
func (r *Registers) Name() string { return "registers" }

// Setup implements Workload.
func (r *Registers) Setup(ctx context.Context, c *Cluster) error {
	return execAll(ctx, c, 0,
		"CREATE TABLE registers (k INT PRIMARY KEY, v BIGINT NOT NULL)",
		fmt.Sprintf("INSERT INTO registers SELECT g, 0 FROM generate_series(0, %d) AS g", r.Keys*registerEpochs-1))
}

// key draws the counter a client uses now: one of the current epoch's.
func (r *Registers) key(rng *rand.Rand) int {
	epoch := r.Epoch
	if epoch <= 0 {
		epoch = 15 * time.Second
	}
	e := min(int(time.Since(r.start)/epoch), registerEpochs-1)
	return e*r.Keys + rng.IntN(r.Keys)
}

// Run implements Workload.
func (r *Registers) Run(ctx context.Context, c *Cluster, seed uint64, commits *Commits) {
	r.start = time.Now()
	var wg sync.WaitGroup
	for cl := range r.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(cl)))
			s := newSession(c, cl)
			defer s.close()
			seen := map[int]int64{}
			for ctx.Err() == nil {
				in := regIn{inc: rng.IntN(2) == 0, key: r.key(rng)}
				conn, node := s.next(ctx)
				if conn == nil {
					continue
				}
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				call := time.Since(r.start).Nanoseconds()
				var v int64
				var err error
				if in.inc {
					err = conn.QueryRow(tctx, "UPDATE registers SET v = v + 1 WHERE k = $1 RETURNING v", in.key).Scan(&v)
				} else {
					err = conn.QueryRow(tctx, "SELECT v FROM registers WHERE k = $1", in.key).Scan(&v)
				}
				ret := time.Since(r.start).Nanoseconds()
				cancel()
				commits.Took(fmt.Sprintf("registers/%d", cl), node, r.start.Add(time.Duration(call)), err)
				out := Classify(err, in.inc)
				commits.Fail(node, err)
				s.after(err, out)
				if in.inc && err != nil {
					r.mu.Lock()
					if r.incErrors == nil {
						r.incErrors = map[string]int{}
					}
					r.incErrors[out.String()+" "+errCode(err)]++
					r.mu.Unlock()
				}
				if out == Fail {
					continue // a read that failed, or an increment refused: no effect
				}
				op := porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: regOut{v: v, node: node}, Return: ret}
				if out == Unknown {
					// It may take effect at any time from now on.
					op.Output, op.Return = regOut{unknown: true, node: node}, -1
				} else {
					if v < seen[in.key] {
						r.mu.Lock()
						r.monotonicErr = append(r.monotonicErr, fmt.Sprintf("client %d read register %d = %d on node %d after %d", cl, in.key, v, node+1, seen[in.key]))
						r.mu.Unlock()
					}
					seen[in.key] = v
					if in.inc {
						commits.Add()
					}
				}
				r.mu.Lock()
				r.ops = append(r.ops, op)
				r.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

var counterModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(regIn).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(int64), input.(regIn), output.(regOut)
		if in.inc {
			return out.unknown || out.v == s+1, s + 1
		}
		return out.v == s, s
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		in, out := input.(regIn), output.(regOut)
		if in.inc {
			if out.unknown {
				return fmt.Sprintf("inc(%d) -> ?", in.key)
			}
			return fmt.Sprintf("inc(%d) -> %d", in.key, out.v)
		}
		return fmt.Sprintf("read(%d) -> %d", in.key, out.v)
	},
}

// Check implements Workload.
func (r *Registers) Check(ctx context.Context, c *Cluster) (string, []string) {
	anomalies := append([]string(nil), r.monotonicErr...)
	end := time.Since(r.start).Nanoseconds() + 1
	ops := slices.Clone(r.ops)
	used := map[int]bool{}
	for _, op := range ops {
		used[op.Input.(regIn).key] = true
	}
	keys := slices.Sorted(maps.Keys(used))
	// Final reads through every node: a read after everything.
	for _, i := range c.Live() {
		err := retry(ctx, 60*time.Second, func() error {
			conn, err := c.ConnectWait(ctx, i, 30*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			for _, k := range keys {
				var v int64
				if err := conn.QueryRow(ctx, "SELECT v FROM registers WHERE k = $1", k).Scan(&v); err != nil {
					return err
				}
				end++
				ops = append(ops, porcupine.Operation{ClientId: 1000 + i, Input: regIn{key: k}, Call: end, Output: regOut{v: v, node: i}, Return: end + 1})
				end++
			}
			return nil
		})
		if err != nil {
			anomalies = append(anomalies, fmt.Sprintf("registers: node %d: cannot read: %v", i+1, err))
		}
	}
	verdict, bad := judgeCounters(ops, end, r.start, counterCheckTimeout)
	anomalies = append(anomalies, bad...)
	return fmt.Sprintf("registers: %d operations on %d counters, %s; monotonic reads: %d violations; increment errors %v", len(ops), len(keys), verdict, len(r.monotonicErr), r.incErrors), anomalies
}

// counterCheckTimeout bounds porcupine's search over a whole history.
const counterCheckTimeout = 3 * time.Minute

// judgeCounters checks a counter history and returns its verdict and
// the anomalies: a history that is not linearizable is one, and so is a
// history porcupine could not decide within timeout. An undecided history
// proves nothing, so it must never pass as a linearizable one.
func judgeCounters(ops []porcupine.Operation, end int64, start time.Time, timeout time.Duration) (string, []string) {
	switch checkCounters(ops, end, timeout) {
	case porcupine.Ok:
		return "linearizable", nil
	case porcupine.Illegal:
		return "NOT linearizable", append([]string{"registers: the history is not linearizable"}, explainCounters(ops, start)...)
	default:
		return "undecided", []string{fmt.Sprintf("registers: porcupine did not decide the %d-operation history within %s: it is not shown linearizable", len(ops), timeout)}
	}
}

// checkCounters checks a counter history whose last operation ends at
// end. An increment whose answer was lost (Return < 0) returns at
// infinity, after the final reads too: it may take effect at any point
// after its call, or never (linearized after everything, unobserved).
func checkCounters(ops []porcupine.Operation, end int64, timeout time.Duration) porcupine.CheckResult {
	ops = slices.Clone(ops)
	for i := range ops {
		if ops[i].Return < 0 {
			ops[i].Return = end + 1
		}
	}
	return porcupine.CheckOperationsTimeout(counterModel, ops, timeout)
}

// explainCounters names what makes a counter history non-linearizable
// when it is one of the simple cases: two increments that returned the
// same value (a lost update), or a read that returned less than an
// increment acknowledged before the read began (a stale read).
func explainCounters(ops []porcupine.Operation, start time.Time) []string {
	var out []string
	at := func(ns int64) string { return start.Add(time.Duration(ns)).Format("15:04:05.000") }
	type key = int
	incs := map[key]map[int64]porcupine.Operation{}
	for _, op := range ops {
		in, o := op.Input.(regIn), op.Output.(regOut)
		if !in.inc || o.unknown {
			continue
		}
		if incs[in.key] == nil {
			incs[in.key] = map[int64]porcupine.Operation{}
		}
		if prev, dup := incs[in.key][o.v]; dup {
			out = append(out, fmt.Sprintf("registers: register %d: two increments returned %d: client %d on node %d (%s..%s) and client %d on node %d (%s..%s)",
				in.key, o.v, prev.ClientId, prev.Output.(regOut).node+1, at(prev.Call), at(prev.Return), op.ClientId, o.node+1, at(op.Call), at(op.Return)))
		}
		incs[in.key][o.v] = op
	}
	// The final value (the last read of each key, made after the run)
	// against the increments: fewer than acknowledged is a lost
	// increment; more than acknowledged plus unknown, an increment said to
	// have failed took effect (or one took effect twice).
	okIncs, unknownIncs, final := map[int]int64{}, map[int]int64{}, map[int]int64{}
	var lastCall = map[int]int64{}
	for _, op := range ops {
		in, o := op.Input.(regIn), op.Output.(regOut)
		switch {
		case in.inc && o.unknown:
			unknownIncs[in.key]++
		case in.inc:
			okIncs[in.key]++
		case op.Call >= lastCall[in.key]:
			lastCall[in.key], final[in.key] = op.Call, o.v
		}
	}
	for k, f := range final {
		if f < okIncs[k] || f > okIncs[k]+unknownIncs[k] {
			out = append(out, fmt.Sprintf("registers: register %d ends at %d after %d acknowledged and %d unknown increments", k, f, okIncs[k], unknownIncs[k]))
		}
	}
	// Stale reads: a read that returned less than an operation (an
	// acknowledged increment or another read, any client) that had
	// completed before it began.
	byKey := map[int][]porcupine.Operation{}
	for _, op := range ops {
		if o := op.Output.(regOut); !o.unknown {
			byKey[op.Input.(regIn).key] = append(byKey[op.Input.(regIn).key], op)
		}
	}
	for k, kops := range byKey {
		done := slices.Clone(kops)
		slices.SortFunc(done, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
		reads := slices.DeleteFunc(slices.Clone(kops), func(op porcupine.Operation) bool { return op.Input.(regIn).inc })
		slices.SortFunc(reads, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		var newest *porcupine.Operation
		i := 0
		for _, rd := range reads {
			for ; i < len(done) && done[i].Return < rd.Call; i++ {
				if newest == nil || done[i].Output.(regOut).v > newest.Output.(regOut).v {
					newest = &done[i]
				}
			}
			if newest != nil && newest.Output.(regOut).v > rd.Output.(regOut).v && len(out) < 20 {
				kind := "a read of"
				if newest.Input.(regIn).inc {
					kind = "an increment to"
				}
				out = append(out, fmt.Sprintf("registers: register %d: client %d read %d on node %d (%s..%s), after %s %d by client %d on node %d was answered at %s",
					k, rd.ClientId, rd.Output.(regOut).v, rd.Output.(regOut).node+1, at(rd.Call), at(rd.Return),
					kind, newest.Output.(regOut).v, newest.ClientId, newest.Output.(regOut).node+1, at(newest.Return)))
			}
		}
	}
	return out
}
