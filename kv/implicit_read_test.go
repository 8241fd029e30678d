package kv

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
)

// sentLog records the batches a DB sent: whether each carried a
// transaction, and whether it was stamped.
type sentLog struct {
	mu    sync.Mutex
	kinds []string
}

func (l *sentLog) wrap(s kvpb.Sender) kvpb.Sender {
	return senderFunc(func(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
		kind := "unstamped"
		switch {
		case ba.Txn != nil:
			kind = "txn"
		case !ba.Timestamp.IsEmpty():
			kind = "stamped"
		}
		l.mu.Lock()
		l.kinds = append(l.kinds, kind)
		l.mu.Unlock()
		return s.Send(ctx, ba)
	})
}

func (l *sentLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds
	l.kinds = nil
	return k
}

// TestRunImplicitRead: an implicit read answers what a transaction of
// its one batch answers; on one tablet it goes out with no transaction
// and no timestamp (the leaseholder stamps it), and on several tablets,
// or when the routing cache was stale, it is read by a transaction, never
// at a timestamp this node chose without one.
func TestRunImplicitRead(t *testing.T) {
	ctx := context.Background()
	rows := []string{"a", "b", "c", "n", "o"}
	// read runs a Get of "b" and a Scan of [from, to) both ways and
	// checks the implicit read against the transaction's answer; it
	// returns the kinds of batch the implicit read sent.
	read := func(t *testing.T, e *testEnv, log *sentLog, from, to string) []string {
		t.Helper()
		mk := func() *Batch {
			b := &Batch{}
			b.Get([]byte("b"))
			b.Scan([]byte(from), []byte(to), 0)
			return b
		}
		want := mk()
		mustOK(t, e.db.Txn(ctx, Serializable, func(ctx context.Context, txn *Txn) error { return txn.Run(ctx, want) }))
		log.take()
		got := mk()
		mustOK(t, e.db.RunImplicitRead(ctx, got))
		sent := log.take()
		if !got.Results[0].Found || string(got.Results[0].Rows[0].Value) != "v-b" {
			t.Fatalf("get b: %+v", got.Results[0])
		}
		if g, w := keysOf(got.Results[1].Rows), keysOf(want.Results[1].Rows); !slices.Equal(g, w) {
			t.Fatalf("scan [%s, %s): got %v, a transaction read %v", from, to, g, w)
		}
		return sent
	}
	load := func(e *testEnv) {
		for _, k := range rows {
			e.mustPut(k, "v-"+k)
		}
	}

	t.Run("one tablet", func(t *testing.T) {
		log := &sentLog{}
		e := newTestEnv(t, envOptions{wrapSender: log.wrap})
		load(e)
		if sent := read(t, e, log, "a", "z"); !slices.Equal(sent, []string{"unstamped"}) {
			t.Fatalf("sent %v, want one unstamped batch", sent)
		}
	})
	t.Run("several tablets", func(t *testing.T) {
		log := &sentLog{}
		e := newTestEnv(t, envOptions{splits: []string{"m"}, wrapSender: log.wrap})
		load(e)
		sent := read(t, e, log, "a", "z")
		if len(sent) == 0 || slices.ContainsFunc(sent, func(k string) bool { return k != "txn" }) {
			t.Fatalf("sent %v, want only a transaction's batches", sent)
		}
		// Both reads on the first tablet: the light path again.
		if sent := read(t, e, log, "a", "d"); !slices.Equal(sent, []string{"unstamped"}) {
			t.Fatalf("sent %v, want one unstamped batch", sent)
		}
	})
	t.Run("stale routing", func(t *testing.T) {
		log := &sentLog{}
		e := newTestEnv(t, envOptions{wrapSender: log.wrap})
		load(e)
		read(t, e, log, "a", "z") // the cache learns the one tablet
		if _, _, err := e.store.Split(ctx, []byte("m")); err != nil {
			t.Fatal(err)
		}
		b := &Batch{}
		b.Get([]byte("b"))
		b.Scan([]byte("a"), []byte("z"), 0)
		mustOK(t, e.db.RunImplicitRead(ctx, b))
		if g := keysOf(b.Results[1].Rows); !slices.Equal(g, rows) {
			t.Fatalf("scan after the split: %v, want %v", g, rows)
		}
		sent := log.take()
		// The refused unstamped batch, then the transaction's.
		if len(sent) < 2 || sent[0] != "unstamped" || slices.ContainsFunc(sent[1:], func(k string) bool { return k != "txn" }) {
			t.Fatalf("sent %v, want one refused unstamped batch, then a transaction's", sent)
		}
	})
	t.Run("refused", func(t *testing.T) {
		log := &sentLog{}
		e := newTestEnv(t, envOptions{wrapSender: log.wrap})
		w := &Batch{}
		w.Put([]byte("a"), []byte("x"))
		l := &Batch{}
		l.Scan([]byte("a"), []byte("b"), 0)
		l.LockOnRead([]byte("a"), []byte("b"))
		for _, b := range []*Batch{w, l} {
			if err := e.db.RunImplicitRead(ctx, b); err == nil || !strings.Contains(err.Error(), "RunImplicitRead") {
				t.Fatalf("RunImplicitRead of a batch that writes or locks: %v", err)
			}
		}
		if sent := log.take(); len(sent) != 0 {
			t.Fatalf("sent %v for refused batches", sent)
		}
	})
	t.Run("intent", func(t *testing.T) {
		// An open transaction's intent is not read: the implicit read
		// meets it as a transaction's read would (here, with
		// WaitError, it fails with the conflict).
		e := newTestEnv(t, envOptions{})
		load(e)
		txn := e.db.NewTxn(ctx, "writer", Serializable)
		mustOK(t, txn.Put(ctx, []byte("b"), []byte("uncommitted")))
		b := &Batch{WaitPolicy: kvpb.WaitError}
		b.Get([]byte("b"))
		var wie *kvpb.WriteIntentError
		if err := e.db.RunImplicitRead(ctx, b); !errors.As(err, &wie) {
			t.Fatalf("read of an intent with WaitError: %v, want a WriteIntentError", err)
		}
		mustOK(t, txn.Commit(ctx))
		b = &Batch{}
		b.Get([]byte("b"))
		mustOK(t, e.db.RunImplicitRead(ctx, b))
		if v := string(b.Results[0].Rows[0].Value); v != "uncommitted" {
			t.Fatalf("after the commit read %q", v)
		}
	})
}

