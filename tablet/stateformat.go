package tablet

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/hlc"
)

// Stored formats and their versions. Every format the tablet writes to
// the engine or the raft log says which version of it a value is, so that
// a binary meets a format from a later build with ErrFutureFormat, which
// names the version and says what to do, never by misreading it:
//
//	raft command     first byte commandVersion (raft.go)
//	proposal         first byte 1..4 (proposal_codec.go)
//	tablet descriptor first byte descriptorVersion (descriptor.go)
//	GC threshold,    the state timestamp format below
//	closed timestamp
//
// The state timestamp format. Before cluster version 1.1 a timestamp of
// the tablet's replicated state was 12 bytes, the wall time (big endian,
// 8 bytes, never negative) then the logical counter (4): no version. From
// 1.1 (clusterversion.VersionedState) it is a version byte, then the
// version's payload; version 1's is those 12 bytes (clusterversion's
// format.go: the first byte alone tells the forms apart).
//
// A binary of 1.0 reads only the 12 bytes: a replica of one would fail to
// load a versioned value (its snapshot, its restart). So the versioned
// form is written only once the cluster version that reads it is active
// (Config.Version): the leaseholder decides while evaluating, and the
// value travels in the proposal, so every replica stores the same bytes.
// Both forms are read forever (a tablet idle since before the upgrade
// still holds the legacy one).

// ErrFutureFormat: a stored value or raft entry is in a version of its
// format that this binary does not know: a newer binary wrote it. It is
// never guessed at.
var ErrFutureFormat = clusterversion.ErrFutureFormat

// futureFormat returns ErrFutureFormat for what (such as "the raft
// command") at version v, this binary reading up to max.
func futureFormat(what string, v, max int) error { return clusterversion.FutureFormat(what, v, max) }

const (
	// stateFormatV1 is the version this binary writes and the newest it
	// reads.
	stateFormatV1 = 1
	// stateTSLen is the length of a state timestamp's payload (and of
	// the whole unversioned form).
	stateTSLen = 12
)

// encodeStateTS encodes a timestamp of the tablet's replicated state,
// versioned once the cluster version that reads the versioned form is
// active (versioned).
func encodeStateTS(ts hlc.Timestamp, versioned bool) []byte {
	b := make([]byte, 0, 1+stateTSLen)
	if versioned {
		b = clusterversion.AppendFormat(b, stateFormatV1)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(ts.WallTime))
	return binary.BigEndian.AppendUint32(b, uint32(ts.Logical))
}

// decodeStateTS decodes what encodeStateTS wrote, in either form; what
// names the value for errors.
func decodeStateTS(what string, b []byte) (hlc.Timestamp, error) {
	v, p, err := clusterversion.SplitFormat(what, b, stateFormatV1)
	if err != nil {
		return hlc.Timestamp{}, err
	}
	if len(p) != stateTSLen {
		return hlc.Timestamp{}, fmt.Errorf("tablet: %s of %d bytes in format version %d", what, len(b), v)
	}
	return hlc.Timestamp{WallTime: int64(binary.BigEndian.Uint64(p)), Logical: int32(binary.BigEndian.Uint32(p[8:]))}, nil
}

// StateFormat returns the format version of a stored state timestamp (the
// GC threshold, the closed timestamp): 0 for the unversioned form of
// cluster version 1.0, else the version its first byte names. A version
// above the newest this binary reads is ErrFutureFormat.
func StateFormat(b []byte) (int, error) {
	v, _, err := clusterversion.SplitFormat("a state timestamp", b, stateFormatV1)
	return v, err
}

// versionedState reports whether this replica writes the versioned form
// of its state timestamps: once the cluster version that reads it is
// active. A replica with no Config.Version belongs to no cluster whose
// other nodes could be older, and writes it.
func (r *Replica) versionedState() bool {
	return r.cfg.Version == nil || r.cfg.Version.IsActive(clusterversion.VersionedState)
}
