// Package keys defines the layout of Cairn's one ordered keyspace (DESIGN §5):
// which prefixes are node-local, which are replicated per tablet, and which
// are addressable user and system keys. Every layer that builds a key it
// does not get from above builds it here, so the layout can be read in one
// place.
//
// It imports nothing of Cairn but the standard library.
//
//	\x01 s ...                     store-local, never replicated: store identity, clock bound
//	\x01 u <tablet id> ...         tablet-local, never replicated: raft log, hard state
//	\x01 r <tablet id> ...         tablet-replicated state: applied index, GC threshold
//	\x01 x <user key>              lock table: the intent on <user key>
//	\x01 t <anchor key> <txn id>   transaction record, on the tablet holding <anchor key>
//	\x02 m <end key>               tablet directory: descriptor of the tablet ending at <end key>
//	\x02 c n <node id>              cluster membership: a node's record (addresses, locality, status)
//	\x02 c l <node id>              cluster membership: a node's liveness record (heartbeats)
//	\x02 i ...                     replicated counters and identity (tablet IDs, node IDs, cluster ID)
//	\x02 s ...                     other system keys (catalog, settings, jobs): the SQL layer's
//	\x03 ... \xff\xff              table data: group / bucket / table / index / key
//
// Invariants:
//
//  1. Addressable keys are exactly [Min, Max). A tablet spans a sub-range of
//     them; local keys (\x01...) are never addressable.
//  2. A lock or transaction record belongs to the tablet whose span holds
//     its user (anchor) key, so splitting a tablet divides them with it.
package keys

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

var (
	// Min is the first addressable key.
	Min = []byte{0x02}
	// Max is the end of the addressable keyspace (exclusive).
	Max = []byte{0xff, 0xff}
	// SystemPrefix starts the system span (directory, catalog).
	SystemPrefix = []byte{0x02}
	// SystemEnd ends the system span.
	SystemEnd = []byte{0x03}
	// TableDataMin is the first key of table data.
	TableDataMin = []byte{0x03}

	localPrefix       = byte(0x01)
	storeLocalInfix   = byte('s')
	tabletLocalInfix  = byte('u')
	tabletReplInfix   = byte('r')
	lockInfix         = byte('x')
	txnRecordInfix    = byte('t')
	directoryPrefix   = []byte{0x02, 'm'}
	directoryEnd      = []byte{0x02, 'n'}
	systemOtherPrefix = []byte{0x02, 's'}
)

// TxnIDLen is the length of a transaction ID in a record key.
const TxnIDLen = 16

// IsLocal reports whether k is in the local (non-addressable) keyspace.
func IsLocal(k []byte) bool { return len(k) > 0 && k[0] == localPrefix }

// IsAddressable reports whether k lies in [Min, Max).
func IsAddressable(k []byte) bool {
	return bytes.Compare(k, Min) >= 0 && bytes.Compare(k, Max) < 0
}

// StoreLocal builds a store-local key with the given suffix (e.g. "ident").
func StoreLocal(suffix string) []byte {
	return append([]byte{localPrefix, storeLocalInfix}, suffix...)
}

func tabletKey(infix byte, tabletID uint64, suffix string) []byte {
	k := make([]byte, 0, 2+8+len(suffix))
	k = append(k, localPrefix, infix)
	k = binary.BigEndian.AppendUint64(k, tabletID)
	return append(k, suffix...)
}

// TabletLocal builds a non-replicated per-tablet key (raft log, hard state).
func TabletLocal(tabletID uint64, suffix string) []byte {
	return tabletKey(tabletLocalInfix, tabletID, suffix)
}

// TabletLocalPrefix is the prefix of all non-replicated keys of a tablet.
func TabletLocalPrefix(tabletID uint64) []byte { return TabletLocal(tabletID, "") }

// TabletReplicated builds a replicated per-tablet state key.
func TabletReplicated(tabletID uint64, suffix string) []byte {
	return tabletKey(tabletReplInfix, tabletID, suffix)
}

// TabletReplicatedPrefix is the prefix of a tablet's replicated state keys.
func TabletReplicatedPrefix(tabletID uint64) []byte { return TabletReplicated(tabletID, "") }

// Lock is the lock-table key of the intent on userKey.
func Lock(userKey []byte) []byte {
	k := make([]byte, 0, 2+len(userKey))
	return append(append(k, localPrefix, lockInfix), userKey...)
}

