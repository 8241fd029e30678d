package builtins

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cairn-db/cairn/sql/types"
)

// EvalContext is what functions may read of the session and the
// transaction. The executor implements it; builtins never reach past it
// (the package imports no session, catalog or KV code).
type EvalContext interface {
	// Ctx is the statement's context, for functions that wait
	// (pg_advisory_lock).
	Ctx() context.Context
	// Types carries the session TimeZone for casts and timestamptz math.
	Types() *types.Context
	// TxnTimestamp is now()/transaction_timestamp(): fixed for the
	// transaction. StmtTimestamp is fixed for the statement.
	TxnTimestamp() time.Time
	StmtTimestamp() time.Time
	// Rand is the session's generator for random(); setseed reseeds it.
	Rand() *rand.Rand
	SetSeed(seed uint64)
	// Session reports the names and numbers the information functions
	// (current_user, current_database, ...) return.
	Session() SessionInfo
	// AdvisoryLocks is the session's advisory lock manager.
	AdvisoryLocks() AdvisoryLocker
	// Sequences is the session's access to sequences (nextval and
	// friends); nil when there is none.
	Sequences() SequenceOps
}

// SequenceOps is what the sequence functions need. A sequence is named by
// its relation OID (a regclass value). Errors carry SQLSTATEs (55000 for
// currval before nextval, 2200H when a sequence is exhausted).
type SequenceOps interface {
	NextVal(oid uint32) (int64, error)
	CurrVal(oid uint32) (int64, error)
	// SetVal sets the value; isCalled false makes the next nextval return
	// v itself. It returns v.
	SetVal(oid uint32, v int64, isCalled bool) (int64, error)
	// LastVal is the value the session's latest nextval returned.
	LastVal() (int64, error)
}

// SessionInfo is the session's identity, as the information functions
// report it.
type SessionInfo struct {
	Database    string
	User        string
	SessionUser string
	SearchPath  []string // schemas in order, without implicit pg_catalog
	BackendPID  int32
	ServerPort  int32 // 0: not on a TCP connection (inet_server_port is NULL)
}

// AdvisoryKey identifies an advisory lock: one bigint, or two ints, which
// Postgres keeps apart (lock (1,2) differs from lock 4294967298).
type AdvisoryKey struct {
	Key    int64
	TwoInt bool
}

// AdvisoryLocker holds a session's advisory locks. Session-level locks
// outlive transactions; transaction-level ones (Xact) end with the
// transaction. Lock waits (honouring ctx) when wait is set, and reports
// whether the lock was taken.
type AdvisoryLocker interface {
	Lock(ctx context.Context, key AdvisoryKey, shared, xact, wait bool) (bool, error)
	// Unlock releases one hold of a session-level lock; false when the
	// session did not hold it (Postgres then warns and returns false).
	Unlock(key AdvisoryKey, shared bool) bool
	UnlockAll()
}

// FixedContext is an EvalContext with fixed values: for tests and for the
// planner folding immutable calls, where no session exists. Its advisory
// lock manager is Locks (nil: advisory functions fail with 55000).
type FixedContext struct {
	TypesCtx *types.Context
	Txn      time.Time
	Stmt     time.Time
	Info     SessionInfo
	Locks    AdvisoryLocker
	rng      *rand.Rand
}

var _ EvalContext = (*FixedContext)(nil)

func (c *FixedContext) Ctx() context.Context     { return context.Background() }
func (c *FixedContext) Types() *types.Context    { return c.TypesCtx }
func (c *FixedContext) TxnTimestamp() time.Time  { return c.Txn }
func (c *FixedContext) StmtTimestamp() time.Time { return c.Stmt }
func (c *FixedContext) Session() SessionInfo     { return c.Info }
func (c *FixedContext) Sequences() SequenceOps   { return nil }

func (c *FixedContext) AdvisoryLocks() AdvisoryLocker {
	return c.Locks
}

// Rand returns a generator seeded with 0 until SetSeed is called, so tests
// are reproducible.
func (c *FixedContext) Rand() *rand.Rand {
	if c.rng == nil {
		c.SetSeed(0)
	}
	return c.rng
}

func (c *FixedContext) SetSeed(seed uint64) {
	c.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// location returns the session zone (UTC when unset).
func location(ctx EvalContext) *time.Location {
	if ctx != nil {
		if tc := ctx.Types(); tc != nil && tc.Location != nil {
			return tc.Location
		}
	}
	return time.UTC
}

func typesCtx(ctx EvalContext) *types.Context {
	if ctx == nil {
		return nil
	}
	return ctx.Types()
}
