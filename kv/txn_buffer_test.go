package kv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// writeWatcher records, for every batch that reaches the store, whether it
// carried a transactional write outside a one-phase commit shape (a
// write sent as an intent) and whether it was a one-phase commit.
type writeWatcher struct {
	kvpb.Sender
	mu      sync.Mutex
	intents []string // keys written by batches without EndTxn
	onePC   int
	batches int // every batch sent
	// delRanges counts the DeleteRange requests sent.
	delRanges int
}

func (w *writeWatcher) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	br, err := w.Sender.Send(ctx, ba)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.batches++
	hasEnd := false
	for _, r := range ba.Requests {
		if r.Method() == kvpb.MethodEndTxn {
			hasEnd = true
		}
	}
	if err == nil && br.OnePhaseCommit {
		w.onePC++
	}
	for _, r := range ba.Requests {
		if r.Method() == kvpb.MethodDeleteRange {
			w.delRanges++
		}
		if lr, ok := r.(*kvpb.LockRequest); ok && lr.Unreplicated {
			continue // writes nothing
		}
		if ba.Txn != nil && r.Method().IsTxnWrite() && (!hasEnd || err != nil || !br.OnePhaseCommit) {
			w.intents = append(w.intents, string(r.Span().Key))
		}
	}
	return br, err
}

func (w *writeWatcher) sent() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.batches
}

func (w *writeWatcher) deleteRanges() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.delRanges
}

func (w *writeWatcher) intentWrites() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.intents)
}

