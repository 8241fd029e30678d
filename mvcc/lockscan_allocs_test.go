package mvcc

import (
	"fmt"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCheckLockScanAllocs: an UPDATE's locking read of one row whose lock
// table promised no lock record (WriteOptions.NoLock: tablet's
// lockUnreplicated) allocates the returned row (its slice and one buffer
// for its key and value) and the newest version's key, nothing for the
// lock walk it skips: 3 objects, where the walk's closure, its conflict
// list and map, and a buffer grown by two appends made 8 (issue 22,
// twenty-fifth session). The engine's iterator comes from its pool: no
// write came since the last read.
func TestCheckLockScanAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts")
	}
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	row := []byte("\x03accounts/1\x00")
	b := eng.NewBatch()
	if err := Put(b, row, hlc.Timestamp{WallTime: 10}, []byte("value"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	txn := &kvpb.Transaction{ReadTimestamp: hlc.Timestamp{WallTime: 20}}
	end := keys.PrefixEnd(row)
	var failed error
	n := testing.AllocsPerRun(100, func() {
		_, newest, whole, rows, err := CheckLockScan(eng, row, end, txn, WriteOptions{NoLock: true}, nil)
		if err == nil && (!whole || len(rows) != 1 || string(rows[0].Value) != "value" || newest.WallTime != 10) {
			err = fmt.Errorf("whole %v, rows %v, newest %s", whole, rows, newest)
		}
		if err != nil && failed == nil {
			failed = err
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if n > 3 {
		t.Errorf("CheckLockScan of one row allocated %.0f objects, want at most 3", n)
	}
}
