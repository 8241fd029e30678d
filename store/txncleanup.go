package store

// Transaction cleanup (issue #14), run by the GC queue over each tablet it
// leads every Config.GCTxnCleanupAge / 2 at most, and not again over a
// tablet where it found no intent and no record until that tablet takes a
// write (every intent and record is written by a batch the tablet counts).
// What it finds on a snapshot of the tablet:
//
//   - an intent whose transaction started more than GCTxnCleanupAge ago:
//     the coordinator is probably gone (killed, partitioned). Unless the
//     transaction's record shows a heartbeat within GCTxnCleanupAge
//     (abandoned), it pushes the transaction (PushAbort, never waiting):
//     the push aborts it if its record expired (no heartbeat for the
//     liveness threshold), or if it can no longer create one (tablet
//     invariant 8), and answers with a final status if it already had
//     one; then the intents are resolved to that status (a committed one
//     with its record's write timestamp and ignored sequence numbers). A
//     live transaction is left alone.
//   - a pending record with no heartbeat for GCTxnCleanupAge: pushed the
//     same way, so that it becomes an aborted record;
//   - a final record older than GCTxnCleanupAge (its EndTxn's resolution
//     of intents elsewhere failed, or the node died before it ran, or a
//     push aborted it): its lock spans are resolved to its status, then the
//     record is deleted by a GC request, which leaves a tombstone.
//
// Resolving intents twice is harmless (mvcc invariant 6), so the cleanup
// needs no coordination with readers that push and resolve the same
// intents.
//
// Why the cleanup waits for GCTxnCleanupAge without a heartbeat, not the
// liveness threshold a contending pusher uses: a pusher has a statement
// waiting on the intent and must decide quickly; the cleanup has nobody
// waiting, and a coordinator that is alive but whose beats did not get
// through for a few seconds (each beat is a raft write to the record's
// tablet; a disk stalled behind a bulk load's batches delayed them by
// over 5 s on a loaded machine) must not lose its transaction to it. A
// COPY running over a minute was aborted that way (40001, "transaction
// aborted", bench/parallelindex's distributed COPY with GIN, 2 of 10 runs
// in one session, 2 of 5 in the next).

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/tablet"
)

const (
	// DefaultGCTxnCleanupAge is Config.GCTxnCleanupAge's default.
	DefaultGCTxnCleanupAge = time.Minute
	// txnCleanupMaxIntents bounds the intents one tablet's cleanup reads.
	txnCleanupMaxIntents = 10000
)

// TxnCleanupStats count the cleanup's work (GCQueueStats).
type TxnCleanupStats struct {
	// IntentsResolved: old intents resolved after a push; RecordsRemoved:
	// final records deleted; Aborted: pushes that found their transaction
	// aborted (or aborted it).
	IntentsResolved, RecordsRemoved, Aborted int64
}

func (s *Store) txnCleanupAge() time.Duration {
	if s.cfg.GCTxnCleanupAge > 0 {
		return s.cfg.GCTxnCleanupAge
	}
	return DefaultGCTxnCleanupAge
}

func (s *Store) cleanupSender() kvpb.Sender {
	if s.cfg.Sender != nil {
		return s.cfg.Sender
	}
	return s
}

