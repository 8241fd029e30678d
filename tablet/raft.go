package tablet

// A replica replicated by raft (DESIGN §7; issue #4). The seam is between
// evaluate and apply: the leaseholder evaluates a batch into a Proposal as
// before, proposes the encoded Proposal to the tablet's raft group, and
// answers once its own replica has applied the committed entry. Every
// replica applies the same entries: the batch goes into the raft node's
// apply batch (with the applied index, so a restart neither loses nor
// repeats one), and the in-memory effects follow once that batch commits.
//
// Leader = leaseholder. Only the replica that leads the group, and has
// applied every entry of earlier terms, evaluates; others answer
// *kvpb.NotLeaseholderError with their leader hint. A proposal carries the
// term it was evaluated under, and is applied only if raft committed it at
// that same term: an entry appended by a deposed leader, or by the same
// node in a later term, was evaluated against a state that may since have
// changed, so every replica skips it and its proposer retries. Together
// with "a new leader evaluates nothing before it has applied its
// predecessors' entries" (raftnode's lease), this means the log's applied
// sequence is exactly a serial evaluation order.
//
// A proposer learns its proposal's fate on its own replica: applied (the
// answer), skipped for a term mismatch, or superseded (an entry of a later
// term was applied first, so raft can no longer commit it at its term).
// The last two are NotLeaseholderErrors (nothing was written; retrying is
// safe). A proposer whose context ends first gets an AmbiguousResultError:
// the entry may still commit; so does one whose replica lost the lease
// and then learned nothing for unknownAfter (cut off from the group: it
// cannot tell). A planned lease transfer drains the replica first
// (DrainLease), so none of its proposals is left waiting that way.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Raft is the replica's handle on its raft group (the store adapts a
// raftnode replica to it). The tablet never sees raft itself.
type Raft interface {
	// Lease returns the term under which this replica holds the lease (0:
	// it does not) and the node it believes leads the group (0: unknown).
	Lease() (term, leader uint64)
	// ReadLease returns the lease's term and whether the replica may
	// answer without a round of consensus right now (raftnode's read
	// lease: a quorum heard from it within the lease duration).
	ReadLease() (term uint64, ok bool)
	// ReadMark and ReadConfirmed are raft's ReadIndex, for when the read
	// lease runs out because heartbeat rounds take longer than it (an
	// overloaded node): ReadConfirmed(mark) reports the lease's term and
	// whether a quorum acknowledged a heartbeat round of it sent at or
	// after mark (ReadMark, taken when a request arrived), which lets the
	// replica answer that request.
	ReadMark() int64
	ReadConfirmed(mark int64) (term uint64, ok bool)
	// Propose appends data to the group's log if this replica still holds
	// the lease of term; an error means nothing was proposed. It gives up
	// with an error when done closes while it waits to propose (a nil
	// done never closes).
	Propose(done <-chan struct{}, term uint64, data []byte) error
	// NodeID is the node this replica lives on.
	NodeID() uint64
}

// HandingRaft is a Raft that can take a proposal without its proposer
// waiting to learn that it was proposed (raftnode.Node.ProposeHanded):
// a nil Withdrawer and err are Propose's answer; a non-nil Withdrawer
// means the proposal was handed to the raft scheduler, which proposes it
// later or, if it can not, calls refuse.Refuse with why (nothing
// proposed), once, on a goroutine that must not be blocked. The proposer
// waits for its outcome (the apply, or the refusal) on one channel,
// instead of being woken once for the proposal and again for the apply.
type HandingRaft interface {
	ProposeHanded(done <-chan struct{}, term uint64, data []byte, refuse Refuser) (Withdrawer, error)
}

// Refuser receives a handed-over proposal's refusal (HandingRaft).
type Refuser interface{ Refuse(err error) }

// Withdrawer takes a handed-over proposal back: true means it was not,
// and will not be, proposed, and it is not refused either.
type Withdrawer interface{ Withdraw() bool }

// raftState is a replica's side of replication.
type raftState struct {
	// group is set once, before the replica serves (SetRaft).
	group Raft

	mu sync.Mutex
	// next numbers this replica's proposals; it starts at a random value
	// so that a proposal of an earlier incarnation of the replica, applied
	// again after a restart, does not match a waiting one.
	next    uint64
	pending map[uint64]*pendingProposal

	// applied is filled by Apply and drained by Applied, both on the raft
	// scheduler's goroutine.
	applied []appliedCommand

	// snapDesc and snapRights are set by ApplySnapshot and taken up by
	// Applied, both on the raft scheduler's goroutine: the snapshot's
	// descriptor and the tablets it showed this node had missed.
	snapDesc   *kvpb.TabletDescriptor
	snapRights []kvpb.TabletDescriptor

	// leaseTerm and leaseStart are the last lease taken up (under mu).
	leaseTerm  uint64
	leaseStart hlc.Timestamp

	// draining is the term of a lease being drained for a transfer (0:
	// none; DrainLease), read without a lock on every request; active
	// counts the requests between passing the lease check and their
	// answer (leaseTerm to its done), which a drain waits for. A request
	// counts itself first and then checks draining, a drain sets draining
	// first and then reads active: one of the two always sees the other.
	draining atomic.Uint64
	active   atomic.Int64
	// leave counts a request out of active: the done that startUnder
	// returns, made once (newReplica) rather than as a closure per
	// request, which allocated on every read.
	leave func()
	// rounds counts the rounds in which this replica applied something
	// (Applied): a proposer whose replica lost the lease tells a replica
	// that still learns the log's fate from one cut off by it.
	rounds atomic.Uint64
}

