package main

import (
	"testing"

	"github.com/cairn-db/cairn/sql/mon"
)

// TestParseMemoryFlag: --max-sql-memory and --max-disk-temp-storage take
// a size or a percentage of RAM (the default --max-sql-memory is 25%, a
// quarter of RAM, as issue 15 asks); anything else is refused.
func TestParseMemoryFlag(t *testing.T) {
	ram := int64(mon.SystemMemory())
	if ram == 0 {
		t.Skip("this machine's RAM is unknown")
	}
	for _, tc := range []struct {
		in   string
		want int64 // -1: an error
	}{
		{"25%", ram / 4},
		{"100%", ram},
		{"4GiB", 4 << 30},
		{"512MiB", 512 << 20},
		{"0%", -1},
		{"150%", -1},
		{"lots%", -1},
		{"0", -1},
		{"lots", -1},
	} {
		got, err := parseMemoryFlag(tc.in)
		switch {
		case tc.want == -1 && err == nil:
			t.Errorf("%q: got %d, want an error", tc.in, got)
		case tc.want != -1 && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.want != -1 && (got < tc.want-1 || got > tc.want+1):
			t.Errorf("%q: got %d, want %d", tc.in, got, tc.want)
		}
	}
}
