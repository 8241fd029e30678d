package raftnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cairn-db/cairn/clusterversion"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Envelope is a raft message of one group, addressed node to node. Raft
// replica IDs are node IDs: a tablet has at most one replica per node.
type Envelope struct {
	TabletID uint64
	Msg      *pb.Message
}

// Transport carries envelopes to other nodes. Send must not block on the
// receiver (a slow or dead node must not stall the scheduler): a
// transport queues or drops, and raft retransmits.
type Transport interface {
	Send([]Envelope)
}

// StateMachine is what a replica's committed entries are applied to (the
// tablet). Apply adds an entry's effects to b, the batch that also records
// the applied index, so that a restart never applies an entry twice or
// loses one; b is write-only (storage.Engine.NewWriteOnlyBatch: a read
// panics), as is ApplySnapshot's. Apply runs in a round or, for a large apply, on a worker
// (doc.go, invariant 5): at the same time as other replicas' Apply and
// observers, never as its own replica's. Snapshot returns an image of the
// state as of the last applied entry (for a replica that fell behind the
// log); ApplySnapshot replaces the state with one, in b.
type StateMachine interface {
	Apply(b *storage.Batch, e *pb.Entry) error
	Snapshot() ([]byte, error)
	ApplySnapshot(b *storage.Batch, snap *pb.Snapshot) error
}

// ApplyObserver is optionally implemented by a StateMachine that keeps
// in-memory state derived from what it applies (the tablet's lock table,
// the waiting proposers). Its methods run on the scheduler's goroutine,
// outside the node's lock, after the batch of the entries they report has
// committed (the round's, or a worker's: doc.go, invariants 5 and 6) and
// before the next round starts.
type ApplyObserver interface {
	// Applied reports the entries of this replica applied in the round, in
	// order: every normal entry, empty ones (a new leader's first entry)
	// included; snapshot says the round replaced the state with a snapshot
	// first.
	Applied(entries []*pb.Entry, snapshot bool)
	// LeaseAcquired says this replica leads term and has applied every
	// entry of earlier terms: nothing evaluated by an earlier leader can
	// still commit after this point. It runs before Lease reports term, so
	// the state machine can rebuild what a leaseholder needs first.
	// alone says the group has no voter but this one, so no other node
	// can ever have held its lease.
	LeaseAcquired(term uint64, alone bool)
}

// BatchSplitter is optionally implemented by a StateMachine some of whose
// entries do more than add to the apply batch: the tablet's AddSSTable
// entries ingest an SST into the engine during Apply. Such an entry must
// find the batch empty: the node commits the batch of the entries before
// it first (with their applied index), so what the entry does directly
// lands after them and before the entries after it, as it would if each
// entry had a batch of its own. The node never interprets the entry; the
// state machine says which entries these are.
type BatchSplitter interface {
	NeedsEmptyBatch(e *pb.Entry) bool
}

// ErrNotLeader is ProposeAt's refusal: the replica does not hold the
// lease of the term the proposal was evaluated under.
var ErrNotLeader = errors.New("raftnode: not the leaseholder at the proposal's term")

// ErrProposerGone is ProposeAt's answer when its proposer gave up (done
// closed) while the proposal waited for the node's lock: nothing was
// proposed.
var ErrProposerGone = errors.New("raftnode: the proposer gave up before its proposal was made")

// appliedSuffix keys a replica's applied index among the tablet's
// replicated state: it moves with the state machine (a snapshot carries
// it), unlike the log.
const appliedSuffix = "rfta"

// Replica is one tablet's raft group member on this node.
type Replica struct {
	TabletID uint64
	node     *Node
	rn       *raft.RawNode
	log      *LogStore
	sm       StateMachine
	applied  uint64
	// conf is the configuration as of applied (under the node's lock).
	conf *pb.ConfState
	// pubConf is conf as of the end of the last pass whose effects are
	// committed to the engine, for Config, which must not wait for the
	// node's lock: a round holds it through its synced commit, and the
	// KV client asks for a tablet's voters on every request (a read
	// waited for the fsync of every concurrent write). Never modified
	// after it is stored.
	pubConf atomic.Pointer[pb.ConfState]
	// lease is the term whose leadership this replica may serve under (it
	// leads it and has applied all earlier terms' entries); 0 when it may
	// not. leader is the node it last knew as leader (0: none).
	lease, leader atomic.Uint64
	// alone: the group's only voter is this replica.
	alone atomic.Bool
	// solo: alone, with no learner and no joint configuration either:
	// no other node takes part in the group (a cluster of one). Set
	// after each round this replica took part in (updateLease).
	solo atomic.Bool
	// started is when (node.now) the replica was opened: it grants no
	// vote for an election timeout after, as if it had just heard from a
	// leader, because before a restart it may have acknowledged a leader's
	// heartbeat that leader now counts on for its read lease.
	started int64
	// readUntil is when (monoNow) the read lease ends: the send time of
	// the latest heartbeat round a quorum acknowledged, plus the lease
	// duration (readLease).
	readUntil atomic.Int64
	// confirmed is the send time (node.now) of the latest heartbeat round
	// of the current lease a quorum acknowledged: raft's ReadIndex. A
	// request that arrived before it may be answered although the read
	// lease ran out, which it does whenever a round takes longer than the
	// lease (a node so loaded that heartbeats take a second would
	// otherwise serve nothing at all: ReadConfirmed).
	confirmed atomic.Int64
	// transferTerm is the term in which this replica, leading, began to
	// transfer leadership to transferTo: it holds no lease in that term
	// again (transfer.go).
	transferTerm, transferTo atomic.Uint64
	// transferTries counts retryTransfers' attempts since the lease was
	// given up (under the node's lock).
	transferTries int
	// pendingSnap is a streamed snapshot stepped into raft whose image
	// waits for the next Ready (snapshot.go; under the node's lock).
	pendingSnap *pendingSnap
	// applying is the apply of this replica's committed entries that a
	// worker is doing off the round (apply.go), from the pass that took
	// their Ready until the round that advances it; nil when none (under
	// the node's lock). While it is set no round takes the group's Ready.
	applying *applyJob
}

// ReadLease returns the term of the lease (0: none) and whether it may
// serve a read now without a round of consensus: the group has no other
// voter, or a quorum acknowledged a heartbeat sent less than the read
// lease duration ago. Until then no other replica can be elected (each of
// that quorum refuses votes for an election timeout after hearing from
// its leader: CheckQuorum's rule), so no other leaseholder can have
// served a newer write.
func (r *Replica) ReadLease() (term uint64, ok bool) {
	term = r.servableLease()
	if term == 0 {
		return 0, false
	}
	return term, r.alone.Load() || r.node.now() < r.readUntil.Load()
}

// servableLease is the term of the lease this replica may serve under
// now, 0 when none: the lease, unless the node is fenced or, for a group
// with another voter, its scheduler has stalled (Node.Stalled). A leader
// whose scheduler has run neither a tick nor a round for an election
// timeout sent no heartbeat for as long, so its followers may already be
// electing another leader, and it can commit nothing until the scheduler
// runs again (a round held in a sync on a stalled disk holds the node's
// lock, so every proposal waits for it). Answering for such a lease
// held every request that came to it until the node fenced itself and
// exited, 5-7 s into a disk stall in the chaos runs: refusing sends them
// to the replicas that elect the next leader. Nothing is lost by the
// refusal (the lease term is kept: once the scheduler runs again the
// replica serves under it, as after a long round, unless a round finds
// it lost), and nothing is gained unsafely: a write still commits only
// through raft, a read still needs the read lease or a confirmed
// heartbeat round. A group of one voter has no replica to go to and
// keeps its lease.
func (r *Replica) servableLease() uint64 {
	term := r.lease.Load()
	if term == 0 || r.node.fenced.Load() || !r.alone.Load() && r.node.Stalled() {
		return 0
	}
	return term
}

// ReadMark is the node's read-lease clock now, for ReadConfirmed.
func (r *Replica) ReadMark() int64 { return r.node.now() }

// ReadConfirmed returns the term of the lease (0: none) and whether a
// quorum acknowledged a heartbeat round of it sent at or after mark. A
// request that arrived before mark may then be answered without the read
// lease, as raft's ReadIndex answers reads: at the round's send time this
// replica still led (a voter that had voted in a later term would have
// refused the heartbeat, and a later leader needs one of that quorum), so
// nothing another leader wrote can have been acknowledged before the
// request arrived, and what a later leaseholder writes lands above the
// request's timestamp (its lease starts a maximum clock offset ahead).
func (r *Replica) ReadConfirmed(mark int64) (term uint64, ok bool) {
	term = r.servableLease()
	if term == 0 {
		return 0, false
	}
	return term, r.alone.Load() || r.confirmed.Load() >= mark
}

