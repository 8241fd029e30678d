package tablet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// Closed timestamps and follower reads (docs/architecture.md, "Reference
// tables: global reads"; issue 17). A tablet whose zone asks for global
// reads (a reference table's) is *closed* by its leaseholder at a
// timestamp in the future, C = now + lead, every closeInterval: a
// promise, carried through the raft log to every replica, that no write
// will ever land at or below C. A follower that has applied that promise
// can then serve a read at any timestamp at or below C from its own
// engine, with no round trip to the leaseholder. The promise holds by
// three rules:
//
//  1. Closing takes write latches over the whole tablet (its keys and its
//     transaction records), raises the timestamp cache's low-water mark
//     to C, and only then proposes the closing entry. A write evaluated
//     before held its latches until it applied, so its entry precedes the
//     closing one in the log; a write evaluated after is pushed above C
//     by the timestamp cache (invariant 4). BulkPut, which bypasses the
//     timestamp cache, is refused at or below the closed timestamp.
//  2. Every replica raises its own timestamp cache to C when it applies
//     the closing entry, and C is persisted with it (replicated state,
//     "closed-ts", carried by snapshots and inherited by a split's right
//     side), so a replica that takes the lease later, after a restart
//     too, never lets a write in at or below a promise any replica may
//     have served reads under.
//  3. A write pushed above the physical clock (by a closed timestamp in
//     the future) is not answered before this node's physical clock has
//     passed its timestamp (Send), so the coordinator and every later
//     reader see it in the past: after the answer, a reader anywhere
//     starts with an uncertainty limit at or above it.
//
// A follower serves a transactional Get or Scan when its applied closed
// timestamp is at or above the transaction's read timestamp and global
// uncertainty limit (it cannot use observed timestamps: they bound only
// the leaseholder's own writes), reads the lock keyspace (its lock table
// is not what the leaseholder's is), records nothing in the timestamp
// cache, and sends the request on (NotLeaseholderError) when it meets an
// intent or the promise does not arrive within followerReadWait.

// closedTSKey is where a tablet's closed timestamp is persisted, in its
// replicated state.
func closedTSKey(id kvpb.TabletID) []byte {
	return keys.TabletReplicated(uint64(id), "closed-ts")
}

// loadClosedTS reads tablet id's persisted closed timestamp (zero: never
// closed).
func loadClosedTS(r storage.Reader, id kvpb.TabletID) (hlc.Timestamp, error) {
	v, ok, err := r.Get(storage.MVCCKey{Key: closedTSKey(id)})
	if err != nil || !ok {
		return hlc.Timestamp{}, err
	}
	return decodeStateTS(fmt.Sprintf("tablet %d: the closed timestamp", id), v)
}

// ClosedTimestamp returns the highest closed timestamp this replica has
// applied (zero: the tablet was never closed).
func (r *Replica) ClosedTimestamp() hlc.Timestamp {
	r.closed.mu.Lock()
	defer r.closed.mu.Unlock()
	return r.closed.ts
}

// closedProposed is the highest of the closed timestamps this replica
// applied or proposed: what a split's right side must inherit, since a
// closing proposed before the split may apply after the split's
// evaluation and before its entry.
func (r *Replica) closedProposed() hlc.Timestamp {
	r.closed.mu.Lock()
	defer r.closed.mu.Unlock()
	return r.closed.ts.Forward(r.closed.proposed)
}

// advanceClosed records an applied closed timestamp and wakes the
// follower reads waiting for it.
func (r *Replica) advanceClosed(ts hlc.Timestamp) {
	r.advanceClosedFrom(ts, false)
}

// advanceClosedFrom is advanceClosed, noting whether ts came from the
// side transport (trailing).
func (r *Replica) advanceClosedFrom(ts hlc.Timestamp, trailing bool) {
	r.closed.mu.Lock()
	defer r.closed.mu.Unlock()
	if !r.closed.ts.Less(ts) {
		return
	}
	r.closed.ts, r.closed.trailing = ts, trailing
	if r.closed.advanced != nil {
		close(r.closed.advanced)
		r.closed.advanced = nil
	}
}