type pendingProposal struct {
	term uint64
	done chan error
	// r and id, for Refuse: the proposal's replica and number.
	r  *Replica
	id uint64
}

// Refuse answers a handed-over proposal the raft scheduler could not
// make (HandingRaft): nothing was proposed. It runs on the scheduler's
// (or its stall watcher's) goroutine under the node's locks, so it only
// takes the replica's raft mutex and sends on the proposal's buffered
// channel. Whoever deletes the proposal from pending answers it (here,
// Applied's superseded proposals, or a waiter that gave up): one answer
// at most, so the send never blocks.
func (pp *pendingProposal) Refuse(err error) {
	rs := &pp.r.raft
	rs.mu.Lock()
	_, ok := rs.pending[pp.id]
	if ok {
		delete(rs.pending, pp.id)
	}
	rs.mu.Unlock()
	if !ok {
		return
	}
	_, leader := rs.group.Lease()
	pp.done <- fmt.Errorf("tablet %d: proposing: %v: %w", pp.r.Desc().TabletID, err, pp.r.notLeaseholder(leader))
}

type appliedCommand struct {
	id       uint64
	node     uint64
	term     uint64
	prop     *Proposal // nil: skipped (evaluated under another term)
	rejected bool
}

// SetRaft makes the replica serve through g: from now on it evaluates only
// while it holds the lease and proposes every write to g. It must be called
// before the replica receives its first request.
func (r *Replica) SetRaft(g Raft) {
	r.raft.group = g
	r.raft.next = rand.Uint64() >> 1
	r.raft.pending = make(map[uint64]*pendingProposal)
}

// leaseTerm returns the term under which the replica may evaluate, or a
// NotLeaseholderError. A replica without raft always may (term 0). Every
// batch needs the read lease, not only reads: whatever is answered without
// a raft round (a read, a failed condition) must come from a leaseholder
// that no other replica can have replaced. On success the caller calls
// done once it has its answer (its proposal applied, or failed): a lease
// transfer's drain waits for that.
func (r *Replica) leaseTerm(ctx context.Context) (term uint64, done func(), err error) {
	g := r.raft.group
	if g == nil {
		return 0, func() {}, nil
	}
	term, ok := g.ReadLease()
	if ok && r.enterLease(term) {
		return r.startUnder(ctx, term)
	}
	mark := g.ReadMark()
	if _, leader := g.Lease(); term == 0 && leader != g.NodeID() {
		return 0, nil, r.notLeaseholder(leader)
	}
	// This replica was just elected and is applying its predecessors'
	// entries, or leads but has not yet heard from a quorum since: the
	// lease follows in moments, and sending the request elsewhere would
	// only bring it back here. Or it is draining its lease for a
	// transfer: the request waits for the transfer to start (then it
	// follows the lease, once the leader hint names the new holder) or
	// to be called off. Or it leads with a lease whose heartbeat rounds
	// take longer than the read lease lasts, so that the read lease never
	// holds: a round sent after the request arrived and acknowledged by a
	// quorum lets it answer (ReadConfirmed) instead of sending the
	// request away from the only replica that can answer it.
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(leaseWait)
	for {
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-t.C:
		}
		if term, ok = g.ReadLease(); ok && r.enterLease(term) {
			return r.startUnder(ctx, term)
		}
		if term, ok = g.ReadConfirmed(mark); ok && r.enterLease(term) {
			return r.startUnder(ctx, term)
		}
		_, leader := g.Lease()
		if term == 0 && leader != g.NodeID() {
			return 0, nil, r.notLeaseholder(leader)
		}
		if time.Now().After(deadline) {
			// Cut off from a quorum: let the router look elsewhere.
			return 0, nil, r.notLeaseholder(0)
		}
	}
}

// enterLease counts a request in under the lease of term unless that
// lease is being drained.
func (r *Replica) enterLease(term uint64) bool {
	rs := &r.raft
	rs.active.Add(1)
	if rs.draining.Load() == term {
		rs.active.Add(-1)
		return false
	}
	return true
}

// startUnder waits out the start of the lease of term for a request
// counted in by enterLease, and returns what leaseTerm does.
func (r *Replica) startUnder(ctx context.Context, term uint64) (uint64, func(), error) {
	done := r.raft.leave
	if err := r.waitLeaseStart(ctx, term); err != nil {
		done()
		return 0, nil, err
	}
	return term, done, nil
}

// refuseIfFollower answers NotLeaseholderError at the door when the
// replica holds no lease and does not lead (leaseTerm would refuse it
// too, later): before validate, so that a follower whose clock is far
// behind the sender's (a fenced node, clockmon) sends the router on
// instead of failing the batch with a clock-offset error.
func (r *Replica) refuseIfFollower() error {
	g := r.raft.group
	if g == nil {
		return nil
	}
	if term, leader := g.Lease(); term == 0 && leader != g.NodeID() {
		return r.notLeaseholder(leader)
	}
	return nil
}

// leaseStartOf is the start of the lease of term, or zero when the
// replica has no such lease start recorded (a lease it never had to wait
// for).
func (r *Replica) leaseStartOf(term uint64) hlc.Timestamp {
	r.raft.mu.Lock()
	defer r.raft.mu.Unlock()
	if r.raft.leaseTerm != term {
		return hlc.Timestamp{}
	}
	return r.raft.leaseStart
}