// monoEpoch anchors monoNow, the node's monotonic clock in nanoseconds.
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// Lease returns the term under which this replica holds the lease (0:
// it does not) and the node it believes leads the group (0: unknown).
// Lock-free: the tablet asks on every request.
// Shared reports whether another node may ever have led the group
// (LogStore.Shared).
func (r *Replica) Shared() bool { return r.log.Shared() }

func (r *Replica) Lease() (term, leader uint64) {
	if r.node.fenced.Load() || !r.alone.Load() && r.node.Stalled() {
		// A fenced leader is handing its groups off (fence.go), a
		// stalled one is being replaced (servableLease): it is no hint
		// for the router.
		if leader = r.leader.Load(); leader == r.node.cfg.NodeID {
			leader = 0
		}
		return 0, leader
	}
	return r.lease.Load(), r.leader.Load()
}

// NodeID is the node this replica lives on.
func (r *Replica) NodeID() uint64 { return r.node.cfg.NodeID }

// Status is the replica's raft status. Safe while the node's scheduler
// runs: it takes the node's lock, as every use of the RawNode does.
func (r *Replica) Status() raft.BasicStatus {
	r.node.mu.Lock()
	defer r.node.mu.Unlock()
	return r.rn.BasicStatus()
}

// Applied is the index of the last entry applied to the state machine.
func (r *Replica) Applied() uint64 {
	r.node.mu.Lock()
	defer r.node.mu.Unlock()
	return r.applied
}

// defaultMaxInflightBytes is Config.MaxInflightBytes's default: 16
// appends of 1 MiB per follower per group, far more than a loopback or
// LAN round trip needs to keep a follower busy, and well under the
// transport's per-peer queue (rpc.defaultQueueBytes, 128 MiB).
const defaultMaxInflightBytes = 16 << 20

// Config are a node's raft settings, shared by its groups.
type Config struct {
	NodeID uint64
	// ElectionTicks and HeartbeatTicks are in units of Tick calls.
	ElectionTicks, HeartbeatTicks int
	// MaxSizePerMsg bounds the entries of one append message.
	MaxSizePerMsg uint64
	// MaxInflightBytes bounds the bytes of entries a leader has sent one
	// follower of one group and not yet heard acknowledged. 0:
	// defaultMaxInflightBytes. Without it only the count bounded them
	// (256 messages of up to MaxSizePerMsg: 256 MiB per follower per
	// group), so one catch-up could pass the transport's 128 MiB queue
	// for its peer, which then dropped what raft had to send again.
	MaxInflightBytes uint64
	// LogKeep is how many applied entries a replica keeps in its log for
	// followers that lag; older ones are compacted away, and a follower
	// that needs them gets a snapshot. 0: 1,000.
	LogKeep uint64
	// Logger receives raft's logs (nil: raft's default, discarded here).
	Logger raft.Logger
	// OnUnknownTablet, when set, is called (outside the node's lock) for
	// a message from a group's leader to a tablet this node has no
	// replica of: the node was added to the group, and the callback
	// creates the empty replica (AddReplica with no peers) that the
	// leader's snapshot then fills (member.go). Without it such messages
	// are dropped.
	OnUnknownTablet func(tabletID uint64)
	// OnRemoved, when set, is called after a round in which this node's
	// replica applied a configuration without itself: the replica is no
	// longer a member and the callback destroys it (RemoveReplica).
	OnRemoved func(tabletID uint64)
	// SendSnapshot, when set, streams a snapshot whose image is larger
	// than InlineSnapshotLimit to node to (rpc.Transport.SendSnapshot):
	// env's MsgSnap carries only the state machine's header, image the
	// state (snapshot.go). Without it every snapshot is inline.
	SendSnapshot func(ctx context.Context, to uint64, env Envelope, image io.Reader) error
	// InlineSnapshotLimit is the largest image, in bytes, sent inside the
	// raft message (0: 1 MiB); it must leave room under the transport's
	// message limit.
	InlineSnapshotLimit int
	// TestingAfterIngest, when set, runs after a streamed snapshot's image
	// was ingested and before its raft state is written; an error fails
	// the round as an engine failure would (tests of a crash there).
	TestingAfterIngest func(tabletID, index uint64) error
	// ApplyOffloadBytes: a group's committed entries of one Ready whose
	// data add up to at least this many bytes, or that ingest an SST, are
	// applied off the round by a worker (apply.go), so that a bulk batch
	// does not hold every other group's round. 0: 64 KiB; negative: every
	// apply is done inside the round.
	ApplyOffloadBytes int
	// ApplyWorkers bounds the offloaded applies running at once (0:
	// GOMAXPROCS).
	ApplyWorkers int
	// Sideload makes the logs of state machines that are Sideloaders keep
	// their entries' payloads in files beside them (sideload.go), once
	// the cluster version allows it. Off, payloads stay inline; a log's
	// side-loaded entries are read either way.
	Sideload bool
	// Version is the node's view of the cluster version: the applied
	// index is stored with a format version only once every node's
	// binary reads it (putApplied). Nil: a node of no cluster, which
	// writes this build's formats.
	Version *clusterversion.Handle
}

// Node drives every raft group of one node: it steps messages into them,
// ticks them, and persists, sends and applies their Readies in rounds, one
// engine sync per round for all groups. Its methods are safe for
// concurrent use; a production node calls ProcessReady from one scheduler
// goroutine whenever there is work, and tests call it directly.
type Node struct {
	cfg       Config
	eng       *storage.Engine
	transport Transport

	// SnapshotsApplied and SnapshotsSent count replica snapshots taken in
	// and sent out (a lagging or new replica caught up from an image, not
	// the log).
	SnapshotsApplied, SnapshotsSent atomic.Int64
	// SnapshotsStreamed counts snapshots whose image was streamed out and
	// taken by the receiver, SnapshotsIngested those streamed in and
	// ingested here.
	SnapshotsStreamed, SnapshotsIngested atomic.Int64
	// SideloadedReads counts the side-loaded payloads read back from
	// their files into entries (for followers' appends, or an apply of an
	// entry raft read back), SideloadedApplies the entries applied from
	// their files (sideload.go).
	SideloadedReads, SideloadedApplies atomic.Int64
	// runCtx ends when Run returns; snapWG counts the snapshot streams
	// under way, which Run waits for (they read the engine).
	runCtx context.Context
	snapWG sync.WaitGroup

	mu       sync.Mutex
	replicas map[uint64]*Replica
	// published mirrors replicas (tablet ID to *Replica) for readers that
	// must not take mu (Config); it is written under mu.
	published sync.Map
	// dirty are the replicas whose raft state was touched since the last
	// round (a step, proposal, campaign, transfer or snapshot report, or
	// a Ready processed): only they can have a Ready, so processReady
	// looks at them instead of at every replica. With thousands of
	// tablets the full scan, done once per round and so once per
	// proposal, made every write (and tablet creation) cost O(tablets)
	// (issue 16, bench/ddl). allDirty (set by a tick, which touches every
	// group) makes the next round scan all replicas; it is also the
	// backstop for any touch not marked.
	dirty    map[uint64]struct{}
	allDirty bool
	// ticks counts Tick calls; ticked holds the IDs of one tick's ticked
	// replicas (reused).
	ticks  uint64
	ticked []uint64
	// work is signalled when a group may have a Ready (Run waits on it).
	work chan struct{}
	// readLease is how long after sending a heartbeat round that a quorum
	// acknowledges the leader may serve reads, and electionDur an election
	// timeout, both in the units of now (set by Run from its tick).
	readLease, electionDur atomic.Int64
	// now is the node's monotonic clock (monoNow; simulations replace it).
	now func() int64
	// ran is when (now) the scheduler last ran a tick or finished a
	// round; 0 until its first tick (Stalled).
	ran atomic.Int64
	// stallC is closed while the scheduler is found stalled (watchStall,
	// proposeWaiting; under stallMu).
	stallMu sync.Mutex
	stallC  chan struct{}
	// propQ holds the proposals handed to the scheduler while the lock
	// was held (proposeWaiting), under propMu; propSpare is the slice
	// of the last hand-off, reused (under mu).
	propMu    sync.Mutex
	propQ     []*queuedProposal
	propSpare []*queuedProposal
	// roundEnd, if set (tests), runs at the end of each processReady,
	// before it releases the lock.
	roundEnd func()

	// fenced is set while any reason in fences holds (fence.go); failed
	// once the engine failed under the scheduler.
	fenced atomic.Bool
	failed atomic.Bool
	// relook is set when the fence lifts (fence.go).
	relook  atomic.Bool
	fenceMu sync.Mutex
	fences  map[string]error

	// stats are the round's and proposals' timings (stats.go);
	// proposedAt the times of the proposals no round took yet (under
	// mu).
	stats      RoundStats
	proposedAt []proposed

	// The offloaded applies (apply.go): applySem bounds those running,
	// applyWG counts those started (Run waits for them: they write the
	// engine), and completed holds the finished ones, under completedMu,
	// until a round advances their groups. Under Run (running) each runs
	// on a goroutine of its own; a node driven by hand (tests calling
	// ProcessReady) runs each in place at the end of the round that made
	// it, so that its rounds stay deterministic and no apply outlives
	// them.
	applySem    chan struct{}
	applyWG     sync.WaitGroup
	completedMu sync.Mutex
	completed   []*applyJob
	running     atomic.Bool
}