func newWatchedEnv(t *testing.T, splits ...string) (*testEnv, *writeWatcher) {
	w := &writeWatcher{}
	e := newTestEnv(t, envOptions{splits: splits, wrapSender: func(s kvpb.Sender) kvpb.Sender {
		w.Sender = s
		return w
	}})
	return e, w
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func getStr(t *testing.T, txn *Txn, key string) string {
	t.Helper()
	v, ok, err := txn.Get(context.Background(), []byte(key))
	mustOK(t, err)
	if !ok {
		return "<none>"
	}
	return string(v)
}

// TestBufferedOnePhaseCommit: a buffered transaction of several statements
// (put, conditional put, delete, at several read timestamps under READ
// COMMITTED) reads its own writes and commits them in one phase: no batch
// ever carries a write outside the committing one, and no record is left.
func TestBufferedOnePhaseCommit(t *testing.T) {
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			e, w := newWatchedEnv(t, "m")
			ctx := context.Background()
			e.mustPut("d", "old-d")
			e.mustPut("e", "old-e")
			txn := e.db.NewTxn(ctx, "buffered", iso)
			txn.EnableWriteBuffering()
			mustOK(t, txn.Put(ctx, []byte("a"), []byte("1")))
			mustOK(t, txn.Step(ctx))
			mustOK(t, txn.CPut(ctx, []byte("c"), []byte("3"), nil, false))
			mustOK(t, txn.CPut(ctx, []byte("e"), []byte("new-e"), []byte("old-e"), true))
			mustOK(t, txn.Step(ctx))
			mustOK(t, txn.Delete(ctx, []byte("d")))
			if got := getStr(t, txn, "a") + getStr(t, txn, "d") + getStr(t, txn, "e"); got != "1<none>new-e" {
				t.Fatalf("own writes read as %q", got)
			}
			rows, err := txn.Scan(ctx, []byte("a"), []byte("z"), 0)
			mustOK(t, err)
			if got := rowsString(rows); got != "a=1 c=3 e=new-e" {
				t.Fatalf("scan through the buffer = %q", got)
			}
			if got := txn.BufferedWrites(); got != 4 {
				t.Fatalf("%d keys buffered, want 4", got)
			}
			mustOK(t, txn.Commit(ctx))
			if !txn.OnePhaseCommitted() {
				t.Fatal("buffered single-tablet transaction did not commit in one phase")
			}
			if got := w.intentWrites(); len(got) != 0 {
				t.Fatalf("writes sent as intents: %q", got)
			}
			if n, r := e.allIntents(), e.txnRecordCount(); n != 0 || r != 0 {
				t.Fatalf("%d intents and %d records left", n, r)
			}
			for k, want := range map[string]string{"a": "1", "c": "3", "d": "<none>", "e": "new-e"} {
				if got := e.mustGet(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

// TestBufferedTwoTablets: buffered writes on two tablets commit in two
// phases (sent at commit), and a rollback of a buffered transaction
// sends nothing.
func TestBufferedTwoTablets(t *testing.T) {
	e, w := newWatchedEnv(t, "m")
	ctx := context.Background()
	txn := e.db.NewTxn(ctx, "two", Snapshot)
	txn.EnableWriteBuffering()
	mustOK(t, txn.Put(ctx, []byte("a"), []byte("1")))
	mustOK(t, txn.Put(ctx, []byte("x"), []byte("2")))
	if got := w.intentWrites(); len(got) != 0 {
		t.Fatalf("writes sent before commit: %q", got)
	}
	mustOK(t, txn.Commit(ctx))
	if txn.OnePhaseCommitted() {
		t.Fatal("two-tablet commit claims one phase")
	}
	if got := e.mustGet("a") + e.mustGet("x"); got != "12" {
		t.Fatalf("values %q", got)
	}

	before := len(w.intentWrites())
	rb := e.db.NewTxn(ctx, "rollback", Snapshot)
	rb.EnableWriteBuffering()
	mustOK(t, rb.Put(ctx, []byte("b"), []byte("9")))
	mustOK(t, rb.Rollback(ctx))
	if got := w.intentWrites(); len(got) != before {
		t.Fatalf("rollback of a buffered transaction sent writes: %q", got[before:])
	}
	if got := e.mustGet("b"); got != "<none>" {
		t.Fatalf("rolled back write visible: %q", got)
	}
}

// TestBufferedScanOverlay: scans of every span, limit and direction over
// a buffer of puts and deletes (some over stored keys, some not) return
// exactly the rows of the merged state, and paging with the resume span
// walks all of them once.
func TestBufferedScanOverlay(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	model := map[string]string{}
	for _, k := range []string{"b", "d", "f", "h", "i0", "j", "l"} {
		e.mustPut(k, "s"+k)
		model[k] = "s" + k
	}
	txn := e.db.NewTxn(ctx, "overlay", Snapshot)
	txn.EnableWriteBuffering()
	for _, k := range []string{"a", "d", "g", "l", "m"} {
		mustOK(t, txn.Put(ctx, []byte(k), []byte("t"+k)))
		model[k] = "t" + k
	}
	for _, k := range []string{"b", "f", "g", "z"} {
		mustOK(t, txn.Delete(ctx, []byte(k)))
		delete(model, k)
	}
	// A range deletion over stored keys (h, i0, j) and a buffered one
	// (i), then a write back into its span (i0).
	mustOK(t, txn.Put(ctx, []byte("i"), []byte("ti")))
	b := &Batch{}
	b.DelRange([]byte("h"), []byte("k"))
	mustOK(t, txn.Run(ctx, b))
	for k := range model {
		if k >= "h" && k < "k" {
			delete(model, k)
		}
	}
	mustOK(t, txn.Put(ctx, []byte("i0"), []byte("again")))
	model["i0"] = "again"
	want := func(start, end string, reverse bool) []string {
		var out []string
		for k, v := range model {
			if k >= start && k < end {
				out = append(out, k+"="+v)
			}
		}
		slices.Sort(out)
		if reverse {
			slices.Reverse(out)
		}
		return out
	}
	spans := [][2]string{{"a", "z"}, {"a", "{"}, {"c", "h"}, {"d", "e"}, {"g", "h"}, {"h", "k"}, {"g", "m"}, {"k", "n"}, {"n", "y"}}
	for _, k := range []string{"h", "i", "i0", "j"} {
		want := model[k]
		if want == "" {
			want = "<none>"
		}
		if got := getStr(t, txn, k); got != want {
			t.Errorf("get %s = %q, want %q", k, got, want)
		}
	}
	for _, sp := range spans {
		for _, reverse := range []bool{false, true} {
			exp := want(sp[0], sp[1], reverse)
			for limit := int64(0); limit <= int64(len(exp))+1; limit++ {
				var got []string
				start, end := []byte(sp[0]), []byte(sp[1])
				for pages := 0; ; pages++ {
					if pages > 20 {
						t.Fatalf("scan %v reverse=%v limit %d does not end", sp, reverse, limit)
					}
					b := &Batch{}
					if reverse {
						b.ReverseScan(start, end, limit)
					} else {
						b.Scan(start, end, limit)
					}
					mustOK(t, txn.Run(ctx, b))
					r := b.Results[0]
					if limit > 0 && int64(len(r.Rows)) > limit {
						t.Fatalf("scan %v limit %d returned %d rows", sp, limit, len(r.Rows))
					}
					for _, kv := range r.Rows {
						got = append(got, string(kv.Key)+"="+string(kv.Value))
					}
					if r.ResumeSpan == nil {
						break
					}
					start, end = r.ResumeSpan.Key, r.ResumeSpan.EndKey
				}
				if !slices.Equal(got, exp) {
					t.Errorf("scan %v reverse=%v limit %d = %v, want %v", sp, reverse, limit, got, exp)
				}
			}
		}
	}
	mustOK(t, txn.Commit(ctx))
	if !txn.OnePhaseCommitted() {
		t.Fatal("buffered puts, deletes and a range deletion on one tablet did not commit in one phase")
	}
	rows, err := e.db.Scan(ctx, []byte("a"), []byte("{"), 0)
	mustOK(t, err)
	var got []string
	for _, kv := range rows {
		got = append(got, string(kv.Key)+"="+string(kv.Value))
	}
	if exp := want("a", "{", false); !slices.Equal(got, exp) {
		t.Fatalf("committed %v, want %v", got, exp)
	}
}

// TestBufferedSavepoints: a rollback to a savepoint hides the buffered
// writes (and range deletions) made after it, from reads and from the
// commit; after a flush (forced by a lock asked for on its own, as SELECT
// FOR UPDATE does) the flushed writes keep their sequence numbers, so a
// savepoint taken before the flush still undoes exactly what came after
// it.
func TestBufferedSavepoints(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	e.mustPut("r1", "x")
	e.mustPut("r2", "y")
	txn := e.db.NewTxn(ctx, "sp", Snapshot)
	txn.EnableWriteBuffering()
	mustOK(t, txn.Put(ctx, []byte("a"), []byte("1")))
	sp1, err := txn.Savepoint(ctx)
	mustOK(t, err)
	mustOK(t, txn.Put(ctx, []byte("a"), []byte("2")))
	mustOK(t, txn.Put(ctx, []byte("b"), []byte("2")))
	mustOK(t, txn.RollbackToSavepoint(ctx, sp1))
	if got := getStr(t, txn, "a") + getStr(t, txn, "b"); got != "1<none>" {
		t.Fatalf("after rollback to sp1: %q", got)
	}
	// A conditional put sees the rolled-back state.
	mustOK(t, txn.CPut(ctx, []byte("b"), []byte("3"), nil, false))
	sp2, err := txn.Savepoint(ctx)
	mustOK(t, err)
	mustOK(t, txn.Put(ctx, []byte("a"), []byte("4")))
	b := &Batch{}
	b.DelRange([]byte("r"), []byte("s"))
	mustOK(t, txn.Run(ctx, b))
	if got := getStr(t, txn, "r1"); got != "<none>" {
		t.Fatalf("r1 after a buffered DeleteRange: %q", got)
	}
	// A lock asked for on its own must be in the tablet now: everything
	// goes out as intents.
	b = &Batch{}
	b.Lock([]byte("q"), []byte("q\x00"), false)
	mustOK(t, txn.Run(ctx, b))
	if txn.BufferedWrites() != 0 || len(e.intentsOf(txn.ID())) == 0 {
		t.Fatalf("a lone Lock did not flush: %d buffered, intents %q", txn.BufferedWrites(), e.intentsOf(txn.ID()))
	}
	if got := getStr(t, txn, "a") + getStr(t, txn, "b") + getStr(t, txn, "r1") + getStr(t, txn, "r2"); got != "43<none><none>" {
		t.Fatalf("after flush: %q", got)
	}
	mustOK(t, txn.RollbackToSavepoint(ctx, sp2))
	if got := getStr(t, txn, "a") + getStr(t, txn, "b") + getStr(t, txn, "r1"); got != "13x" {
		t.Fatalf("after rollback to sp2 (taken before the flush): %q", got)
	}
	mustOK(t, txn.Commit(ctx))
	if txn.OnePhaseCommitted() {
		t.Fatal("a transaction that flushed claims one phase")
	}
	for k, want := range map[string]string{"a": "1", "b": "3", "r1": "x", "r2": "y"} {
		if got := e.mustGet(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

// TestBufferedConditionalPut: a buffered CPut fails at once, with the
// tablet's error, when its condition does not hold; one that held when
// buffered but whose key another transaction wrote before the commit
// makes the commit fail with a retryable error and overwrites nothing.
func TestBufferedConditionalPut(t *testing.T) {
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			// Without unreplicated locks: the write of n below would
			// wait for this transaction. What is tested is the check at
			// commit, which is what still catches the race when a lock
			// was lost (lease change, split).
			e := newTestEnv(t, envOptions{db: Options{NoUnreplicatedLocks: true}})
			ctx := context.Background()
			e.mustPut("k", "taken")
			txn := e.db.NewTxn(ctx, "cput", iso)
			txn.EnableWriteBuffering()
			err := txn.CPut(ctx, []byte("k"), []byte("mine"), nil, false)
			var cf *kvpb.ConditionFailedError
			if !errors.As(err, &cf) || string(cf.ActualValue) != "taken" {
				t.Fatalf("CPut over a taken key = %v, want ConditionFailedError with its value", err)
			}
			mustOK(t, txn.CPut(ctx, []byte("n"), []byte("mine"), nil, false))
			mustOK(t, txn.Step(ctx))
			// Another transaction takes n before we commit.
			e.mustPut("n", "theirs")
			mustOK(t, txn.Step(ctx))
			err = txn.Commit(ctx)
			if !kvpb.IsRetryable(err) {
				t.Fatalf("commit over a key taken since the CPut = %v, want a retryable error", err)
			}
			if got := e.mustGet("n"); got != "theirs" {
				t.Fatalf("n = %q: the buffered CPut overwrote a concurrent commit", got)
			}
			_ = txn.Rollback(ctx)
		})
	}
}

// TestBufferedGeneratedCPut: a CPut of a generated key (CPutGenerated)
// costs a buffering transaction no round trip at its statement, commits
// in one phase, and is still exact: a key that turns out to be taken
// fails the commit with a retryable error and nothing is overwritten,
// whether it was taken before the statement or after it. Unbuffered, it
// is a plain CPut, checked at once.
func TestBufferedGeneratedCPut(t *testing.T) {
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			e, w := newWatchedEnv(t)
			ctx := context.Background()
			e.mustPut("taken", "v")
			run := func(txn *Txn, key, value string) error {
				b := &Batch{}
				b.CPutGenerated([]byte(key), []byte(value))
				return txn.Run(ctx, b)
			}

			txn := e.db.NewTxn(ctx, "generated", iso)
			txn.EnableWriteBuffering()
			before := w.sent()
			mustOK(t, run(txn, "g", "1"))
			if n := w.sent() - before; n != 0 {
				t.Fatalf("the statement sent %d batches, want none", n)
			}
			if got := getStr(t, txn, "g"); got != "1" {
				t.Fatalf("own generated write reads as %q", got)
			}
			mustOK(t, txn.Commit(ctx))
			if !txn.OnePhaseCommitted() {
				t.Fatal("did not commit in one phase")
			}
			if got := e.mustGet("g"); got != "1" {
				t.Fatalf("g = %q after commit", got)
			}

			// Taken before the statement: not seen there, refused at commit.
			txn = e.db.NewTxn(ctx, "clash", iso)
			txn.EnableWriteBuffering()
			mustOK(t, run(txn, "taken", "mine"))
			if err := txn.Commit(ctx); !kvpb.IsRetryable(err) {
				t.Fatalf("commit over a taken generated key = %v, want a retryable error", err)
			}
			_ = txn.Rollback(ctx)
			if got := e.mustGet("taken"); got != "v" {
				t.Fatalf("taken = %q: a generated CPut overwrote a row", got)
			}

			// Taken between the statement and the commit (the key has no
			// lock to wait on).
			txn = e.db.NewTxn(ctx, "race", iso)
			txn.EnableWriteBuffering()
			mustOK(t, run(txn, "h", "mine"))
			e.mustPut("h", "theirs")
			if err := txn.Commit(ctx); !kvpb.IsRetryable(err) {
				t.Fatalf("commit over a generated key taken since = %v, want a retryable error", err)
			}
			_ = txn.Rollback(ctx)
			if got := e.mustGet("h"); got != "theirs" {
				t.Fatalf("h = %q: a generated CPut overwrote a concurrent commit", got)
			}

			// Flushed as intents (a schema change's writes would be): the
			// condition goes with the flushed write.
			txn = e.db.NewTxn(ctx, "flushed", iso)
			txn.EnableWriteBuffering()
			mustOK(t, run(txn, "taken", "mine"))
			err := txn.DisableWriteBuffering(ctx)
			if err == nil {
				err = txn.Commit(ctx)
			}
			if !kvpb.IsRetryable(err) {
				t.Fatalf("flushing a generated CPut over a taken key = %v, want a retryable error", err)
			}
			_ = txn.Rollback(ctx)
			if got := e.mustGet("taken"); got != "v" {
				t.Fatalf("taken = %q after a flushed generated CPut", got)
			}

			// Unbuffered: a plain CPut.
			txn = e.db.NewTxn(ctx, "unbuffered", iso)
			var cf *kvpb.ConditionFailedError
			if err := run(txn, "taken", "mine"); !errors.As(err, &cf) {
				t.Fatalf("unbuffered generated CPut over a taken key = %v, want ConditionFailedError", err)
			}
			_ = txn.Rollback(ctx)
		})
	}
}

// TestBufferedNoLostUpdate: a read-modify-write whose key another
// transaction changes between the read and the commit fails with a
// retryable error at every level, even when later statements moved the
// READ COMMITTED snapshot past the other write.
func TestBufferedNoLostUpdate(t *testing.T) {
	for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
		t.Run(iso.String(), func(t *testing.T) {
			// Without unreplicated locks, as in TestBufferedConditionalPut.
			e := newTestEnv(t, envOptions{db: Options{NoUnreplicatedLocks: true}})
			ctx := context.Background()
			e.mustPut("x", "1")
			txn := e.db.NewTxn(ctx, "rmw", iso)
			txn.EnableWriteBuffering()
			if got := getStr(t, txn, "x"); got != "1" {
				t.Fatalf("x = %q", got)
			}
			mustOK(t, txn.Put(ctx, []byte("x"), []byte("2")))
			e.mustPut("x", "10")
			mustOK(t, txn.Step(ctx))
			mustOK(t, txn.Put(ctx, []byte("y"), []byte("y")))
			mustOK(t, txn.Step(ctx))
			if err := txn.Commit(ctx); !kvpb.IsRetryable(err) {
				t.Fatalf("commit = %v, want a retryable error", err)
			}
			if got := e.mustGet("x"); got != "10" {
				t.Fatalf("x = %q: lost update", got)
			}
			_ = txn.Rollback(ctx)
		})
	}
}