// waitLeaseStart waits until the clock has passed the start of the
// lease of term (at most the maximum clock offset, once per lease).
func (r *Replica) waitLeaseStart(ctx context.Context, term uint64) error {
	r.raft.mu.Lock()
	start := r.raft.leaseStart
	if r.raft.leaseTerm != term {
		start = hlc.Timestamp{}
	}
	r.raft.mu.Unlock()
	if start.IsEmpty() {
		// No start recorded for the lease (one no other node can have
		// held: LeaseAcquired): nothing to wait out, and no reading of
		// the physical clock, which every request paid here.
		return nil
	}
	for {
		wait := time.Duration(start.WallTime - r.clock.PhysicalNow())
		if wait <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// leaseWait bounds how long a request waits for its replica, just elected,
// to take up the lease.
const leaseWait = 2 * time.Second

func (r *Replica) notLeaseholder(leader uint64) error {
	return &kvpb.NotLeaseholderError{TabletID: r.Desc().TabletID, Replica: r.raft.group.NodeID(), Leader: leader}
}

// localOnly reports whether p changes nothing replicated: no batch, no
// SST, no split, no GC threshold, no transaction tombstone. Such a proposal (a
// read that found intents to resolve, a push answered from memory) needs
// no consensus. A tombstone must reach every replica, so that the next
// leaseholder refuses the record too.
func localOnly(p *Proposal) bool {
	return len(p.Repr) == 0 && len(p.SST) == 0 && p.Split == nil && p.GCThreshold.IsEmpty() && len(p.TxnTombstones) == 0
}

// commit makes p happen: directly (a replica without raft, or a proposal
// with nothing to replicate) or through the log, waiting for this replica
// to apply it. term is the lease term p was evaluated under.
func (r *Replica) commit(ctx context.Context, term uint64, p *Proposal) error {
	return r.commitOr(ctx, term, p, nil)
}

// commitOr is commit for a caller that holds latches (executeOnce): when
// ctx ends with the proposal still in flight, it answers at once that the
// outcome is unknown, and hands abandon a channel closed once the
// proposal's fate is known (applied, refused, or the lease lost for
// unknownAfter); the caller keeps its latches until then. Releasing them
// earlier let a conflicting request evaluate against a state without the
// abandoned write and then propose after it, overwriting it from a stale
// read: issue 13's lost transfer debit (test/chaos, a client's COMMIT cut
// off by its gateway's death). A nil abandon behaves as commit always did.
func (r *Replica) commitOr(ctx context.Context, term uint64, p *Proposal, abandon func(settled <-chan struct{})) error {
	if r.raft.group == nil {
		return r.Apply(p)
	}
	if localOnly(p) {
		r.applyEffects(p, true)
		return nil
	}
	rs := &r.raft
	pp := &pendingProposal{term: term, done: make(chan error, 1), r: r}
	rs.mu.Lock()
	rs.next++
	id := rs.next
	pp.id = id
	rs.pending[id] = pp
	rs.mu.Unlock()
	data := encodeCommand(id, rs.group.NodeID(), term, p)
	proposed := time.Now()
	done := ctx.Done()
	var handed Withdrawer
	var err error
	if hg, ok := rs.group.(HandingRaft); ok {
		handed, err = hg.ProposeHanded(done, term, data, pp)
	} else {
		err = rs.group.Propose(done, term, data)
	}
	if err != nil {
		rs.mu.Lock()
		delete(rs.pending, id)
		rs.mu.Unlock()
		if cerr := ctx.Err(); cerr != nil {
			// Nothing was proposed, so the outcome is known: not
			// ambiguous, and no reason to look for another leaseholder.
			return fmt.Errorf("tablet %d: gave up waiting to propose: %w", r.Desc().TabletID, cerr)
		}
		_, leader := rs.group.Lease()
		return fmt.Errorf("tablet %d: proposing: %v: %w", r.Desc().TabletID, err, r.notLeaseholder(leader))
	}
	err = r.waitProposal(done, term, id, pp, handed)
	if errors.Is(err, errNotProposed) {
		// Withdrawn before the scheduler took it: as a Propose that gave
		// up, the outcome is known.
		return fmt.Errorf("tablet %d: gave up waiting to propose: %w", r.Desc().TabletID, ctx.Err())
	}
	if err == nil && r.cfg.Observe != nil && r.cfg.Observe.RaftCommit != nil {
		r.cfg.Observe.RaftCommit(time.Since(proposed))
	}
	if !errors.Is(err, errCallerGone) {
		return err
	}
	amb := &kvpb.AmbiguousResultError{Cause: fmt.Errorf("tablet %d: waiting for a proposal to apply: %w", r.Desc().TabletID, ctx.Err())}
	if abandon == nil {
		r.forgetProposal(id)
		return amb
	}
	settled := make(chan struct{})
	abandon(settled)
	go func() {
		defer close(settled)
		_ = r.waitProposal(nil, term, id, pp, nil)
	}()
	return amb
}

// errCallerGone: waitProposal's caller's context ended first.
var errCallerGone = errors.New("tablet: the proposer gave up")

// errNotProposed: waitProposal's caller's context ended first, and the
// handed-over proposal was withdrawn before the scheduler took it.
var errNotProposed = errors.New("tablet: the proposer gave up before the proposal was made")

// forgetProposal drops a proposal no one waits for any more.
func (r *Replica) forgetProposal(id uint64) {
	r.raft.mu.Lock()
	delete(r.raft.pending, id)
	r.raft.mu.Unlock()
}

// waitProposal waits for proposal id's outcome: its answer once applied
// (or refused), an AmbiguousResultError once the lease is lost and
// nothing applies for unknownAfter, or errCallerGone (the proposal left
// pending) when gone is closed first, or errNotProposed (forgotten) when
// it is and handed, a proposal handed to the raft scheduler
// (HandingRaft), could be withdrawn.
//
// A replica that lost its lease learns its proposals' fate once it
// applies their entries or an entry of a later term; cut off from the
// group it never does, so after unknownAfter without the lease and
// without applying anything the answer is that the outcome is unknown. A
// replica that goes on applying (a follower now, catching up under a new
// leader) is still learning, however long it takes: answering ambiguous
// then would report as unknown what it is about to know.
func (r *Replica) waitProposal(gone <-chan struct{}, term, id uint64, pp *pendingProposal, handed Withdrawer) error {
	rs := &r.raft
	check := leaseCheckers.Get().(*time.Ticker)
	check.Reset(leaseCheck)
	defer func() {
		// Stopped, its channel yields no stale tick to the next waiter
		// (Go 1.23's timers).
		check.Stop()
		leaseCheckers.Put(check)
	}()
	var lostAt time.Time
	var seen uint64
	for {
		select {
		case err := <-pp.done:
			return err
		case <-gone:
			select {
			case err := <-pp.done:
				return err
			default:
			}
			if handed != nil && handed.Withdraw() {
				r.forgetProposal(id)
				return errNotProposed
			}
			return errCallerGone
		case now := <-check.C:
			if t, _ := rs.group.Lease(); t == term {
				lostAt = time.Time{}
				continue
			}
			if n := rs.rounds.Load(); lostAt.IsZero() || n != seen {
				lostAt, seen = now, n
			}
			if now.Sub(lostAt) < unknownAfter {
				continue
			}
		}
		r.forgetProposal(id)
		select {
		case err := <-pp.done:
			// Answered in the meantime.
			return err
		default:
		}
		// The entry may still commit and apply: the caller cannot know.
		return &kvpb.AmbiguousResultError{Cause: fmt.Errorf("tablet %d: waiting for a proposal to apply: lease of term %d lost with the proposal in flight, and nothing applied for %s", r.Desc().TabletID, term, unknownAfter)}
	}
}

// unknownAfter is how long a proposer whose replica lost the lease waits
// while the replica applies nothing before it answers that the outcome
// is unknown. It was leaseWait (2 s); but an election can take longer
// than that on a loaded machine (cairn start's election timeout is 0.5–1
// s, and a split vote or a failed pre-vote starts another), and until a
// leader commits, every replica, the proposer's included, learns nothing:
// 2 s answered ambiguous for writes the next leader would settle moments
// later. A replica cut off for good still answers within this bound.
const unknownAfter = 5 * time.Second

// leaseCheck is how often a waiting proposer checks that its replica still
// holds the lease.
const leaseCheck = 50 * time.Millisecond

// leaseCheckers are stopped tickers for waitProposal: a proposal is
// answered long before its first check, and a ticker made per proposal
// was three objects for every write.
var leaseCheckers = sync.Pool{New: func() any {
	t := time.NewTicker(leaseCheck)
	t.Stop()
	return t
}}

// commandVersion starts a raft command: the proposal's identity, then its
// encoding (EncodeProposal).
const commandVersion = 1

func encodeCommand(id, node, term uint64, p *Proposal) []byte {
	b := make([]byte, 0, 32+len(p.Repr)+len(p.SST))
	b = append(b, commandVersion)
	b = binary.AppendUvarint(b, id)
	b = binary.AppendUvarint(b, node)
	b = binary.AppendUvarint(b, term)
	return EncodeProposal(b, p)
}

func decodeCommand(b []byte) (id, node, term uint64, p *Proposal, err error) {
	switch {
	case len(b) > 0 && b[0] > commandVersion:
		// A newer binary's header: refused by name, never read as this
		// one's (stateformat.go).
		return 0, 0, 0, nil, futureFormat("the raft command", int(b[0]), commandVersion)
	case len(b) == 0 || b[0] != commandVersion:
		return 0, 0, 0, nil, fmt.Errorf("%w: bad command header", ErrBadProposal)
	}
	b = b[1:]
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, 0, 0, nil, fmt.Errorf("%w: bad command header", ErrBadProposal)
		}
		vals[i], b = v, b[n:]
	}
	p, err = DecodeProposal(b)
	return vals[0], vals[1], vals[2], p, err
}

