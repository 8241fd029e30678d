package session

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/types"
)

// evalCtx is the session as builtins see it during one statement.
type evalCtx struct{ x *stmtState }

var _ builtins.EvalContext = (*evalCtx)(nil)

func (e *evalCtx) Ctx() context.Context     { return e.x.ctx }
func (e *evalCtx) Types() *types.Context    { return e.x.types() }
func (e *evalCtx) TxnTimestamp() time.Time  { return e.x.s.txnStart }
func (e *evalCtx) StmtTimestamp() time.Time { return e.x.start }
func (e *evalCtx) Rand() *rand.Rand         { return e.x.s.rng }

// SetSeed reseeds the session's generator (setseed), so later random()
// calls of the session repeat, as in Postgres.
func (e *evalCtx) SetSeed(seed uint64) {
	e.x.s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (e *evalCtx) Session() builtins.SessionInfo {
	s := e.x.s
	return builtins.SessionInfo{
		Database:    s.db.Name,
		User:        s.user,
		SessionUser: s.user,
		SearchPath:  s.searchPath(),
		BackendPID:  int32(s.pid),
		ServerPort:  s.b.cfg.ServerPort,
	}
}

// AdvisoryLocks is the session's holder, with lock_timeout bounding
// waits.
func (e *evalCtx) AdvisoryLocks() builtins.AdvisoryLocker {
	s := e.x.s
	d, err := parseDuration(s.vars["lock_timeout"])
	if err != nil || d <= 0 {
		return s.locks
	}
	return lockTimeout{s.locks, d}
}

// lockTimeout bounds advisory lock waits by lock_timeout.
type lockTimeout struct {
	*advisoryHolder
	d time.Duration
}

func (l lockTimeout) Lock(ctx context.Context, key builtins.AdvisoryKey, shared, xact, wait bool) (bool, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, l.d, errLockTimeout)
	defer cancel()
	return l.advisoryHolder.Lock(ctx, key, shared, xact, wait)
}

func (e *evalCtx) Sequences() builtins.SequenceOps { return e.x.s.seqs }

var _ builtins.SettingsAccess = (*evalCtx)(nil)

var _ builtins.NotifyContext = (*evalCtx)(nil)

// Notify is pg_notify: NOTIFY channel, payload at the transaction's
// commit (notify.go).
func (e *evalCtx) Notify(channel, payload string) error {
	return e.x.s.queueNotify(channel, payload)
}

// ListeningChannels is pg_listening_channels().
func (e *evalCtx) ListeningChannels() []string { return e.x.s.listeningChannels() }
