package kv

import (
	"bytes"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestTruncateReadsOnTo: a forward scan the router cuts at a tablet's end
// tells the tablet where the scan goes on to (kvpb.ScanRequest.ReadsOnTo),
// so that its node may read the next tablets' files ahead; the last piece,
// a reverse scan and a scan that is not cut say nothing more, and a
// request that already said further keeps it.
func TestTruncateReadsOnTo(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       kvpb.ScanRequest
		piece     kvpb.Span
		readsOnTo string
	}{
		{"cut at a tablet's end", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z")}, kvpb.Span{Key: []byte("a"), EndKey: []byte("m")}, "z"},
		{"a count cut", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 10, CountTags: []byte{1}}, kvpb.Span{Key: []byte("c"), EndKey: []byte("m")}, "z"},
		{"the last piece", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z")}, kvpb.Span{Key: []byte("m"), EndKey: []byte("z")}, ""},
		{"not cut", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z")}, kvpb.Span{Key: []byte("a"), EndKey: []byte("z")}, ""},
		{"reverse", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), Reverse: true}, kvpb.Span{Key: []byte("m"), EndKey: []byte("z")}, ""},
		{"reverse, cut below", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), Reverse: true}, kvpb.Span{Key: []byte("a"), EndKey: []byte("m")}, ""},
		{"said further already", kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("m"), ReadsOnTo: []byte("z")}, kvpb.Span{Key: []byte("a"), EndKey: []byte("f")}, "z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := truncate(&tc.req, tc.piece).(*kvpb.ScanRequest)
			if !bytes.Equal(got.Key, tc.piece.Key) || !bytes.Equal(got.EndKey, tc.piece.EndKey) {
				t.Fatalf("truncated to [%s, %s), want [%s, %s)", got.Key, got.EndKey, tc.piece.Key, tc.piece.EndKey)
			}
			if string(got.ReadsOnTo) != tc.readsOnTo {
				t.Errorf("ReadsOnTo = %q, want %q", got.ReadsOnTo, tc.readsOnTo)
			}
			if got.MaxKeys != tc.req.MaxKeys || !bytes.Equal(got.CountTags, tc.req.CountTags) || got.Reverse != tc.req.Reverse {
				t.Errorf("truncate changed the request: %+v from %+v", got, tc.req)
			}
		})
	}
}
