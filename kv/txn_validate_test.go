package kv

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/kvpb"
)

// TestValidateAtCommit: a transaction that registered key "d" (a
// descriptor's stamp, in the SQL layer) commits only if nobody else wrote
// d since the registered timestamp nor holds an intent on it, at every
// isolation level and on both commit paths.
func TestValidateAtCommit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// before runs after the transaction registered d (at its read
		// timestamp) and wrote x; other is a concurrent transaction left
		// pending, if the case makes one.
		before  func(e *testEnv, txn *Txn) (other *Txn)
		onePC   bool
		wantErr bool
	}{
		{name: "no write", before: func(*testEnv, *Txn) *Txn { return nil }},
		{name: "no write/one phase", onePC: true, before: func(*testEnv, *Txn) *Txn { return nil }},
		{name: "write in window", wantErr: true, before: func(e *testEnv, _ *Txn) *Txn {
			e.mustPut("d", "v2")
			return nil
		}},
		{name: "write in window/one phase", onePC: true, wantErr: true, before: func(e *testEnv, _ *Txn) *Txn {
			e.mustPut("d", "v2")
			return nil
		}},
		{name: "write of another key", before: func(e *testEnv, _ *Txn) *Txn {
			e.mustPut("e", "v2")
			return nil
		}},
		{name: "intent in window", wantErr: true, before: func(e *testEnv, _ *Txn) *Txn {
			other := e.db.NewTxn(ctx, "ddl", ReadCommitted)
			if err := other.Put(ctx, []byte("d"), []byte("v2")); err != nil {
				e.t.Fatal(err)
			}
			return other
		}},
		{name: "own write", before: func(e *testEnv, txn *Txn) *Txn {
			if err := txn.Put(ctx, []byte("d"), []byte("mine")); err != nil {
				e.t.Fatal(err)
			}
			return nil
		}},
		{name: "registered after a savepoint rolled back", before: func(e *testEnv, txn *Txn) *Txn {
			// The registration of the test's setup came before sp; a
			// second one of another key after it is forgotten.
			sp, err := txn.Savepoint(ctx)
			if err != nil {
				e.t.Fatal(err)
			}
			txn.ValidateAtCommit([]byte("f"), txn.ReadTimestamp())
			if err := txn.Put(ctx, []byte("y"), []byte("1")); err != nil {
				e.t.Fatal(err)
			}
			if err := txn.RollbackToSavepoint(ctx, sp); err != nil {
				e.t.Fatal(err)
			}
			e.mustPut("f", "v2")
			return nil
		}},
	} {
		for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
			t.Run(tc.name+"/"+iso.String(), func(t *testing.T) {
				e := newTestEnv(t, envOptions{splits: []string{"c", "m"}})
				e.mustPut("d", "v1")
				txn := e.db.NewTxn(ctx, "w", iso)
				txn.ValidateAtCommit([]byte("d"), txn.ReadTimestamp())
				b := &Batch{}
				b.Put([]byte("x"), []byte("row"))
				if !tc.onePC {
					if err := txn.Run(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
				other := tc.before(e, txn)
				var err error
				if tc.onePC {
					err = txn.CommitInBatch(ctx, b)
				} else {
					err = txn.Commit(ctx)
				}
				if tc.wantErr {
					var retry *kvpb.TransactionRetryError
					if !errors.As(err, &retry) || !kvpb.IsRetryable(err) {
						t.Fatalf("commit: %v, want a retryable TransactionRetryError", err)
					}
					_ = txn.Rollback(ctx)
					if got := e.mustGet("x"); got != "<none>" {
						t.Fatalf("x = %q after the failed commit", got)
					}
				} else {
					if err != nil {
						t.Fatalf("commit: %v", err)
					}
					if got := e.mustGet("x"); got != "row" {
						t.Fatalf("x = %q after the commit", got)
					}
					if tc.onePC && !txn.OnePhaseCommitted() {
						t.Fatal("the commit did not take one phase")
					}
				}
				if other != nil {
					// The writer in the way is unharmed.
					if err := other.Commit(ctx); err != nil {
						t.Fatalf("the other transaction's commit: %v", err)
					}
					if got := e.mustGet("d"); got != "v2" {
						t.Fatalf("d = %q", got)
					}
				}
			})
		}
	}
}