// TestBufferedFlushOnLimit: a buffer past maxBufferKeys goes out as
// intents and the transaction commits in two phases.
func TestBufferedFlushOnLimit(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	ctx := context.Background()
	txn := e.db.NewTxn(ctx, "big", Snapshot)
	txn.EnableWriteBuffering()
	n := maxBufferKeys + 10
	for i := 0; i < n; i += 100 {
		b := &Batch{}
		for j := i; j < min(i+100, n); j++ {
			b.Put([]byte(fmt.Sprintf("k%06d", j)), []byte("v"))
		}
		mustOK(t, txn.Run(ctx, b))
	}
	if txn.BufferedWrites() != 0 {
		t.Fatalf("%d keys still buffered past the limit", txn.BufferedWrites())
	}
	if got := len(e.intentsOf(txn.ID())); got < maxBufferKeys {
		t.Fatalf("%d intents after the flush, want at least %d", got, maxBufferKeys)
	}
	rows, err := txn.Scan(ctx, []byte("k"), []byte("l"), 0)
	mustOK(t, err)
	if len(rows) != n {
		t.Fatalf("scan sees %d rows, want %d", len(rows), n)
	}
	mustOK(t, txn.Commit(ctx))
	if txn.OnePhaseCommitted() {
		t.Fatal("flushed transaction claims one phase")
	}
	got, err := e.db.Scan(ctx, []byte("k"), []byte("l"), 0)
	mustOK(t, err)
	if len(got) != n {
		t.Fatalf("%d rows committed, want %d", len(got), n)
	}
}

