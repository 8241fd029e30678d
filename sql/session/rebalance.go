package session

// rebalance_table_shards (Citus; docs/distributed.md "Rebalancing
// shards"): the session asks the catalog for the plan
// (builtins.RebalanceInfo, the same one get_rebalance_table_shards_plan
// shows) and carries its moves out, in order, as a job with progress
// (SHOW JOBS): replica moves (kvpb.PlacementRequest: a learner on the
// target, promoted, the source's voter removed, as the replicate queue
// moves replicas) on clusters with more nodes than replicas, then lease
// transfers (kvpb.SpreadLeaseRequest with the target node), which copy
// nothing. Reads and writes go on through both.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/parser"
	"github.com/cairn-db/cairn/sql/pgcatalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// RebalanceJobType is the job type of rebalance_table_shards and
// citus_rebalance_start (citus_rebalance_status lists them).
const RebalanceJobType = pgcatalog.RebalanceJobType

// rebalanceMoveTimeout bounds how long one move waits for its lease to
// arrive (a target that is behind catches up first). A variable for tests.
var rebalanceMoveTimeout = 10 * time.Second

// rebalanceMovePoll is the pause between asks of a move not done yet.
const rebalanceMovePoll = 20 * time.Millisecond

// rebalanceShards runs rebalance_table_shards call c in the statement.
func (s *Session) rebalanceShards(x *stmtState, st *parser.Statement, c *citusCall) error {
	job, moves, err := s.startRebalance(x, st, c)
	if err != nil || job == nil {
		return err
	}
	return runRebalance(x.ctx, s.b, job, moves, 0)
}

// startRebalance plans call c's moves and records them as a running job
// (nil when there is nothing to move). One rebalance runs at a time, as
// in Citus: another one running is 55000.
func (s *Session) startRebalance(x *stmtState, st *parser.Statement, c *citusCall) (*jobs.Job, []builtins.RebalanceMove, error) {
	req, err := s.rebalanceRequest(x, c)
	if err != nil {
		return nil, nil, err
	}
	ri, ok := x.types().Reg.(builtins.RebalanceInfo)
	if !ok {
		return nil, nil, pgerror.New(pgerrcode.FeatureNotSupported, "%s needs a node's tablet directory", c.fn)
	}
	ctx := x.ctx
	if running, err := runningRebalance(ctx, s.b); err != nil {
		return nil, nil, err
	} else if running != nil {
		return nil, nil, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "A rebalance is already running as job %d", running.ID).
			WithHint("Wait for it with SELECT citus_rebalance_wait(), or stop it with SELECT citus_rebalance_stop().")
	}
	moves, err := ri.RebalancePlan(req)
	if err != nil || len(moves) == 0 {
		return nil, nil, err
	}
	desc := st.SQL
	if st.Original != "" {
		desc = st.Original
	}
	payload, err := json.Marshal(moves)
	if err != nil {
		return nil, nil, err
	}
	job, err := jobs.Create(ctx, s.b.db, jobs.Record{Type: RebalanceJobType, Description: desc, User: s.user, Payload: payload})
	if err != nil {
		return nil, nil, err
	}
	return job, moves, nil
}

// runningRebalance is the rebalance job running now (nil: none). A job
// whose node stopped (jobs.Record.Orphaned) counts too: a node takes it
// over and goes on with it (ResumeOrphanedRebalances), so starting
// another would run two at once.
func runningRebalance(ctx context.Context, b *Backend) (*jobs.Record, error) {
	recs, err := jobs.List(ctx, b.db)
	if err != nil {
		return nil, err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; r.Type == RebalanceJobType && r.Status == jobs.StatusRunning {
			return &r, nil
		}
	}
	return nil, nil
}

// rebalanceTestingHooks are set by tests (TestingSetRebalanceBeforeMove).
var rebalanceTestingHooks struct {
	beforeMove atomic.Pointer[func(job int64, i int) error]
}

// TestingSetRebalanceBeforeMove installs fn, for tests of other packages
// (sql/distsql's, which run whole servers in one process), to run before
// each move of every rebalance in the process, before its stop check; nil
// removes it. ErrTestingJobDied from fn makes the rebalance return at
// once, leaving its job running and unfinished, as if its node had died
// there. Never set outside tests.
func TestingSetRebalanceBeforeMove(fn func(job int64, move int) error) {
	if fn == nil {
		rebalanceTestingHooks.beforeMove.Store(nil)
		return
	}
	rebalanceTestingHooks.beforeMove.Store(&fn)
}

// ErrTestingJobDied: see TestingSetRebalanceBeforeMove.
var ErrTestingJobDied = errors.New("session: the rebalance's node died (testing)")

