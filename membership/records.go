package membership

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cairn-db/cairn/clusterversion"
)

// Node statuses in the node table.
const (
	StatusActive          = "active"
	StatusDecommissioning = "decommissioning"
	StatusDecommissioned  = "decommissioned"
)

// Liveness states derived from a node's record and liveness record.
const (
	Live           = "live"
	Suspect        = "suspect"
	Dead           = "dead"
	Decommissioned = "decommissioned"
)

// NodeRecord is a node's entry in the node table (keys.NodeRecord).
type NodeRecord struct {
	NodeID   uint64 `json:"node_id"`
	RPCAddr  string `json:"rpc_addr"`
	SQLAddr  string `json:"sql_addr,omitempty"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Locality string `json:"locality,omitempty"`
	// StoreProfile is the node's storage profile (ssd, hdd, object-store),
	// so every node's admin UI shows every node's.
	StoreProfile string `json:"store_profile,omitempty"`
	Status       string `json:"status"`
	// BinaryVersion and MinSupportedVersion are the node's binary's
	// version and the oldest cluster version it runs in (package
	// clusterversion): the cluster version rises to the lowest
	// BinaryVersion once every node advertises one above it.
	BinaryVersion       string `json:"binary_version,omitempty"`
	MinSupportedVersion string `json:"min_supported_version,omitempty"`
}

// WithVersion returns r advertising h's versions.
func (r NodeRecord) WithVersion(h *clusterversion.Handle) NodeRecord {
	r.BinaryVersion, r.MinSupportedVersion = h.Binary().String(), h.MinSupported().String()
	return r
}

// LivenessRecord is a node's heartbeat (keys.Liveness): written by the
// node every heartbeat interval, it is live until Expiration and dead
// once DeadAfter has passed since Updated.
type LivenessRecord struct {
	NodeID uint64 `json:"node_id"`
	// Epoch counts the node's starts.
	Epoch int64 `json:"epoch"`
	// Updated and Expiration are wall-clock nanoseconds of the node's
	// clock (within the maximum offset of every other node's).
	Updated    int64 `json:"updated"`
	Expiration int64 `json:"expiration"`
	// Replicas and Leaders count this node's replicas and leases.
	Replicas int `json:"replicas"`
	Leaders  int `json:"leaders"`
	// Members counts, over the groups this node leads, the replicas each
	// node holds: the sum over all nodes is each node's replica count as
	// the leaders see it (a removed replica that never learned of its
	// removal is not counted).
	Members map[uint64]int `json:"members,omitempty"`
	// Domains counts the same per domain (Config.Domain: the tablets of
	// one index, such as a hash-sharded index's buckets), for the
	// domains this node holds at least two replicas of: a domain of one
	// tablet cannot be uneven, and leaving those out keeps the record
	// small with thousands of one-tablet tables. Summed over all nodes,
	// each node's replicas of the domain (View.DomainReplicasOn).
	Domains map[string]map[uint64]int `json:"domains,omitempty"`
}

func decode[T any](b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("membership: decoding %T: %w", v, err)
	}
	return v, nil
}

// recordFormat is the format version of the node table's records and the
// liveness records, which membership stores as JSON objects with a
// "format_version" member (clusterversion.MarshalFormat; a 1.0 binary
// skips the member, so writing it needs no gate). A record without it
// was written by 1.0: version 0, the same shape.
const recordFormat = 1

// encodeRecord is a stored record's value.
func encodeRecord(v any) []byte {
	b, err := clusterversion.MarshalFormat(v, recordFormat)
	if err != nil {
		panic(err) // plain structs of strings and numbers
	}
	return b
}

// decodeRecord reads what encodeRecord (or a 1.0 binary's encode) wrote,
// refusing a format version this binary does not know.
func decodeRecord[T any](b []byte) (T, error) {
	var v T
	if _, err := clusterversion.JSONFormat(fmt.Sprintf("membership: a stored %T", v), b, recordFormat); err != nil {
		return v, err
	}
	return decode[T](b)
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and numbers
	}
	return b
}

// Registry is a node's view of the node table: where each node listens.
// The transport resolves node IDs through it. Safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	nodes map[uint64]NodeRecord
}

// NewRegistry returns a registry holding recs.
func NewRegistry(recs ...NodeRecord) *Registry {
	r := &Registry{nodes: map[uint64]NodeRecord{}}
	for _, rec := range recs {
		r.Set(rec)
	}
	return r
}

// Set adds or replaces a node's record.
func (r *Registry) Set(rec NodeRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Status == "" {
		rec.Status = StatusActive
	}
	r.nodes[rec.NodeID] = rec
}

// Get returns a node's record.
func (r *Registry) Get(id uint64) (NodeRecord, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	rec, ok := r.nodes[id]
	return rec, ok
}

// Resolve returns a node's RPC address.
func (r *Registry) Resolve(id uint64) (string, error) {
	rec, ok := r.Get(id)
	if !ok || rec.RPCAddr == "" {
		return "", fmt.Errorf("membership: no address known for node %d", id)
	}
	return rec.RPCAddr, nil
}

// Nodes returns every record, by node ID.
func (r *Registry) Nodes() []NodeRecord {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]NodeRecord, 0, len(r.nodes))
	for _, rec := range r.nodes {
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b NodeRecord) int { return cmpU(a.NodeID, b.NodeID) })
	return out
}

// IDs lists the nodes not decommissioned (routing tries them when it
// knows no replica of a tablet).
func (r *Registry) IDs() []uint64 {
	var out []uint64
	for _, rec := range r.Nodes() {
		if rec.Status != StatusDecommissioned {
			out = append(out, rec.NodeID)
		}
	}
	return out
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// View is the membership as read from the node table and liveness
// records at one moment.
type View struct {
	Now      time.Time
	Nodes    map[uint64]NodeRecord
	Liveness map[uint64]LivenessRecord
	// DeadAfter is how long after its last heartbeat a node is dead.
	DeadAfter time.Duration
}

// State is node id's liveness state: decommissioned, live (its record
// has not expired), dead (no heartbeat for DeadAfter) or suspect (in
// between, or never heartbeated).
func (v *View) State(id uint64) string {
	rec, ok := v.Nodes[id]
	if ok && rec.Status == StatusDecommissioned {
		return Decommissioned
	}
	l, ok := v.Liveness[id]
	if !ok {
		return Suspect
	}
	now := v.Now.UnixNano()
	switch {
	case now < l.Expiration:
		return Live
	case now-l.Updated >= int64(v.DeadAfter):
		return Dead
	}
	return Suspect
}

// Eligible reports whether node id may receive replicas: live and active.
func (v *View) Eligible(id uint64) bool {
	rec, ok := v.Nodes[id]
	return ok && rec.Status == StatusActive && v.State(id) == Live
}

// Leaving reports whether node id's replicas must move off it: it is
// dead, decommissioning or decommissioned.
func (v *View) Leaving(id uint64) bool {
	rec, ok := v.Nodes[id]
	if ok && rec.Status != StatusActive {
		return true
	}
	return v.State(id) == Dead
}

// DomainReplicasOn sums, over every leader's report, the replicas of
// domain d on node id (0 for d "").
func (v *View) DomainReplicasOn(d string, id uint64) int {
	if d == "" {
		return 0
	}
	n := 0
	for _, l := range v.Liveness {
		n += l.Domains[d][id]
	}
	return n
}

// ReplicasOn sums, over every leader's report, the replicas on node id.
func (v *View) ReplicasOn(id uint64) int {
	n := 0
	for _, l := range v.Liveness {
		n += l.Members[id]
	}
	return n
}
