package kv

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// funcSender is a kvpb.Sender from a function.
type funcSender func(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error)

func (f funcSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	return f(ctx, ba)
}

// TestRollbackAfterAmbiguousCommit is issue 13's partial transfer: a
// transaction writes on two tablets, its committing EndTxn applies but the
// answer is lost (the client's connection broke during COMMIT), and the
// session then rolls back. The abort meets a committed record; resolving
// the other tablet's intent as aborted then would keep the anchor
// tablet's write (resolved with the commit) and drop the other: the
// transaction applied in part. Both writes must be there.
//
// The store's own committed resolution of the foreign intent (the
// tablet's ResolveAsync) is held back until the rollback has done what it
// does, so the outcome does not depend on which resolution wins the race.
func TestRollbackAfterAmbiguousCommit(t *testing.T) {
	ctx := context.Background()
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	clock := hlc.NewClock(hlc.UnixNano, 0)
	// gate holds the tablets' committed intent resolutions.
	var st *store.Store
	release := make(chan struct{})
	var releaseOnce sync.Once
	gate := funcSender(func(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
		for _, r := range ba.Requests {
			switch r := r.(type) {
			case *kvpb.ResolveIntentRequest:
				if r.Status == kvpb.Committed {
					<-release
				}
			case *kvpb.ResolveIntentRangeRequest:
				if r.Status == kvpb.Committed {
					<-release
				}
			}
		}
		return st.Send(ctx, ba)
	})
	st, err = store.Open(ctx, eng, clock, store.Config{Sender: gate})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer releaseOnce.Do(func() { close(release) })
	if _, _, err := st.Split(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	// The committing EndTxn applies, and its answer is lost.
	lossy := funcSender(func(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
		br, err := st.Send(ctx, ba)
		for _, r := range ba.Requests {
			if et, ok := r.(*kvpb.EndTxnRequest); ok && et.Commit && err == nil {
				return nil, &kvpb.AmbiguousResultError{Cause: errors.New("connection lost after sending")}
			}
		}
		return br, err
	})
	db := NewDB(lossy, st, clock, Options{})
	txn := db.NewTxn(ctx, "transfer", Serializable)
	if err := txn.Put(ctx, []byte("a"), []byte("debit")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Put(ctx, []byte("b"), []byte("credit")); err != nil {
		t.Fatal(err)
	}
	var amb *kvpb.AmbiguousResultError
	if err := txn.Commit(ctx); !errors.As(err, &amb) {
		t.Fatalf("commit: %v, want an ambiguous result", err)
	}
	_ = txn.Rollback(ctx) // fails: the record is committed
	db.bg.Wait()          // whatever the rollback resolves in the background is done
	releaseOnce.Do(func() { close(release) })

	reader := NewDB(st, st, clock, Options{})
	defer reader.Close()
	defer db.Close()
	for _, k := range []string{"a", "b"} {
		var v []byte
		var found bool
		if err := reader.Txn(ctx, Serializable, func(ctx context.Context, txn *Txn) error {
			var err error
			v, found, err = txn.Get(ctx, []byte(k))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Errorf("%s: missing: the committed transaction applied in part", k)
		} else {
			t.Logf("%s = %s", k, v)
		}
	}
}
