package store

import "testing"

// TestRaftRF1 runs the store's tests with every tablet a raft group of
// one voter: writes go evaluate → propose → append+sync → apply, splits
// are raft commands, and the results must be the same as without raft.
func TestRaftRF1(t *testing.T) {
	raftMode = true
	defer func() { raftMode = false }()
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"BootstrapAndReopen", TestBootstrapAndReopen},
		{"SplitAndReloadDirectory", TestSplitAndReloadDirectory},
		{"SplitBadKeys", TestSplitBadKeys},
		{"ConcurrentSplits", TestConcurrentSplits},
		{"TwoTabletCommit", TestTwoTabletCommit},
		{"DeadlockAcrossTablets", TestDeadlockAcrossTablets},
		{"SplitMovesLockWaiters", TestSplitMovesLockWaiters},
		{"RoutingRacesSplit", TestRoutingRacesSplit},
		{"GCThresholdSurvivesSplitAndReopen", TestGCThresholdSurvivesSplitAndReopen},
		{"DeadlockOfThree", TestDeadlockOfThree},
		{"CloseCancelsWaiters", TestCloseCancelsWaiters},
		{"BankTransfers", TestBankTransfers},
		{"SplitQueueBySize", TestSplitQueueBySize},
		{"SplitQueueByLoad", TestSplitQueueByLoad},
		{"GCQueueCollectsHotRow", TestGCQueueCollectsHotRow},
		{"GCQueueProtected", TestGCQueueProtected},
		{"GCQueueModel", TestGCQueueModel},
	} {
		t.Run(tc.name, tc.f)
	}
}
