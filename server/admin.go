package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// The admin UI on the HTTP address (admin_http.go, templates in ui/):
// an overview of the nodes, databases → tables → tablets, and under
// /api/ the same facts as JSON for tools. It reads only what the node
// already keeps (its tablets and their raft state, their counters, the
// catalog); nothing here changes state. This file gathers the facts.
//
// A node knows the replicas it holds: a tablet's replica set and leader
// are its local replica's view (the raft configuration it applied, the
// leader it last heard from). Every member of today's static cluster
// holds every tablet, so that view is the whole cluster's; once replicas
// move (issue #4's placement), per-node counts will need the other nodes'
// reports.

// NodeStatus is what a NodeSource knows of one node.
type NodeStatus struct {
	NodeID   int    `json:"node_id"`
	SQLAddr  string `json:"sql_addr"`
	RPCAddr  string `json:"rpc_addr"`
	HTTPAddr string `json:"http_addr"`
	Locality string `json:"locality"`
	// StoreProfile is the node's storage profile (Config.StoreProfile,
	// resolved); "" for a node whose record predates profiles.
	StoreProfile string    `json:"store_profile"`
	Liveness     string    `json:"liveness"`
	StartedAt    time.Time `json:"started_at"`
	// BinaryVersion is the version of the binary the node advertises
	// (package clusterversion): during a rolling upgrade, which nodes run
	// the new one. "" for a node that advertises none.
	BinaryVersion string `json:"binary_version"`
}

// NodeSource lists the cluster's nodes. The default (memberNodes) lists
// the members the node was started with; a membership and liveness
// service replaces it with SetNodeSource.
type NodeSource interface {
	Nodes(ctx context.Context) ([]NodeStatus, error)
}

// SetNodeSource makes the admin UI list the nodes src reports. Call it
// before the node serves HTTP, or at any time: it is read per request.
func (s *Server) SetNodeSource(src NodeSource) {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	s.admin.nodes = src
}

// Liveness values of the default node source.
const (
	// LivenessLive is this node: it answers.
	LivenessLive = "live"
	// LivenessUp is another member that accepted a TCP connection on its
	// RPC address just now.
	LivenessUp = "up"
	// LivenessUnreachable is a member that did not.
	LivenessUnreachable = "unreachable"
)

// memberNodes is the default NodeSource: this node, and in a replicated
// cluster every member of --join, probed by a TCP connection to its RPC
// address (no liveness records exist yet to ask instead).
type memberNodes struct{ s *Server }

// probeTimeout bounds the reachability probe of another member.
const probeTimeout = 300 * time.Millisecond

func (m memberNodes) Nodes(ctx context.Context) ([]NodeStatus, error) {
	s := m.s
	self := NodeStatus{
		NodeID: int(s.nodeID()), SQLAddr: s.Addr().String(), RPCAddr: s.cfg.RPCAddr, HTTPAddr: s.HTTPAddr().String(),
		Locality: s.cfg.Locality, StoreProfile: s.cfg.StoreProfile, Liveness: LivenessLive, StartedAt: s.started,
		BinaryVersion: s.version.Binary().String(),
	}
	if s.repl == nil {
		return []NodeStatus{self}, nil
	}
	recs := s.repl.registry.Nodes()
	out := make([]NodeStatus, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		id, addr := int(rec.NodeID), rec.RPCAddr
		if uint64(id) == s.repl.id {
			out[i] = self
			continue
		}
		out[i] = NodeStatus{NodeID: id, RPCAddr: addr, Liveness: LivenessUnreachable}
		wg.Go(func() {
			d := net.Dialer{Timeout: probeTimeout}
			if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
				c.Close()
				out[i].Liveness = LivenessUp
			}
		})
	}
	wg.Wait()
	return out, nil
}

func (s *Server) nodeID() uint64 {
	if s.repl != nil {
		return s.repl.id
	}
	return localNodeID
}

// NodeInfo is one node with the replicas and leaders it holds.
type NodeInfo struct {
	NodeStatus
	Replicas int `json:"replicas"`
	Leaders  int `json:"leaders"`
}