// runRebalance makes job's moves from moves[from] on in order, reporting
// progress (the share of moves made, from which a node taking the job
// over finds where to go on), until they are done, one fails, ctx ends
// or citus_rebalance_stop asks it to stop (checked before each move); it
// ends the job accordingly. A move whose target may no longer take the
// lease (the node died or is leaving since the plan) is skipped: the
// other moves still even the load out, and a later rebalance plans
// without that node.
func runRebalance(ctx context.Context, b *Backend, job *jobs.Job, moves []builtins.RebalanceMove, from int) error {
	bg := context.WithoutCancel(ctx)
	stop := job.KeepAlive(bg)
	defer stop()
	for i := from; i < len(moves); i++ {
		if h := rebalanceTestingHooks.beforeMove.Load(); h != nil {
			if err := (*h)(job.ID(), i); errors.Is(err, ErrTestingJobDied) {
				return err
			}
		}
		if stopped, err := job.CancelRequested(ctx); err == nil && stopped {
			err := pgerror.New(pgerrcode.QueryCanceled, "the rebalance was stopped by citus_rebalance_stop after %d of %d moves", i, len(moves))
			_ = job.Finish(bg, jobs.StatusCanceled, err)
			return err
		}
		// The two replica moves of a swap run at once: made one after
		// the other, they would leave the two nodes' replica counts two
		// apart for as long as a move takes, long enough under load for
		// the replicate queue to even the counts out with a move of its
		// own (membership's rebalance), perhaps of the shard just moved.
		n := 1
		if replicaSwap(moves, i) {
			n = 2
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for k := range n {
			m := moves[i+k]
			wg.Go(func() {
				if m.Replica {
					errs[k] = moveReplica(ctx, b, m)
				} else {
					errs[k] = moveLease(ctx, b, m)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil && !errors.Is(err, errMoveRefused) {
				status := jobs.StatusFailed
				if ctx.Err() != nil {
					status = jobs.StatusCanceled
				}
				_ = job.Finish(bg, status, err)
				return err
			} else if err != nil {
				b.log.Warn("cairn: rebalance: move skipped", "job", job.ID(), "err", err)
			}
		}
		i += n - 1
		_ = job.Progress(ctx, float64(i+1)/float64(len(moves)))
	}
	return job.Finish(bg, jobs.StatusSucceeded, nil)
}

// replicaSwap reports whether moves i and i+1 are a swap of replicas
// between two nodes (sql/rebalance plans swaps as such a pair).
func replicaSwap(moves []builtins.RebalanceMove, i int) bool {
	if i+1 >= len(moves) {
		return false
	}
	a, b := moves[i], moves[i+1]
	return a.Replica && b.Replica && a.Source == b.Target && a.Target == b.Source && a.Tablet != b.Tablet
}

// ResumeOrphanedRebalances takes over the rebalance jobs whose node
// stopped while they ran (jobs.Record.Orphaned): it claims each
// (jobs.Claim: of several nodes checking at once, one wins) and makes its
// remaining moves in the background, from the first one its progress
// does not count as made (a move made twice is a lease handed to the
// node that already holds it: nothing happens). A citus_rebalance_stop
// asked meanwhile stops it before its next move. It returns how many it
// took over; every node runs it now and then (server), as it does for
// index builds (ddl.ResumeOrphanedIndexBuilds).
//
// u, when set, lists the jobs (from the oldest that may be running on,
// jobs.Unfinished); nil reads every job.
func (b *Backend) ResumeOrphanedRebalances(ctx context.Context, u *jobs.Unfinished) (int, error) {
	var recs []jobs.Record
	var err error
	if u != nil {
		recs, err = u.List(ctx, b.db)
	} else {
		recs, err = jobs.List(ctx, b.db)
	}
	if err != nil {
		return 0, err
	}
	n := 0
	now := time.Now()
	for _, r := range recs {
		if r.Type != RebalanceJobType || !r.Orphaned(now) {
			continue
		}
		job, ok, err := jobs.Claim(ctx, b.db, r.ID)
		if err != nil {
			return n, err
		}
		if !ok {
			continue // another node took it, or it came back
		}
		n++
		var moves []builtins.RebalanceMove
		if err := json.Unmarshal(r.Payload, &moves); err != nil {
			_ = job.Finish(ctx, jobs.StatusFailed, fmt.Errorf("reading the moves of rebalance job %d: %w", r.ID, err))
			continue
		}
		from := min(int(math.Round(r.Fraction*float64(len(moves)))), len(moves))
		b.log.Info("cairn: resuming an orphaned rebalance", "job", r.ID, "moves", len(moves), "done", from)
		b.goBackground(func(ctx context.Context) { _ = runRebalance(ctx, b, job, moves, from) })
	}
	return n, nil
}

// rebalanceStart runs citus_rebalance_start call c: the moves run on this
// node in the background (until they end or the node stops) and the call
// answers the job's ID at once, or NULL with a notice when nothing would
// move.
func (s *Session) rebalanceStart(x *stmtState, st *parser.Statement, c *citusCall) (string, bool, error) {
	job, moves, err := s.startRebalance(x, st, c)
	if err != nil {
		return "", false, err
	}
	if job == nil {
		s.notice(x.w, "NOTICE", "00000", "No moves available for rebalancing")
		return "", false, nil
	}
	s.b.goBackground(func(ctx context.Context) { _ = runRebalance(ctx, s.b, job, moves, 0) })
	s.notice(x.w, "NOTICE", "00000", fmt.Sprintf("Scheduled %d moves as job %d", len(moves), job.ID()))
	return strconv.FormatInt(job.ID(), 10), true, nil
}

// rebalanceWait runs citus_rebalance_wait: it returns once no rebalance
// is running, failing (55000) if the latest one failed.
func (s *Session) rebalanceWait(x *stmtState) error {
	for {
		running, err := runningRebalance(x.ctx, s.b)
		if err != nil {
			return err
		}
		if running == nil {
			break
		}
		select {
		case <-x.ctx.Done():
			return x.ctx.Err()
		case <-time.After(rebalanceMovePoll):
		}
	}
	recs, err := jobs.List(x.ctx, s.b.db)
	if err != nil {
		return err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; r.Type == RebalanceJobType {
			if r.Status == jobs.StatusFailed {
				return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "rebalance job %d failed: %s", r.ID, r.Error)
			}
			break
		}
	}
	return nil
}

// rebalanceStop runs citus_rebalance_stop: the running rebalance stops
// before its next move (55000 when none runs).
func (s *Session) rebalanceStop(x *stmtState) error {
	running, err := runningRebalance(x.ctx, s.b)
	if err != nil {
		return err
	}
	if running == nil {
		return pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "no ongoing rebalance that can be cancelled")
	}
	return jobs.RequestCancel(x.ctx, s.b.db, running.ID)
}

// errMoveRefused: a move's target may no longer take the lease
// (kvpb.SpreadLeaseResponse.Refused).
var errMoveRefused = errors.New("the target may not take the lease")

// moveLease hands the lease of m's tablet to m.Target, asking again until
// the tablet's leaseholder is the target (kvpb.SpreadLeaseResponse.Done)
// or rebalanceMoveTimeout has passed; errMoveRefused when the target is
// no voter that may take the lease. The request is routed by the
// tablet's start key, so a tablet that split since the plan moves its
// first part.
func moveLease(ctx context.Context, b *Backend, m builtins.RebalanceMove) error {
	return askUntilDone(ctx, b, moveAsk{
		req: func() kvpb.Request { return &kvpb.SpreadLeaseRequest{Key: m.Key, Node: uint64(m.Target)} },
		answer: func(resp kvpb.Response) (done, refused bool) {
			r, ok := resp.(*kvpb.SpreadLeaseResponse)
			return ok && r.Done, ok && r.Refused
		},
		timeout: rebalanceMoveTimeout,
		poll:    rebalanceMovePoll,
		refused: fmt.Sprintf("shard %d (tablet %d) to %s", m.ShardID, m.Tablet, builtins.NodeName(m.Target)),
		what: fmt.Sprintf("shard %d (tablet %d) from %s to %s",
			m.ShardID, m.Tablet, builtins.NodeName(m.Source), builtins.NodeName(m.Target)),
	})
}

// moveAsk is one step of a rebalance (a lease or a replica to move) as
// askUntilDone asks for it.
type moveAsk struct {
	req     func() kvpb.Request                      // a fresh request for each ask
	answer  func(kvpb.Response) (done, refused bool) // what its response says
	timeout time.Duration                            // how long the move may take
	poll    time.Duration                            // the pause between asks
	refused string                                   // names the move in errMoveRefused's error
	what    string                                   // names the move in the timeout's error
}

// askUntilDone sends a.req until its answer says the move is done (nil)
// or refused (errMoveRefused), or a.timeout has passed (55000, with the
// last error of a send as its detail). Each answer that is neither
// (the leaseholder or the replicate queue is still at it) is asked again
// after a.poll.
func askUntilDone(ctx context.Context, b *Backend, a moveAsk) error {
	mctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var last error
	for {
		ba := &kvpb.BatchRequest{}
		ba.Add(a.req())
		br, err := b.db.Send(mctx, ba)
		if err == nil && len(br.Responses) == 1 {
			done, refused := a.answer(br.Responses[0])
			if done {
				return nil
			} else if refused {
				return fmt.Errorf("%s: %w", a.refused, errMoveRefused)
			}
		}
		if err != nil {
			last = err
		}
		select {
		case <-mctx.Done():
			if err := ctx.Err(); err != nil {
				return err
			}
			e := pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "could not move %s within %s", a.what, a.timeout)
			if last != nil {
				e = e.WithDetail("%v", last)
			}
			return e
		case <-time.After(a.poll):
		}
	}
}

// rebalanceReplicaMoveTimeout bounds one replica move: a learner's
// snapshot of the tablet, its promotion and the source's removal, each
// made by the replicate queue's next scan. A variable for tests.
var rebalanceReplicaMoveTimeout = 2 * time.Minute

// moveReplica moves the replica of m's tablet from m.Source to m.Target
// (kvpb.PlacementRequest, one step per ask), asking again until the
// target is a voter and the source is not (Done),
// rebalanceReplicaMoveTimeout has passed, or the move is refused
// (errMoveRefused: the target may hold no replica, or the source holds
// none any more).
func moveReplica(ctx context.Context, b *Backend, m builtins.RebalanceMove) error {
	return askUntilDone(ctx, b, moveAsk{
		req: func() kvpb.Request {
			return &kvpb.PlacementRequest{Key: m.Key, From: uint64(m.Source), To: uint64(m.Target)}
		},
		answer: func(resp kvpb.Response) (done, refused bool) {
			r, ok := resp.(*kvpb.PlacementResponse)
			return ok && r.Done, ok && r.Refused
		},
		timeout: rebalanceReplicaMoveTimeout,
		poll:    rebalanceReplicaMovePoll,
		refused: fmt.Sprintf("replica of shard %d (tablet %d) from %s to %s", m.ShardID, m.Tablet,
			builtins.NodeName(m.Source), builtins.NodeName(m.Target)),
		what: fmt.Sprintf("shard %d's replica (tablet %d) from %s to %s",
			m.ShardID, m.Tablet, builtins.NodeName(m.Source), builtins.NodeName(m.Target)),
	})
}

// rebalanceReplicaMovePoll is the pause between asks of a replica move:
// each step waits for a replicate queue scan.
const rebalanceReplicaMovePoll = 100 * time.Millisecond

// rebalanceRequest reads c's arguments as Citus's: relation (a table
// name), threshold, max_shard_moves, excluded_shard_list ('{1,2}'),
// shard_transfer_mode (auto, force_logical or block_writes: all the
// same here, since a move copies nothing), drain_only and
// rebalance_strategy.
func (s *Session) rebalanceRequest(x *stmtState, c *citusCall) (builtins.RebalanceRequest, error) {
	var rel uint32
	if name, ok := c.args["relation"]; ok {
		oid, err := x.types().Reg.ResolveReg(types.RegClass, name)
		if err != nil {
			return builtins.RebalanceRequest{}, err
		}
		rel = oid
	}
	bad := func(param, v string) error {
		return pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input for %s: %q", param, v)
	}
	threshold, maxMoves, excluded, drain, strategy := types.Datum(types.DNull), types.Datum(types.DNull), types.Datum(types.DNull), types.Datum(types.DNull), types.Datum(types.DNull)
	if v, ok := c.args["threshold"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return builtins.RebalanceRequest{}, bad("threshold", v)
		}
		threshold = types.DFloat(f)
	}
	if v, ok := c.args["max_shard_moves"]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return builtins.RebalanceRequest{}, bad("max_shard_moves", v)
		}
		maxMoves = types.DInt(n)
	}
	if v, ok := c.args["excluded_shard_list"]; ok {
		body, found := strings.CutPrefix(strings.TrimSpace(v), "{")
		body, found2 := strings.CutSuffix(body, "}")
		if !found || !found2 {
			return builtins.RebalanceRequest{}, bad("excluded_shard_list", v)
		}
		a := types.NewArray(types.Int8)
		for _, f := range strings.Split(body, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return builtins.RebalanceRequest{}, bad("excluded_shard_list", v)
			}
			a.Elems = append(a.Elems, types.DInt(n))
		}
		excluded = a
	}
	if v, ok := c.args["shard_transfer_mode"]; ok && v != "auto" && v != "force_logical" && v != "block_writes" {
		return builtins.RebalanceRequest{}, pgerror.New(pgerrcode.InvalidTextRepresentation, "invalid input value for enum citus.shard_transfer_mode: %q", v)
	}
	if v, ok := c.args["drain_only"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return builtins.RebalanceRequest{}, bad("drain_only", v)
		}
		drain = types.DBool(b)
	}
	if v, ok := c.args["rebalance_strategy"]; ok {
		strategy = types.DString(v)
	}
	return builtins.RebalanceOptions(rel, threshold, maxMoves, excluded, drain, strategy)
}

// goBackground runs fn on a goroutine of the Backend's, whose context
// ends when the Backend closes (Close waits for fn to return).
func (b *Backend) goBackground(fn func(ctx context.Context)) {
	b.bg.wg.Go(func() { fn(b.bg.ctx) })
}
