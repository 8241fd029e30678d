package rowenc_test

import (
	"bytes"
	"testing"

	"github.com/cairn-db/cairn/sql/types"
)

// TestAppendIndexEntryReusesBuffers: encoding entry after entry into the
// same two buffers (as an index build does) gives each row the entry
// EncodeIndexEntry gives it, for a unique index (primary key in the
// value; a NULL key puts it in the key instead) and a non-unique one with
// a stored column, whatever the buffers held before.
func TestAppendIndexEntryReusesBuffers(t *testing.T) {
	l := mustLayout(t, testTable(130))
	rows := [][]types.Datum{
		row(1, "x", 5, "p"), row(2, nil, -1, nil), row(300000, "a much longer text value", 7, "q"), row(-4, "w", nil, "stored"),
	}
	for i := range l.Secondary[:2] {
		idx := &l.Secondary[i]
		key, value := []byte("left over from a previous entry"), []byte("and its value, longer still than most")
		for _, r := range rows {
			want, err := l.EncodeIndexEntry(idx, r)
			if err != nil {
				t.Fatal(err)
			}
			var unique bool
			if key, value, unique, err = l.AppendIndexEntry(key[:0], value[:0], idx, r); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(key, want.Key) || !bytes.Equal(value, want.Value) || unique != want.Unique {
				t.Errorf("index %s row %v: appended %x=%x unique %v, want %x=%x unique %v",
					idx.Name, r, key, value, unique, want.Key, want.Value, want.Unique)
			}
		}
	}
}