// signal wakes Run.
func (n *Node) signal() {
	select {
	case n.work <- struct{}{}:
	default:
	}
}

// Run is the node's scheduler: it ticks every group each tick interval
// and processes Readies whenever a step, tick or proposal may have made
// some, until ctx ends. Errors from ProcessReady are fatal to the node
// (its engine failed): Run returns them.
func (n *Node) Run(ctx context.Context, tick time.Duration) error {
	// The followers that acknowledged a heartbeat refuse to vote for an
	// election timeout, counted in their own ticks; a fifth of it is
	// left for tick-rate drift and a late tick.
	n.setTiming(int64(time.Duration(n.cfg.ElectionTicks) * tick))
	ctx, cancel := context.WithCancel(ctx)
	n.mu.Lock()
	n.runCtx = ctx
	n.mu.Unlock()
	defer n.snapWG.Wait()
	defer n.applyWG.Wait()
	n.running.Store(true)
	defer n.stopRunning()
	defer cancel()
	go n.watchStall(ctx, tick)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n.Tick()
		case <-n.work:
		}
		for {
			more, err := n.ProcessReady()
			if err != nil {
				// The engine failed: nothing more is persisted, so
				// nothing more may be served from here.
				n.fail(err)
				return err
			}
			n.ran.Store(n.now())
			if !more {
				break
			}
		}
	}
}

// proposeWaiting lets a proposal into raft for ProposeAt: at once if the
// node's lock is free, else (under Run) by handing it to the scheduler,
// which proposes it under its own hold of the lock, at the end of the
// round in progress or at the start of its next one
// (proposeQueuedLocked); it reports the proposal's outcome. Unless the
// scheduler is found stalled (watchStall) while the proposal waits: then
// it gives up and reports ErrNotLeader, nothing proposed. A round held
// in its sync on a disk that stopped answering holds the lock until the
// disk answers or the process exits (the disk-stall fence, seconds
// later); a proposal that had passed the lease checks just before the
// stall was found then waited as long, with its latches held and its
// client's transaction with it (five such in a chaos run's stalled node
// after servableLease sent every later request elsewhere). Not proposed,
// it is refused like any request to a replica without the lease, and
// its gateway finds the next leaseholder.
//
// Why a hand-off and not a wait for the lock: a round holds the lock
// through its synced commit, and the proposals that arrive meanwhile
// (under pgbench's simple-update with 16 clients, three or more per
// round) each had to be woken, take the lock and release it, one after
// another, once the round ended, while the scheduler's next round
// competed for the same lock: with the CPU shared, a quarter of them
// lost the race and waited out that next round's whole sync as well
// (RoundStats.ProposalsLate), and each wait cost a goroutine of its own
// (so that it could be abandoned). Handed to the round, every proposal
// that waited for it is in the next round, and none is woken until it
// is in raft (TestWaitingProposalsJoinTheNextRound).
//
// A proposal to a group whose only voter is this replica (soleVoter) always
// waits, as servableLease keeps such a lease through a stall: no other
// replica can take the request, so a refusal only sent it back here,
// to be refused again while the rounds stayed long. On a cluster of one
// whose syncs took longer than an election timeout (a loaded disk), or
// whose scheduler a starved CPU held as long, every write that found a
// round under way was refused that way until its gateway gave up, 10 s
// later: "no leaseholder found for tablet N within 10s" on a single
// node (TestStalledSoleVoterProposes). A disk that truly stopped
// answering ends the process through the disk-stall fence.
//
// Any proposal also gives up when done closes (its proposer's context
// ended: a cancel, statement_timeout) before the scheduler took it, and
// then proposeWaiting returns ErrProposerGone and nothing was proposed,
// so the proposer's outcome is known: a statement waiting on a round
// held in its sync can be cancelled (TestStalledSoleVoterProposes,
// "cancelled"). A nil done never closes.
func (n *Node) proposeWaiting(done <-chan struct{}, q *queuedProposal) error {
	if n.mu.TryLock() {
		defer n.mu.Unlock()
		return n.proposeAtLocked(q)
	}
	if !n.running.Load() {
		// Driven by hand (tests): no scheduler to stall, no watcher, no
		// round to hand the proposal to.
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.proposeAtLocked(q)
	}
	stalled := n.stallSignal()
	if n.soleVoter(q.tabletID) {
		// Nowhere else to go: wait, stalled or not, until the proposer
		// gives up.
		select {
		case <-stalled:
			n.stats.SoleStallWaits.Add(1)
		default:
		}
		stalled = nil
	} else {
		select {
		case <-stalled:
			n.stats.StallRefusals.Add(1)
			return ErrNotLeader
		default:
		}
	}
	if !n.enqueueProposal(q) {
		// The scheduler stopped: take the lock, as a node driven by hand.
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.proposeAtLocked(q)
	}
	// The holder of the lock may be no round (a tick, a step, a status
	// read): this wakes the scheduler for one.
	n.signal()
	select {
	case err := <-q.out:
		return err
	case <-stalled:
		if q.state.CompareAndSwap(0, 2) {
			n.stats.StallRefusals.Add(1)
			return ErrNotLeader
		}
	case <-done:
		if q.state.CompareAndSwap(0, 2) {
			return ErrProposerGone
		}
	}
	// The scheduler took it first: its outcome is the proposal's.
	return <-q.out
}

// ProposeHanded is ProposeAt for a proposer that waits for its entry's
// outcome on a channel of its own (the tablet waits for the entry's
// apply), so that a proposal handed to the scheduler does not wake its
// proposer only to tell it that it was proposed.
//
// It returns (nil, err) when the proposal's fate is known at once: err
// nil, it was proposed; else nothing was proposed (ErrNotLeader, ...), as
// ProposeAt. It returns a non-nil Handoff when the node's lock was held
// under Run and the proposal was handed to the scheduler: the scheduler
// proposes it under its own hold of the lock, and if it can not
// (ErrNotLeader, ...), or the stall watcher finds the scheduler stalled
// first (a group with another voter: invariant 9, ErrNotLeader),
// refuse.Refuse is called with the error, once, on the scheduler's or the watcher's
// goroutine, under the node's lock or the hand-off's: it must not block
// nor call the node. A proposal that is proposed is never refused: its
// proposer learns its outcome from the apply. A proposer that gives up
// withdraws the proposal (Handoff.Withdraw); when that reports true,
// nothing was or will be proposed and refuse is never called.
//
// Why: under pgbench's simple-update with 4 clients 58% of the commits'
// proposals were handed over, and each proposer was woken to learn that
// its proposal was in raft, and went straight back to waiting for the
// apply: a wake-up of a goroutine that waited 85 µs for a CPU, ran 7 µs
// and, readied last, took the scheduler's processor's next slot ahead of
// the proposers the previous round had just answered (bench/README.md,
// "Issue 22, twenty-fifth session: the commit's END").
func (n *Node) ProposeHanded(done <-chan struct{}, tabletID, term uint64, data []byte, refuse Refuser) (*Handoff, error) {
	q := &queuedProposal{tabletID: tabletID, term: term, data: data, asked: time.Now(), ended: n.stats.Rounds.Load(), refuse: refuse}
	if n.mu.TryLock() {
		defer n.mu.Unlock()
		return nil, n.proposeAtLocked(q)
	}
	if !n.running.Load() {
		// Driven by hand (tests): as proposeWaiting.
		n.mu.Lock()
		defer n.mu.Unlock()
		return nil, n.proposeAtLocked(q)
	}
	q.sole = n.soleVoter(tabletID)
	select {
	case <-n.stallSignal():
		if q.sole {
			n.stats.SoleStallWaits.Add(1)
		} else {
			n.stats.StallRefusals.Add(1)
			return nil, ErrNotLeader
		}
	default:
	}
	if !n.enqueueProposal(q) {
		// The scheduler stopped: take the lock, as a node driven by hand.
		n.mu.Lock()
		defer n.mu.Unlock()
		return nil, n.proposeAtLocked(q)
	}
	n.signal()
	return (*Handoff)(q), nil
}

