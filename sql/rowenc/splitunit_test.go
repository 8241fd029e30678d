package rowenc

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/sql/types"
)

func TestSplitUnit(t *testing.T) {
	row := func(group uint64, table uint32) []byte {
		p := binary.BigEndian.AppendUint16(GroupPrefix(nil, group), 0)
		k, err := EncodeKey(EncodeTableIndexPrefix(p, table, 1), types.DInt(42), Asc)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, tc := range []struct {
		name string
		key  []byte
		want []byte // the unit's start; nil: no unit
	}{
		{"catalog", []byte("\x02s/catalog"), keys.Min},
		{"directory", keys.Directory([]byte("\x03")), keys.Min},
		{"colocated group", row(50, 51), GroupSpan(50).Key},
		{"column entry of a colocated row", ColumnKey(nil, row(50, 52), 3), GroupSpan(50).Key},
		{"ordinary table", row(100, 100), nil},
		{"bare group prefix", GroupPrefix(nil, 7), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := SplitUnit(tc.key)
			if ok != (tc.want != nil) || ok && !bytes.Equal(u.Key, tc.want) {
				t.Fatalf("SplitUnit(%x) = %x..%x %v, want unit from %x", tc.key, u.Key, u.EndKey, ok, tc.want)
			}
			if ok && (bytes.Compare(tc.key, u.Key) < 0 || bytes.Compare(tc.key, u.EndKey) >= 0) {
				t.Fatalf("SplitUnit(%x) = %x..%x does not hold the key", tc.key, u.Key, u.EndKey)
			}
		})
	}
}
