package tablet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pointReadReplica is a replica over the whole keyspace, without raft, on
// an in-memory engine holding rows rows (pointReadKey(i), value
// "value-i"), each written by a Put through Send.
func pointReadReplica(t testing.TB, rows int) *Replica {
	t.Helper()
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	clock := hlc.NewClock(hlc.NewManualClock(testClockStart).UnixNano, testMaxOffset)
	ss := &selfSender{}
	r, err := New(eng, clock, kvpb.TabletDescriptor{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max}, Config{Sender: ss})
	if err != nil {
		t.Fatal(err)
	}
	ss.r = r
	t.Cleanup(r.Close)
	for i := range rows {
		put := &kvpb.PutRequest{Key: pointReadKey(i), Value: fmt.Appendf(nil, "value-%d", i)}
		if _, err := r.Send(context.Background(), &kvpb.BatchRequest{Requests: []kvpb.Request{put}}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func pointReadKey(i int) []byte { return fmt.Appendf(nil, "\x03t/accounts/%04d", i) }

// rowRead is the batch of a point SELECT's KV read: a Scan of row i's
// span, timestamped by the tablet.
func rowRead(i int) *kvpb.BatchRequest {
	k := pointReadKey(i)
	return &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.ScanRequest{Key: k, EndKey: keys.PrefixEnd(k)}}}
}

// TestPointReadAllocs counts the objects Replica.Send allocates for a
// point read of a row (the Scan of its span, as a point SELECT sends
// it): the sendState (the request's copy, its latch guard and its answer)
// and the scan's arena holding the row's bytes. The evaluation's evalCtx
// (728 bytes) was a third, before a read's went back to a pool
// (evalOut.recycle).
func TestPointReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	r := pointReadReplica(t, 100)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ba   *kvpb.BatchRequest
		want float64
	}{
		{"scan of a row", rowRead(7), 2},
		{"scan of a missing row", rowRead(1000), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(200, func() {
				if _, err := r.Send(ctx, tc.ba); err != nil {
					t.Fatal(err)
				}
			}); got != tc.want {
				t.Fatalf("a point read allocates %.1f objects, want %.0f", got, tc.want)
			}
		})
	}
}

// TestPointReadAnswersOwned: the answer of a point read (its
// BatchResponse, ScanResponse and row) is the caller's: later reads,
// whose evaluations reuse the recycled evalCtx of the earlier ones, leave
// every earlier answer as it was.
func TestPointReadAnswersOwned(t *testing.T) {
	r := pointReadReplica(t, 20)
	ctx := context.Background()
	var answers []*kvpb.BatchResponse
	for i := range 20 {
		br, err := r.Send(ctx, rowRead(i))
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, br)
	}
	for i, br := range answers {
		if len(br.Responses) != 1 {
			t.Fatalf("answer %d now holds %d responses, want 1", i, len(br.Responses))
		}
		rows := br.Responses[0].(*kvpb.ScanResponse).Rows
		if len(rows) != 1 || string(rows[0].Key) != string(pointReadKey(i)) || string(rows[0].Value) != fmt.Sprintf("value-%d", i) {
			t.Fatalf("answer %d now holds %v, want row %q = value-%d", i, rows, pointReadKey(i), i)
		}
	}
}

// TestPointReadTakesNoReplicaLock is invariant 13: a point read reads the
// descriptor (in validate and twice under latches) and the GC threshold
// (its scan's check) without the replica's mutex, which it read-locked
// four times per batch before: with the mutex held for writing, the read
// still completes, and answers the row.
func TestPointReadTakesNoReplicaLock(t *testing.T) {
	r := pointReadReplica(t, 10)
	r.mu.Lock()
	type result struct {
		br  *kvpb.BatchResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		br, err := r.Send(context.Background(), rowRead(7))
		done <- result{br, err}
	}()
	var res result
	select {
	case res = <-done:
		r.mu.Unlock()
	case <-time.After(10 * time.Second):
		r.mu.Unlock()
		<-done
		t.Fatal("a point read waited for the replica's mutex")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	rows := res.br.Responses[0].(*kvpb.ScanResponse).Rows
	if len(rows) != 1 || string(rows[0].Value) != "value-7" {
		t.Fatalf("answer %v, want row 7", rows)
	}
}