// TabletTable names a table (or system catalog part) a tablet holds.
type TabletTable struct {
	ID       uint32 `json:"table_id,omitempty"`
	Database string `json:"database"`
	Schema   string `json:"schema,omitempty"`
	Name     string `json:"name"`
	System   bool   `json:"system,omitempty"`
}

// Qualified is database.schema.name (database.name for the system
// catalog's parts).
func (t TabletTable) Qualified() string {
	if t.Schema == "" {
		return t.Database + "." + t.Name
	}
	return t.Database + "." + t.Schema + "." + t.Name
}

// TabletInfo is one tablet: its span, where its replicas are, its size
// and load, and the tables in it.
type TabletInfo struct {
	TabletID uint64 `json:"tablet_id"`
	// StartKey and EndKey are printed as cairn_catalog.tablets prints them.
	StartKey string `json:"start_key"`
	EndKey   string `json:"end_key"`
	// SizeBytes is Pebble's estimate of the span's size on disk: flushed
	// data only, so a young tablet shows 0.
	SizeBytes uint64 `json:"size_bytes"`
	// LiveBytes and TotalBytes count the tablet's keys and values as
	// stored, before compression: the newest version of each key, and
	// every version, tombstone and lock record (the garbage GC reclaims
	// is the difference). Counted by a scan, at most tabletStatsCache's
	// TTL old; memtable data included.
	LiveBytes  int64 `json:"live_bytes"`
	TotalBytes int64 `json:"total_bytes"`
	// Replicas are the voters' node IDs, Learners the learners'; Leader
	// is the node leading the group as this node last heard (0: unknown).
	Replicas []int `json:"replicas"`
	Learners []int `json:"learners,omitempty"`
	Leader   int   `json:"leader"`
	// ReadBatches and WriteBatches count the batches this node's replica
	// evaluated (the leaseholder evaluates, so followers show ~0); the
	// rates are over the last loadWindow.
	ReadBatches  int64         `json:"read_batches"`
	WriteBatches int64         `json:"write_batches"`
	ReadsPerSec  float64       `json:"reads_per_second"`
	WritesPerSec float64       `json:"writes_per_second"`
	Tables       []TabletTable `json:"tables"`
	// Colocation is set on the tablet of a colocated group (a colocated
	// database's, or the system catalog's): the group's name.
	Colocation string `json:"colocation,omitempty"`
	// OverWarnSize says a colocation tablet is larger than
	// --colocation-warn-size.
	OverWarnSize bool `json:"over_warn_size,omitempty"`
}

// TableInfo is one table and the tablets its keys are in.
type TableInfo struct {
	ID        uint32   `json:"id"`
	Database  string   `json:"database"`
	Schema    string   `json:"schema"`
	Name      string   `json:"name"`
	Colocated bool     `json:"colocated"`
	GroupID   uint64   `json:"group_id"`
	Indexes   []string `json:"indexes,omitempty"`
	Tablets   []uint64 `json:"tablets"`
	// Span is the key span of the table's rows (a system catalog part's
	// key prefix).
	Span string `json:"span"`
	// Note says why the tablets are approximate, if they are.
	Note string `json:"note,omitempty"`
}

// DatabaseInfo is one database and its tables. The system catalog is
// listed as a database of its own (System), colocated: its parts share
// the system span's tablet.
type DatabaseInfo struct {
	ID        uint32 `json:"id"`
	Name      string `json:"name"`
	System    bool   `json:"system,omitempty"`
	Colocated bool   `json:"colocated"`
	// ColocationTablets are the tablets of a colocated database's group
	// (one unless it was split).
	ColocationTablets []uint64 `json:"colocation_tablets,omitempty"`
	// ColocationSizeBytes is the colocation tablets' size.
	ColocationSizeBytes uint64 `json:"colocation_size_bytes,omitempty"`
	// Tablets are the tablets holding any of the tables, and SizeBytes
	// their size (a tablet holding other databases' tables too counts
	// whole).
	Tablets   []uint64    `json:"tablets"`
	SizeBytes uint64      `json:"size_bytes"`
	Tables    []TableInfo `json:"tables"`
	// span is the colocation group's span (colocated databases and the
	// system catalog only).
	span kvpb.Span
}

