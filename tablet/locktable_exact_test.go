package tablet

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/mvcc"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// exactWorld is a set of replicas over one engine, split as the test goes,
// for TestLockTableExact.
type exactWorld struct {
	t      *rapid.T
	eng    *storage.Engine
	manual *hlc.ManualClock
	clock  *hlc.Clock
	cfg    Config
	reps   []*Replica
	nextID kvpb.TabletID
	// active are the transactions that may write; all are every
	// transaction ever started, whose intents may still need resolving.
	active []*kvpb.Transaction
	all    []*kvpb.Transaction
}

// Send routes by the first request's key, as a store would.
func (w *exactWorld) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	return w.route(ba.Requests[0].Span().Key).Send(ctx, ba)
}

func (w *exactWorld) route(key []byte) *Replica {
	for _, r := range w.reps {
		if d := r.Desc(); d.ContainsKey(key) {
			return r
		}
	}
	w.t.Fatalf("no replica holds %q", key)
	return nil
}

func (w *exactWorld) newTxn() *kvpb.Transaction {
	now := w.clock.Now()
	txn := &kvpb.Transaction{
		TxnMeta:       kvpb.TxnMeta{ID: uuid.New(), Key: []byte("\x03a"), WriteTimestamp: now, MinTimestamp: now},
		Status:        kvpb.Pending,
		ReadTimestamp: now,
	}
	w.all = append(w.all, txn)
	return txn
}

// check asserts invariant 11 in its strongest form, with no request in
// flight: each replica's lock table holds exactly the intents the engine
// holds in its span, with the same holders.
func (w *exactWorld) check(step string) {
	for _, r := range w.reps {
		d := r.Desc()
		in, err := mvcc.ScanIntents(w.eng, d.StartKey, d.EndKey, 0)
		if err != nil {
			w.t.Fatal(err)
		}
		var want []string
		for _, i := range in {
			want = append(want, string(i.Key))
			r.locks.mu.Lock()
			l, ok := r.locks.locks[string(i.Key)]
			r.locks.mu.Unlock()
			if !ok || l.holder.ID != i.Txn.ID {
				w.t.Fatalf("after %s: engine intent of %s on %q, lock table of %s has %v", step, i.Txn.Short(), i.Key, &d, l)
			}
		}
		if got := r.locks.keys(); !slices.Equal(got, want) {
			w.t.Fatalf("after %s: lock table of %s = %q, engine intents %q", step, &d, got, want)
		}
	}
}

