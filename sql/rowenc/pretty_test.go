package rowenc

import (
	"testing"

	"github.com/cairn-db/cairn/keys"
)

func TestPrettyKey(t *testing.T) {
	g := GroupPrefix(nil, 16390)
	tbl := EncodeTableIndexPrefix(append(append([]byte{}, g...), 0, 3), 16391, 2)
	for _, tc := range []struct {
		key  []byte
		want string
	}{
		{keys.Min, "/Min"},
		{keys.Max, "/Max"},
		{keys.SystemEnd, "/Data"},
		{append(append([]byte{}, keys.SystemPrefix...), 's', 'x'), "/System/sx"},
		{g, "/Group/16390"},
		{keys.PrefixEnd(g), "/Group/16391"},  // a group's end is the next group
		{[]byte{0x03, 0x82, 0x40}, `/\x82@`}, // a group number cut short
		{append(append([]byte{}, g...), 0, 7), "/Group/16390/Bucket/7"},
		{tbl, "/Group/16390/Bucket/3/Table/16391/Index/2"},
		{append(append([]byte{}, tbl...), 0x01, 'a'), `/Group/16390/Bucket/3/Table/16391/Index/2/\x01a`},
	} {
		if got := PrettyKey(tc.key); got != tc.want {
			t.Errorf("PrettyKey(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