// TestValidateAtCommitPushesLaterWriter: a validated commit leaves the key
// in the timestamp cache at the commit timestamp, so a transaction that
// started earlier but writes the key afterwards commits above it (what
// lets a schema change that reads the table above its descriptor write
// see every row validated against the old descriptor).
func TestValidateAtCommitPushesLaterWriter(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, envOptions{splits: []string{"m"}})
	e.mustPut("d", "v1")
	ddl := e.db.NewTxn(ctx, "ddl", ReadCommitted)
	txn := e.db.NewTxn(ctx, "w", ReadCommitted)
	txn.ValidateAtCommit([]byte("d"), txn.ReadTimestamp())
	if err := txn.Put(ctx, []byte("x"), []byte("row")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !ddl.ReadTimestamp().Less(txn.CommitTimestamp()) {
		t.Fatalf("setup: ddl reads at %s, not below the commit at %s", ddl.ReadTimestamp(), txn.CommitTimestamp())
	}
	if err := ddl.Put(ctx, []byte("d"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	// The schema change reads at its descriptor write, above the commit.
	if err := ddl.ReadAtWriteTimestamp(ctx); err != nil {
		t.Fatal(err)
	}
	if !txn.CommitTimestamp().Less(ddl.ReadTimestamp()) {
		t.Fatalf("ddl reads at %s, not above the validated commit at %s", ddl.ReadTimestamp(), txn.CommitTimestamp())
	}
	v, ok, err := ddl.Get(ctx, []byte("x"))
	if err != nil || !ok || string(v) != "row" {
		t.Fatalf("ddl reads x = %q, %v, %v; want the committed row", v, ok, err)
	}
	if err := ddl.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !txn.CommitTimestamp().Less(ddl.CommitTimestamp()) {
		t.Fatalf("ddl committed at %s, not above %s", ddl.CommitTimestamp(), txn.CommitTimestamp())
	}
}

// refreshGate holds every batch carrying a RefreshRequest until it has
// seen both a strict one (the commit's validation) and a plain one (the
// buffered writes' check), or until the test's deadline: if the commit
// sent them one after the other, the first would be held until then.
type refreshGate struct {
	kvpb.Sender
	mu             sync.Mutex
	strict, plain  bool
	both           chan struct{}
	together, seen int
}

func (g *refreshGate) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	kind := ""
	for _, r := range ba.Requests {
		if rr, ok := r.(*kvpb.RefreshRequest); ok {
			kind = "plain"
			if rr.Strict {
				kind = "strict"
			}
		}
	}
	if kind == "" {
		return g.Sender.Send(ctx, ba)
	}
	g.mu.Lock()
	g.seen++
	if kind == "strict" {
		g.strict = true
	} else {
		g.plain = true
	}
	if g.strict && g.plain {
		select {
		case <-g.both:
		default:
			close(g.both)
		}
	}
	g.mu.Unlock()
	select {
	case <-g.both:
		g.mu.Lock()
		g.together++
		g.mu.Unlock()
	case <-time.After(10 * time.Second):
	}
	return g.Sender.Send(ctx, ba)
}

// TestBufferedCommitValidatesWithCheck: a buffered transaction's commit
// checks its buffered keys (written by an earlier statement, so from an
// older snapshot) and validates its registered keys in parallel, not one
// round trip after the other, on both commit paths; and a write of a
// registered key in the window still fails the commit.
func TestBufferedCommitValidatesWithCheck(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		keys    []string // written by the first statement
		onePC   bool
		intrude bool // write d in the window
	}{
		{name: "one phase", keys: []string{"x"}, onePC: true},
		{name: "two phases", keys: []string{"a", "x"}},
		{name: "one phase/write in window", keys: []string{"x"}, intrude: true},
		{name: "two phases/write in window", keys: []string{"a", "x"}, intrude: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &refreshGate{both: make(chan struct{})}
			e := newTestEnv(t, envOptions{splits: []string{"c", "m"}, wrapSender: func(s kvpb.Sender) kvpb.Sender {
				g.Sender = s
				return g
			}})
			e.mustPut("d", "v1")
			txn := e.db.NewTxn(ctx, "w", ReadCommitted)
			txn.EnableWriteBuffering()
			txn.ValidateAtCommit([]byte("d"), txn.ReadTimestamp())
			for _, k := range tc.keys {
				mustOK(t, txn.Put(ctx, []byte(k), []byte("row")))
			}
			// A second statement: the buffered keys now date from an older
			// snapshot, so the commit checks them.
			mustOK(t, txn.Step(ctx))
			if tc.intrude {
				e.mustPut("d", "v2")
			}
			err := txn.Commit(ctx)
			if tc.intrude {
				var retry *kvpb.TransactionRetryError
				if !errors.As(err, &retry) {
					t.Fatalf("commit: %v, want a retryable TransactionRetryError", err)
				}
				_ = txn.Rollback(ctx)
				if got := e.mustGet("x"); got != "<none>" {
					t.Fatalf("x = %q after the failed commit", got)
				}
			} else {
				mustOK(t, err)
				for _, k := range tc.keys {
					if got := e.mustGet(k); got != "row" {
						t.Fatalf("%s = %q after the commit", k, got)
					}
				}
				if txn.OnePhaseCommitted() != tc.onePC {
					t.Fatalf("one phase: %v, want %v", txn.OnePhaseCommitted(), tc.onePC)
				}
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if !g.strict || !g.plain || g.together != g.seen {
				t.Fatalf("validation sent: %v, check sent: %v, %d of %d refresh batches in flight together",
					g.strict, g.plain, g.together, g.seen)
			}
		})
	}
}