func keysOf(kvs []kvpb.KeyValue) []string {
	var out []string
	for _, kv := range kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// TestRunImplicitReadAt: the clock reading the caller took goes out as
// the implicit read's own (BatchRequest.Now): the batch reads the clock
// no more. Without one (RunImplicitRead) the read takes a later reading.
// At a stopped clock every reading is the one before it plus one logical
// tick, so a reading taken after now differs from it. The reading it
// returns is the leaseholder's answer's (BatchResponse.Now), above both.
func TestRunImplicitReadAt(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var sentNow, answerNow []hlc.Timestamp
	wrap := func(s kvpb.Sender) kvpb.Sender {
		return senderFunc(func(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
			unstamped := ba.Txn == nil && ba.Timestamp.IsEmpty()
			if unstamped {
				mu.Lock()
				sentNow = append(sentNow, ba.Now)
				mu.Unlock()
			}
			br, err := s.Send(ctx, ba)
			if unstamped && err == nil {
				mu.Lock()
				answerNow = append(answerNow, br.Now)
				mu.Unlock()
			}
			return br, err
		})
	}
	e := newTestEnv(t, envOptions{manualClock: true, wrapSender: wrap})
	e.mustPut("a", "v-a")
	for _, tc := range []struct {
		name  string
		given bool // RunImplicitReadAt with the reading, else RunImplicitRead
	}{
		{"given reading", true},
		{"own reading", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			sentNow, answerNow = nil, nil
			mu.Unlock()
			b := &Batch{}
			b.Scan([]byte("a"), []byte("b"), 0)
			now := e.clock.Now()
			var after hlc.Timestamp
			if tc.given {
				var err error
				after, err = e.db.RunImplicitReadAt(ctx, b, now)
				mustOK(t, err)
			} else {
				mustOK(t, e.db.RunImplicitRead(ctx, b))
			}
			if len(b.Results[0].Rows) != 1 {
				t.Fatalf("read %v", b.Results[0].Rows)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sentNow) != 1 {
				t.Fatalf("%d unstamped batches, want 1", len(sentNow))
			}
			if got := sentNow[0] == now; got != tc.given {
				t.Errorf("the batch's Now %v, the caller's reading %v: equal %v, want %v", sentNow[0], now, got, tc.given)
			}
			if sentNow[0].Less(now) {
				t.Errorf("the batch's Now %v is below the caller's reading %v", sentNow[0], now)
			}
			if tc.given && (len(answerNow) != 1 || after != answerNow[0] || !now.Less(after)) {
				t.Errorf("returned %v, the answer's Now %v, the caller's reading %v", after, answerNow, now)
			}
		})
	}
}
