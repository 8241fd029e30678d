package tablet

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPointReadClockReadings counts the physical clock readings of a
// point read the tablet timestamps itself (an implicit read's): one for
// its timestamp and one for the commit wait's check. The answer's Now is
// the read's timestamp, a reading of the clock taken for the read; a
// third reading made it before (twentieth session). The wait for a
// write's timestamp reads the clock only when the batch wrote; a read
// paid a fourth reading there. A write still reads it, and reads the
// clock again for its answer's Now (it may have written above its
// timestamp).
func TestPointReadClockReadings(t *testing.T) {
	eng, err := storage.Open("", storage.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = eng.Close() }()
	manual := hlc.NewManualClock(testClockStart)
	var readings atomic.Int64
	clock := hlc.NewClock(func() int64 { readings.Add(1); return manual.UnixNano() }, testMaxOffset)
	ss := &selfSender{}
	r, err := New(eng, clock, kvpb.TabletDescriptor{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max}, Config{Sender: ss})
	if err != nil {
		t.Fatal(err)
	}
	ss.r = r
	defer r.Close()
	ctx := context.Background()
	key := []byte("\x03t/accounts/7")
	for _, tc := range []struct {
		name string
		req  kvpb.Request
		want int64
	}{
		{"put", &kvpb.PutRequest{Key: key, Value: []byte("v")}, 4},
		{"scan of the row", &kvpb.ScanRequest{Key: key, EndKey: keys.PrefixEnd(key)}, 2},
		{"get", &kvpb.GetRequest{Key: key}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manual.Advance(1000)
			before := readings.Load()
			if _, err := r.Send(ctx, &kvpb.BatchRequest{Requests: []kvpb.Request{tc.req}}); err != nil {
				t.Fatal(err)
			}
			if got := readings.Load() - before; got != tc.want {
				t.Fatalf("%d physical clock readings, want %d", got, tc.want)
			}
		})
	}
	// As leaseholder of a raft group (the lease held here alone, as on a
	// node of its own: no start to wait out), a point read reads the
	// clock no more: waitLeaseStart read it for every request, to find
	// nothing to wait for (3 readings).
	r.SetRaft(&scriptedGroup{term: 1, leader: 1, proposed: make(chan []byte, 1)})
	t.Run("scan of the row under a lease", func(t *testing.T) {
		manual.Advance(1000)
		before := readings.Load()
		if _, err := r.Send(ctx, &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.ScanRequest{Key: key, EndKey: keys.PrefixEnd(key)}}}); err != nil {
			t.Fatal(err)
		}
		if got := readings.Load() - before; got != 2 {
			t.Fatalf("%d physical clock readings, want 2", got)
		}
	})
}

// TestPointReadAnswerNow: the Now of a point read's answer, the read's
// own timestamp since the answer stopped reading the clock again, is at
// or above every timestamp the answer shows (the row's version) and above
// the sender's clock reading (the header's Now), so the sender's clock,
// moved up to it, passes both.
func TestPointReadAnswerNow(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	key := []byte("\x03t/accounts/7")
	if _, err := h.r.Send(ctx, &kvpb.BatchRequest{Requests: []kvpb.Request{&kvpb.PutRequest{Key: key, Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	h.manual.Advance(1000)
	sender := h.clock.Now()
	for _, tc := range []struct {
		name string
		req  kvpb.Request
	}{
		{"scan of the row", &kvpb.ScanRequest{Key: key, EndKey: keys.PrefixEnd(key)}},
		{"get", &kvpb.GetRequest{Key: key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br, err := h.r.Send(ctx, &kvpb.BatchRequest{Header: kvpb.Header{Now: sender}, Requests: []kvpb.Request{tc.req}})
			if err != nil {
				t.Fatal(err)
			}
			var shown hlc.Timestamp
			switch resp := br.Responses[0].(type) {
			case *kvpb.ScanResponse:
				if len(resp.Rows) != 1 {
					t.Fatalf("read %d rows, want 1", len(resp.Rows))
				}
				shown = resp.Rows[0].Timestamp
			case *kvpb.GetResponse:
				shown = resp.Timestamp
			}
			if shown.IsEmpty() || br.Now.Less(shown) || !sender.Less(br.Now) {
				t.Fatalf("answer's Now %s, want at or above the version's %s and above the sender's %s", br.Now, shown, sender)
			}
		})
	}
}
