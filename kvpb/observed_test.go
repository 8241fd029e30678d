package kvpb

import (
	"testing"

	"github.com/cairn-db/cairn/hlc"
)

func ts(w int64) hlc.Timestamp { return hlc.Timestamp{WallTime: w} }

func TestLocalUncertaintyLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		global     hlc.Timestamp
		observed   []ObservedTimestamp
		node       uint64
		leaseStart hlc.Timestamp
		want       hlc.Timestamp
	}{
		{"no observation: global", ts(100), nil, 1, hlc.Timestamp{}, ts(100)},
		{"another node's observation: global", ts(100), []ObservedTimestamp{{2, ts(30)}}, 1, hlc.Timestamp{}, ts(100)},
		{"unknown node 0: global", ts(100), []ObservedTimestamp{{0, ts(30)}}, 0, hlc.Timestamp{}, ts(100)},
		{"observation below global", ts(100), []ObservedTimestamp{{2, ts(30)}, {1, ts(40)}}, 1, hlc.Timestamp{}, ts(40)},
		{"observation above global: global", ts(100), []ObservedTimestamp{{1, ts(140)}}, 1, hlc.Timestamp{}, ts(100)},
		{"lease start above observation", ts(100), []ObservedTimestamp{{1, ts(40)}}, 1, ts(70), ts(70)},
		{"lease start below observation", ts(100), []ObservedTimestamp{{1, ts(40)}}, 1, ts(20), ts(40)},
		{"lease start above global: global", ts(100), []ObservedTimestamp{{1, ts(40)}}, 1, ts(150), ts(100)},
		{"logical ticks count", hlc.Timestamp{WallTime: 100, Logical: 3}, []ObservedTimestamp{{1, hlc.Timestamp{WallTime: 100, Logical: 5}}}, 1, hlc.Timestamp{}, hlc.Timestamp{WallTime: 100, Logical: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txn := &Transaction{GlobalUncertaintyLimit: tc.global, ObservedTimestamps: tc.observed}
			if got := txn.LocalUncertaintyLimit(tc.node, tc.leaseStart); got != tc.want {
				t.Fatalf("LocalUncertaintyLimit(%d, %s) = %s, want %s", tc.node, tc.leaseStart, got, tc.want)
			}
		})
	}
}

func TestUpdateObservedTimestampKeepsFirst(t *testing.T) {
	var txn Transaction
	for _, step := range []struct {
		node uint64
		ts   hlc.Timestamp
	}{{1, ts(50)}, {2, ts(70)}, {1, ts(60)}, {2, ts(65)}} {
		txn.UpdateObservedTimestamp(step.node, step.ts)
	}
	for node, want := range map[uint64]hlc.Timestamp{1: ts(50), 2: ts(65)} {
		if got, ok := txn.ObservedTimestamp(node); !ok || got != want {
			t.Errorf("node %d: %s, %v; want %s", node, got, ok, want)
		}
	}
	if len(txn.ObservedTimestamps) != 2 {
		t.Errorf("%d observations, want one per node: %v", len(txn.ObservedTimestamps), txn.ObservedTimestamps)
	}
	if _, ok := txn.ObservedTimestamp(3); ok {
		t.Errorf("node 3 observed without a reading")
	}
	c := txn.Clone()
	c.UpdateObservedTimestamp(1, ts(10))
	if got, _ := txn.ObservedTimestamp(1); got != ts(50) {
		t.Errorf("a clone's update changed the original: %s", got)
	}
}