// Refuser receives the refusal of a proposal handed over by
// ProposeHanded (an interface, not a func, so that a proposer's own
// record of the proposal is it, with no closure per proposal).
type Refuser interface{ Refuse(err error) }

// Handoff is a proposal handed to the scheduler by ProposeHanded.
type Handoff queuedProposal

// Withdraw takes the proposal back if the scheduler has not taken it yet
// and reports whether it did: then nothing is proposed, and its refuse is
// not called. False: the scheduler took it (proposed, or refused through
// refuse), or it was refused for a stall.
func (h *Handoff) Withdraw() bool { return h.state.CompareAndSwap(0, 2) }

// queuedProposal is a ProposeAt that found the node's lock held while
// the scheduler runs, handed to the scheduler (proposeWaiting).
type queuedProposal struct {
	tabletID, term uint64
	data           []byte
	// refuse, for a ProposeHanded, receives the error of a proposal the
	// scheduler or the stall watcher could not make; its proposer waits
	// on no out. sole: its group's only voter is this replica (it waits
	// through a stall).
	refuse Refuser
	sole   bool
	// asked is when the proposal asked for the lock, ended the count of
	// rounds ended then (the stats: proposedLocked).
	asked time.Time
	ended int64
	// state: 0 while queued, 1 once the scheduler took it (it will send
	// its outcome on out), 2 once its proposer gave up (the scheduler
	// drops it, unproposed).
	state atomic.Int32
	out   chan error
}

// enqueueProposal queues q for the scheduler's next hold of the lock; it
// reports false, queuing nothing, if Run is not running (or stopped).
func (n *Node) enqueueProposal(q *queuedProposal) bool {
	n.propMu.Lock()
	defer n.propMu.Unlock()
	if !n.running.Load() {
		return false
	}
	if q.refuse == nil {
		q.out = make(chan error, 1)
	}
	n.propQ = append(n.propQ, q)
	n.stats.QueuedProposals.Add(1)
	return true
}

// proposeQueuedLocked proposes the proposals handed to the scheduler
// (proposeWaiting) whose proposers still wait, in the order they came,
// and sends each its outcome. n.mu is held.
func (n *Node) proposeQueuedLocked() {
	n.propMu.Lock()
	q := n.propQ
	n.propQ, n.propSpare = n.propSpare[:0], nil
	n.propMu.Unlock()
	if len(q) == 0 {
		n.propSpare = q
		return
	}
	for i, p := range q {
		if p.state.CompareAndSwap(0, 1) {
			err := n.proposeAtLocked(p)
			switch {
			case p.refuse == nil:
				p.out <- err
			case err != nil:
				p.refuse.Refuse(err)
			}
		}
		q[i] = nil
	}
	n.propSpare = q[:0]
}

// stopRunning ends Run's hand-offs: no proposal is queued after it, and
// those queued are proposed now, as they would have been once the lock
// was free.
func (n *Node) stopRunning() {
	n.propMu.Lock()
	n.running.Store(false)
	n.propMu.Unlock()
	n.mu.Lock()
	n.proposeQueuedLocked()
	n.mu.Unlock()
}

// stallSignal returns the channel watchStall closes when it finds the
// scheduler stalled; it stays closed until the scheduler runs again.
func (n *Node) stallSignal() <-chan struct{} {
	n.stallMu.Lock()
	defer n.stallMu.Unlock()
	if n.stallC == nil {
		n.stallC = make(chan struct{})
	}
	return n.stallC
}

// watchStall checks, each tick until ctx ends, whether the scheduler has
// stalled (Stalled), and closes the stall signal when it has: the
// scheduler itself cannot say so while a round holds it.
func (n *Node) watchStall(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	closed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stalled := n.Stalled()
		if stalled == closed {
			continue
		}
		n.stallMu.Lock()
		if stalled {
			n.stats.SchedulerStalls.Add(1)
			if n.stallC == nil {
				n.stallC = make(chan struct{})
			}
			close(n.stallC)
			n.refuseHandedStalled()
		} else {
			n.stallC = make(chan struct{})
		}
		n.stallMu.Unlock()
		closed = stalled
	}
}

// refuseHandedStalled refuses, with ErrNotLeader, the ProposeHanded
// proposals queued for the scheduler, and not yet taken, of groups with
// another voter: what a proposeWaiting proposer does itself when it
// finds the scheduler stalled (invariant 9). Their proposers wait for
// refuse, not for the stall signal.
func (n *Node) refuseHandedStalled() {
	n.propMu.Lock()
	defer n.propMu.Unlock()
	for _, q := range n.propQ {
		if q.refuse != nil && !q.sole && q.state.CompareAndSwap(0, 2) {
			n.stats.StallRefusals.Add(1)
			q.refuse.Refuse(ErrNotLeader)
		}
	}
}

// Stalled reports whether the node's scheduler has run neither a tick
// nor a round for longer than an election timeout (servableLease): a
// round held in the engine's sync, on a disk that stopped answering or a
// write stall, or the process stopped. False before the first tick and
// without an election timeout (a node driven by hand).
func (n *Node) Stalled() bool {
	ran, el := n.ran.Load(), n.electionDur.Load()
	return ran != 0 && el > 0 && n.now()-ran > el
}

// setTiming sets the election timeout, in the units of n.now, and the
// read lease from it.
func (n *Node) setTiming(election int64) {
	n.electionDur.Store(election)
	n.readLease.Store(election * 4 / 5)
}

// NewNode makes the multi-raft of a node over eng.
func NewNode(cfg Config, eng *storage.Engine, t Transport) *Node {
	if cfg.ElectionTicks == 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks == 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.MaxSizePerMsg == 0 {
		cfg.MaxSizePerMsg = 1 << 20
	}
	if cfg.MaxInflightBytes == 0 {
		cfg.MaxInflightBytes = defaultMaxInflightBytes
	}
	if cfg.LogKeep == 0 {
		cfg.LogKeep = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger{}
	}
	if cfg.InlineSnapshotLimit == 0 {
		cfg.InlineSnapshotLimit = defaultInlineSnapshotLimit
	}
	if cfg.ApplyOffloadBytes == 0 {
		cfg.ApplyOffloadBytes = defaultApplyOffloadBytes
	}
	if cfg.ApplyWorkers <= 0 {
		cfg.ApplyWorkers = runtime.GOMAXPROCS(0)
	}
	return &Node{cfg: cfg, eng: eng, transport: t, replicas: map[uint64]*Replica{}, dirty: map[uint64]struct{}{}, allDirty: true,
		work: make(chan struct{}, 1), now: monoNow, runCtx: context.Background(),
		applySem: make(chan struct{}, cfg.ApplyWorkers)}
}

// touchLocked records that r's raft state changed, so the next round
// looks at it (see Node.dirty). n.mu is held.
func (n *Node) touchLocked(r *Replica) { n.dirty[r.TabletID] = struct{}{} }

// AddReplica opens (or creates) this node's replica of tabletID. A
// replica with no raft state yet starts with peers as the group's voters
// when peers is non-empty (bootstrapping a new group), or empty, waiting
// for the leader to send it a snapshot (a replica being added).
func (n *Node) AddReplica(tabletID uint64, peers []uint64, sm StateMachine) (*Replica, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.replicas[tabletID]; ok {
		return nil, fmt.Errorf("raftnode: node %d already has a replica of tablet %d", n.cfg.NodeID, tabletID)
	}
	ls, err := OpenLogStore(n.eng, tabletID)
	if err != nil {
		return nil, err
	}
	if n.cfg.Sideload {
		ls.sideloader, _ = sm.(Sideloader)
	}
	ls.readCounter = &n.SideloadedReads
	if v := n.cfg.Version; v != nil {
		// A binary of 1.1 cannot read a side-loaded record: written only
		// once the cluster cannot go back to one.
		ls.sideloadActive = func() bool { return v.IsActive(clusterversion.SideloadedLog) }
	}
	applied, err := n.readApplied(tabletID)
	if err != nil {
		return nil, err
	}
	// Every applied entry was committed, and the commit index alone is
	// not written (invariant 10): raft's commit starts at the applied
	// index at least (it refuses an applied index past its commit).
	ls.RaiseCommit(applied)
	hs, cs, _ := ls.InitialState()
	last, _ := ls.LastIndex()
	if len(peers) > 0 && raft.IsEmptyHardState(hs) && len(cs.GetVoters()) == 0 && last == 0 {
		// A new group: its initial configuration is the snapshot the log
		// starts after (index 1, term 1), as every member starts alike.
		b := n.eng.NewBatch()
		defer b.Close()
		one := uint64(1)
		snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: &one, Term: &one, ConfState: &pb.ConfState{Voters: slices.Clone(peers)}}}
		if err := ls.ApplySnapshot(b, snap); err != nil {
			return nil, err
		}
		if err := n.putApplied(b, tabletID, 1); err != nil {
			return nil, err
		}
		if err := b.Commit(); err != nil {
			return nil, fmt.Errorf("raftnode: bootstrapping tablet %d: %w", tabletID, err)
		}
		applied = 1
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        n.cfg.NodeID,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   ls,
		Applied:                   applied,
		MaxSizePerMsg:             n.cfg.MaxSizePerMsg,
		MaxInflightMsgs:           256,
		MaxInflightBytes:          max(n.cfg.MaxInflightBytes, n.cfg.MaxSizePerMsg),
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		Logger:                    n.cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("raftnode: tablet %d: %w", tabletID, err)
	}
	_, conf, _ := ls.InitialState()
	r := &Replica{TabletID: tabletID, node: n, rn: rn, log: ls, sm: sm, applied: applied, conf: conf, started: n.now()}
	r.pubConf.Store(pb.EnsureConfState(conf))
	n.replicas[tabletID] = r
	n.published.Store(tabletID, r)
	n.touchLocked(r)
	return r, nil
}

