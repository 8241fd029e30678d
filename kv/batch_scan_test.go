package kv

import (
	"testing"

	"github.com/cairn-db/cairn/kvpb"
)

// TestBatchScanSlot: a batch whose first operation is a Scan keeps that
// request in itself (a point read's batch allocates none); a second Scan
// is a request of its own, and each answers its own span.
func TestBatchScanSlot(t *testing.T) {
	cases := []struct {
		name  string
		scans int
		want  float64 // allocations per batch of scans
	}{
		{"one scan", 1, 0},
		{"two scans", 2, 2}, // the second request and the two-request slice
	}
	keys := [][2][]byte{{[]byte("a"), []byte("b")}, {[]byte("c"), []byte("d")}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b Batch
			add := func() {
				b = Batch{}
				for i := 0; i < tc.scans; i++ {
					b.Scan(keys[i][0], keys[i][1], int64(i+1))
				}
			}
			add()
			if len(b.reqs) != tc.scans {
				t.Fatalf("%d requests, want %d", len(b.reqs), tc.scans)
			}
			for i, r := range b.reqs {
				sr := r.(*kvpb.ScanRequest)
				if string(sr.Key) != string(keys[i][0]) || string(sr.EndKey) != string(keys[i][1]) || sr.MaxKeys != int64(i+1) {
					t.Errorf("request %d: %+v", i, sr)
				}
			}
			if raceEnabled {
				t.Skip("allocation counts differ under the race detector")
			}
			if got := testing.AllocsPerRun(100, add); got != tc.want {
				t.Errorf("%v allocations per batch, want %v", got, tc.want)
			}
		})
	}
}
