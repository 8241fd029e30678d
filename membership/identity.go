package membership

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/storage"
)

// Identity is what a store records about the cluster it belongs to, in
// store-local keys (never replicated): written before the node first
// serves, checked at every start.
type Identity struct {
	ClusterID string
	NodeID    uint64
}

var (
	clusterIDKey = keys.StoreLocal("cluster-id")
	// nodeIDKey is shared with the fixed initial members' check
	// (server/cluster.go), which wrote it first.
	nodeIDKey = keys.StoreLocal("node-id")
	// joinedKey marks a store whose node joined a running cluster (its
	// node ID was allocated, not its position among initial members).
	joinedKey = keys.StoreLocal("joined")
	// nodesCacheKey caches the node table, so a restarted node can reach
	// its peers before it can read the table.
	nodesCacheKey = keys.StoreLocal("nodes")
)

// ErrOtherCluster refuses a store that belongs to another cluster.
var ErrOtherCluster = errors.New("the store belongs to another cluster")

// ReadIdentity reads the store's identity (zero values: none recorded)
// and whether its node joined a running cluster.
func ReadIdentity(eng *storage.Engine) (id Identity, joined bool, err error) {
	v, ok, err := eng.Get(storage.MVCCKey{Key: clusterIDKey})
	if err != nil {
		return id, false, fmt.Errorf("membership: reading the cluster ID: %w", err)
	}
	if ok {
		id.ClusterID = string(v)
	}
	v, ok, err = eng.Get(storage.MVCCKey{Key: nodeIDKey})
	if err != nil {
		return id, false, fmt.Errorf("membership: reading the node ID: %w", err)
	}
	if ok && len(v) == 8 {
		id.NodeID = binary.BigEndian.Uint64(v)
	}
	_, joined, err = eng.Get(storage.MVCCKey{Key: joinedKey})
	if err != nil {
		return id, false, fmt.Errorf("membership: reading the store's identity: %w", err)
	}
	return id, joined, nil
}

// WriteIdentity records the store's identity (synced); joined marks a
// node that joined a running cluster.
func WriteIdentity(eng *storage.Engine, id Identity, joined bool) error {
	b := eng.NewWriteOnlyBatch()
	defer b.Close()
	if id.ClusterID != "" {
		if err := b.Put(storage.MVCCKey{Key: clusterIDKey}, []byte(id.ClusterID)); err != nil {
			return err
		}
	}
	if id.NodeID != 0 {
		if err := b.Put(storage.MVCCKey{Key: nodeIDKey}, binary.BigEndian.AppendUint64(nil, id.NodeID)); err != nil {
			return err
		}
	}
	if joined {
		if err := b.Put(storage.MVCCKey{Key: joinedKey}, nil); err != nil {
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("membership: recording the store's identity: %w", err)
	}
	return nil
}

// CachedNodes returns the node table as last cached in the store.
func CachedNodes(eng *storage.Engine) ([]NodeRecord, error) {
	v, ok, err := eng.Get(storage.MVCCKey{Key: nodesCacheKey})
	if err != nil || !ok {
		return nil, err
	}
	return decode[[]NodeRecord](v)
}

func cacheNodes(eng *storage.Engine, recs []NodeRecord) error {
	b := eng.NewWriteOnlyBatch()
	defer b.Close()
	if err := b.Put(storage.MVCCKey{Key: nodesCacheKey}, encode(recs)); err != nil {
		return err
	}
	return b.CommitNoSync()
}
