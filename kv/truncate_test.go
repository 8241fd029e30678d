package kv

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestTruncate checks the router's cut of one request to one tablet's part
// of its span: every ranged request the router may split comes back as a
// copy over the part, its other fields kept and the original untouched; a
// request already over exactly the part, or over one key, is returned as
// it is.
func TestTruncate(t *testing.T) {
	part := kvpb.Span{Key: []byte("c"), EndKey: []byte("f")}
	ranged := []kvpb.Request{
		&kvpb.ScanRequest{Key: []byte("a"), EndKey: []byte("z"), MaxKeys: 7, Reverse: true},
		&kvpb.DeleteRangeRequest{Key: []byte("a"), EndKey: []byte("z")},
		&kvpb.ResolveIntentRangeRequest{Key: []byte("a"), EndKey: []byte("z")},
		&kvpb.GCRequest{Key: []byte("a"), EndKey: []byte("z")},
		&kvpb.ClearRangeRequest{Key: []byte("a"), EndKey: []byte("z")},
		&kvpb.RefreshRequest{Key: []byte("a"), EndKey: []byte("z")},
		&kvpb.LockRequest{Key: []byte("a"), EndKey: []byte("z"), SkipLocked: true},
	}
	for _, r := range ranged {
		t.Run(r.Method().String(), func(t *testing.T) {
			before := reflect.ValueOf(r).Elem().Interface()
			got := truncate(r, part)
			if got == r {
				t.Fatalf("truncate returned the request itself, want a copy")
			}
			if reflect.TypeOf(got) != reflect.TypeOf(r) {
				t.Fatalf("truncate returned a %T, want a %T", got, r)
			}
			if s := got.Span(); !bytes.Equal(s.Key, part.Key) || !bytes.Equal(s.EndKey, part.EndKey) {
				t.Fatalf("span = %s, want %s", s, part)
			}
			if now := reflect.ValueOf(r).Elem().Interface(); !reflect.DeepEqual(now, before) {
				t.Fatalf("original changed: %+v, was %+v", now, before)
			}
			// Apart from the span, the copy is the original.
			back := truncate(got, r.Span())
			if !reflect.DeepEqual(reflect.ValueOf(back).Elem().Interface(), before) {
				t.Fatalf("other fields lost: %+v, want %+v", back, before)
			}
			if same := truncate(got, part); same != got {
				t.Fatalf("a request over exactly the part was copied")
			}
		})
	}
	point := &kvpb.GetRequest{Key: []byte("d")}
	if got := truncate(point, part); got != kvpb.Request(point) {
		t.Fatalf("a point request was copied")
	}
}
