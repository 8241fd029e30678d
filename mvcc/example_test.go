package mvcc_test

import (
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
)

// A transaction writes an intent, a reader meets it as a conflict, the
// transaction commits at a pushed timestamp and its intent is resolved into
// a committed version. Errors other than the expected conflict are elided
// with must.
func Example() {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
	must(err)
	defer eng.Close()
	ts := func(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }
	key := []byte("k")

	b := eng.NewBatch()
	must(mvcc.Put(b, key, ts(5), []byte("v5"), nil))
	txn := &kvpb.Transaction{
		TxnMeta:       kvpb.TxnMeta{ID: uuid.New(), Key: key, WriteTimestamp: ts(10), MinTimestamp: ts(10)},
		ReadTimestamp: ts(10),
	}
	must(mvcc.Put(b, key, hlc.Timestamp{}, []byte("v10"), txn))
	must(b.Commit())
	b.Close()

	_, err = mvcc.Get(eng, key, ts(12), mvcc.ReadOptions{})
	var wie *kvpb.WriteIntentError
	fmt.Println("read at 12 conflicts:", errors.As(err, &wie))
	old, err := mvcc.Get(eng, key, ts(9), mvcc.ReadOptions{})
	must(err)
	fmt.Printf("read at 9: %s\n", old.Value)

	// The transaction was pushed to 15 and committed there.
	txn.WriteTimestamp = ts(15)
	b = eng.NewBatch()
	ok, err := mvcc.ResolveIntent(b, kvpb.Intent{Key: key, Txn: txn.TxnMeta}, kvpb.Committed)
	must(err)
	must(b.Commit())
	b.Close()
	res, err := mvcc.Get(eng, key, ts(20), mvcc.ReadOptions{})
	must(err)
	fmt.Printf("resolved: %v; read at 20: %s@%s\n", ok, res.Value, res.Timestamp)
	// Output:
	// read at 12 conflicts: true
	// read at 9: v5
	// resolved: true; read at 20: v10@15,0
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