// Replica returns this node's replica of tabletID, or nil.
func (n *Node) Replica(tabletID uint64) *Replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[tabletID]
}

// Step delivers a message from another node. Messages for tablets this
// node has no replica of are dropped (the placement layer creates the
// replica first).
func (n *Node) Step(env Envelope) error {
	if to := env.Msg.GetTo(); to != 0 && to != n.cfg.NodeID {
		// Meant for another node ID at this address: a wiped node that
		// rejoined under a new ID still gets its old ID's traffic.
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[env.TabletID]
	if r == nil && beyondEmptyLog(env.Msg) {
		// See pastLastIndex: an empty replica made for it could only
		// drop it.
		return nil
	}
	if r == nil && n.cfg.OnUnknownTablet != nil && fromLeader(env.Msg) {
		n.mu.Unlock()
		n.cfg.OnUnknownTablet(env.TabletID)
		n.mu.Lock()
		r = n.replicas[env.TabletID]
	}
	if r == nil {
		return nil
	}
	if n.failed.Load() {
		// Dead to raft: the sender sees an unresponsive node.
		return nil
	}
	if n.fenced.Load() && fencedIn(env.Msg) {
		return nil
	}
	if r.pastLastIndex(env.Msg) {
		return nil
	}
	if ss, ok := r.sm.(SnapshotStreamer); ok && env.Msg.GetType() == pb.MessageType_MsgSnap && ss.IsStreamHeader(env.Msg.GetSnapshot().GetData()) {
		return ErrSnapshotFromStream
	}
	if t := env.Msg.GetType(); t == pb.MessageType_MsgVote || t == pb.MessageType_MsgPreVote {
		if el := n.electionDur.Load(); el == 0 || n.now()-r.started < el {
			// See Replica.started; the candidate retries.
			return nil
		}
	}
	defer n.signal()
	n.touchLocked(r)
	if err := r.rn.Step(env.Msg); err != nil {
		return err
	}
	n.answerHeldLocked(r, env.Msg)
	return nil
}

// soloBackstopTicks: every this many ticks the next round looks at every
// replica for a Ready, ticked or not (the backstop for a touch not
// marked, which a tick of every group used to give each tick).
const soloBackstopTicks = 20

// Tick advances every group's logical clock by one tick, except the
// groups a tick has nothing to do for: a solo replica (no other node in
// its configuration) that leads and holds the lease has no one to send
// heartbeats to, no election to time and no transfer to retry, so raft's
// tick would only count. Skipping them keeps an idle cluster of one with
// 20,000 tablets from spending a tenth of a core ticking them, and
// looking at each for a Ready after every tick (issue 16, bench/ddl): a
// tick marks dirty only the replicas it ticked (all of them, as before,
// when that is most), and every soloBackstopTicks all of them. A
// replica not yet through a round since it opened is not known solo and
// is ticked (it may need to campaign).
func (n *Node) Tick() {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	n.ran.Store(now)
	if n.fenced.Load() {
		n.handOffLocked()
	}
	n.ticks++
	n.ticked = n.ticked[:0]
	var held []*Replica
	for _, r := range n.replicas {
		if r.solo.Load() && r.lease.Load() != 0 {
			continue
		}
		n.ticked = append(n.ticked, r.TabletID)
		r.rn.Tick()
		if r.applying != nil {
			held = append(held, r)
		}
		if r.lease.Load() != 0 && !r.alone.Load() && n.readLease.Load() > 0 {
			// Renew the read lease: a heartbeat round whose context is
			// its send time; raft reports it in Ready.ReadStates once a
			// quorum answered.
			r.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, uint64(now)))
		}
	}
	if n.ticks%soloBackstopTicks == 0 || len(n.ticked) > len(n.replicas)/4 {
		n.allDirty = true
	} else {
		for _, id := range n.ticked {
			n.dirty[id] = struct{}{}
		}
	}
	n.heartbeatHeldLocked(held)
	n.retryTransfers()
	n.signal()
}

// Propose proposes data to tabletID's group (raft forwards a follower's
// proposal to the leader; it is dropped while there is none).
func (n *Node) Propose(tabletID uint64, data []byte) error {
	asked, ended := time.Now(), n.stats.Rounds.Load()
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, tabletID)
	}
	defer n.signal()
	n.touchLocked(r)
	n.proposedLocked(asked, time.Now(), ended)
	return r.rn.Propose(data)
}

// ProposeAt proposes data to tabletID's group if this replica holds the
// lease of term (the term the proposal was evaluated under): the entry is
// then appended to this leader's log at term, so a state machine that
// applies only entries whose term matches the proposal's evaluation term
// never applies a proposal evaluated against a stale state. Otherwise it
// returns ErrNotLeader and nothing was proposed. If done closes while the
// proposal waits for the node's lock, it returns ErrProposerGone and
// nothing was proposed (proposeWaiting).
func (n *Node) ProposeAt(done <-chan struct{}, tabletID, term uint64, data []byte) error {
	q := &queuedProposal{tabletID: tabletID, term: term, data: data, asked: time.Now(), ended: n.stats.Rounds.Load()}
	// The scheduler stalled while the proposal waited (ErrNotLeader: the
	// lease is not servable, servableLease), or done closed
	// (ErrProposerGone); either way nothing was proposed.
	return n.proposeWaiting(done, q)
}

// proposeAtLocked is ProposeAt's proposal of q, under n.mu.
func (n *Node) proposeAtLocked(q *queuedProposal) error {
	r := n.replicas[q.tabletID]
	if r == nil {
		return fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, q.tabletID)
	}
	st := r.rn.BasicStatus()
	if st.RaftState != raft.StateLeader || st.GetTerm() != q.term || r.lease.Load() != q.term || n.fenced.Load() {
		return ErrNotLeader
	}
	defer n.signal()
	n.touchLocked(r)
	n.proposedLocked(q.asked, time.Now(), q.ended)
	return r.rn.Propose(q.data)
}

// ProposeConfChange proposes a membership change to tabletID's group:
// add a learner, promote it to voter, remove a replica, or several at once
// through a joint configuration (raft's ConfChangeV2). A replica added
// this way starts empty on its node (AddReplica with no peers) and is
// brought up by the leader's log or a snapshot. Only voters count toward
// quorums; a learner never does.
func (n *Node) ProposeConfChange(tabletID uint64, cc *pb.ConfChangeV2) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, tabletID)
	}
	defer n.signal()
	n.touchLocked(r)
	return r.rn.ProposeConfChange(cc)
}

// soleVoter reports, without the node's lock, whether this node's
// replica of tabletID is its group's only voter (Replica.alone, as of
// the last round): such a replica keeps its lease through a stalled
// scheduler (servableLease) and its proposals wait (proposeWaiting).
func (n *Node) soleVoter(tabletID uint64) bool {
	v, ok := n.published.Load(tabletID)
	return ok && v.(*Replica).alone.Load()
}

// Config returns the configuration of tabletID's group as of this
// replica's last applied entry (nil: no such replica). It takes no lock:
// a round in progress, with its synced commit, does not
// delay it; it answers as of the last pass before that round.
func (n *Node) Config(tabletID uint64) *pb.ConfState {
	v, ok := n.published.Load(tabletID)
	if !ok {
		return nil
	}
	return proto.Clone(v.(*Replica).pubConf.Load()).(*pb.ConfState)
}

