package kvpb

type (
	// LockRequest takes an exclusive row lock for the header's
	// transaction (SELECT ... FOR UPDATE): a lock record without a value
	// on Key, which makes every other transaction's write of Key wait (or
	// fail under WaitError) until the transaction ends, and which readers,
	// the holder included, read through as if it were not there.
	// Committing or aborting the transaction removes it and writes
	// nothing.
	//
	// [Key, EndKey) (EndKey empty: Key alone) is the span the lock stands
	// for, a whole SQL row with its column keys: another transaction's
	// lock or intent anywhere in it is a conflict (a *WriteIntentError,
	// waited on as for writes), and a committed version in it above the
	// transaction's read timestamp fails the request with
	// *WriteTooOldError, as a write would, so the locker never holds a
	// lock on a row newer than the one it read.
	//
	// With SkipLocked a conflict is not an error and is not waited on:
	// the response says Skipped and nothing is locked (SELECT ... SKIP
	// LOCKED). Without a transaction (a one-phase commit evaluates its
	// requests so) only the checks are made.
	//
	// With Unreplicated (transactional only) the lock is an unreplicated,
	// in-memory lock in the leaseholder's lock table at Key, standing for
	// [Key, EndKey): nothing is written to storage or raft. A buffered
	// write's statement takes one per key it buffers (kv/txn_buffer.go),
	// so a second writer waits at its statement as on an intent, while the
	// transaction can still commit in one phase. The same checks are made
	// (other transactions' locks and intents, newer committed versions
	// above the read timestamp). It is released by the transaction's
	// EndTxn on the tablet, by a resolution of its key, or by a
	// ResolveIntent with UnreplicatedOnly; a lease change or split may
	// lose it.
	LockRequest struct {
		Key          []byte `wire:"1"`
		EndKey       []byte `wire:"2"`
		SkipLocked   bool   `wire:"3"`
		Unreplicated bool   `wire:"4"`
	}
	// LockResponse reports whether the lock was skipped.
	LockResponse struct {
		Skipped bool `wire:"1"`
	}
)

func (*LockRequest) Method() Method  { return MethodLock }
func (*LockResponse) Method() Method { return MethodLock }
func (r *LockRequest) Span() Span    { return Span{Key: r.Key, EndKey: r.EndKey} }

// WithSpan serves a row split over tablets: each part checks its own keys
// and locks its first one (the transaction's lock spans cover them all).
func (r LockRequest) WithSpan(s Span) Request {
	r.Key, r.EndKey = s.Key, s.EndKey
	return &r
}