// systemDatabase is the system catalog's name in the admin UI.
const systemDatabase = "system"

// systemPart is a family of the system span's keys, shown as a table of
// the system catalog's colocated group. The prefixes are the ones the
// owning packages write (catalog/keys.go, sequence, stats, keys'
// directory); TestAdminSystemCatalog checks each one holds keys.
type systemPart struct {
	name   string
	prefix []byte
}

var systemParts = []systemPart{
	{"tablet_directory", keys.Directory(nil)},
	{"descriptors", keys.System([]byte("d/"))},
	{"descriptor_stamps", keys.System([]byte("v/"))},
	{"namespace", keys.System([]byte("n/"))},
	{"index_names", keys.System([]byte("x/"))},
	{"roles", keys.System([]byte("r/"))},
	{"sequence_values", keys.System([]byte("q/"))},
	{"table_statistics", keys.System([]byte("st/"))},
}

// placement returns tablet id's voters, learners and leader as this node
// sees them.
func (s *Server) placement(id kvpb.TabletID) (voters, learners []int, leader int) {
	if s.repl == nil {
		return []int{localNodeID}, nil, localNodeID
	}
	if cs := s.repl.raft.Config(uint64(id)); cs != nil {
		for _, v := range cs.GetVoters() {
			voters = append(voters, int(v))
		}
		for _, l := range cs.GetLearners() {
			learners = append(learners, int(l))
		}
		slices.Sort(voters)
		slices.Sort(learners)
	}
	if r := s.repl.raft.Replica(uint64(id)); r != nil {
		_, l := r.Lease()
		leader = int(l)
	}
	return voters, learners, leader
}

// adminView is one consistent read of everything the pages show.
type adminView struct {
	Nodes     []NodeInfo
	Databases []DatabaseInfo
	Tablets   []TabletInfo
	// WarnSize is --colocation-warn-size (0: no warning).
	WarnSize int64
	Window   time.Duration
}

// tablet returns the tablet with id, or nil.
func (v *adminView) tablet(id uint64) *TabletInfo {
	for i := range v.Tablets {
		if v.Tablets[i].TabletID == id {
			return &v.Tablets[i]
		}
	}
	return nil
}

// database returns the database named name (the system catalog when
// system), or nil.
func (v *adminView) database(name string, system bool) *DatabaseInfo {
	for i := range v.Databases {
		if d := &v.Databases[i]; d.Name == name && d.System == system {
			return d
		}
	}
	return nil
}

// table returns the user table with descriptor id, or nil.
func (v *adminView) table(id uint32) *TableInfo {
	for _, d := range v.Databases {
		for i := range d.Tables {
			if t := &d.Tables[i]; !d.System && t.ID == id {
				return t
			}
		}
	}
	return nil
}

// view reads the catalog, the tablets and the nodes. withNodes=false skips
// the node source (its probes) for pages that do not show nodes.
func (s *Server) view(ctx context.Context, withNodes bool) (*adminView, error) {
	descs := s.store.Tablets()
	dbs, err := s.databases(ctx, descs)
	if err != nil {
		return nil, fmt.Errorf("reading the catalog: %w", err)
	}
	v := &adminView{Databases: dbs, WarnSize: s.admin.warnSize.Load(), Window: loadWindow}
	v.Tablets = s.tabletInfos(descs, dbs)
	sizes := map[uint64]uint64{}
	for _, t := range v.Tablets {
		sizes[t.TabletID] = t.SizeBytes
	}
	for i := range v.Databases {
		d := &v.Databases[i]
		for _, t := range d.Tables {
			for _, id := range t.Tablets {
				if !slices.Contains(d.Tablets, id) {
					d.Tablets = append(d.Tablets, id)
				}
			}
		}
		slices.Sort(d.Tablets)
		for _, id := range d.Tablets {
			d.SizeBytes += sizes[id]
		}
		for _, id := range d.ColocationTablets {
			d.ColocationSizeBytes += sizes[id]
		}
	}
	if withNodes {
		if v.Nodes, err = s.nodeInfos(ctx, v.Tablets); err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
	}
	return v, nil
}

