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
// its timestamp, one for the commit wait's check, one for the answer's
// Now. The wait for a write's timestamp reads the clock only when the
// batch wrote; a read paid a fourth reading there. A write still reads
// it.
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
		{"scan of the row", &kvpb.ScanRequest{Key: key, EndKey: keys.PrefixEnd(key)}, 3},
		{"get", &kvpb.GetRequest{Key: key}, 3},
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
}
