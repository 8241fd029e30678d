package membership

import (
	"errors"
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