// Campaign makes this node's replica of tabletID stand for election.
func (n *Node) Campaign(tabletID uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.replicas[tabletID]
	if r == nil {
		return fmt.Errorf("raftnode: node %d has no replica of tablet %d", n.cfg.NodeID, tabletID)
	}
	defer n.signal()
	n.touchLocked(r)
	if err := r.rn.Campaign(); err != nil {
		return err
	}
	// A group of one voter is led by it from here on (raft makes it
	// leader once it has persisted its own vote): publish the hint now.
	if v := pb.EnsureConfState(r.conf).GetVoters(); len(v) == 1 && v[0] == n.cfg.NodeID {
		r.leader.Store(n.cfg.NodeID)
	}
	return nil
}

// ProcessReady handles every group that has work, in one round: their new
// entries, hard states and snapshots go into one batch and one synced
// commit; then their messages are sent and their committed entries
// applied (one more batch, for all groups), except a group's large apply,
// which a worker does off the round (apply.go). When that synced new
// entries, a second pass in the same round, with no proposal let in
// between, applies what the sync committed (every entry of a group whose
// only voter is this node): a proposer is answered after one sync, not
// after the next round's as well. The observers see both passes as one
// round. It reports whether any group had work.
func (n *Node) ProcessReady() (bool, error) {
	more, after, jobs, err := n.processReady()
	if err == nil && n.relook.Swap(false) {
		after = append(after, n.relookLeases()...)
	}
	// The observers run outside the lock: they may add replicas (a split)
	// or propose.
	if len(after) > 0 {
		start := time.Now()
		for _, f := range after {
			f()
		}
		n.stats.ObserveNanos.Add(int64(time.Since(start)))
	}
	// Invariant 6 (doc.go): the offloaded applies start after the
	// observers of the entries before them.
	for _, j := range jobs {
		if n.running.Load() {
			go n.runApply(j)
		} else {
			n.runApply(j)
		}
	}
	return more, err
}

