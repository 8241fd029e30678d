package tablet

import (
	"testing"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/google/uuid"
)

// TestAcquireUnreplicatedAllocs: an unreplicated lock (an UPDATE's row
// lock, applyUnreplicated) enters the lock table with its state and one
// copy of its key, which both of the table's maps share: 2 objects, where
// a conversion per map made 3 (issue 22, twenty-fifth session).
func TestAcquireUnreplicatedAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts")
	}
	lt := newLockTable()
	key := []byte("\x03accounts/1\x00")
	txn := kvpb.TxnMeta{ID: uuid.New()}
	n := testing.AllocsPerRun(100, func() {
		lt.acquireUnreplicated(key, txn)
		lt.releaseUnreplicated(txn.ID, nil)
	})
	if lt.len() != 0 {
		t.Fatalf("%d locks left after the release", lt.len())
	}
	if n > 2 {
		t.Errorf("acquiring an unreplicated lock allocated %.0f objects, want at most 2", n)
	}
}
