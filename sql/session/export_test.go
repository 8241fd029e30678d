package session

// SetImplicitReadHook makes f run before every implicit read is sent
// (implicit.go) until the returned function is called.
func SetImplicitReadHook(f func()) (restore func()) {
	implicitReadHook.Store(&f)
	return func() { implicitReadHook.Store(nil) }
}
