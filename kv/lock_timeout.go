package kv

import (
	"context"
	"time"
)

// lockTimeoutKey is the context key of WithLockTimeout.
type lockTimeoutKey struct{}

// WithLockTimeout returns a context under which every batch the DistSender
// sends carries d as its kvpb.Header.LockTimeout: each wait of that batch
// for one conflicting lock, on whatever node the lock lives, fails after d
// with a *kvpb.WriteIntentError whose LockTimeout is set (the session's
// lock_timeout, 55P03). d <= 0 returns ctx unchanged. The value travels in
// the batch, not in the context, because a context's values do not cross
// the RPC boundary; its deadline and cancellation do (gRPC carries them).
func WithLockTimeout(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, lockTimeoutKey{}, d)
}

// lockTimeoutOf returns what WithLockTimeout put in ctx, or zero.
func lockTimeoutOf(ctx context.Context) time.Duration {
	d, _ := ctx.Value(lockTimeoutKey{}).(time.Duration)
	return d
}
