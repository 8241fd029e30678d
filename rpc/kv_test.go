package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/store"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"
)

// openStore opens a store over an in-memory engine with a manual clock
// stopped at wall time 1, so that two stores given the same batches answer
// identically.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	eng, err := storage.Open("db", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	manual := hlc.NewManualClock(1)
	clock := hlc.NewClock(manual.UnixNano, 500*time.Millisecond)
	s, err := store.Open(context.Background(), eng, clock, store.Config{PushPollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		_ = eng.Close()
	})
	return s
}

// serveKV serves sender's KV on loopback and returns a client to it.
func serveKV(t *testing.T, sender kvpb.Sender) (*KVSender, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln, func(raftnode.Envelope) {}, nil, WithKV(sender))
	t.Cleanup(srv.Stop)
	addr := srv.Addr().String()
	tr := NewTransport(TransportConfig{Resolve: func(uint64) (string, error) { return addr, nil }})
	t.Cleanup(tr.Close)
	c := NewKVSender(tr, 2)
	t.Cleanup(func() { _ = c.Close() })
	return c, srv
}

func txnNamed(id byte, key string) *kvpb.Transaction {
	var u uuid.UUID
	u[0] = id
	ts := hlc.Timestamp{WallTime: 50}
	return &kvpb.Transaction{
		TxnMeta:       kvpb.TxnMeta{ID: u, Key: []byte(key), WriteTimestamp: ts, MinTimestamp: ts, Priority: 1},
		Name:          fmt.Sprintf("t%d", id),
		ReadTimestamp: ts,
	}
}

func batch(h kvpb.Header, reqs ...kvpb.Request) *kvpb.BatchRequest {
	return (&kvpb.BatchRequest{Header: h}).Add(reqs...)
}

func bs(s string) []byte { return []byte(s) }