// TestBufferedBank: concurrent buffered transfers between accounts on two
// tablets (some transfers within one tablet, committing in one phase,
// some across) conserve the total: no lost update, whatever the level.
func TestBufferedBank(t *testing.T) {
	e := newTestEnv(t, envOptions{splits: []string{"acct/5"}})
	ctx := context.Background()
	const accounts, start = 10, 100
	key := func(i int) []byte { return []byte(fmt.Sprintf("acct/%d", i)) }
	for i := range accounts {
		e.mustPut(string(key(i)), fmt.Sprint(start))
	}
	var wg sync.WaitGroup
	var onePC sync.Map
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			iso := []IsolationLevel{ReadCommitted, Snapshot, Serializable}[w%3]
			for range 40 {
				from, to := rng.IntN(accounts), rng.IntN(accounts)
				if from == to {
					continue
				}
				for attempt := 0; ; attempt++ {
					txn := e.db.NewTxn(ctx, "transfer", iso)
					txn.EnableWriteBuffering()
					err := transfer(ctx, txn, key(from), key(to))
					if err == nil {
						err = txn.Commit(ctx)
					}
					if err == nil {
						if txn.OnePhaseCommitted() {
							onePC.Store(fmt.Sprint(w, from, to, attempt), true)
						}
						break
					}
					_ = txn.Rollback(ctx)
					if !kvpb.IsRetryable(err) || attempt > 200 {
						errs <- fmt.Errorf("transfer %d->%d after %d attempts: %w", from, to, attempt, err)
						return
					}
					// As a client would: back off before retrying, or the
					// contenders keep meeting each other's intents.
					time.Sleep(time.Duration(rng.IntN(attempt+2)) * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sum := 0
	for i := range accounts {
		var v int
		fmt.Sscan(e.mustGet(string(key(i))), &v)
		sum += v
	}
	if sum != accounts*start {
		t.Fatalf("total %d, want %d", sum, accounts*start)
	}
	n := 0
	onePC.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Fatal("no transfer committed in one phase")
	}
}

func transfer(ctx context.Context, txn *Txn, from, to []byte) error {
	read := func(k []byte) (int, error) {
		v, _, err := txn.Get(ctx, k)
		if err != nil {
			return 0, err
		}
		var n int
		_, err = fmt.Sscan(string(v), &n)
		return n, err
	}
	a, err := read(from)
	if err != nil {
		return err
	}
	if err := txn.Put(ctx, from, []byte(fmt.Sprint(a-1))); err != nil {
		return err
	}
	if err := txn.Step(ctx); err != nil {
		return err
	}
	b, err := read(to)
	if err != nil {
		return err
	}
	return txn.Put(ctx, to, []byte(fmt.Sprint(b+1)))
}

// TestBufferedRandomOps: random puts, conditional puts, deletes, range
// deletions, rows deleted as a span and conditionally written again, and
// savepoint rollbacks over stored keys; after each step every key and a
// few scans (forward, reverse, limited) read what a model of the writes
// says, and the commit leaves exactly the model's state. Each seed runs
// buffered (a one-phase commit), unbuffered (intents), and buffered until
// a flush at a random step (the buffer replayed as intents).
func TestBufferedRandomOps(t *testing.T) {
	for _, mode := range []string{"buffered", "unbuffered", "flushed"} {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/%d", mode, seed), func(t *testing.T) {
				testBufferedRandomOps(t, mode, seed)
			})
		}
	}
}

