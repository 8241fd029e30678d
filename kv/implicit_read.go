package kv

import (
	"context"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// The implicit read (issue 22). A statement outside BEGIN whose whole KV
// work is one batch of plain reads (a point SELECT by primary key) is a
// transaction of that one batch: it reads at one timestamp and commits
// nothing. Built as a Txn it pays for a coordinator it never uses: the
// Txn and its registration with the GC protection (protected.go), a
// transaction ID, its proto cloned into the batch and again by the
// tablet, uncertainty and observed timestamps, read spans kept for a
// refresh that never comes, the commit. RunImplicitRead sends the batch
// without a transaction and without a timestamp, so the tablet's
// leaseholder reads it at its own clock (DistSender.Send explains why
// that reading sees every write acknowledged before the batch was sent:
// no uncertainty interval is needed), which is the read a one-batch
// transaction would have made, minus the restarts its uncertainty window
// could cost.
//
// That holds on one tablet only: a batch over several tablets needs one
// timestamp for all of them and, chosen by this node's clock, an
// uncertainty window, so it runs as a transaction (Txn.Run and Commit,
// retried by DB.Txn). The batch is also run that way when its tablet
// split or moved between the routing cache's answer and the send (a
// routing refusal), rather than be read at a gateway timestamp.
//
// Nothing of the read is remembered by any transaction, and the GC
// protection does not cover it: it reads at the leaseholder's present,
// above any GC threshold, and a tablet refuses a read below its threshold
// (BatchTimestampBeforeGCError) rather than answer wrongly.

// RunImplicitRead runs b, whose requests must all be Gets and Scans with
// no row locks (Batch.LockOnRead), as a transaction of that one batch
// would run it (see above), and fills b.Results. It refuses any other
// batch: writes and locks need a transaction.
func (db *DB) RunImplicitRead(ctx context.Context, b *Batch) error {
	_, err := db.RunImplicitReadAt(ctx, b, hlc.Timestamp{})
	return err
}

// RunImplicitReadAt is RunImplicitRead for a caller that has just read
// db.Clock(): now, that reading, goes out as the batch's clock reading
// (kvpb.BatchRequest.Now, which moves the leaseholder's clock up to it)
// instead of a reading of its own, one clock reading fewer per read (the
// session's implicit reads check their plan's catalog generation at it:
// sql/session, implicit.go). A batch sent again after a routing refusal
// takes a reading of its own. An empty now: a reading of its own.
//
// after is a reading of the clock at or above the read's timestamp, which
// such a caller checks its generation at again: the Now the leaseholder
// answered with (kvpb.BatchResponse.Now, which this node's clock has been
// moved up to: for a read the tablet timestamped, that timestamp itself,
// tablet.TestPointReadAnswerNow; else a reading taken after the read), or, for a batch a transaction
// read, a reading of db.Clock() taken after its commit. The caller need
// not read the clock again for it.
func (db *DB) RunImplicitReadAt(ctx context.Context, b *Batch, now hlc.Timestamp) (after hlc.Timestamp, err error) {
	if len(b.lockOnRead) > 0 {
		return hlc.Timestamp{}, fmt.Errorf("kv: RunImplicitRead of a batch that locks rows")
	}
	for _, r := range b.reqs {
		switch r.(type) {
		case *kvpb.GetRequest, *kvpb.ScanRequest:
		default:
			return hlc.Timestamp{}, fmt.Errorf("kv: RunImplicitRead of a batch with a %s", r.Method())
		}
	}
	if len(b.reqs) == 0 {
		b.Results = nil
		return db.clock.Now(), nil
	}
	// A client's batch names its gateway node here, as LeaseholderSender
	// would (client_requests.go): that sender copies a batch to name it.
	var gateway uint64
	if db.opts.NodeID != 0 {
		gateway = ClientGateway(ctx, db.opts.NodeID)
	}
	br, ok, err := db.ds.sendOneTabletRead(ctx, &b.implicit, b.reqs, b.WaitPolicy, gateway, now)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	if ok {
		after = br.Now
		if after.IsEmpty() {
			after = db.clock.Now() // an answer without the leaseholder's clock
		}
		return after, b.fill(br)
	}
	if err := db.Txn(ctx, Serializable, func(ctx context.Context, txn *Txn) error {
		return txn.Run(ctx, b)
	}); err != nil {
		return hlc.Timestamp{}, err
	}
	return db.clock.Now(), nil
}

// sendOneTabletRead sends reqs, plain reads, unstamped and outside any
// transaction to the one tablet that holds them all, so its leaseholder
// reads them at its own clock. It reports false, having read nothing,
// when they lie on several tablets, or when the tablet refused them as
// not its own (a split or merge since the cache learned it): unlike
// DistSender.Send, it never stamps them with this node's clock. ba is
// the request it sends (the caller's Batch's, so that it allocates none),
// gateway the client's gateway node it names (0: none), now the clock
// reading its first attempt sends (empty: one of its own).
func (ds *DistSender) sendOneTabletRead(ctx context.Context, ba *kvpb.BatchRequest, reqs []kvpb.Request, wait kvpb.WaitPolicy, gateway uint64, now hlc.Timestamp) (*kvpb.BatchResponse, bool, error) {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		desc, ok, err := ds.oneTablet(ctx, reqs)
		if err != nil || !ok {
			return nil, false, err
		}
		*ba = kvpb.BatchRequest{Requests: reqs}
		ba.WaitPolicy = wait
		ba.LockTimeout = lockTimeoutOf(ctx)
		if attempt == 0 && !now.IsEmpty() {
			ba.Now = now
		} else {
			ba.Now = ds.clock.Now()
		}
		ba.TabletID = desc.TabletID
		ba.GatewayNode = gateway
		traceTablet(ctx, desc.TabletID)
		br, err := ds.sender.Send(ctx, ba)
		if err == nil {
			if len(br.Responses) != len(reqs) {
				return nil, false, fmt.Errorf("kv: tablet %d answered %d responses to %d requests", desc.TabletID, len(br.Responses), len(reqs))
			}
			// As DistSender.Send: the tablet checked our clock against
			// its own.
			_ = ds.clock.Update(br.Now)
			return br, true, nil
		}
		if !ds.handleRoutingError(desc, err) {
			return nil, false, err
		}
		// The cache now holds the refusal's descriptor: if the reads are
		// still on one tablet, send them there; else a transaction reads
		// them (ok false).
		if attempt >= ds.maxRoutingRetries {
			return nil, false, fmt.Errorf("%w after %d attempts", ErrRoutingRetriesExhausted, attempt)
		}
		if err := routingBackoff(ctx, attempt); err != nil {
			return nil, false, err
		}
	}
}
