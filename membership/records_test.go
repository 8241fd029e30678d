package membership

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-db/cairn/clusterversion"
)

// Node and liveness records are stored with their format version; one
// written by 1.0 (without it) still reads, and one from a later format is
// refused, not misread.
func TestRecordFormat(t *testing.T) {
	rec := NodeRecord{NodeID: 3, RPCAddr: "10.0.0.3:26357", Status: StatusActive, BinaryVersion: "1.1", MinSupportedVersion: "1.0"}
	b := encodeRecord(rec)
	if !strings.HasPrefix(string(b), `{"format_version":1,"node_id":3,`) {
		t.Fatalf("a stored node record: %s", b)
	}
	if got, err := decodeRecord[NodeRecord](b); err != nil || got != rec {
		t.Fatalf("decodeRecord(%s) = %+v, %v", b, got, err)
	}
	// What a 1.0 binary wrote (encode, no format version), and what it
	// reads of a 1.1 record (decode, which skips the member).
	if got, err := decodeRecord[NodeRecord](encode(rec)); err != nil || got != rec {
		t.Fatalf("a 1.0 node record: %+v, %v", got, err)
	}
	if got, err := decode[NodeRecord](b); err != nil || got != rec {
		t.Fatalf("a 1.0 reader of a 1.1 record: %+v, %v", got, err)
	}
	l := LivenessRecord{NodeID: 3, Epoch: 2, Updated: 10, Expiration: 20}
	if got, err := decodeRecord[LivenessRecord](encodeRecord(l)); err != nil || got.NodeID != 3 || got.Epoch != 2 || got.Expiration != 20 {
		t.Fatalf("a liveness record: %+v, %v", got, err)
	}
	future := strings.Replace(string(b), `"format_version":1`, `"format_version":2`, 1)
	if _, err := decodeRecord[NodeRecord]([]byte(future)); !errors.Is(err, clusterversion.ErrFutureFormat) || !strings.Contains(err.Error(), "membership: a stored membership.NodeRecord is in format version 2") {
		t.Fatalf("a future node record: %v", err)
	}
}

// TestLeadsWith: what the lease balancer's two hops (store's twoHop) read
// of the last View's live records: the nodes that report, and whether a
// node leads a tablet (of a domain, or any) another holds a replica of.
func TestLeadsWith(t *testing.T) {
	m := &Member{reports: map[uint64]LivenessRecord{
		3: {NodeID: 3, Members: map[uint64]int{3: 4, 1: 2, 5: 4}, Domains: map[string]map[uint64]int{"t/1": {3: 2, 5: 2}}},
		1: {NodeID: 1, Members: map[uint64]int{1: 1, 2: 1, 3: 1}},
	}}
	if got := m.ReportingNodes(); !slices.Equal(got, []uint64{1, 3}) {
		t.Errorf("ReportingNodes() = %v, want [1 3]", got)
	}
	for _, tc := range []struct {
		node, peer uint64
		domain     string
		want       bool
	}{
		{3, 5, "t/1", true},
		{3, 1, "t/1", false}, // node 3 leads a tablet of node 1's, but of no domain t/1
		{3, 1, "", true},
		{3, 2, "", false},
		{3, 3, "t/1", false}, // itself
		{1, 2, "t/1", false}, // no domain in its record
		{2, 1, "", false},    // no live record
	} {
		if got := m.LeadsWith(tc.node, tc.peer, tc.domain); got != tc.want {
			t.Errorf("LeadsWith(%d, %d, %q) = %v, want %v", tc.node, tc.peer, tc.domain, got, tc.want)
		}
	}
}