// cleanupTxns runs the cleanup over tablet d (see above). clean reports
// that the tablet held no intent and no transaction record at all: until
// it takes a write, a later cleanup would find nothing either.
func (s *Store) cleanupTxns(ctx context.Context, d kvpb.TabletDescriptor) (clean bool, err error) {
	s.gc.stats.txnScans.Add(1)
	now := s.clock.Now()
	cutoff := hlc.Timestamp{WallTime: now.WallTime - s.txnCleanupAge().Nanoseconds()}
	snap := s.eng.NewSnapshot()
	intents, err := mvcc.ScanIntents(snap, d.StartKey, d.EndKey, txnCleanupMaxIntents)
	var pending, final []kvpb.Transaction
	records := 0
	if err == nil {
		err = mvcc.ScanTxnRecords(snap, d.StartKey, d.EndKey, func(rec kvpb.Transaction) (bool, error) {
			records++
			switch {
			case rec.Status.IsFinal() && rec.WriteTimestamp.Forward(rec.LastHeartbeat).Less(cutoff):
				final = append(final, rec)
			case !rec.Status.IsFinal() && abandoned(rec, now, s.txnCleanupAge()):
				pending = append(pending, rec)
			}
			return true, nil
		})
	}
	snap.Close()
	if err != nil {
		return false, err
	}
	if len(intents) == 0 && records == 0 {
		return true, nil
	}
	ir := tablet.NewIntentResolver(s.cleanupSender(), s.LookupTablet, s.clock)

	// Old intents, grouped by transaction.
	byTxn := map[[16]byte][]kvpb.Intent{}
	var order [][16]byte
	for _, in := range intents {
		if !in.Txn.MinTimestamp.Less(cutoff) {
			continue
		}
		if _, ok := byTxn[in.Txn.ID]; !ok {
			order = append(order, in.Txn.ID)
		}
		byTxn[in.Txn.ID] = append(byTxn[in.Txn.ID], in)
	}
	for _, id := range order {
		ins := byTxn[id]
		holder := ins[0].Txn
		if alive, err := s.beatRecently(ctx, holder, now); err != nil {
			return false, err
		} else if alive {
			continue
		}
		pushee, err := s.pushForCleanup(ctx, holder)
		if err != nil {
			return false, err
		}
		if !pushee.Status.IsFinal() {
			continue
		}
		meta := holder
		meta.WriteTimestamp = meta.WriteTimestamp.Forward(pushee.WriteTimestamp)
		if pushee.Epoch > meta.Epoch {
			meta.Epoch = pushee.Epoch
		}
		var ks [][]byte
		for _, in := range ins {
			ks = append(ks, in.Key)
		}
		if err := ir.ResolveIntents(ctx, meta, pushee.Status, ks, pushee.IgnoredSeqNums...); err != nil {
			return false, err
		}
		s.gc.stats.intentsResolved.Add(int64(len(ks)))
	}

	// Expired pending records: abort them (the next cleanup removes them).
	for _, rec := range pending {
		if _, err := s.pushForCleanup(ctx, rec.TxnMeta); err != nil {
			return false, err
		}
	}

	// Old final records: resolve what they name, then delete them.
	for _, rec := range final {
		if len(rec.LockSpans) > 0 {
			if err := ir.ResolveSpans(ctx, rec.TxnMeta, rec.Status, rec.LockSpans, rec.IgnoredSeqNums...); err != nil {
				return false, err
			}
		}
		if err := tablet.GCTxnRecord(ctx, s.cleanupSender(), s.clock, rec.TxnMeta); err != nil {
			return false, err
		}
		s.gc.stats.recordsRemoved.Add(1)
	}
	return false, nil
}

// abandoned reports whether rec, a transaction's record, is pending
// with no heartbeat for age: what the cleanup pushes.
func abandoned(rec kvpb.Transaction, now hlc.Timestamp, age time.Duration) bool {
	return mvcc.IsExpired(rec, now, age)
}

// beatRecently reports whether txn's record, wherever it lives, is
// pending and was heartbeat within the cleanup age: its coordinator is
// alive, however late its last few beats were, and the cleanup leaves it
// alone. A transaction without a record (none written yet, or already
// removed) is for the push to judge.
func (s *Store) beatRecently(ctx context.Context, txn kvpb.TxnMeta, now hlc.Timestamp) (bool, error) {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Now: s.clock.Now()}}
	ba.Add(&kvpb.QueryTxnRequest{Key: txn.Key, Txn: txn})
	br, err := s.cleanupSender().Send(ctx, ba)
	if err != nil {
		return false, err
	}
	q := br.Responses[0].(*kvpb.QueryTxnResponse)
	return q.Found && q.Txn.Status == kvpb.Pending && !abandoned(q.Txn, now, s.txnCleanupAge()), nil
}

// pushForCleanup pushes txn to abort without waiting and returns its
// record as the push left it.
func (s *Store) pushForCleanup(ctx context.Context, txn kvpb.TxnMeta) (kvpb.Transaction, error) {
	ba := &kvpb.BatchRequest{Header: kvpb.Header{Now: s.clock.Now(), WaitPolicy: kvpb.WaitError}}
	ba.Add(&kvpb.PushTxnRequest{Key: txn.Key, Pushee: txn, PushType: kvpb.PushAbort})
	br, err := s.cleanupSender().Send(ctx, ba)
	if err != nil {
		var pe *kvpb.TransactionPushError
		if errors.As(err, &pe) {
			return pe.Pushee, nil // alive
		}
		return kvpb.Transaction{}, err
	}
	p := br.Responses[0].(*kvpb.PushTxnResponse).Pushee
	if p.Status == kvpb.Aborted {
		s.gc.stats.aborted.Add(1)
	}
	return p, nil
}