// batchLog records, once armed, the requests of every batch sent.
type batchLog struct {
	kvpb.Sender
	mu      sync.Mutex
	armed   bool
	batches [][]kvpb.Request
}

func (l *batchLog) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	l.mu.Lock()
	if l.armed {
		l.batches = append(l.batches, append([]kvpb.Request(nil), ba.Requests...))
	}
	l.mu.Unlock()
	return l.Sender.Send(ctx, ba)
}

func (l *batchLog) arm() {
	l.mu.Lock()
	l.armed = true
	l.mu.Unlock()
}

// describe names a batch's requests: the method, the key, and for a
// refresh whether it is strict.
func describe(reqs []kvpb.Request) []string {
	var out []string
	for _, r := range reqs {
		s := r.Method().String() + " " + string(r.Span().Key)
		if rr, ok := r.(*kvpb.RefreshRequest); ok && rr.Strict {
			s += " strict"
		}
		out = append(out, s)
	}
	return out
}

// TestOnePhaseCommitCarriesChecks: a buffered transaction whose writes,
// buffered keys and registered keys all lie on one tablet commits in one
// batch, [checks..., writes..., EndTxn]: the check of the keys buffered by
// an earlier statement (READ COMMITTED's, whose snapshot moved) and the
// strict validation of the registered key ride in the committing batch
// instead of a round trip of their own before it. A write of either key
// in the window still fails the commit, and nothing is written.
func TestOnePhaseCommitCarriesChecks(t *testing.T) {
	ctx := context.Background()
	for _, intrude := range []string{"", "d", "k"} {
		for _, iso := range []IsolationLevel{ReadCommitted, Snapshot, Serializable} {
			name := "no write"
			if intrude != "" {
				name = "write of " + intrude
			}
			t.Run(name+"/"+iso.String(), func(t *testing.T) {
				log := &batchLog{}
				// The write of k in the window needs the unreplicated lock
				// out of its way (as if a lease change had lost it): the
				// check is what stops a lost update then.
				e := newTestEnv(t, envOptions{splits: []string{"m"}, db: Options{NoUnreplicatedLocks: intrude == "k"},
					wrapSender: func(s kvpb.Sender) kvpb.Sender {
						log.Sender = s
						return log
					}})
				e.mustPut("d", "v1")
				e.mustPut("k", "v1")
				txn := e.db.NewTxn(ctx, "w", iso)
				txn.EnableWriteBuffering()
				txn.ValidateAtCommit([]byte("d"), txn.ReadTimestamp())
				mustOK(t, txn.Put(ctx, []byte("k"), []byte("row")))
				mustOK(t, txn.Step(ctx))
				if intrude != "" {
					e.mustPut(intrude, "v2")
				}
				log.arm()
				err := txn.Commit(ctx)
				log.mu.Lock()
				log.armed = false
				log.mu.Unlock()
				if intrude != "" {
					if !kvpb.IsRetryable(err) {
						t.Fatalf("commit: %v, want a retryable error", err)
					}
					_ = txn.Rollback(ctx)
					want := "v1"
					if intrude == "k" {
						want = "v2"
					}
					if got := e.mustGet("k"); got != want {
						t.Fatalf("k = %q after the failed commit, want %q", got, want)
					}
					return
				}
				mustOK(t, err)
				if got := e.mustGet("k"); got != "row" {
					t.Fatalf("k = %q after the commit", got)
				}
				if !txn.OnePhaseCommitted() {
					t.Fatal("the commit did not take one phase")
				}
				// Only READ COMMITTED's snapshot moved at the Step, so only
				// it checks k from the statement's snapshot.
				want := []string{"Refresh k", "Refresh d strict", "Put k", "EndTxn k"}
				if iso != ReadCommitted {
					want = want[1:]
				}
				log.mu.Lock()
				defer log.mu.Unlock()
				if len(log.batches) != 1 || !slices.Equal(describe(log.batches[0]), want) {
					var got [][]string
					for _, b := range log.batches {
						got = append(got, describe(b))
					}
					t.Fatalf("the commit sent %q, want one batch %q", got, want)
				}
			})
		}
	}
}

