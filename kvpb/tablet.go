package kvpb

import (
	"bytes"
	"fmt"
)

// TabletID names a tablet for the lifetime of the cluster.
type TabletID uint64

// TabletDescriptor says which span of keys a tablet holds.
type TabletDescriptor struct {
	TabletID TabletID `wire:"1"`
	StartKey []byte   `wire:"2"`
	EndKey   []byte   `wire:"3"`
	// Generation increases on every split or merge involving the tablet, so
	// a routing cache can tell which of two descriptors is newer.
	Generation int64 `wire:"4"`
}

// ContainsKey reports whether k is in [StartKey, EndKey).
func (d *TabletDescriptor) ContainsKey(k []byte) bool {
	return bytes.Compare(k, d.StartKey) >= 0 && bytes.Compare(k, d.EndKey) < 0
}

// ContainsSpan reports whether the whole span is in the tablet.
func (d *TabletDescriptor) ContainsSpan(s Span) bool {
	if len(s.EndKey) == 0 {
		return d.ContainsKey(s.Key)
	}
	return bytes.Compare(s.Key, d.StartKey) >= 0 && bytes.Compare(s.EndKey, d.EndKey) <= 0
}

func (d *TabletDescriptor) String() string {
	return fmt.Sprintf("t%d[%q, %q)@g%d", d.TabletID, d.StartKey, d.EndKey, d.Generation)
}
