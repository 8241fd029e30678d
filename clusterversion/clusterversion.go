// Package clusterversion owns Cairn's cluster versions, which make rolling
// upgrades safe (docs/operations.md, "Upgrading"): every binary has a
// version (Binary) and knows the oldest cluster version it can run in
// (MinSupported); the cluster version, one replicated key (Key), says
// which behaviour every node may use. A behaviour that an older binary
// would not understand (a new message type, a new field whose absence an
// older node would misread) is used only once IsActive says the cluster
// version has reached the version that introduced it.
//
// It also owns how a stored format that had no version in 1.0 gains one
// (format.go), so that every reader of one tells the forms apart alike
// and refuses a future version with ErrFutureFormat.
//
// This package only names versions and checks them; membership stores the
// cluster version, raises it (automatically once every node runs a newer
// binary, or by SET CLUSTER SETTING version) and refuses nodes whose
// binary cannot run in the cluster.
//
// Invariants:
//
//  1. The cluster version only rises, and never above the binary version
//     of any node in the cluster (decommissioned nodes aside).
//  2. A node runs only if MinSupported <= cluster version <= Binary: a
//     binary older than the cluster version would not understand what
//     other nodes now send; one whose oldest supported version is above
//     it may send what older nodes do not understand.
//  3. Versions lists every version, oldest first; Binary is the newest.
package clusterversion

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cairn-db/cairn/keys"
)

// Version is a cluster version, "major.minor".
type Version struct {
	Major, Minor int32
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	return v.Major < w.Major || v.Major == w.Major && v.Minor < w.Minor
}

// IsZero reports whether v is the zero Version (unknown).
func (v Version) IsZero() bool { return v == Version{} }

// Parse reads "major.minor".
func Parse(s string) (Version, error) {
	maj, min, ok := strings.Cut(strings.TrimSpace(s), ".")
	a, err1 := strconv.ParseInt(maj, 10, 32)
	b, err2 := strconv.ParseInt(min, 10, 32)
	if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 {
		return Version{}, fmt.Errorf("%q is not a version (major.minor, such as %s)", s, V1_0)
	}
	return Version{int32(a), int32(b)}, nil
}

// The cluster versions that gate a behaviour, by what they brought; the
// code that uses it asks IsActive of its constant.
var (
	// V1_0: versioned node-to-node messages (numbered fields, package
	// wire) and cluster versions. The version rolling upgrades start from.
	V1_0 = Version{1, 0}
	// VersionedState: the timestamps of a tablet's replicated state
	// (its GC threshold and closed timestamp) start with a format version
	// (tablet/stateformat.go). A 1.0 binary reads only the unversioned
	// form, so a replica writes the versioned one only from here on.
	VersionedState = Version{1, 1}
	// SideloadedLog: an AddSSTable entry's SST is kept in a file beside
	// the node's raft log, whose record of the entry a 1.1 binary cannot
	// decode (raftnode/sideload.go), so a node side-loads only from here
	// on and a 1.1 binary can be rolled back to until then.
	SideloadedLog = Version{1, 2}
)

// Versions are every cluster version, oldest first, with what it brought.
var Versions = []struct {
	Version Version
	What    string
}{
	{V1_0, "versioned node-to-node messages (numbered fields, package wire) and cluster versions: the version rolling upgrades start from"},
	{VersionedState, "a tablet's GC threshold and closed timestamp are stored with a format version"},
	{SideloadedLog, "SSTs ingested through raft are kept in files beside the raft log, not in its entries"},
}

// Binary is this build's version; MinSupported the oldest cluster version
// it can run in.
var (
	Binary       = buildVersion(testingBinary, Versions[len(Versions)-1].Version)
	MinSupported = V1_0
)

// testingBinary, set only when a test links a binary with
//
//	-ldflags -X github.com/cairn-db/cairn/clusterversion.testingBinary=1.0
//
// makes the build claim that binary version, so that a test runs real
// processes of an "older" and a "newer" build side by side
// (cmd/cairn.TestUpgradeProcesses). Such a build still has this build's
// code: it reads every format, and writes what the cluster version
// allows, as a binary of that version would. Release builds never set it.
var testingBinary string