// RaftStateMachine is what the raft node applies the replica's committed
// entries to (raftnode.StateMachine and raftnode.ApplyObserver).
type RaftStateMachine struct{ r *Replica }

// StateMachine returns the replica's raft state machine.
func (r *Replica) StateMachine() *RaftStateMachine { return &RaftStateMachine{r: r} }

// Apply adds a committed entry's batch to b. An entry committed at a term
// other than the one its proposal was evaluated under is skipped on every
// replica alike (see the file comment).
//
// An entry with an SST (AddSSTable) ingests it here, before b commits:
// the raft node commits the batch of the entries before it first
// (NeedsEmptyBatch), so the ingestion lands above all of them and below
// all that follow, as if it were a batch of its own. A crash between the
// ingest and b's commit (which records the entry as applied) applies the
// entry again on restart, which ingests the same versions again
// (applySST).
func (m *RaftStateMachine) Apply(b *storage.Batch, e *pb.Entry) error {
	return m.apply(b, e, "")
}

// ApplySideloaded is Apply for an entry whose SST the raft log keeps in
// file (raftnode.Sideloader): the SST is ingested from file by a hard
// link (storage.Engine.IngestFile), so its bytes are not written again.
func (m *RaftStateMachine) ApplySideloaded(b *storage.Batch, e *pb.Entry, file string) error {
	return m.apply(b, e, file)
}

