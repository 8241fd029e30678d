package ddl

// Hooks for the external tests (package ddl_test), which start whole
// servers: package server imports this one, so they cannot live in it.

// SetMoveAfterPage installs fn to run after each page a table move copies
// (nil removes it); it returns the previous hook.
func SetMoveAfterPage(fn func(jobID int64, page int) error) func(jobID int64, page int) error {
	prev := moveTestingHooks.afterPage
	moveTestingHooks.afterPage = fn
	return prev
}

// ErrJobDied, returned by the hook, makes the move stop where it is as if
// its node had died.
var ErrJobDied = errJobDied
