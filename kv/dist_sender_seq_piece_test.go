package kv

import (
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestPieceReadsOnTo: a limited forward scan the sequential walk cuts at
// a tablet's end tells the tablet where the scan goes on to
// (kvpb.ScanRequest.ReadsOnTo), so that its node may read the next
// tablets' files ahead; the last piece, a reverse scan, an unlimited scan
// (sent to every tablet at once, not walked) and a scan that is not cut
// say nothing more, and a request that already said further keeps it.
func TestPieceReadsOnTo(t *testing.T) {
	tablet := func(start, end string) kvpb.TabletDescriptor {
		return kvpb.TabletDescriptor{TabletID: 1, StartKey: []byte(start), EndKey: []byte(end)}
	}
	for _, tc := range []struct {
		name      string
		req       kvpb.ScanRequest
		desc      kvpb.TabletDescriptor
		readsOnTo string
	}{
		{"cut at a tablet's end", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 10}, tablet("a", "m"), "z"},
		{"a count cut", kvpb.ScanRequest{Key: []byte("c"), EndKey: []byte("z"), MaxKeys: 10, CountTags: []byte{1}}, tablet("a", "m"), "z"},
		{"the last piece", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 10}, tablet("m", "zz"), ""},
		{"not cut", kvpb.ScanRequest{Key: []byte("b"), EndKey: []byte("c"), MaxKeys: 10}, tablet("a", "m"), ""},
		{"unlimited", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z")}, tablet("a", "m"), ""},
		{"reverse", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 10, Reverse: true}, tablet("a", "m"), ""},
		{"said further already", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("m"), MaxKeys: 10, ReadsOnTo: []byte("z")}, tablet("a", "f"), "z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &seqReq{req: &tc.req, rest: tc.req.Span(), keysLeft: tc.req.MaxKeys}
			got, ok := st.pieceIn(tc.desc).(*kvpb.ScanRequest)
			if !ok {
				t.Fatalf("no scan piece in %+v", tc.desc)
			}
			if string(got.ReadsOnTo) != tc.readsOnTo {
				t.Errorf("ReadsOnTo = %q, want %q", got.ReadsOnTo, tc.readsOnTo)
			}
			if got.MaxKeys != tc.req.MaxKeys || string(got.CountTags) != string(tc.req.CountTags) || got.Reverse != tc.req.Reverse {
				t.Errorf("the piece changed the request: %+v from %+v", got, tc.req)
			}
		})
	}
}