// SideloadedRange implements raftnode.Sideloader: an AddSSTable entry's
// SST (the proposal's field 12, the bytes themselves without their tag
// and length) is kept in a file beside the raft log. Only the command
// header and the proposal's field tags are read, not the SST.
func (m *RaftStateMachine) SideloadedRange(data []byte) (start, end int, ok bool) {
	return sstRange(data)
}

// apply applies e, ingesting its SST from sstFile when set.
func (m *RaftStateMachine) apply(b *storage.Batch, e *pb.Entry, sstFile string) error {
	r := m.r
	id, node, term, p, err := decodeCommand(e.GetData())
	if err != nil {
		return fmt.Errorf("tablet %d: entry %d: %w", r.Desc().TabletID, e.GetIndex(), err)
	}
	c := appliedCommand{id: id, node: node, term: term}
	if term != e.GetTerm() {
		c.rejected = true
	} else {
		// Before b commits: no validation may pass on what the entry
		// overwrites (validcache.go); applyEffects repeats it after.
		r.valid.writing(p.Repr, len(p.SST) > 0)
		if len(p.SST) > 0 {
			if !b.Empty() {
				return fmt.Errorf("tablet %d: entry %d ingests an SST but the apply batch holds earlier entries' writes", r.Desc().TabletID, e.GetIndex())
			}
			if err := r.applySST(p.SST, sstFile); err != nil {
				return fmt.Errorf("tablet %d: entry %d: %w", r.Desc().TabletID, e.GetIndex(), err)
			}
		}
		if len(p.Repr) > 0 {
			if err := b.ApplyRepr(p.Repr); err != nil {
				return fmt.Errorf("tablet %d: entry %d: %w", r.Desc().TabletID, e.GetIndex(), err)
			}
		}
		c.prop = p
	}
	r.raft.applied = append(r.raft.applied, c)
	return nil
}

// NeedsEmptyBatch reports whether entry e ingests an SST, which must not
// be applied with earlier entries' writes still in the apply batch
// (raftnode.BatchSplitter). Only the command header and the proposal's
// version byte are read.
func (m *RaftStateMachine) NeedsEmptyBatch(e *pb.Entry) bool {
	return commandIngests(e.GetData())
}

// commandIngests reports whether an encoded command carries an SST: its
// proposal is of version proposalVersionSST, which only a proposal with
// one is.
func commandIngests(b []byte) bool {
	return proposalStart(b) >= 0
}

// proposalStart returns where an encoded command's proposal starts when
// it is of version proposalVersionSST, else -1.
func proposalStart(b []byte) int {
	if len(b) == 0 || b[0] != commandVersion {
		return -1
	}
	off := 1
	for range 3 {
		_, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return -1
		}
		off += n
	}
	if off < len(b) && b[off] == proposalVersionSST {
		return off
	}
	return -1
}

// sstRange returns where the SST's bytes lie in an encoded command that
// carries one: the value of the proposal's field 12 (the wire codec is
// protobuf's wire format), found by stepping over the other fields'
// tags and lengths.
func sstRange(b []byte) (start, end int, ok bool) {
	off := proposalStart(b)
	if off < 0 || len(b) < off+5 {
		return 0, 0, false
	}
	off += 5 // the version byte and the frame's length
	for off < len(b) {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return 0, 0, false
		}
		off += n
		if num == sstFieldNumber && typ == protowire.BytesType {
			l, n := protowire.ConsumeVarint(b[off:])
			if n < 0 || l > uint64(len(b)-off-n) {
				return 0, 0, false
			}
			return off + n, off + n + int(l), true
		}
		n = protowire.ConsumeFieldValue(num, typ, b[off:])
		if n < 0 {
			return 0, 0, false
		}
		off += n
	}
	return 0, 0, false
}

// sstFieldNumber is Proposal.SST's wire number.
const sstFieldNumber = 12

// Applied performs the in-memory effects of the entries whose batches just
// committed, answers their proposers, and fails the proposals that can no
// longer commit at their term.
func (m *RaftStateMachine) Applied(entries []*pb.Entry, snapshot bool) {
	r := m.r
	rs := &r.raft
	if snapshot {
		r.adoptSnapshotDesc()
		r.rebuildFromEngine()
	}
	cmds := rs.applied
	rs.applied = nil
	rs.rounds.Add(1)
	if n := len(entries); n > 0 {
		// Before any proposer is answered: the leaseholder's applied index
		// covers every write whose latches it released (closedts.go).
		r.noteApplied(entries[n-1].GetIndex())
	}
	self := rs.group.NodeID()
	for _, c := range cmds {
		var pp *pendingProposal
		if c.node == self {
			rs.mu.Lock()
			pp = rs.pending[c.id]
			if pp != nil && pp.term == c.term {
				delete(rs.pending, c.id)
			} else {
				pp = nil
			}
			rs.mu.Unlock()
		}
		if c.rejected {
			if pp != nil {
				_, leader := rs.group.Lease()
				pp.done <- fmt.Errorf("tablet %d: proposal evaluated at term %d not committed at it: %w", r.Desc().TabletID, c.term, r.notLeaseholder(leader))
			}
			continue
		}
		r.applyEffects(c.prop, pp != nil)
		if c.prop.Split != nil {
			var register func(*Replica)
			if r.cfg.OnSplit != nil {
				register = func(right *Replica) { r.cfg.OnSplit(r, right) }
			}
			r.applySplit(c.prop.Split, register)
		}
		if pp != nil {
			pp.done <- nil
		}
	}
	var maxTerm uint64
	for _, e := range entries {
		maxTerm = max(maxTerm, e.GetTerm())
	}
	// Terms never decrease along the log: once an entry of term T is
	// applied, no entry of an earlier term can commit after it, so
	// proposals evaluated under an earlier term and still waiting were
	// dropped with their leader's uncommitted log.
	rs.mu.Lock()
	var superseded []*pendingProposal
	for id, pp := range rs.pending {
		if pp.term < maxTerm {
			superseded = append(superseded, pp)
			delete(rs.pending, id)
		}
	}
	rs.mu.Unlock()
	for _, pp := range superseded {
		_, leader := rs.group.Lease()
		pp.done <- fmt.Errorf("tablet %d: proposal of term %d superseded by term %d: %w", r.Desc().TabletID, pp.term, maxTerm, r.notLeaseholder(leader))
	}
}