func (n *Node) processReady() (bool, []func(), []*applyJob, error) {
	n.mu.Lock()
	// The proposals handed over while the lock was held go into raft
	// now, so that this round takes them, and those handed over during
	// this round go in before the lock is released, so that the next
	// round takes them all, none of them left to wake and compete with
	// it for the lock (proposeWaiting).
	n.proposeQueuedLocked()
	defer func() {
		n.proposeQueuedLocked()
		if n.roundEnd != nil {
			n.roundEnd()
		}
		n.mu.Unlock()
	}()
	outs := map[uint64]*passOut{}
	// The groups whose offloaded apply finished are advanced first, so
	// this round may take their next Ready.
	finished, err := n.advanceCompletedLocked(outs)
	if err != nil {
		return true, nil, nil, err
	}
	var ids []uint64
	// busy are the touched groups a worker applies: no round takes their
	// Ready, but a step may have cost them their leadership, which must
	// end their lease now, not when the apply ends.
	var busy []*Replica
	look := func(id uint64, r *Replica) {
		switch {
		case r.applying != nil:
			busy = append(busy, r)
		case r.rn.HasReady():
			ids = append(ids, id)
		}
	}
	if n.allDirty {
		ids = make([]uint64, 0, len(n.replicas))
		for id, r := range n.replicas {
			look(id, r)
		}
	} else {
		for id := range n.dirty {
			if r := n.replicas[id]; r != nil {
				look(id, r)
			}
		}
	}
	for _, r := range busy {
		// Gains nothing while busy (updateLease), so returns nil.
		r.updateLease(nil)
	}
	// The groups handled now stay dirty for the next round: Advance may
	// leave them more work. A group being applied off the round is
	// touched again when its apply finishes.
	n.allDirty = false
	clear(n.dirty)
	for _, id := range ids {
		n.dirty[id] = struct{}{}
	}
	if len(ids) == 0 && len(finished) == 0 {
		return false, nil, nil, nil
	}
	slices.Sort(ids) // a deterministic order for simulations
	var jobs []*applyJob
	if len(ids) > 0 {
		var tm roundTimes
		tm.start = time.Now()
		n.roundStartedLocked(tm.start)
		defer n.countRound(&tm)
		synced, err := n.pass(ids, outs, &tm, &jobs)
		if err != nil {
			return true, nil, nil, err
		}
		if synced {
			// A second pass, still under the lock, so no proposal can join
			// it: an entry this pass made durable is committed by Advance
			// when its group has no other voter (or its followers had
			// already acknowledged), and is applied now. Left to the next
			// round it would wait for that round's sync of the entries
			// proposed meanwhile: two syncs per write under load instead of
			// one (docs/performance.md, item 9).
			var again []uint64
			for _, id := range ids {
				if r := n.replicas[id]; r != nil && r.applying == nil && r.rn.HasReady() {
					again = append(again, id)
				}
			}
			if len(again) > 0 {
				start := time.Now()
				if _, err := n.pass(again, outs, nil, &jobs); err != nil {
					return true, nil, nil, err
				}
				n.stats.SecondPassNanos.Add(int64(time.Since(start)))
			}
		}
	}
	// The groups of this round and those whose offloaded apply finished.
	for _, id := range finished {
		if _, ok := n.dirty[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var after []func()
	for _, id := range ids {
		o := outs[id]
		r := o.r
		obs, _ := r.sm.(ApplyObserver)
		if obs != nil && (len(o.entries) > 0 || o.snap) {
			entries, snap := o.entries, o.snap
			after = append(after, func() { obs.Applied(entries, snap) })
		}
		if f := r.updateLease(obs); f != nil {
			after = append(after, f)
		}
		if n.cfg.OnRemoved != nil && r.applied > 0 && !isMember(r.conf, n.cfg.NodeID) && len(r.conf.GetVoters()) > 0 {
			id := r.TabletID
			after = append(after, func() { n.cfg.OnRemoved(id) })
		}
	}
	// Truncate logs that grew past LogKeep applied entries. The entries
	// stay readable until the commit, and nothing reads them before.
	// A group whose only member is this node's voter keeps no entries
	// for followers, so once its log holds soloLogBytes it is truncated
	// through the applied index: an SST ingested through the log (tens of
	// MiB) is then deleted in the memtable it was written to, so Pebble's
	// flush drops it instead of writing it into L0 for a compaction to
	// rewrite (a cluster of one's index builds and bulk COPYs).
	compactStart := time.Now()
	compact := n.eng.NewWriteOnlyBatch()
	defer compact.Close()
	var release []*LogStore
	for _, id := range ids {
		r := outs[id].r
		if r.applying != nil {
			// Its applied index is behind what a worker is applying.
			continue
		}
		first, _ := r.log.FirstIndex()
		to := uint64(0)
		switch {
		case r.applied >= first+2*n.cfg.LogKeep:
			to = r.applied - n.cfg.LogKeep
		case r.applied >= first && r.log.Bytes() >= soloLogBytes && soleVoter(r.conf, n.cfg.NodeID):
			to = r.applied
		}
		if to > 0 {
			if err := r.log.Compact(compact, to, r.conf); err != nil {
				return true, nil, nil, fmt.Errorf("raftnode: tablet %d: compacting: %w", r.TabletID, err)
			}
			if r.log.HasObsolete() {
				release = append(release, r.log)
			}
		}
	}
	if !compact.Empty() {
		// Synced only when side-loaded files are to go: a file is removed
		// after its record's removal is durable (sideload.go, rule S3).
		commit := compact.CommitNoSync
		if len(release) > 0 {
			commit = compact.Commit
		}
		if err := commit(); err != nil {
			return true, nil, nil, fmt.Errorf("raftnode: compacting logs: %w", err)
		}
		n.noteCommit(compact)
		n.releaseObsolete(release...)
	}
	n.stats.CompactNanos.Add(int64(time.Since(compactStart)))
	return true, after, jobs, nil
}

// passOut is what a round's passes did to one replica: the entries
// applied, in order, and whether a snapshot replaced its state first.
type passOut struct {
	r       *Replica
	entries []*pb.Entry
	snap    bool
}

// pass takes the Ready of each of ids (which must have one, or be gone),
// persists them all with one commit (synced if any must be), sends their
// messages, applies their committed entries and advances them, adding
// to outs. A group whose apply is large is not applied nor advanced
// here: its apply is added to jobs, for a worker (apply.go). synced
// reports that it synced new entries. n.mu is held.
func (n *Node) pass(ids []uint64, outs map[uint64]*passOut, tm *roundTimes, jobs *[]*applyJob) (synced bool, _ error) {
	type ready struct {
		r      *Replica
		rd     raft.Ready
		prevHS *pb.HardState
	}
	var rds []ready
	// Write-only: nothing reads a round's batches (the log and the state
	// machines only write to them), and an indexed batch inserted each
	// write into an index of its own as well as, at its commit, into the
	// memtable.
	persist := n.eng.NewWriteOnlyBatch()
	defer persist.Close()
	apply := n.eng.NewWriteOnlyBatch()
	defer func() { apply.Close() }()
	// streamedIn are the streamed snapshots applied this round, whose
	// senders are answered once persist has committed.
	var streamedIn []*pendingSnap
	for _, id := range ids {
		r := n.replicas[id]
		prevHS := r.log.HardState()
		rd := r.rn.Ready()
		ps := r.pendingSnap
		r.pendingSnap = nil
		if ps != nil && (raft.IsEmptySnap(rd.Snapshot) || rd.Snapshot.GetMetadata().GetIndex() != ps.index) {
			// Raft declined the streamed snapshot (its answer, in this
			// Ready, tells the leader where the log stands).
			_ = n.eng.RemoveFile(ps.path)
			ps.done <- nil
			ps = nil
		}
		if ps != nil {
			if err := n.applyStreamed(r, &rd, prevHS, ps, persist); err != nil {
				ps.done <- err
				return false, fmt.Errorf("raftnode: tablet %d: %w", id, err)
			}
			// Answered once persist has committed (below).
			streamedIn = append(streamedIn, ps)
		} else if !raft.IsEmptySnap(rd.Snapshot) {
			if ss, ok := r.sm.(SnapshotStreamer); ok && ss.IsStreamHeader(rd.Snapshot.GetData()) {
				// Step and ReceiveSnapshot let none through.
				return false, fmt.Errorf("raftnode: tablet %d: %w", id, ErrSnapshotFromStream)
			}
			if err := r.log.ApplySnapshot(persist, rd.Snapshot); err != nil {
				return false, fmt.Errorf("raftnode: tablet %d: %w", id, err)
			}
			if err := r.sm.ApplySnapshot(persist, rd.Snapshot); err != nil {
				return false, fmt.Errorf("raftnode: tablet %d: applying a snapshot: %w", id, err)
			}
		}
		if !raft.IsEmptySnap(rd.Snapshot) {
			n.SnapshotsApplied.Add(1)
			r.applied = rd.Snapshot.GetMetadata().GetIndex()
			r.conf = pb.EnsureConfState(rd.Snapshot.GetMetadata().GetConfState())
			if err := n.putApplied(persist, id, r.applied); err != nil {
				return false, err
			}
		}
		if err := r.log.Append(persist, rd.Entries); err != nil {
			return false, fmt.Errorf("raftnode: tablet %d: %w", id, err)
		}
		if !raft.IsEmptyHardState(rd.HardState) && (!commitOnly(rd.HardState, prevHS) || !raft.IsEmptySnap(rd.Snapshot)) {
			if err := r.log.SetHardState(persist, rd.HardState); err != nil {
				return false, err
			}
		}
		rds = append(rds, ready{r, rd, prevHS})
	}
	mustSync := false
	for _, x := range rds {
		// Only new entries, a new term or vote, or a snapshot must be
		// durable before messages go out; a commit index can be
		// relearned from the leader.
		if raft.MustSync(x.rd.HardState, x.prevHS, len(x.rd.Entries)) || !raft.IsEmptySnap(x.rd.Snapshot) {
			mustSync = true
		}
		if len(x.rd.Entries) > 0 {
			synced = true
		}
	}
	fenced := n.fenced.Load()
	// Invariant 3 (doc.go): what needs no durable state goes out before
	// the sync, so a leader's appends reach its followers while its own
	// log syncs, and the two syncs of a write overlap instead of running
	// one after the other (Raft thesis §10.2.1).
	var early []Envelope
	for _, x := range rds {
		for _, m := range x.rd.Messages {
			if sendsBeforeSync(m) && !(fenced && fencedOut(m)) {
				early = append(early, Envelope{TabletID: x.r.TabletID, Msg: m})
			}
		}
	}
	if len(early) > 0 && n.transport != nil {
		n.transport.Send(early)
	}
	commit := persist.CommitNoSync
	if mustSync {
		commit = persist.Commit
	}
	if tm != nil {
		tm.synced = mustSync
		tm.commit = time.Now()
	}
	if !persist.Empty() {
		if err := commit(); err != nil {
			// Nothing of this round is acknowledged: the engine fails
			// closed (storage.ErrEngineFailed) and raft must not advance.
			for _, ps := range streamedIn {
				ps.done <- err
			}
			return false, fmt.Errorf("raftnode: persisting a round: %w", err)
		}
		n.noteCommit(persist)
	}
	if tm != nil {
		tm.committed = time.Now()
	}
	if mustSync {
		// The side-loaded files of replaced tails and snapshots go now
		// that their records' removal is durable (sideload.go, rule S3).
		for _, x := range rds {
			if x.r.log.HasObsolete() {
				n.releaseObsolete(x.r.log)
			}
		}
	}
	for _, ps := range streamedIn {
		ps.done <- nil
	}
	var out []Envelope
	var snapsTo []struct {
		r  *Replica
		to uint64
	}
	var streams []func(start bool)
	for _, x := range rds {
		for _, m := range x.rd.Messages {
			if (fenced && fencedOut(m)) || sendsBeforeSync(m) {
				continue
			}
			if m.GetType() == pb.MessageType_MsgSnap {
				// Raft asked for the log's truncation point; send the
				// state as of the last applied entry instead, which is
				// newer and is what the image holds.
				stream, err := n.makeSnapshot(x.r, m)
				if err != nil {
					for _, s := range streams {
						s(false)
					}
					return false, fmt.Errorf("raftnode: tablet %d: making a snapshot: %w", x.r.TabletID, err)
				}
				n.SnapshotsSent.Add(1)
				if stream != nil {
					// Too large for a message: streamed, and
					// reported to raft when the stream ends.
					streams = append(streams, stream)
					continue
				}
				snapsTo = append(snapsTo, struct {
					r  *Replica
					to uint64
				}{x.r, m.GetTo()})
			}
			out = append(out, Envelope{TabletID: x.r.TabletID, Msg: m})
		}
	}
	if len(out) > 0 && n.transport != nil {
		n.transport.Send(out)
	}
	for _, s := range snapsTo {
		// The transport took the snapshot; whether it arrives shows in the
		// follower's response, as after any append.
		s.r.rn.ReportSnapshot(s.to, raft.SnapshotFinish)
		n.touchLocked(s.r)
	}
	for _, s := range streams {
		s(true)
	}
	applyStart := time.Now()
	applied := make([][]*pb.Entry, len(rds))
	offloaded := make([]bool, len(rds))
	for i, x := range rds {
		r := x.r
		if ents := n.offload(r, &x.rd); ents != nil {
			// Invariant 5 (doc.go): applied by a worker, and advanced
			// once that apply has committed.
			j := &applyJob{r: r, rd: x.rd, entries: ents, done: make(chan struct{})}
			r.applying = j
			n.applyWG.Add(1)
			*jobs = append(*jobs, j)
			offloaded[i] = true
			continue
		}
		// The applied index goes into the batch once, after the group's
		// last entry (or before a split's commit: applyNormal), not after
		// each: one write per group and batch, atomic with the effects
		// all the same (invariant 2).
		unrecorded := false
		for _, e := range x.rd.CommittedEntries {
			if e.GetIndex() <= r.applied {
				continue
			}
			switch e.GetType() {
			case pb.EntryType_EntryNormal:
				applied[i] = append(applied[i], e)
				if err := n.applyNormal(&apply, r, e, unrecorded); err != nil {
					return false, err
				}
			case pb.EntryType_EntryConfChange:
				var cc pb.ConfChange
				if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
					return false, fmt.Errorf("raftnode: tablet %d: entry %d: %w", r.TabletID, e.GetIndex(), err)
				}
				r.conf = r.rn.ApplyConfChange(&cc)
				if err := r.log.SetConfState(apply, r.conf); err != nil {
					return false, err
				}
			case pb.EntryType_EntryConfChangeV2:
				var cc pb.ConfChangeV2
				if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
					return false, fmt.Errorf("raftnode: tablet %d: entry %d: %w", r.TabletID, e.GetIndex(), err)
				}
				r.conf = r.rn.ApplyConfChange(&cc)
				if err := r.log.SetConfState(apply, r.conf); err != nil {
					return false, err
				}
			}
			r.applied = e.GetIndex()
			unrecorded = true
		}
		if unrecorded {
			if err := n.putApplied(apply, r.TabletID, r.applied); err != nil {
				return false, err
			}
		}
		// The applied entries leave the log's cache (logstore.go, C1).
		r.log.AppliedTo(r.applied)
	}
	if !apply.Empty() {
		// Not synced: the applied index commits atomically with the
		// effects, and a crash that loses both re-applies from the log.
		// (A later synced commit makes it durable too: the WAL is one
		// sequence.)
		if err := apply.CommitNoSync(); err != nil {
			return false, fmt.Errorf("raftnode: applying a round: %w", err)
		}
		n.noteCommit(apply)
	}
	n.stats.ApplyNanos.Add(int64(time.Since(applyStart)))
	// The configurations this pass applied (or took from a snapshot) are
	// committed now: publish them to Config.
	for _, x := range rds {
		if c := pb.EnsureConfState(x.r.conf); x.r.pubConf.Load() != x.r.conf {
			x.r.pubConf.Store(c)
		}
	}
	for i, x := range rds {
		// The read states answer heartbeat rounds, which an apply does
		// not change: taken at once, offloaded or not.
		for _, rs := range x.rd.ReadStates {
			if len(rs.RequestCtx) == 8 {
				sent := int64(binary.BigEndian.Uint64(rs.RequestCtx))
				if until := sent + n.readLease.Load(); until > x.r.readUntil.Load() {
					x.r.readUntil.Store(until)
				}
				if sent > x.r.confirmed.Load() {
					x.r.confirmed.Store(sent)
				}
			}
		}
		o := outs[x.r.TabletID]
		if o == nil {
			o = &passOut{r: x.r}
			outs[x.r.TabletID] = o
		}
		if offloaded[i] {
			continue
		}
		x.r.rn.Advance(x.rd)
		o.entries = append(o.entries, applied[i]...)
		o.snap = o.snap || !raft.IsEmptySnap(x.rd.Snapshot)
	}
	return synced, nil
}