// closedAtLeast waits until the applied closed timestamp is at or above
// ts, for at most wait, and reports whether it is.
func (r *Replica) closedAtLeast(ctx context.Context, ts hlc.Timestamp, wait time.Duration) bool {
	var deadline <-chan time.Time
	for {
		r.closed.mu.Lock()
		if ts.LessEq(r.closed.ts) {
			r.closed.mu.Unlock()
			return true
		}
		if r.closed.advanced == nil {
			r.closed.advanced = make(chan struct{})
		}
		ch := r.closed.advanced
		r.closed.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// ErrNotClosable: CloseTimestamp on a replica that is not replicated.
var ErrNotClosable = errors.New("tablet: only a replicated tablet's leaseholder closes timestamps")

// HoldsLease reports whether this replica holds its group's lease now.
func (r *Replica) HoldsLease() bool {
	if r.raft.group == nil {
		return false
	}
	term, _ := r.raft.group.Lease()
	return term != 0
}

// CloseTimestamp closes the tablet at its clock's physical time plus lead
// (rule 1 of the file comment) and returns that timestamp once the
// closing entry is proposed; it is in force on a replica once applied
// there. Only the leaseholder closes; another replica answers
// NotLeaseholderError. Closes of one replica must not run concurrently
// (the store's closer calls it from one goroutine).
func (r *Replica) CloseTimestamp(ctx context.Context, lead time.Duration) (hlc.Timestamp, error) {
	if r.raft.group == nil {
		return hlc.Timestamp{}, ErrNotClosable
	}
	if err := r.refuseIfFollower(); err != nil {
		return hlc.Timestamp{}, err
	}
	desc := r.Desc()
	recLo, recHi := keys.TxnRecordSpan(desc.StartKey, desc.EndKey)
	g, err := r.latches.acquire(ctx, []latchSpan{
		{span: kvpb.Span{Key: desc.StartKey, EndKey: desc.EndKey}, write: true},
		{span: kvpb.Span{Key: recLo, EndKey: recHi}, write: true},
	})
	if err != nil {
		return hlc.Timestamp{}, err
	}
	defer r.latches.release(g)
	if cur := r.Desc(); cur.Generation != desc.Generation {
		return hlc.Timestamp{}, fmt.Errorf("tablet %d: split while closing: %w", desc.TabletID, keyMismatch(desc.StartKey, cur))
	}
	term, done, err := r.leaseTerm(ctx)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	defer done()
	c := hlc.Timestamp{WallTime: r.clock.PhysicalNow() + int64(lead)}.Forward(r.ClosedTimestamp())
	// Before the entry exists: from here on no write evaluates at or
	// below c on this leaseholder.
	r.tscache.raiseLowWater(c)
	r.closed.mu.Lock()
	r.closed.proposed = r.closed.proposed.Forward(c)
	r.closed.mu.Unlock()
	b := r.eng.NewWriteOnlyBatch()
	defer b.Close()
	if err := b.Put(storage.MVCCKey{Key: closedTSKey(desc.TabletID)}, encodeStateTS(c, r.versionedState())); err != nil {
		return hlc.Timestamp{}, fmt.Errorf("tablet %d: closing at %s: %w", desc.TabletID, c, err)
	}
	p := &Proposal{Repr: append([]byte(nil), b.Repr()...), ClosedTS: c}
	// Proposed without waiting for it to apply: every write that could
	// land at or below c is already before it in the log (rule 1), and
	// the latches need not be held for a round of consensus. A proposal
	// that never commits closes nothing; the next one will.
	data := encodeCommand(0, r.raft.group.NodeID(), term, p)
	if err := r.raft.group.Propose(nil, term, data); err != nil {
		_, leader := r.raft.group.Lease()
		return hlc.Timestamp{}, fmt.Errorf("tablet %d: proposing closed timestamp %s: %v: %w", desc.TabletID, c, err, r.notLeaseholder(leader))
	}
	r.metrics.TimestampsClosed.Add(1)
	return c, nil
}

// followerReadWait bounds how long a follower waits for the closed
// timestamp a read needs before sending the read on to the leaseholder.
// The closer runs every closeInterval and closes lead ahead, so a healthy
// follower needs no wait at all; this covers a closer delayed by load.
const followerReadWait = 2 * time.Second

// followerReadable reports whether ba may be served by a follower: the
// plain reads (Get, Scan; locking reads are LockRequests, refreshes are
// left to the leaseholder) of a transaction that has written nothing
// (no anchor key): its own intents may be above the closed timestamp and
// not yet applied here, and it must read them.
func followerReadable(ba *kvpb.BatchRequest) bool {
	if ba.Txn == nil || len(ba.Txn.Key) != 0 || len(ba.Requests) == 0 {
		return false
	}
	for _, req := range ba.Requests {
		switch req.(type) {
		case *kvpb.GetRequest, *kvpb.ScanRequest:
		default:
			return false
		}
	}
	return true
}

// followerRead serves ba on this follower if it can (served true), under
// the rules of the file comment; served false means the caller refuses
// it as it would any request to a follower.
func (r *Replica) followerRead(ctx context.Context, ba *kvpb.BatchRequest) (br *kvpb.BatchResponse, served bool, err error) {
	if !followerReadable(ba) || r.ClosedTimestamp().IsEmpty() {
		return nil, false, nil
	}
	if err := r.validate(ba); err != nil {
		return nil, true, err
	}
	need := ba.Txn.ReadTimestamp.Forward(ba.Txn.GlobalUncertaintyLimit)
	wait := followerReadWait
	if !r.ClosedLeads() {
		// A trailing closed timestamp moves with the clock, TrailingTarget
		// behind it: a read above it is the leaseholder's at once.
		wait = 0
	}
	if !r.closedAtLeast(ctx, need, wait) {
		r.metrics.FollowerReadsRefused.Add(1)
		return nil, false, nil
	}
	st := &sendState{exec: *ba}
	r.stampObservation(&st.exec)
	// The global uncertainty limit (localLimit zero): an observation of
	// this node's clock bounds what this node wrote as leaseholder, not
	// what the leaseholder elsewhere wrote.
	_, br, err = r.evaluate(&st.exec, r.Desc(), evalOptions{follower: true}, &st.out)
	// The Proposal of these reads is dropped: nothing holds it.
	st.out.recycle()
	if err != nil {
		var wie *kvpb.WriteIntentError
		if errors.As(err, &wie) {
			// An intent is the leaseholder's to wait on and push.
			r.metrics.FollowerReadsRefused.Add(1)
			return nil, false, nil
		}
		return nil, true, err
	}
	r.metrics.FollowerReads.Add(1)
	br.Now = r.clock.Now()
	return br, true, nil
}

// waitPhysical holds an answer that reveals ts (a batch that wrote at
// ts, or a WriteTooOldError naming a version at ts) until this node's
// physical clock has passed ts (rule 3 of the file comment): its receiver
// moves its clock and its transaction up to ts, and refuses neither once
// ts is in the past. Only a write pushed by a closed timestamp lands that
// far ahead; any other is at most the hybrid clock, which commitWait
// covers. wrote: the batch applied, so giving up is ambiguous.
func (r *Replica) waitPhysical(ctx context.Context, ts hlc.Timestamp, wrote bool) error {
	if ts.IsEmpty() {
		// Nothing written (a read): nothing to wait for, and no reading
		// of the clock, which a point read paid for.
		return nil
	}
	d := time.Duration(ts.WallTime - r.clock.PhysicalNow())
	if d <= 0 {
		return nil
	}
	r.metrics.FutureWriteWaits.Add(1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		err := fmt.Errorf("tablet %d: waiting for the clock to pass a write at %s: %w", r.Desc().TabletID, ts, ctx.Err())
		if wrote {
			return &kvpb.AmbiguousResultError{Cause: err}
		}
		return err
	case <-t.C:
		return nil
	}
}

// Trailing closed timestamps (docs/architecture.md, "AS OF SYSTEM TIME",
// its follower reads; issue 22). Every other tablet is closed by its
// leaseholder at C = physical clock − TrailingTarget, with no raft entry:
// CloseTrailing raises the timestamp cache as CloseTimestamp does (rule
// 1), waits (without blocking anyone) until every write latched before
// the raise is released, then reads the replica's applied index I, and
// the store sends (tablet, C, I) to the other nodes in one message per
// node (the side transport). A follower that has applied entry I holds
// every write at or below C (each was latched before the raise and
// applied on the leaseholder before I was read, at an index at most I),
// and no later write
// lands at or below C on this leaseholder. The promise outlives the
// lease without being persisted (rule 2 is not needed): a new
// leaseholder's lease starts at its clock plus the maximum offset
// (LeaseAcquired), above any C = some node's physical clock − 3 s, since
// the clocks are within the maximum offset of each other (500 ms); a
// restarted leaseholder's timestamp cache starts at its clock (New); a
// split's right side inherits the leaseholder's timestamp cache. A
// follower keeps a side C in memory only (a restart forgets it until the
// next message).

// TrailingTarget is how far behind its physical clock a leaseholder
// closes its ordinary tablets (CockroachDB's default target duration).
const TrailingTarget = 3 * time.Second

// noteApplied records that entries up to index are applied (engine
// batch committed), and takes up a side-transport closing waiting for it.
func (r *Replica) noteApplied(index uint64) {
	r.closed.mu.Lock()
	if index > r.closed.applied {
		r.closed.applied = index
	}
	var adopt hlc.Timestamp
	if p := r.closed.pending; !p.ts.IsEmpty() && p.index <= r.closed.applied {
		adopt = p.ts
		r.closed.pending = sideClosed{}
	}
	r.closed.mu.Unlock()
	if !adopt.IsEmpty() {
		r.advanceClosedFrom(adopt, true)
	}
}

// sideClosed is a closing received through the side transport, waiting
// for its applied index.
type sideClosed struct {
	ts    hlc.Timestamp
	index uint64
}

// CloseTrailing closes the tablet at the physical clock − target without
// a raft entry, and returns C and the applied index a follower must reach
// to use it (see above); a zero C means nothing to send this round. Only
// the leaseholder closes.
//
// It never waits and never makes a write wait. A first call raises the
// timestamp cache to C and notes the latch manager's last sequence number
// S: a write latched after that evaluates after the raise and lands above
// C (latches are acquired before evaluation, which consults the cache).
// The writes latched at or before S may still be below C and not yet
// applied; C is returned by the first call (this one or a later round's)
// that finds none of them still registered, with the applied index then,
// which covers every one of them (a write holds its latches until it is
// applied or failed). Waiting for those latches instead, as
// CloseTimestamp does, would queue every new write of a busy tablet
// behind the closer for a raft round, once per closing.
func (r *Replica) CloseTrailing(ctx context.Context, target time.Duration) (hlc.Timestamp, uint64, error) {
	if r.raft.group == nil {
		return hlc.Timestamp{}, 0, ErrNotClosable
	}
	if err := r.refuseIfFollower(); err != nil {
		return hlc.Timestamp{}, 0, err
	}
	term, done, err := r.leaseTermNow()
	if err != nil {
		return hlc.Timestamp{}, 0, err
	}
	defer done()
	r.trailing.mu.Lock()
	defer r.trailing.mu.Unlock()
	p := r.trailing.pending
	if p.term != term {
		// A closing noted under an earlier lease term is dropped: the
		// lease may have been elsewhere in between.
		p = trailingClosing{}
	}
	// The closing noted last round is returned if its writes are done;
	// a new one is noted (and returned instead, being newer, if nothing
	// was in flight at its raise), so a busy tablet's C advances every
	// round, one round behind.
	var res trailingClosing
	if !p.c.IsEmpty() && !r.latches.registeredAtOrBelow(p.seq) {
		res, p = p, trailingClosing{}
	}
	if p.c.IsEmpty() {
		if c := (hlc.Timestamp{WallTime: r.clock.PhysicalNow() - int64(target)}); r.ClosedTimestamp().Less(c) {
			r.tscache.raiseLowWater(c)
			p = trailingClosing{c: c, seq: r.latches.lastSeq(), term: term}
			if !r.latches.registeredAtOrBelow(p.seq) {
				res, p = p, trailingClosing{}
			}
		}
	}
	r.trailing.pending = p
	if res.c.IsEmpty() || res.c.LessEq(r.ClosedTimestamp()) {
		// Nothing new, or a leading closing (a global-reads tablet) or
		// a later one holds.
		return hlc.Timestamp{}, 0, nil
	}
	// Not into closed.proposed: a split's right side takes the left's
	// timestamp cache, which holds c, and a BulkPut below c is not
	// refused (see "BulkPut" in docs/architecture.md, "AS OF SYSTEM
	// TIME").
	r.closed.mu.Lock()
	index := r.closed.applied
	r.closed.mu.Unlock()
	r.metrics.TimestampsClosed.Add(1)
	return res.c, index, nil
}

// ErrLeaseNotNow: CloseTrailing found no lease it could close under
// without waiting; the closer tries again next round.
var ErrLeaseNotNow = errors.New("tablet: no lease to close under without waiting")

// leaseTermNow is leaseTerm without its waits: the lease of the term
// returned holds now (a read lease, started, not draining), else
// ErrLeaseNotNow. The closer visits every tablet it leads in turn each
// round; leaseTerm would make it wait, for a tablet whose read lease has
// lapsed (a heartbeat round late under load), for a quorum round
// (ReadConfirmed) or up to its interval, tablet after tablet. At 2,000
// tablets on 3 loaded nodes that made a round of a node's 667 tablets
// last 100–300 ms of wall time, so tablets were closed less often than
// every 200 ms interval (bench/README.md, "the closer at 2,000 tablets").
// Skipping such a tablet for one round only delays its closing.
func (r *Replica) leaseTermNow() (uint64, func(), error) {
	term, ok := r.raft.group.ReadLease()
	if !ok || !r.enterLease(term) {
		return 0, nil, ErrLeaseNotNow
	}
	// A done context: startUnder returns at once, with an error if the
	// lease starts in the future (after a transfer).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	term, done, err := r.startUnder(ctx, term)
	if err != nil {
		return 0, nil, ErrLeaseNotNow
	}
	return term, done, nil
}

// trailingClosing is a closing CloseTrailing has raised the timestamp
// cache for and not yet returned: C, the last latch sequence number at
// the raise, and the lease term it was raised under.
type trailingClosing struct {
	c    hlc.Timestamp
	seq  uint64
	term uint64
}

// SideClosed takes a closing from the side transport: C, in force once
// this replica has applied entry index. The leaseholder ignores it (it
// closes its own).
func (r *Replica) SideClosed(c hlc.Timestamp, index uint64) {
	if r.HoldsLease() {
		return
	}
	r.closed.mu.Lock()
	if index > r.closed.applied {
		if r.closed.pending.ts.Less(c) {
			r.closed.pending = sideClosed{ts: c, index: index}
		}
		r.closed.mu.Unlock()
		return
	}
	r.closed.mu.Unlock()
	r.advanceClosedFrom(c, true)
}

// ClosedLeads reports whether the replica's closed timestamp comes from
// closing entries (a global-reads tablet's, closed ahead of the clock,
// which serves present-time reads) rather than from the side transport
// (trailing the clock, for historical reads only).
func (r *Replica) ClosedLeads() bool {
	r.closed.mu.Lock()
	defer r.closed.mu.Unlock()
	return !r.closed.ts.IsEmpty() && !r.closed.trailing
}
