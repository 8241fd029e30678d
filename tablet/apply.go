package tablet

import (
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// Proposal is the result of evaluating a write batch: the engine batch to
// commit plus the in-memory effects that committing it implies. It is a
// plain value (no pointers into the replica, no closures) so that a Raft
// log can carry it between Evaluate and Apply (invariant 5).
type Proposal struct {
	// Repr is the storage batch (storage.Batch.Repr); empty for a batch
	// that writes nothing.
	Repr []byte `wire:"1"`
	// LocksAcquired are the intents the batch wrote.
	LocksAcquired []kvpb.Intent `wire:"2"`
	// LocksReleased are the intents the batch resolved.
	LocksReleased []LockRelease `wire:"3"`
	// LocksUpdated are intents that stay but moved (resolved as pending at
	// a pushed timestamp); their waiters re-evaluate.
	LocksUpdated []LockRelease `wire:"4"`
	// TxnUpdates are transaction records the batch finalised or changed,
	// whose waiters must re-check them.
	TxnUpdates []TxnUpdate `wire:"5"`
	// OnePhaseCommit is set when the batch committed a transaction in one
	// phase.
	OnePhaseCommit bool `wire:"6"`
	// GCThreshold, when set, raises the tablet's GC threshold.
	GCThreshold hlc.Timestamp `wire:"7"`
	// Split, when set, splits the tablet (see split.go).
	Split *SplitTrigger `wire:"8"`
	// ResolveAsync lists intents outside this tablet that a finished
	// transaction left; the leaseholder resolves them after applying.
	ResolveAsync []AsyncResolve `wire:"9"`
	// TxnTombstones are the transactions whose final records the batch
	// deleted (or never wrote). Every replica remembers them at their
	// write timestamps, so whichever holds the lease next still refuses
	// to create a record for them again (invariant 8, txntombstone.go).
	// They travel in the log for that: a leaseholder-only set would make
	// a new lease forget them all, and the low-water mark standing in for
	// them would abort every transaction that started before the lease
	// changed and had not written its record yet.
	TxnTombstones []kvpb.Transaction `wire:"10"`
	// ClosedTS, when set, closes the tablet at that timestamp: no write
	// will land at or below it (closedts.go). The batch persists it.
	ClosedTS hlc.Timestamp `wire:"11"`
	// SST, when set, is an SST of committed versions (AddSSTable) that
	// every replica ingests into its engine before committing Repr: it
	// goes through neither the WAL nor a memtable. It travels in the
	// entry (at most maxSSTSize), which each replica's raft log keeps in
	// a file beside it (SideloadedRange).
	SST []byte `wire:"12"`

	// Unreplicated lock effects, applied by the leaseholder that evaluated
	// the batch once it committed (applyUnreplicated), never encoded into
	// the log: acquired locks, released keys, and the transaction whose
	// EndTxn ran here (all its unreplicated locks on the tablet go).
	unreplAcquired []kvpb.Intent `wire:"-"`
	unreplReleased []LockRelease `wire:"-"`
	unreplEnded    uuid.UUID     `wire:"-"`
	// wroteAt is the highest timestamp the batch wrote a user key at,
	// for the leaseholder's answer (closedts.go, rule 3); not encoded.
	wroteAt hlc.Timestamp `wire:"-"`
}

// LockRelease names txn's intents in Span.
type LockRelease struct {
	Span kvpb.Span `wire:"1"`
	Txn  uuid.UUID `wire:"2"`
}

// TxnUpdate says a transaction record changed, and if it was aborted, why.
type TxnUpdate struct {
	ID          uuid.UUID        `wire:"1"`
	Status      kvpb.TxnStatus   `wire:"2"`
	AbortReason kvpb.AbortReason `wire:"3"`
	// Key anchors the transaction's record (kvpb.TxnMeta.Key): a split
	// hands the right side only the abort reasons of records it holds
	// (abortReasons.splitOff). Empty in proposals from before it was
	// recorded: such a reason stays with the left side.
	Key []byte `wire:"4"`
}

// AsyncResolve asks for Txn's intents in Spans to be resolved to Status.
// IgnoredSeqNums are the transaction's rolled back sequence numbers, whose
// values a commit discards.
type AsyncResolve struct {
	Txn            kvpb.TxnMeta    `wire:"1"`
	Status         kvpb.TxnStatus  `wire:"2"`
	Spans          []kvpb.Span     `wire:"3"`
	IgnoredSeqNums []kvpb.SeqRange `wire:"4"`
}

// SplitTrigger carries the two descriptors a split produces.
type SplitTrigger struct {
	Left  kvpb.TabletDescriptor `wire:"1"`
	Right kvpb.TabletDescriptor `wire:"2"`
}

// Apply commits p's batch (synced) and then applies its in-memory effects.
// The caller holds the latches p was evaluated under. A split trigger is
// applied by Split, not here.
func (r *Replica) Apply(p *Proposal) error {
	r.valid.writing(p.Repr, len(p.SST) > 0)
	if len(p.SST) > 0 {
		if err := r.applySST(p.SST, ""); err != nil {
			return err
		}
	}
	if len(p.Repr) > 0 {
		if err := r.eng.ApplyBatchRepr(p.Repr); err != nil {
			return fmt.Errorf("tablet: apply proposal to %s: %w", r.descPtr(), err)
		}
	}
	r.applyEffects(p, true)
	return nil
}

// applyEffects performs p's in-memory effects once its batch has
// committed. Every replica of a raft group keeps its lock table, abort
// reasons and GC threshold current this way; only the leaseholder that
// evaluated p (leaseholder) resolves the intents it lists elsewhere.
func (r *Replica) applyEffects(p *Proposal, leaseholder bool) {
	r.valid.written(p.Repr, len(p.SST) > 0)
	for _, in := range p.LocksAcquired {
		r.locks.acquire(in.Key, in.Txn)
	}
	r.locks.releaseAll(p.LocksReleased)
	for _, u := range p.LocksUpdated {
		r.locks.wakeRange(u.Span.Key, spanEnd(u.Span), u.Txn)
	}
	r.metrics.IntentsWritten.Add(int64(len(p.LocksAcquired)))
	if p.OnePhaseCommit {
		r.metrics.OnePhaseCommits.Add(1)
	}
	if len(p.TxnUpdates) > 0 {
		r.mu.Lock()
		for _, u := range p.TxnUpdates {
			if u.Status == kvpb.Aborted {
				if len(r.mu.abortReasons) >= maxAbortReasons {
					clear(r.mu.abortReasons)
				}
				r.mu.abortReasons[u.ID] = abortReason{reason: u.AbortReason, anchor: u.Key}
			}
		}
		r.mu.Unlock()
		for _, u := range p.TxnUpdates {
			r.txnWait.notify(u.ID)
		}
	}
	if !p.GCThreshold.IsEmpty() {
		r.mu.Lock()
		r.setGCThresholdLocked(r.mu.gcThreshold.Forward(p.GCThreshold))
		desc := r.mu.desc
		r.mu.Unlock()
		// No write may land at or below the threshold either.
		r.tscache.add(kvpb.Span{Key: desc.StartKey, EndKey: desc.EndKey}, p.GCThreshold, uuid.Nil)
	}
	for _, t := range p.TxnTombstones {
		r.tombs.add(t.TxnMeta, t.Status)
	}
	if !p.ClosedTS.IsEmpty() {
		// Every replica, so that whichever takes the lease next keeps the
		// promise (closedts.go, rule 2); the leaseholder raised its own
		// before proposing.
		r.tscache.raiseLowWater(p.ClosedTS)
		r.advanceClosed(p.ClosedTS)
	}
	if leaseholder {
		for _, a := range p.ResolveAsync {
			r.resolveAsync(a)
		}
	}
}

func (r *Replica) descPtr() *kvpb.TabletDescriptor {
	d := r.Desc()
	return &d
}
