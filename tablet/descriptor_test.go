package tablet

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

func TestDescriptorRoundTrip(t *testing.T) {
	for _, d := range []kvpb.TabletDescriptor{
		{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max},
		{TabletID: 1 << 40, StartKey: []byte("\x03abc"), EndKey: []byte("\x03abd"), Generation: 7},
	} {
		got, err := DecodeDescriptor(EncodeDescriptor(nil, d))
		if err != nil {
			t.Fatal(err)
		}
		if got.TabletID != d.TabletID || got.Generation != d.Generation || !bytes.Equal(got.StartKey, d.StartKey) || !bytes.Equal(got.EndKey, d.EndKey) {
			t.Fatalf("round trip of %s gave %s", &d, &got)
		}
	}
	for _, bad := range [][]byte{nil, {9}, {1}, {1, 1, 0, 5, 'a'}, append(EncodeDescriptor(nil, kvpb.TabletDescriptor{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max}), 0)} {
		if _, err := DecodeDescriptor(bad); !errors.Is(err, ErrBadDescriptor) {
			t.Errorf("DecodeDescriptor(%x) = %v, want ErrBadDescriptor", bad, err)
		}
	}
}

// FuzzDecodeDescriptor: decoding never panics, and whatever decodes
// re-encodes to the same bytes.
func FuzzDecodeDescriptor(f *testing.F) {
	f.Add(EncodeDescriptor(nil, kvpb.TabletDescriptor{TabletID: 1, StartKey: keys.Min, EndKey: keys.Max}))
	f.Add(EncodeDescriptor(nil, kvpb.TabletDescriptor{TabletID: 3, StartKey: []byte("\x02b"), EndKey: []byte("\x03"), Generation: -1}))
	f.Add([]byte{1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDescriptor(b)
		if err != nil {
			return
		}
		if re := EncodeDescriptor(nil, d); !bytes.Equal(re, b) {
			t.Fatalf("decoded %s from %x but it encodes to %x", &d, b, re)
		}
	})
}