// TestOnePhaseValidationPushesLaterWriter: a one-phase commit that a read
// moved above its read timestamp (READ COMMITTED's EndTxn.MayMoveCommit)
// leaves its validated key in the timestamp cache at or above the
// timestamp it committed at, as TestValidateAtCommitPushesLaterWriter
// shows for a commit in two phases: a schema change that writes the key
// afterwards commits above the row and reads it. With the row on the
// validated key's tablet the validation rides in the committing batch;
// on another tablet it is a round trip of its own, at the timestamp the
// commit is sent at, so the commit must not move above that.
func TestOnePhaseValidationPushesLaterWriter(t *testing.T) {
	ctx := context.Background()
	for _, row := range []string{"k", "x"} {
		t.Run("row "+row, func(t *testing.T) {
			e := newTestEnv(t, envOptions{splits: []string{"m"}})
			e.mustPut("d", "v1")
			ddl := e.db.NewTxn(ctx, "ddl", ReadCommitted)
			txn := e.db.NewTxn(ctx, "w", ReadCommitted)
			txn.EnableWriteBuffering()
			txn.ValidateAtCommit([]byte("d"), txn.ReadTimestamp())
			mustOK(t, txn.Put(ctx, []byte(row), []byte("row")))
			// A read of the row above the transaction's timestamp.
			e.mustGet(row)
			mustOK(t, txn.Commit(ctx))
			if !ddl.ReadTimestamp().Less(txn.CommitTimestamp()) {
				t.Fatalf("setup: ddl reads at %s, not below the commit at %s", ddl.ReadTimestamp(), txn.CommitTimestamp())
			}
			mustOK(t, ddl.Put(ctx, []byte("d"), []byte("v2")))
			mustOK(t, ddl.ReadAtWriteTimestamp(ctx))
			v, ok, err := ddl.Get(ctx, []byte(row))
			if err != nil || !ok || string(v) != "row" {
				t.Fatalf("ddl reads %s = %q, %v, %v; want the committed row", row, v, ok, err)
			}
			mustOK(t, ddl.Commit(ctx))
			if !txn.CommitTimestamp().Less(ddl.CommitTimestamp()) {
				t.Fatalf("ddl committed at %s, not above %s", ddl.CommitTimestamp(), txn.CommitTimestamp())
			}
		})
	}
}