// The same batches sent to a store directly and to an identical store
// through the KV service get the same responses and the same errors (type,
// fields and message).
func TestKVServiceMatchesStore(t *testing.T) {
	ctx := context.Background()
	direct := openStore(t)
	remoteStore := openStore(t)
	remote, _ := serveKV(t, remoteStore)
	for _, s := range []*store.Store{direct, remoteStore} {
		if _, _, err := s.Split(ctx, bs("m")); err != nil {
			t.Fatal(err)
		}
	}
	ts := func(w int64) kvpb.Header { return kvpb.Header{Timestamp: hlc.Timestamp{WallTime: w}} }
	a := txnNamed(1, "e")
	b := txnNamed(2, "e")
	steps := []struct {
		name string
		ba   *kvpb.BatchRequest
	}{
		{"puts", batch(ts(10), &kvpb.PutRequest{Key: bs("a"), Value: bs("1")}, &kvpb.PutRequest{Key: bs("b"), Value: bs("2")},
			&kvpb.PutRequest{Key: bs("c"), Value: bs("3")}, &kvpb.PutRequest{Key: bs("d"), Value: []byte{}})},
		{"gets", batch(ts(11), &kvpb.GetRequest{Key: bs("a")}, &kvpb.GetRequest{Key: bs("d")}, &kvpb.GetRequest{Key: bs("e")})},
		{"scan limited", batch(ts(11), &kvpb.ScanRequest{Key: bs("a"), EndKey: bs("e"), MaxKeys: 2})},
		{"scan resumed", batch(ts(11), &kvpb.ScanRequest{Key: bs("c"), EndKey: bs("e"), MaxKeys: 2})},
		{"reverse scan", batch(ts(11), &kvpb.ScanRequest{Key: bs("a"), EndKey: bs("e"), Reverse: true, MaxBytes: 1})},
		{"cput fails", batch(ts(12), &kvpb.ConditionalPutRequest{Key: bs("a"), Value: bs("x"), Expected: bs("nope"), ExpectExists: true})},
		{"cput missing", batch(ts(12), &kvpb.ConditionalPutRequest{Key: bs("q"), Value: bs("x"), Expected: bs("nope"), ExpectExists: true})},
		{"txn intent", batch(kvpb.Header{Txn: a.Clone()}, &kvpb.PutRequest{Key: bs("e"), Value: bs("A")})},
		{"intent conflict", batch(kvpb.Header{Txn: b.Clone(), WaitPolicy: kvpb.WaitError}, &kvpb.PutRequest{Key: bs("e"), Value: bs("B")})},
		{"read own write", batch(kvpb.Header{Txn: a.Clone()}, &kvpb.GetRequest{Key: bs("e")})},
		{"query txn", batch(ts(20), &kvpb.QueryTxnRequest{Key: bs("e"), Txn: a.TxnMeta})},
		{"commit", batch(kvpb.Header{Txn: a.Clone()}, &kvpb.EndTxnRequest{Key: bs("e"), Commit: true, LockSpans: []kvpb.Span{{Key: bs("e")}}})},
		{"after commit", batch(ts(60), &kvpb.GetRequest{Key: bs("e")})},
		{"key outside tablet", batch(kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 30}, TabletID: 1}, &kvpb.GetRequest{Key: bs("p")})},
		{"tablet not found", batch(kvpb.Header{Timestamp: hlc.Timestamp{WallTime: 30}, TabletID: 99}, &kvpb.GetRequest{Key: bs("p")})},
		{"increment", batch(ts(31), &kvpb.IncrementRequest{Key: bs("n"), Increment: 5})},
		{"delete range", batch(ts(32), &kvpb.DeleteRangeRequest{Key: bs("a"), EndKey: bs("c")})},
	}
	failing := map[string]bool{"cput fails": true, "cput missing": true, "intent conflict": true, "key outside tablet": true, "tablet not found": true}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			wantBR, wantErr := direct.Send(ctx, st.ba)
			if fails := failing[st.name]; fails != (wantErr != nil) {
				t.Fatalf("the step does not test what it says: error %v", wantErr)
			}
			gotBR, gotErr := remote.Send(ctx, st.ba)
			if (wantErr == nil) != (gotErr == nil) {
				t.Fatalf("direct error %v, remote error %v", wantErr, gotErr)
			}
			if wantErr != nil {
				if reflect.TypeOf(gotErr) != reflect.TypeOf(wantErr) && errors.Unwrap(gotErr) == nil {
					t.Fatalf("remote error %T, direct %T", gotErr, wantErr)
				}
				if gotErr.Error() != wantErr.Error() {
					t.Fatalf("remote error %q, direct %q", gotErr, wantErr)
				}
				if kvpb.IsRetryable(gotErr) != kvpb.IsRetryable(wantErr) {
					t.Fatalf("retryable: remote %v, direct %v", kvpb.IsRetryable(gotErr), kvpb.IsRetryable(wantErr))
				}
				// The typed error in the chain is the same, fields included.
				for _, m := range errorTypes {
					et := m.Type
					w, g := reflect.New(reflect.PointerTo(et)), reflect.New(reflect.PointerTo(et))
					wok := errors.As(wantErr, w.Interface())
					gok := errors.As(gotErr, g.Interface())
					if wok != gok || (wok && !reflect.DeepEqual(w.Elem().Interface(), g.Elem().Interface())) {
						t.Fatalf("typed %s: direct %v, remote %v", et.Name(), wantErr, gotErr)
					}
				}
				return
			}
			// The clock readings depend on how often each store read its
			// clock, which is not what is compared here.
			if gotBR.Now.IsEmpty() {
				t.Fatal("remote response without a clock reading")
			}
			gotBR.Now, wantBR.Now = hlc.Timestamp{}, hlc.Timestamp{}
			if !reflect.DeepEqual(gotBR, wantBR) {
				t.Fatalf("remote response\n %#v\ndirect\n %#v", gotBR, wantBR)
			}
		})
	}
}

// blockingSender blocks until released or its ctx is done, reporting when
// it started and how it ended.
type blockingSender struct {
	started chan struct{}
	ended   chan error
	release chan struct{}
}