func testBufferedRandomOps(t *testing.T, mode string, seed uint64) {
	// A buffered transaction older than a heartbeat interval writes its
	// record first and commits in two phases (txn.go, prepareWritesLocked):
	// on a loaded machine a run can take that long, so the interval is set
	// past any run and the one-phase check below is about the protocol.
	e := newTestEnv(t, envOptions{db: Options{HeartbeatInterval: time.Hour}})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 3))
	key := func(i int) string { return fmt.Sprintf("k%02d", i) }
	const n = 30
	model := map[string]string{}
	for i := 0; i < n; i += 2 {
		e.mustPut(key(i), "s"+key(i))
		model[key(i)] = "s" + key(i)
	}
	txn := e.db.NewTxn(ctx, "random", Snapshot)
	if mode != "unbuffered" {
		txn.EnableWriteBuffering()
	}
	flushAt := -1
	if mode == "flushed" {
		flushAt = rng.IntN(60)
	}
	type mark struct {
		sp    SavepointToken
		model map[string]string
	}
	var marks []mark
	for step := range 60 {
		if step == flushAt {
			mustOK(t, txn.DisableWriteBuffering(ctx))
		}
		switch op := rng.IntN(11); {
		case op < 4:
			k := key(rng.IntN(n))
			v := fmt.Sprintf("v%d", step)
			mustOK(t, txn.Put(ctx, []byte(k), []byte(v)))
			model[k] = v
		case op < 6:
			k := key(rng.IntN(n))
			mustOK(t, txn.Delete(ctx, []byte(k)))
			delete(model, k)
		case op < 7:
			// A conditional put with the condition the model
			// says holds: against a stored value, a buffered
			// write or a buffered range deletion.
			k := key(rng.IntN(n))
			v := fmt.Sprintf("c%d", step)
			old, ok := model[k]
			mustOK(t, txn.CPut(ctx, []byte(k), []byte(v), []byte(old), ok))
			model[k] = v
		case op < 8:
			a, b := rng.IntN(n), rng.IntN(n)
			if a > b {
				a, b = b, a
			}
			bt := &Batch{}
			bt.DelRange([]byte(key(a)), []byte(key(b+1)))
			mustOK(t, txn.Run(ctx, bt))
			for k := range model {
				if k >= key(a) && k < key(b+1) {
					delete(model, k)
				}
			}
		case op < 9:
			// Deleted as a span and written again, as SQL
			// deletes and reinserts a row.
			// Or its whole span (a row rewritten whole), which
			// the row-span reads below then read from the buffer
			// alone unless a savepoint rollback undid part of it.
			k := key(rng.IntN(n))
			bt := &Batch{}
			if rng.IntN(2) == 0 {
				bt.DelRange([]byte(k), []byte(k+"\x00"))
			} else {
				bt.DelRange([]byte(k), keys.PrefixEnd([]byte(k)))
			}
			if rng.IntN(2) == 0 {
				mustOK(t, txn.Run(ctx, bt))
				bt = &Batch{}
			}
			v := fmt.Sprintf("r%d", step)
			bt.CPut([]byte(k), []byte(v), nil, false)
			mustOK(t, txn.Run(ctx, bt))
			model[k] = v
		case op < 10:
			sp, err := txn.Savepoint(ctx)
			mustOK(t, err)
			marks = append(marks, mark{sp, maps.Clone(model)})
		default:
			if len(marks) > 0 {
				// As in SQL, rolling back to a savepoint
				// destroys the ones taken after it.
				i := rng.IntN(len(marks))
				m := marks[i]
				marks = marks[:i+1]
				mustOK(t, txn.RollbackToSavepoint(ctx, m.sp))
				model = maps.Clone(m.model)
			}
		}
		for i := range n {
			want, ok := model[key(i)]
			if !ok {
				want = "<none>"
			}
			if got := getStr(t, txn, key(i)); got != want {
				t.Fatalf("step %d: %s = %q, want %q", step, key(i), got, want)
			}
			// The key's row span, as SQL's point read scans it.
			rows, err := txn.Scan(ctx, []byte(key(i)), keys.PrefixEnd([]byte(key(i))), 0)
			mustOK(t, err)
			got := "<none>"
			if len(rows) > 0 {
				got = string(rows[0].Value)
			}
			if len(rows) > 1 || got != want {
				t.Fatalf("step %d: scan of %s's span = %v, want %q", step, key(i), rows, want)
			}
		}
		var all []string
		for k, v := range model {
			all = append(all, k+"="+v)
		}
		slices.Sort(all)
		for _, limit := range []int64{0, 1, 3} {
			for _, reverse := range []bool{false, true} {
				b := &Batch{}
				if reverse {
					b.ReverseScan([]byte("k"), []byte("l"), limit)
				} else {
					b.Scan([]byte("k"), []byte("l"), limit)
				}
				mustOK(t, txn.Run(ctx, b))
				var got []string
				for _, kv := range b.Results[0].Rows {
					got = append(got, string(kv.Key)+"="+string(kv.Value))
				}
				want := slices.Clone(all)
				if reverse {
					slices.Reverse(want)
				}
				if limit > 0 && int64(len(want)) > limit {
					want = want[:limit]
				}
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: scan limit %d reverse=%v = %v, want %v", step, limit, reverse, got, want)
				}
			}
		}
	}
	mustOK(t, txn.Commit(ctx))
	// Two phases would mean something was sent before the commit
	// or the commit was refused one phase; none (every write
	// rolled back) is a read-only commit.
	if p := txn.CommitPhases(); p == 2 && mode == "buffered" {
		t.Error("single-tablet buffered transaction committed in two phases")
	}
	rows, err := e.db.Scan(ctx, []byte("k"), []byte("l"), 0)
	mustOK(t, err)
	got := map[string]string{}
	for _, kv := range rows {
		got[string(kv.Key)] = string(kv.Value)
	}
	if !maps.Equal(got, model) {
		t.Fatalf("committed %v, want %v", got, model)
	}
}