// LockSpan returns the lock-table span covering user keys [start, end).
func LockSpan(start, end []byte) (lo, hi []byte) { return Lock(start), Lock(end) }

// DecodeLock returns the user key of a lock-table key.
func DecodeLock(k []byte) ([]byte, error) {
	if len(k) < 2 || k[0] != localPrefix || k[1] != lockInfix {
		return nil, fmt.Errorf("keys: %q is not a lock key", k)
	}
	return k[2:], nil
}

// TxnRecord is the key of the record of transaction id anchored at anchor.
func TxnRecord(anchor []byte, id [TxnIDLen]byte) []byte {
	k := make([]byte, 0, 2+len(anchor)+TxnIDLen)
	k = append(k, localPrefix, txnRecordInfix)
	k = append(k, anchor...)
	return append(k, id[:]...)
}

// TxnRecordSpan returns the span of records anchored in [start, end). A
// record anchored at a key equal to end is excluded: its anchor ends with
// the 16 ID bytes, which sort after end itself.
func TxnRecordSpan(start, end []byte) (lo, hi []byte) {
	return append([]byte{localPrefix, txnRecordInfix}, start...),
		append([]byte{localPrefix, txnRecordInfix}, end...)
}

// DecodeTxnRecord splits a record key into its anchor and transaction ID.
func DecodeTxnRecord(k []byte) (anchor []byte, id [TxnIDLen]byte, err error) {
	if len(k) < 2+TxnIDLen || k[0] != localPrefix || k[1] != txnRecordInfix {
		return nil, id, fmt.Errorf("keys: %q is not a transaction record key", k)
	}
	copy(id[:], k[len(k)-TxnIDLen:])
	return k[2 : len(k)-TxnIDLen], id, nil
}

// Directory is the key of the directory entry for the tablet ending at end.
// Looking up the tablet of k means finding the first entry > Directory(k).
func Directory(end []byte) []byte {
	return append(append([]byte(nil), directoryPrefix...), end...)
}

// DirectorySpan is the span of all directory entries.
func DirectorySpan() (lo, hi []byte) {
	return append([]byte(nil), directoryPrefix...), append([]byte(nil), directoryEnd...)
}

// DecodeDirectory returns the end key named by a directory key.
func DecodeDirectory(k []byte) ([]byte, error) {
	if !bytes.HasPrefix(k, directoryPrefix) {
		return nil, fmt.Errorf("keys: %q is not a directory key", k)
	}
	return k[len(directoryPrefix):], nil
}

// System builds a system key for the SQL layer's metadata (catalog,
// settings, jobs).
func System(suffix []byte) []byte {
	return append(append([]byte(nil), systemOtherPrefix...), suffix...)
}

// Next returns the smallest key greater than k (k with a zero byte appended).
func Next(k []byte) []byte { return append(append(make([]byte, 0, len(k)+1), k...), 0) }

// PrefixEnd returns the smallest key greater than every key with prefix p,
// or Max when p is all 0xff.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return append([]byte(nil), Max...)
}

// Cluster membership keys (package membership): addressable system keys,
// replicated like any other, outside the directory and the SQL layer's.
var (
	nodeRecordPrefix = []byte{0x02, 'c', 'n'}
	livenessPrefix   = []byte{0x02, 'c', 'l'}
	// ClusterID holds the cluster's ID, chosen by its bootstrap.
	ClusterID = []byte("\x02icluster-id")
	// NodeIDCounter is the replicated counter of node IDs.
	NodeIDCounter = []byte("\x02inode-id")
	// InitialMembers holds how many initial members (node IDs 1..n) the
	// cluster was bootstrapped with; allocated IDs come after them.
	InitialMembers = []byte("\x02iinitial-members")
)

// NodeRecord is the key of node id's membership record.
func NodeRecord(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), nodeRecordPrefix...), id)
}

// NodeRecordSpan is the span of every node record.
func NodeRecordSpan() (lo, hi []byte) { return nodeRecordPrefix, PrefixEnd(nodeRecordPrefix) }

// Liveness is the key of node id's liveness record.
func Liveness(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), livenessPrefix...), id)
}

// LivenessSpan is the span of every liveness record.
func LivenessSpan() (lo, hi []byte) { return livenessPrefix, PrefixEnd(livenessPrefix) }