// DrainLease prepares a planned transfer of the lease of term
// (raftnode.LeaseDrainer): from now on requests wait at the door
// (leaseTerm), and it waits, until ctx ends, for every request already
// past it to be answered (its proposal applied, or refused). Then, with
// the lock table still, it replicates the unreplicated locks (the new
// leaseholder builds its table from storage), so a transfer does not
// free the rows that buffered writers locked. It reports whether all of
// that was done; either way EndDrain must follow. Nothing is refused for
// the drain: a request waits for it or is waited for.
func (m *RaftStateMachine) DrainLease(ctx context.Context, term uint64) bool {
	rs := &m.r.raft
	rs.draining.Store(term)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		if rs.active.Load() == 0 && !m.r.pendingUnder(term) {
			return m.r.replicateLocksForTransfer(ctx, term) == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// replicateLocksForTransfer proposes, under the drained lease of term, a
// lock record for every unreplicated lock of the tablet.
func (r *Replica) replicateLocksForTransfer(ctx context.Context, term uint64) error {
	desc := r.Desc()
	b := r.eng.NewWriteOnlyBatch()
	defer b.Close()
	moved, err := r.replicateUnreplicated(b, desc.StartKey, desc.EndKey)
	if err != nil || len(moved) == 0 {
		return err
	}
	return r.commit(ctx, term, &Proposal{Repr: append([]byte(nil), b.Repr()...), LocksAcquired: moved})
}

// pendingUnder reports whether a proposal made under term still waits.
func (r *Replica) pendingUnder(term uint64) bool {
	rs := &r.raft
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, pp := range rs.pending {
		if pp.term == term {
			return true
		}
	}
	return false
}

// EndDrain ends DrainLease's hold on term: requests waiting at the door
// go on, under the lease if the transfer was called off, otherwise to the
// new holder once the leader hint names it.
func (m *RaftStateMachine) EndDrain(term uint64) {
	m.r.raft.draining.CompareAndSwap(term, 0)
}

// adoptSnapshotDesc makes the replica's descriptor the one of the
// snapshot just applied. Tablets the snapshot showed were split off go to
// Config.OnSplitBySnapshot first, so that, as for a split applied from the
// log, some replica claims every key throughout.
func (r *Replica) adoptSnapshotDesc() {
	rs := &r.raft
	desc, rights := rs.snapDesc, rs.snapRights
	rs.snapDesc, rs.snapRights = nil, nil
	if desc == nil {
		return
	}
	if len(rights) > 0 && r.cfg.OnSplitBySnapshot != nil {
		r.cfg.OnSplitBySnapshot(r, rights)
	}
	r.mu.Lock()
	r.setDescLocked(*desc)
	r.mu.Unlock()
}

// LeaseAcquired prepares the replica to serve as leaseholder of term: its
// lock table is rebuilt from the engine (a follower's may be out of date
// after a snapshot), and no write may land at or below a timestamp the
// previous leaseholder could have served a read at: that is bounded by
// this node's clock plus the maximum offset, the new lease's start.
//
// When other nodes may have held the lease, its start is this node's clock
// plus the maximum offset, and the replica serves nothing until its own
// clock has passed that start (leaseTerm waits), so it never writes at a
// timestamp its clock has not reached.
func (m *RaftStateMachine) LeaseAcquired(term uint64, alone bool) {
	r := m.r
	r.rebuildFromEngine()
	// Whatever timestamp a replica may have served follower reads under
	// (closedts.go, rule 2): this replica applied every closing entry that
	// committed before its lease.
	r.tscache.raiseLowWater(r.ClosedTimestamp())
	if alone {
		// No other node ever led the group, and this node's own reads
		// before a restart are below the low-water mark New set from the
		// clock, which never goes backwards.
		return
	}
	start := horizon(r.clock)
	r.tscache.raiseLowWater(start)
	// The transaction tombstones need no such raise: every replica applied
	// the deletions of earlier terms before its lease began (the lease
	// waits for an entry of its own term), so it knows them all.
	r.raft.mu.Lock()
	r.raft.leaseTerm, r.raft.leaseStart = term, start
	r.raft.mu.Unlock()
}

// rebuildFromEngine reloads the lock table and GC threshold from the
// engine, waking every waiter so it re-evaluates against the new view.
func (r *Replica) rebuildFromEngine() {
	r.valid.reset()
	// A snapshot, or the entries of another node's lease, may have
	// brought records no mark of this replica's names.
	r.recMarks.raiseLowWater(r.clock)
	desc := r.Desc()
	intents, err := mvcc.ScanIntents(r.eng, desc.StartKey, desc.EndKey, 0)
	if err == nil {
		r.locks.reset(intents)
	}
	if th, err := loadGCThreshold(r.eng, desc.TabletID); err == nil {
		r.mu.Lock()
		r.setGCThresholdLocked(r.mu.gcThreshold.Forward(th))
		r.mu.Unlock()
	}
	if c, err := loadClosedTS(r.eng, desc.TabletID); err == nil && !c.IsEmpty() {
		// A snapshot may carry a closing this replica never applied.
		r.tscache.raiseLowWater(c)
		r.advanceClosed(c)
	}
	r.txnWait.notifyAll()
}

// reset makes the table hold exactly intents, waking every waiter.
func (t *lockTable) reset(intents []kvpb.Intent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.locks {
		l.wake()
	}
	clear(t.locks)
	for _, in := range intents {
		t.acquireLocked(in.Key, in.Txn)
	}
}

// raiseLowWater makes every span's maximum read timestamp at least ts.
func (c *tsCache) raiseLowWater(ts hlc.Timestamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lowWater = c.lowWater.Forward(ts)
}

// A snapshot carries its tablet's descriptor as of the snapshot's index,
// because a replica may learn of a split only through it: one stopped
// before the split whose group's log was then truncated past the split
// entry. Such a replica still claims the pre-split span. Decision (the
// way CockroachDB handles it): the receiver narrows itself to the
// snapshot's span and replaces only the replicated spans of that
// descriptor, leaving the keys it held outside them alone. Those belong
// to the right side, whose replica on this node is opened with no raft
// state (not bootstrapped: its engine holds pre-split data, not the state
// the right group started from), so the right group's leader, which has
// this node among its voters, sends it a snapshot of its own that
// replaces them. The right side's descriptor comes from the left's split
// records (splitRecordKey, replicated state the snapshot carries); a
// right side that split again while this node was away is found the same
// way when its own snapshot arrives. The same snapshot batch marks each
// such tablet as awaiting a snapshot (AwaitsSnapshot), so a restart before
// that snapshot arrives does not bootstrap it with the configured peers
// either. The alternative, refusing a snapshot whose span differs until
// the split is applied from the log, cannot work once the log is
// truncated.
//
// Encoding: snapshotVersion, uvarint(len) descriptor, then every engine
// key of the descriptor's replicated spans and its value, each
// uvarint(len)-prefixed.
const snapshotVersion = 1

// awaitSnapshotKey marks a tablet this node learned of through another
// tablet's snapshot: its replica must wait for its own group's snapshot.
// Node-local, never replicated, never removed (tablet IDs are not
// reused, and a replica with raft state ignores it).
func awaitSnapshotKey(id kvpb.TabletID) storage.MVCCKey {
	return storage.MVCCKey{Key: keys.TabletLocal(uint64(id), "snapw")}
}

// AwaitsSnapshot reports whether this node learned of tablet id only
// through a snapshot of another tablet (see the comment on
// snapshotVersion): its replica must be opened with no raft state rather
// than bootstrapped with the configured peers.
func AwaitsSnapshot(r storage.Reader, id kvpb.TabletID) (bool, error) {
	_, ok, err := r.Get(awaitSnapshotKey(id))
	if err != nil {
		return false, fmt.Errorf("tablet %d: reading its snapshot marker: %w", id, err)
	}
	return ok, nil
}

// Snapshot is the replica's replicated state as of its last applied
// entry: its descriptor and every engine key of its replicated spans. The
// descriptor is read from the same engine snapshot as the data (the
// directory entry of the tablet holding its start key, which a split
// keeps) as well as from memory, where a split already committed may not
// yet have narrowed it. This inline form travels inside the raft
// message; an image too large for one goes in the streamed form
// (SnapshotStream, snapshot_stream.go).
func (m *RaftStateMachine) Snapshot() ([]byte, error) {
	data, _, err := m.snapshotInline(0)
	return data, err
}

// snapshotDesc is the descriptor a snapshot read from snap carries: the
// later of the directory's and the in-memory one. Memory lags a split
// whose batch has committed, and the directory, which other tablets'
// snapshots also write (ApplySnapshot), may lag memory. A replica
// outside a store's directory (tests) has only memory's.
func (r *Replica) snapshotDesc(snap *storage.Snapshot) (kvpb.TabletDescriptor, error) {
	desc := r.Desc()
	if d, found, err := LookupDirectory(snap, desc.StartKey, false); err != nil {
		return desc, fmt.Errorf("tablet %d: snapshot: %w", desc.TabletID, err)
	} else if found && d.TabletID == desc.TabletID && d.Generation > desc.Generation {
		desc = d
	}
	return desc, nil
}

// snapshotInline is Snapshot's image, or ok false once it exceeds limit
// bytes (limit 0: no limit).
func (m *RaftStateMachine) snapshotInline(limit int) (data []byte, ok bool, err error) {
	r := m.r
	snap := r.eng.NewSnapshot()
	defer snap.Close()
	desc, err := r.snapshotDesc(snap)
	if err != nil {
		return nil, false, err
	}
	enc := EncodeDescriptor(nil, desc)
	out := []byte{snapshotVersion}
	out = binary.AppendUvarint(out, uint64(len(enc)))
	out = append(out, enc...)
	for _, sp := range ReplicatedSpans(desc) {
		it, err := snap.NewIter(storage.IterOptions{LowerBound: sp.Key, UpperBound: sp.EndKey})
		if err != nil {
			return nil, false, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.UnsafeValue()
			if err != nil {
				it.Close()
				return nil, false, err
			}
			k := it.UnsafeKey().Encode(nil)
			out = binary.AppendUvarint(out, uint64(len(k)))
			out = append(out, k...)
			out = binary.AppendUvarint(out, uint64(len(v)))
			out = append(out, v...)
			if limit > 0 && len(out) > limit {
				it.Close()
				return nil, false, nil
			}
		}
		err = it.Err()
		it.Close()
		if err != nil {
			return nil, false, err
		}
	}
	return out, true, nil
}

// ApplySnapshot replaces, in b, the replicated state of the snapshot's
// descriptor with the snapshot's (for the streamed form the image was
// ingested before: applyStreamedHeader writes the rest); keys outside those spans are left
// alone (see snapshotVersion). The replica takes the descriptor up in
// Applied, once b has committed; the tablets the snapshot's split records
// place in the part of the old span the new one lost are marked as
// awaiting their own snapshot in b and handed to Config.OnSplitBySnapshot
// there.
func (m *RaftStateMachine) ApplySnapshot(b *storage.Batch, snap *pb.Snapshot) error {
	// Emptied again by Applied's rebuildFromEngine once b committed.
	m.r.valid.reset()
	if m.IsStreamHeader(snap.GetData()) {
		return m.applyStreamedHeader(b, snap)
	}
	r := m.r
	old := r.Desc()
	d := snap.GetData()
	if len(d) == 0 || d[0] != snapshotVersion {
		return fmt.Errorf("tablet %d: corrupt snapshot: unknown version", old.TabletID)
	}
	sr := &snapReader{d: d[1:], tablet: old.TabletID, what: "snapshot"}
	next := sr.next
	desc, err := sr.descriptor()
	if err != nil {
		return err
	}
	// First pass: decode, and find the tablets split off desc in the part
	// of the old span it lost.
	type kv struct {
		key storage.MVCCKey
		val []byte
	}
	var kvs []kv
	splits := keys.TabletReplicated(uint64(desc.TabletID), splitRecordSuffix)
	var rights []kvpb.TabletDescriptor
	for sr.more() {
		k, err := next()
		if err != nil {
			return err
		}
		v, err := next()
		if err != nil {
			return err
		}
		key, err := storage.DecodeMVCCKey(k)
		if err != nil {
			return fmt.Errorf("tablet %d: snapshot key: %w", old.TabletID, err)
		}
		kvs = append(kvs, kv{key, v})
		if bytes.HasPrefix(key.Key, splits) {
			e, err := DecodeDescriptor(v)
			if err != nil {
				return fmt.Errorf("tablet %d: snapshot's split record %q: %w", old.TabletID, key.Key, err)
			}
			if lostSpan(old, desc, e) {
				rights = append(rights, e)
			}
		}
	}
	// The directory entries of desc and of the tablets split off it: the
	// directory lies in the span of whichever tablet holds it, but a split
	// writes its entries through the splitting tablet's log, so a replica
	// that missed the split would otherwise keep its pre-split entry
	// (and a store reopened with it would not find its tablets tiling
	// the keyspace). This node cannot hold newer entries in the lost
	// span: it applied none of its splits. Written before the clears: if
	// the directory is in desc's own span, the snapshot's copy of it,
	// newer still, replaces them.
	for _, e := range append([]kvpb.TabletDescriptor{desc}, rights...) {
		if err := WriteDescriptor(b, e); err != nil {
			return err
		}
	}
	for _, e := range rights {
		if err := b.Put(awaitSnapshotKey(e.TabletID), nil); err != nil {
			return err
		}
	}
	for _, sp := range ReplicatedSpans(desc) {
		if err := b.ClearRange(sp.Key, sp.EndKey); err != nil {
			return err
		}
	}
	for _, x := range kvs {
		if err := b.Put(x.key, x.val); err != nil {
			return err
		}
	}
	r.raft.snapDesc, r.raft.snapRights = &desc, rights
	return nil
}

// lostSpan reports whether e is another tablet within the part of old's
// span that cur no longer covers.
func lostSpan(old, cur, e kvpb.TabletDescriptor) bool {
	if e.TabletID == cur.TabletID {
		return false
	}
	inOld := bytes.Compare(old.StartKey, e.StartKey) <= 0 && bytes.Compare(e.EndKey, old.EndKey) <= 0
	outCur := bytes.Compare(e.EndKey, cur.StartKey) <= 0 || bytes.Compare(cur.EndKey, e.StartKey) <= 0
	return inOld && outCur
}

// snapReader reads the length-prefixed fields of a snapshot (inline) or
// of a streamed snapshot's header, which both begin with the tablet's
// descriptor.
type snapReader struct {
	d      []byte
	tablet kvpb.TabletID
	what   string
}

func (s *snapReader) more() bool { return len(s.d) > 0 }

func (s *snapReader) next() ([]byte, error) {
	n, k := binary.Uvarint(s.d)
	if k <= 0 || n > uint64(len(s.d)-k) {
		return nil, fmt.Errorf("tablet %d: corrupt %s: length", s.tablet, s.what)
	}
	v := s.d[k : k+int(n)]
	s.d = s.d[k+int(n):]
	return v, nil
}

// descriptor reads the descriptor field, which must be the reader's
// tablet's.
func (s *snapReader) descriptor() (kvpb.TabletDescriptor, error) {
	enc, err := s.next()
	if err != nil {
		return kvpb.TabletDescriptor{}, err
	}
	desc, err := DecodeDescriptor(enc)
	if err != nil {
		return kvpb.TabletDescriptor{}, fmt.Errorf("tablet %d: %s descriptor: %w", s.tablet, s.what, err)
	}
	if desc.TabletID != s.tablet {
		return kvpb.TabletDescriptor{}, fmt.Errorf("tablet %d: a snapshot of tablet %d", s.tablet, desc.TabletID)
	}
	return desc, nil
}