// releaseObsolete removes the files of side-loaded entries the logs let
// go of, after a synced commit. A file that cannot be removed costs disk
// space, not correctness (the log no longer names it, and the next open
// of the log deletes it), so the failure is logged, not returned.
func (n *Node) releaseObsolete(logs ...*LogStore) {
	for _, l := range logs {
		if err := l.ReleaseObsolete(); err != nil {
			n.cfg.Logger.Warningf("raftnode: %v", err)
		}
	}
}

// commitOnly reports whether hs differs from the hard state last written,
// prev, in its commit index alone. Such a hard state is not written
// (invariant 10, doc.go): a round's second pass had one for every group
// it applied, a write and an engine commit of their own each round,
// which no reader needs, since the log's open raises the commit index to
// the applied index (LogStore.RaiseCommit) and raft relearns the rest
// from its leader or, as a sole voter, by committing its new term's
// entry.
func commitOnly(hs, prev *pb.HardState) bool {
	return prev != nil && hs.GetTerm() == prev.GetTerm() && hs.GetVote() == prev.GetVote()
}

// sendsBeforeSync reports whether m may be sent before the state of the
// Ready it came in is durable (invariant 3). Ready.Messages holds, in
// this order, raft's msgs, which depend on nothing unsynced (the messages
// etcd raft sends at once when its storage writes are asynchronous: a
// leader's appends and heartbeats, a candidate's vote requests, forwarded
// proposals), and its msgsAfterAppend: the acknowledgements of appends and
// the votes, which promise that what they answer is durable and so wait
// for the sync. Raft counts the leader's own copy of an entry, and a
// candidate's own vote, only at Advance, after the sync: an entry whose
// leader crashes before its sync commits only if a quorum of followers
// made it durable, and then a new leader has it. A snapshot waits too: it
// is made from the applied state after the round's commit.
func sendsBeforeSync(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgAppResp, pb.MessageType_MsgVoteResp, pb.MessageType_MsgPreVoteResp, pb.MessageType_MsgSnap:
		return false
	}
	return true
}

// updateLease refreshes the replica's leader hint and lease after a
// round (the node's lock is held). Losing the lease takes effect at once;
// gaining it returns the function that tells the observer and then
// publishes the lease, run after the lock is released.
func (r *Replica) updateLease(obs ApplyObserver) func() {
	st := r.rn.BasicStatus()
	v := pb.EnsureConfState(r.conf).GetVoters()
	alone := len(v) == 1 && v[0] == r.node.cfg.NodeID
	r.alone.Store(alone)
	cs := pb.EnsureConfState(r.conf)
	r.solo.Store(alone && len(cs.GetLearners()) == 0 && len(cs.GetVotersOutgoing()) == 0 && len(cs.GetLearnersNext()) == 0)
	if lead := st.Lead; lead != 0 || !alone {
		r.leader.Store(lead)
	} else {
		// A sole voter between its campaign and its election.
		r.leader.Store(r.node.cfg.NodeID)
	}
	if st.RaftState != raft.StateLeader || r.node.fenced.Load() {
		r.lease.Store(0)
		r.readUntil.Store(0)
		r.confirmed.Store(0)
		return nil
	}
	if r.lease.Load() == st.GetTerm() {
		return nil
	}
	if r.transferTerm.Load() == st.GetTerm() {
		// It handed the lease on in this term (transfer.go).
		r.lease.Store(0)
		r.readUntil.Store(0)
		r.confirmed.Store(0)
		return nil
	}
	r.lease.Store(0)
	r.readUntil.Store(0)
	r.confirmed.Store(0)
	if r.applying != nil {
		// A worker applies its entries (invariant 6: LeaseAcquired
		// rebuilds from the engine what that apply writes); the round
		// that advances it takes the lease up.
		return nil
	}
	if t, err := r.log.Term(r.applied); err != nil || t != st.GetTerm() {
		// Entries of earlier terms may still be unapplied.
		return nil
	}
	term := st.GetTerm()
	return func() {
		if obs != nil {
			// A lone voter of a group another node may have led
			// waits out the clock offset like any new leaseholder.
			obs.LeaseAcquired(term, alone && !r.log.Shared())
		}
		if r.node.fenced.Load() {
			// Fenced meanwhile: the next round after the fence lifts
			// takes the lease up again.
			return
		}
		r.lease.Store(term)
	}
}

func (n *Node) appliedKey(tabletID uint64) storage.MVCCKey {
	return storage.MVCCKey{Key: keys.TabletReplicated(tabletID, appliedSuffix)}
}

func (n *Node) readApplied(tabletID uint64) (uint64, error) {
	return readApplied(n.eng, tabletID)
}

// The applied index's format: 8 bytes, big endian, in 1.0; from
// clusterversion.VersionedState a format version byte, then those 8 bytes
// (clusterversion's format.go). A 1.0 binary reads only the first form,
// and may run on this store again until the cluster version rises (a
// rolling upgrade rolled back), so the second is written only from then.
const appliedFormatV1 = 1

func readApplied(eng *storage.Engine, tabletID uint64) (uint64, error) {
	v, ok, err := eng.Get(storage.MVCCKey{Key: keys.TabletReplicated(tabletID, appliedSuffix)})
	if err != nil || !ok {
		return 0, err
	}
	return decodeApplied(tabletID, v)
}

// AppliedFormat returns the format version of tablet's stored applied
// index on eng (0: the 1.0 form); ok false if none is stored.
func AppliedFormat(eng *storage.Engine, tabletID uint64) (v int, ok bool, err error) {
	b, ok, err := eng.Get(storage.MVCCKey{Key: keys.TabletReplicated(tabletID, appliedSuffix)})
	if err != nil || !ok {
		return 0, false, err
	}
	if _, err := decodeApplied(tabletID, b); err != nil {
		return 0, true, err
	}
	v, _, err = clusterversion.SplitFormat("the applied index", b, appliedFormatV1)
	return v, true, err
}

func decodeApplied(tabletID uint64, v []byte) (uint64, error) {
	f, p, err := clusterversion.SplitFormat(fmt.Sprintf("raftnode: tablet %d: the applied index", tabletID), v, appliedFormatV1)
	if err != nil {
		return 0, err
	}
	if len(p) != 8 {
		return 0, fmt.Errorf("raftnode: tablet %d: applied index of %d bytes in format version %d", tabletID, len(v), f)
	}
	return binary.BigEndian.Uint64(p), nil
}

func (n *Node) putApplied(b *storage.Batch, tabletID, index uint64) error {
	return b.Put(n.appliedKey(tabletID), n.encodeApplied(index))
}

func (n *Node) encodeApplied(index uint64) []byte {
	b := make([]byte, 0, 9)
	if n.cfg.Version == nil || n.cfg.Version.IsActive(clusterversion.VersionedState) {
		b = clusterversion.AppendFormat(b, appliedFormatV1)
	}
	return binary.BigEndian.AppendUint64(b, index)
}

// discardLogger drops raft's logs (the node logs what matters itself).
type discardLogger struct{}

func (discardLogger) Debug(...any)                   {}
func (discardLogger) Debugf(string, ...any)          {}
func (discardLogger) Error(...any)                   {}
func (discardLogger) Errorf(string, ...any)          {}
func (discardLogger) Info(...any)                    {}
func (discardLogger) Infof(string, ...any)           {}
func (discardLogger) Warning(...any)                 {}
func (discardLogger) Warningf(string, ...any)        {}
func (discardLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (discardLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (discardLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (discardLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