func (s *Server) nodeInfos(ctx context.Context, tablets []TabletInfo) ([]NodeInfo, error) {
	s.admin.mu.Lock()
	src := s.admin.nodes
	s.admin.mu.Unlock()
	if src == nil {
		src = memberNodes{s}
	}
	st, err := src.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	replicas, leaders := map[int]int{}, map[int]int{}
	if rc, ok := src.(replicaCounter); ok {
		// Counts over the whole cluster (a node need not hold every
		// tablet once replicas move).
		if replicas, leaders, err = rc.ReplicaCounts(ctx); err != nil {
			return nil, err
		}
		tablets = nil
	}
	for _, t := range tablets {
		for _, n := range t.Replicas {
			replicas[n]++
		}
		for _, n := range t.Learners {
			replicas[n]++
		}
		if t.Leader != 0 {
			leaders[t.Leader]++
		}
	}
	out := make([]NodeInfo, len(st))
	for i, n := range st {
		out[i] = NodeInfo{NodeStatus: n, Replicas: replicas[n.NodeID], Leaders: leaders[n.NodeID]}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}

func (s *Server) tabletInfos(descs []kvpb.TabletDescriptor, dbs []DatabaseInfo) []TabletInfo {
	counts := s.tabletCounts(descs)
	rates := s.admin.load.rates(time.Now(), counts)
	byTablet := map[uint64][]TabletTable{}
	coloc := map[uint64]string{}
	limit := s.admin.warnSize.Load()
	for _, db := range dbs {
		for _, t := range db.Tables {
			for _, id := range t.Tablets {
				byTablet[id] = append(byTablet[id], TabletTable{ID: t.ID, Database: db.Name, Schema: t.Schema, Name: t.Name, System: db.System})
			}
		}
		if db.Colocated {
			for _, id := range db.ColocationTablets {
				coloc[id] = db.Name
			}
		}
	}
	out := make([]TabletInfo, 0, len(descs))
	for _, d := range descs {
		id := uint64(d.TabletID)
		size, _ := s.eng.EstimateDiskUsage(d.StartKey, d.EndKey)
		st, err := s.tabletStats(d)
		if err != nil {
			s.log.Warn("admin: tablet sizes", "tablet", id, "err", err)
		}
		voters, learners, leader := s.placement(d.TabletID)
		c, r := counts[id], rates[id]
		ti := TabletInfo{
			TabletID: id, StartKey: rowenc.PrettyKey(d.StartKey), EndKey: rowenc.PrettyKey(d.EndKey),
			SizeBytes: size, LiveBytes: st.LiveBytes, TotalBytes: st.TotalBytes,
			Replicas: voters, Learners: learners, Leader: leader,
			ReadBatches: c[0], WriteBatches: c[1], ReadsPerSec: r[0], WritesPerSec: r[1],
			Tables: byTablet[id], Colocation: coloc[id],
		}
		if ti.Tables == nil {
			ti.Tables = []TabletTable{} // JSON [] rather than null
		}
		ti.OverWarnSize = ti.Colocation != "" && limit > 0 && size > uint64(limit)
		out = append(out, ti)
	}
	return out
}

// tabletCounts reads the read and write batch counters of this node's
// replicas.
func (s *Server) tabletCounts(descs []kvpb.TabletDescriptor) map[uint64][2]int64 {
	counts := make(map[uint64][2]int64, len(descs))
	for _, d := range descs {
		if r := s.store.Replica(d.TabletID); r != nil {
			m := r.Metrics()
			counts[uint64(d.TabletID)] = [2]int64{m.ReadBatches.Load(), m.WriteBatches.Load()}
		}
	}
	return counts
}

// overlapping lists the IDs of the tablets sp reaches into.
func overlapping(descs []kvpb.TabletDescriptor, sp kvpb.Span, into []uint64) []uint64 {
	for _, d := range descs {
		if bytes.Compare(d.StartKey, sp.EndKey) < 0 && bytes.Compare(sp.Key, d.EndKey) < 0 && !slices.Contains(into, uint64(d.TabletID)) {
			into = append(into, uint64(d.TabletID))
		}
	}
	slices.Sort(into)
	return into
}

// systemCatalog is the system catalog as a colocated database whose
// tables are the parts of the system span.
func systemCatalog(descs []kvpb.TabletDescriptor) DatabaseInfo {
	span := kvpb.Span{Key: keys.SystemPrefix, EndKey: keys.SystemEnd}
	db := DatabaseInfo{Name: systemDatabase, System: true, Colocated: true, span: span,
		ColocationTablets: overlapping(descs, span, nil)}
	for _, p := range systemParts {
		sp := kvpb.Span{Key: p.prefix, EndKey: keys.PrefixEnd(p.prefix)}
		db.Tables = append(db.Tables, TableInfo{Database: systemDatabase, Name: p.name, Colocated: true,
			Span: rowenc.PrettyKey(sp.Key), Tablets: overlapping(descs, sp, nil)})
	}
	return db
}

// databases lists the system catalog and every database's tables with
// the tablets holding them.
func (s *Server) databases(ctx context.Context, descs []kvpb.TabletDescriptor) ([]DatabaseInfo, error) {
	var out []DatabaseInfo
	err := s.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		out = out[:0]
		rd := catalog.NewReader(txn, nil)
		dbs, err := rd.Databases(ctx)
		if err != nil {
			return err
		}
		for _, db := range dbs {
			di := DatabaseInfo{ID: uint32(db.ID), Name: db.Name, Colocated: db.Colocated, Tables: []TableInfo{}, Tablets: []uint64{}}
			if db.Colocated {
				di.span = rowenc.GroupSpan(db.ColocationGroupID)
				di.ColocationTablets = overlapping(descs, di.span, nil)
			}
			schemas, err := rd.Schemas(ctx, db.ID)
			if err != nil {
				return fmt.Errorf("schemas of %s: %w", db.Name, err)
			}
			for _, sc := range schemas {
				if sc.Virtual {
					continue
				}
				rels, err := rd.Relations(ctx, db.ID, sc.ID)
				if err != nil {
					return fmt.Errorf("relations of %s.%s: %w", db.Name, sc.Name, err)
				}
				for _, rel := range rels {
					if t, ok := rel.(*catalog.Table); ok {
						di.Tables = append(di.Tables, tableInfo(descs, db.Name, sc.Name, t))
					}
				}
			}
			sort.Slice(di.Tables, func(i, j int) bool {
				a, b := di.Tables[i], di.Tables[j]
				return a.Schema < b.Schema || a.Schema == b.Schema && a.Name < b.Name
			})
			out = append(out, di)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return append([]DatabaseInfo{systemCatalog(descs)}, out...), err
}

func tableInfo(descs []kvpb.TabletDescriptor, db, schema string, t *catalog.Table) TableInfo {
	ti := TableInfo{ID: uint32(t.ID), Database: db, Schema: schema, Name: t.Name, Colocated: t.Colocated, GroupID: t.GroupID}
	for _, ix := range t.Indexes {
		ti.Indexes = append(ti.Indexes, ix.Name)
	}
	l, err := t.Layout()
	if err != nil {
		// A table rowenc cannot lay out (a GIN index) is still in its
		// group: list the group's tablets rather than fail the page.
		sp := rowenc.GroupSpan(t.GroupID)
		ti.Span = rowenc.PrettyKey(sp.Key)
		ti.Tablets = overlapping(descs, sp, nil)
		ti.Note = fmt.Sprintf("tablets of the table's whole group (%v)", err)
		return ti
	}
	spans := l.TableSpans()
	ti.Span = rowenc.PrettyKey(spans[0].Key)
	for _, sp := range spans {
		ti.Tablets = overlapping(descs, sp, ti.Tablets)
	}
	return ti
}
