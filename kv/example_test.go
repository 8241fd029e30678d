package kv_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A transfer between two accounts: DB.Txn reruns the closure if the
// transaction conflicts with another, and commits it when the closure
// returns nil. CommitInBatch sends the final writes with the commit, so a
// transfer between accounts on one tablet commits in one phase.
func ExampleDB_Txn() {
	ctx := context.Background()
	eng, _ := storage.Open("", storage.Options{FS: vfs.NewMem()})
	defer eng.Close()
	clock := hlc.NewClock(hlc.UnixNano, 0)
	st, _ := store.Open(ctx, eng, clock, store.Config{})
	defer st.Close()
	db := kv.NewDB(st, st, clock, kv.Options{})
	defer db.Close()

	_ = db.Put(ctx, []byte("alice"), []byte("100"))
	_ = db.Put(ctx, []byte("bob"), []byte("0"))

	err := db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		b := &kv.Batch{}
		b.Get([]byte("alice"))
		b.Get([]byte("bob"))
		if err := txn.Run(ctx, b); err != nil {
			return err
		}
		alice, _ := strconv.Atoi(string(b.Results[0].Rows[0].Value))
		bob, _ := strconv.Atoi(string(b.Results[1].Rows[0].Value))
		w := &kv.Batch{}
		w.Put([]byte("alice"), []byte(strconv.Itoa(alice-30)))
		w.Put([]byte("bob"), []byte(strconv.Itoa(bob+30)))
		if err := txn.CommitInBatch(ctx, w); err != nil {
			return err
		}
		fmt.Println("one phase:", txn.OnePhaseCommitted())
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	rows, _ := db.Scan(ctx, []byte("a"), []byte("z"), 0)
	for _, r := range rows {
		fmt.Printf("%s=%s\n", r.Key, r.Value)
	}
	// Output:
	// one phase: true
	// alice=70
	// bob=30
}
