package kvpb

import "context"

// LockWaitObserver hears when a batch sent under a context carrying it
// starts and stops waiting for another transaction's lock (the session
// shows it as pg_stat_activity's wait_event_type 'Lock'). Calls come in
// pairs, possibly from several goroutines at once.
type LockWaitObserver interface {
	LockWait(waiting bool)
}

type lockWaitObserverKey struct{}

// WithLockWaitObserver returns ctx carrying o. Context values do not cross
// the RPC boundary: only a wait in a tablet of the sender's own process
// is reported.
func WithLockWaitObserver(ctx context.Context, o LockWaitObserver) context.Context {
	return context.WithValue(ctx, lockWaitObserverKey{}, o)
}

// LockWaitObserverOf returns the observer ctx carries, or nil.
func LockWaitObserverOf(ctx context.Context) LockWaitObserver {
	o, _ := ctx.Value(lockWaitObserverKey{}).(LockWaitObserver)
	return o
}