func (b *blockingSender) Send(ctx context.Context, ba *kvpb.BatchRequest) (*kvpb.BatchResponse, error) {
	b.started <- struct{}{}
	select {
	case <-ctx.Done():
		b.ended <- ctx.Err()
		return nil, ctx.Err()
	case <-b.release:
		b.ended <- nil
		return &kvpb.BatchResponse{}, nil
	}
}

func newBlocking() *blockingSender {
	return &blockingSender{started: make(chan struct{}, 1), ended: make(chan error, 1), release: make(chan struct{})}
}

func write() *kvpb.BatchRequest {
	return batch(kvpb.Header{TabletID: 4}, &kvpb.PutRequest{Key: bs("k"), Value: bs("v")})
}

func read() *kvpb.BatchRequest {
	return batch(kvpb.Header{TabletID: 4}, &kvpb.GetRequest{Key: bs("k")})
}

// Cancelling the caller's ctx cancels the remote call and returns the
// ctx's error.
func TestKVSenderCancel(t *testing.T) {
	bl := newBlocking()
	c, _ := serveKV(t, bl)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, write())
		done <- err
	}()
	<-bl.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Send after cancel: %v", err)
	}
	select {
	case err := <-bl.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("remote call ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("remote call not cancelled")
	}
}

// A connection lost mid-call is ambiguous for a write and a routing error
// for a read; a node that cannot be reached is a routing error.
func TestKVSenderFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ba        *kvpb.BatchRequest
		ambiguous bool
	}{
		{"write", write(), true},
		{"read", read(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bl := newBlocking()
			c, srv := serveKV(t, bl)
			done := make(chan error, 1)
			go func() {
				_, err := c.Send(context.Background(), tc.ba)
				done <- err
			}()
			<-bl.started
			srv.Stop()
			err := <-done
			var amb *kvpb.AmbiguousResultError
			var nf *kvpb.TabletNotFoundError
			if tc.ambiguous && !errors.As(err, &amb) {
				t.Fatalf("lost write: %v, want ambiguous", err)
			}
			if !tc.ambiguous && (errors.As(err, &amb) || !errors.As(err, &nf) || nf.TabletID != 4) {
				t.Fatalf("lost read: %v, want a routing error", err)
			}
			// The server is gone: nothing is sent now, so even a write
			// fails with a routing error.
			_, err = c.Send(context.Background(), write())
			if errors.As(err, &amb) || !errors.As(err, &nf) {
				t.Fatalf("send to a stopped node: %v, want a routing error", err)
			}
		})
	}
	tr := NewTransport(TransportConfig{Resolve: func(id uint64) (string, error) { return "", fmt.Errorf("node %d unknown", id) }})
	defer tr.Close()
	var nf *kvpb.TabletNotFoundError
	if _, err := NewKVSender(tr, 7).Send(context.Background(), write()); !errors.As(err, &nf) {
		t.Fatalf("unresolvable node: %v, want a routing error", err)
	}
}

// After the node restarts on the same address, the sender reaches it again
// within seconds.
func TestKVSenderReconnects(t *testing.T) {
	st := openStore(t)
	c, srv := serveKV(t, st)
	ctx := context.Background()
	put := batch(kvpb.Header{}, &kvpb.PutRequest{Key: bs("k"), Value: bs("v")})
	if _, err := c.Send(ctx, put); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	srv.Stop()
	var nf *kvpb.TabletNotFoundError
	if _, err := c.Send(ctx, read()); !errors.As(err, &nf) {
		t.Fatalf("send to a stopped node: %v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	srv2 := Serve(ln, func(raftnode.Envelope) {}, nil, WithKV(st))
	defer srv2.Stop()
	get := batch(kvpb.Header{}, &kvpb.GetRequest{Key: bs("k")})
	deadline := time.Now().Add(10 * time.Second)
	for {
		br, err := c.Send(ctx, get)
		if err == nil {
			if v := br.Responses[0].(*kvpb.GetResponse).Value; string(v) != "v" {
				t.Fatalf("k = %q after reconnecting", v)
			}
			return
		}
		if !errors.As(err, &nf) || time.Now().After(deadline) {
			t.Fatalf("after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