// buildVersion is Binary: s when a test build set it, else dflt. A
// version this build does not know is a broken test build: it panics at
// start rather than run under a made-up version.
func buildVersion(s string, dflt Version) Version {
	if s == "" {
		return dflt
	}
	v, err := Parse(s)
	if err != nil || dflt.Less(v) || v.Less(V1_0) {
		panic(fmt.Sprintf("clusterversion: the test build's binary version %q is not one of this build's versions (%s to %s)", s, V1_0, dflt))
	}
	return v
}

// Key is where the cluster version lives: the cluster setting "version"
// (SHOW CLUSTER SETTING version reads it).
func Key() []byte { return keys.System([]byte("cs/" + Setting)) }

// Setting is the cluster setting's name.
const Setting = "version"

// PreserveDowngradeSetting, set to the current cluster version, holds
// the automatic upgrade: the cluster keeps running at it after every node
// runs a newer binary, so the binaries can still be rolled back, until it
// is reset or SET CLUSTER SETTING version raises the version by hand.
const PreserveDowngradeSetting = "cluster.preserve_downgrade_option"

// PreserveDowngradeKey is the setting's key.
func PreserveDowngradeKey() []byte { return keys.System([]byte("cs/" + PreserveDowngradeSetting)) }

// Errors of Check.
var (
	ErrBinaryTooOld = errors.New("binary too old for the cluster")
	ErrBinaryTooNew = errors.New("binary too new for the cluster")
)

// ErrSetRefused: SET CLUSTER SETTING version asked for a version the
// cluster cannot take now (below the current one, above a node's binary,
// or while a node's binary is unknown).
var ErrSetRefused = errors.New("cluster version refused")

// Check reports whether a binary of version binary, which runs in clusters
// at minSupported or later, may run in a cluster at version cluster
// (invariant 2).
func Check(binary, minSupported, cluster Version) error {
	switch {
	case binary.Less(cluster):
		return fmt.Errorf("%w: this node's binary is version %s and the cluster version is %s: run a binary of version %s or newer on this node", ErrBinaryTooOld, binary, cluster, cluster)
	case cluster.Less(minSupported):
		return fmt.Errorf("%w: this node's binary runs in clusters at version %s or later and the cluster version is %s: finish upgrading the cluster to %s with the binaries it runs first", ErrBinaryTooNew, minSupported, cluster, minSupported)
	}
	return nil
}

// Handle is a node's view of the versions: its binary's (fixed) and the
// cluster's (raised as the node learns of it). Safe for concurrent use.
type Handle struct {
	binary, minSupported Version
	active               atomic.Pointer[Version]
}

// NewHandle returns a handle for a binary of version binary running in
// clusters at minSupported or later; zero Versions mean this build's
// (tests simulate other builds with others). Until SetActive, the
// cluster version is taken to be minSupported.
func NewHandle(binary, minSupported Version) *Handle {
	if binary.IsZero() {
		binary = Binary
	}
	if minSupported.IsZero() {
		minSupported = MinSupported
	}
	h := &Handle{binary: binary, minSupported: minSupported}
	h.active.Store(&minSupported)
	return h
}

// Binary is the node's binary version.
func (h *Handle) Binary() Version { return h.binary }

// MinSupported is the oldest cluster version the node's binary runs in.
func (h *Handle) MinSupported() Version { return h.minSupported }

// Active is the cluster version as the node last learned it.
func (h *Handle) Active() Version { return *h.active.Load() }

// IsActive reports whether the behaviour of version v may be used: every
// node of the cluster runs a binary that knows it.
func (h *Handle) IsActive(v Version) bool { return !h.Active().Less(v) }

// SetActive records the cluster version v (it only rises).
func (h *Handle) SetActive(v Version) {
	for {
		cur := h.active.Load()
		if !cur.Less(v) || h.active.CompareAndSwap(cur, &v) {
			return
		}
	}
}