// TestLockTableExact interleaves transactional writes, point and range
// resolutions (commit, abort, push), epoch restarts, reads, splits and
// replica restarts, and after every step compares every replica's lock
// table with the engine's intents (invariant 11). Reads run with
// VerifyLockTable, so a skipped lock lookup that should have found an
// intent fails the read.
func TestLockTableExact(t *testing.T) {
	ukeys := []string{"\x03a", "\x03b", "\x03c", "\x03d", "\x03e", "\x03f"}
	keyGen := rapid.SampledFrom(ukeys)
	rapid.Check(t, func(rt *rapid.T) {
		eng, err := storage.Open("", storage.Options{FS: vfs.NewMem(), NoSync: true})
		if err != nil {
			rt.Fatal(err)
		}
		defer eng.Close()
		w := &exactWorld{t: rt, eng: eng, manual: hlc.NewManualClock(1), nextID: 2}
		w.clock = hlc.NewClock(w.manual.UnixNano, 500*time.Millisecond)
		w.cfg = Config{Sender: w, VerifyLockTable: true}
		r, err := New(eng, w.clock, kvpb.TabletDescriptor{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max}, w.cfg)
		if err != nil {
			rt.Fatal(err)
		}
		w.reps = []*Replica{r}
		defer func() {
			for _, r := range w.reps {
				r.Close()
			}
		}()
		for range 3 {
			w.active = append(w.active, w.newTxn())
		}
		ctx := context.Background()
		send := func(ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
			ba.WaitPolicy = kvpb.WaitError
			br, err := w.route(ba.Requests[0].Span().Key).Send(ctx, ba)
			if errors.Is(err, ErrLockTableInexact) {
				rt.Fatalf("%s: %v", ba.Requests[0].Method(), err)
			}
			return br, err
		}
		// span draws a span within one replica.
		span := func() kvpb.Span {
			a, b := keyGen.Draw(rt, "from"), keyGen.Draw(rt, "to")
			if b < a {
				a, b = b, a
			}
			d := w.route([]byte(a)).Desc()
			end := minKey([]byte(b+"\x00"), d.EndKey)
			return kvpb.Span{Key: []byte(a), EndKey: end}
		}
		for i := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			_ = i
			w.manual.Advance(time.Millisecond)
			op := rapid.IntRange(0, 9).Draw(rt, "op")
			switch op {
			case 0, 1, 2: // transactional write
				ti := rapid.IntRange(0, len(w.active)-1).Draw(rt, "txn")
				txn := w.active[ti]
				ba := &kvpb.BatchRequest{Header: kvpb.Header{Txn: txn.Clone()}}
				if rapid.Bool().Draw(rt, "deleteRange") {
					s := span()
					ba.Add(&kvpb.DeleteRangeRequest{Key: s.Key, EndKey: s.EndKey})
				} else {
					ba.Add(&kvpb.PutRequest{Key: []byte(keyGen.Draw(rt, "key")), Value: []byte("v")})
				}
				br, err := send(ba)
				if err == nil && br.Txn != nil {
					txn.WriteTimestamp = txn.WriteTimestamp.Forward(br.Txn.WriteTimestamp)
				}
			case 3: // epoch restart
				txn := w.active[rapid.IntRange(0, len(w.active)-1).Draw(rt, "txn")]
				txn.Epoch++
				now := w.clock.Now()
				txn.ReadTimestamp, txn.WriteTimestamp = now, now
			case 4, 5: // resolution, point or range, of any transaction
				txn := w.all[rapid.IntRange(0, len(w.all)-1).Draw(rt, "txn")]
				status := rapid.SampledFrom([]kvpb.TxnStatus{kvpb.Pending, kvpb.Committed, kvpb.Aborted}).Draw(rt, "status")
				if status == kvpb.Pending {
					// A push moves the transaction's intents up.
					txn.WriteTimestamp = txn.WriteTimestamp.Forward(w.clock.Now())
				}
				ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: w.clock.Now()}}
				if op == 4 {
					ba.Add(&kvpb.ResolveIntentRequest{Key: []byte(keyGen.Draw(rt, "key")), Txn: txn.TxnMeta, Status: status})
				} else {
					s := span()
					ba.Add(&kvpb.ResolveIntentRangeRequest{Key: s.Key, EndKey: s.EndKey, Txn: txn.TxnMeta, Status: status})
				}
				if _, err := send(ba); err != nil {
					rt.Fatalf("resolve %s as %s: %v", txn.Short(), status, err)
				}
				if status != kvpb.Pending {
					if i := slices.Index(w.active, txn); i >= 0 {
						w.active[i] = w.newTxn()
					}
				}
			case 6: // reads, transactional or not; conflicts are fine
				ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: w.clock.Now()}}
				if rapid.Bool().Draw(rt, "txnRead") {
					ba.Timestamp = hlc.Timestamp{}
					ba.Txn = w.active[rapid.IntRange(0, len(w.active)-1).Draw(rt, "txn")].Clone()
				}
				if rapid.Bool().Draw(rt, "scan") {
					s := span()
					ba.Add(&kvpb.ScanRequest{Key: s.Key, EndKey: s.EndKey})
				} else {
					ba.Add(&kvpb.GetRequest{Key: []byte(keyGen.Draw(rt, "key"))})
				}
				_, _ = send(ba)
			case 7, 8: // split
				k := []byte(keyGen.Draw(rt, "split"))
				r := w.route(k)
				if d := r.Desc(); string(d.StartKey) == string(k) {
					continue
				}
				if _, _, err := r.Split(ctx, k, w.nextID, func(right *Replica) { w.reps = append(w.reps, right) }); err != nil {
					rt.Fatalf("split at %q: %v", k, err)
				}
				w.nextID++
			case 9: // restart every replica from the engine
				for i, r := range w.reps {
					r.Close()
					nr, err := New(eng, w.clock, r.Desc(), w.cfg)
					if err != nil {
						rt.Fatal(err)
					}
					w.reps[i] = nr
				}
			}
			w.check([]string{"write", "write", "write", "restart txn", "resolve", "resolve range", "read", "split", "split", "restart"}[op])
		}
	})
}

// TestVerifyLockTable: with Config.VerifyLockTable, a read that would skip
// the lock keyspace over an intent the lock table lost fails loudly instead
// of returning the value under the intent; without the loss it reads
// normally.
func TestVerifyLockTable(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	h.newTxn("A", ts(10), 0)
	if _, err := h.send(ctx, putBatch("k", "a"), "A"); err != nil {
		t.Fatal(err)
	}
	get := func() error {
		ba := &kvpb.BatchRequest{Header: kvpb.Header{Timestamp: ts(20), WaitPolicy: kvpb.WaitError}}
		ba.Add(&kvpb.GetRequest{Key: []byte("k")})
		_, err := h.r.Send(ctx, ba)
		return err
	}
	var wie *kvpb.WriteIntentError
	if err := get(); !errors.As(err, &wie) {
		t.Fatalf("get over an intent: %v, want a WriteIntentError", err)
	}
	h.r.locks.mu.Lock()
	delete(h.r.locks.locks, "k")
	h.r.locks.mu.Unlock()
	if err := get(); !errors.Is(err, ErrLockTableInexact) {
		t.Fatalf("get over an intent the lock table lost: %v, want ErrLockTableInexact", err)
	}
}
