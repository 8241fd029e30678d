package rowenc

import (
	"testing"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/sql/types"
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

// TestLeaseDomain: the bucket tablets of one index (they start at its
// prefix followed by a shard value, bucket 0 at its group's start) share
// a domain, other indexes and tables have their own, a hash-partitioned
// group's bucket ranges and a table of one tablet are their group's, and
// keys outside table data have none.
func TestLeaseDomain(t *testing.T) {
	g := GroupPrefix(nil, 16390)
	idx := func(table, index uint32) []byte {
		return EncodeTableIndexPrefix(append(append([]byte{}, g...), 0, 0), table, index)
	}
	shard := func(table, index uint32, s int64) []byte {
		k, err := EncodeKey(idx(table, index), types.DInt(s), Asc)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	bucket := func(b byte) []byte { return append(append([]byte{}, g...), 0, b) }
	sys := append(append([]byte{}, keys.SystemPrefix...), 's', 'x')
	for _, tc := range []struct {
		name       string
		start, end []byte
		want       string
	}{
		{"system", sys, keys.Next(sys), ""},
		{"the start of table data", keys.SystemEnd, g, ""},
		{"a group cut short", []byte{0x03, 0x82, 0x40}, g, ""},
		{"a table of one tablet", g, keys.PrefixEnd(g), "g16390"},
		{"a bucket range of a hash-partitioned group", bucket(0x12), bucket(0x34), "g16390"},
		{"a table's prefix", idx(16391, 0)[:len(idx(16391, 0))-1], keys.PrefixEnd(g), "g16390/t16391"},
		{"an index from its start", idx(16391, 2), keys.PrefixEnd(g), "g16390/t16391/i2"},
		{"bucket 0: the group's start to bucket 1", g, shard(16391, 2, 1), "g16390/t16391/i2"},
		{"bucket 1", shard(16391, 2, 1), shard(16391, 2, 2), "g16390/t16391/i2"},
		{"the last bucket: to the group's end", shard(16391, 2, 7), keys.PrefixEnd(g), "g16390/t16391/i2"},
		{"ending at an index's start: not in it", g, idx(16391, 2), "g16390"},
		{"ending in the next group", g, append(keys.PrefixEnd(g), 0, 0, 0x81, 0x82), "g16390"},
		{"another index", shard(16391, 3, 7), shard(16391, 3, 8), "g16390/t16391/i3"},
		{"another table", shard(16392, 2, 7), shard(16392, 2, 8), "g16390/t16392/i2"},
	} {
		if got := LeaseDomain(tc.start, tc.end); got != tc.want {
			t.Errorf("%s: LeaseDomain(%q, %q) = %q, want %q", tc.name, tc.start, tc.end, got, tc.want)
		}
	}
}
