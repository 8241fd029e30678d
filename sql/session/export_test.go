package session

import "github.com/cairn-db/cairn/sql/catalog"

// SetAnalyzedHook makes f see, per table, the count of changes each
// committed ANALYZE of the whole table takes off the automatic
// refresher's (endTxnStats), until the returned function is called.
func SetAnalyzedHook(f func(id catalog.ID, n int64)) (restore func()) {
	analyzedHook.Store(&f)
	return func() { analyzedHook.Store(nil) }
}

// SetImplicitReadHook makes f run before every implicit read is sent
// (implicit.go) until the returned function is called.
func SetImplicitReadHook(f func()) (restore func()) {
	implicitReadHook.Store(&f)
	return func() { implicitReadHook.Store(nil) }
}

// SetFastReadOff turns the fast path of kept point reads off
// (fastread.go) until the returned function is called.
func SetFastReadOff() (restore func()) {
	fastReadOff.Store(true)
	return func() { fastReadOff.Store(false) }
}

// SetFastUpdateOff turns the fast path of kept point UPDATEs off
// (fastupdate.go) until the returned function is called.
func SetFastUpdateOff() (restore func()) {
	fastUpdateOff.Store(true)
	return func() { fastUpdateOff.Store(false) }
}

// FastUpdates is how many UPDATEs the fast path ran so far.
func FastUpdates() uint64 { return fastUpdates.Load() }

// RaceEnabled: the race detector changes allocation counts.
const RaceEnabled = raceEnabled

// StatementLookups is the count of pg_stat_statements' map look-ups
// (stmtStats.entry) so far.
func StatementLookups() int64 { return statLookups.Load() }

// ObserverLookups is the count of Config.StatementObserver's calls so
// far.
func ObserverLookups() int64 { return observerLookups.Load() }
