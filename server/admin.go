package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/sql/catalog"
)

// The admin UI on the HTTP address: an overview page for operators and,
// under /api/, the same facts as JSON for tools. It reads only what the
// node already keeps (its tablets, their metrics, the catalog); nothing
// here changes state.
//
// A node is a cluster of one until the cluster work (issue #4) lands, so
// every tablet has one replica, on this node, which is its leader; the
// shapes below already carry replica sets and leaders so that pages and
// tools need no change then.

// NodeInfo is one node of the cluster.
type NodeInfo struct {
	NodeID    int       `json:"node_id"`
	SQLAddr   string    `json:"sql_addr"`
	RPCAddr   string    `json:"rpc_addr"`
	HTTPAddr  string    `json:"http_addr"`
	Locality  string    `json:"locality"`
	Liveness  string    `json:"liveness"`
	StartedAt time.Time `json:"started_at"`
	Replicas  int       `json:"replicas"`
	Leaders   int       `json:"leaders"`
}

// TabletInfo is one tablet: its span, where its replicas are, and its load.
type TabletInfo struct {
	TabletID     uint64   `json:"tablet_id"`
	StartKey     string   `json:"start_key"`
	EndKey       string   `json:"end_key"`
	SizeBytes    uint64   `json:"size_bytes"`
	Replicas     []int    `json:"replicas"`
	Leader       int      `json:"leader"`
	ReadBatches  int64    `json:"read_batches"`
	WriteBatches int64    `json:"write_batches"`
	ReadsPerSec  float64  `json:"reads_per_second"`
	WritesPerSec float64  `json:"writes_per_second"`
	Tables       []string `json:"tables"`
}

// TableInfo is one table and the tablets its keys are in.
type TableInfo struct {
	ID        uint32   `json:"id"`
	Schema    string   `json:"schema"`
	Name      string   `json:"name"`
	Colocated bool     `json:"colocated"`
	GroupID   uint64   `json:"group_id"`
	Tablets   []uint64 `json:"tablets"`
}

// DatabaseInfo is one database and its tables.
type DatabaseInfo struct {
	ID     uint32      `json:"id"`
	Name   string      `json:"name"`
	Tables []TableInfo `json:"tables"`
}

// loadSampler turns the tablets' batch counters into per-second rates,
// measured between two samples at least a second apart.
type loadSampler struct {
	mu    sync.Mutex
	at    time.Time
	prev  map[uint64][2]int64
	rates map[uint64][2]float64
}

func (l *loadSampler) sample(now time.Time, counts map[uint64][2]int64) map[uint64][2]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.prev == nil || now.Sub(l.at) >= time.Second {
		if l.prev != nil {
			dt := now.Sub(l.at).Seconds()
			l.rates = map[uint64][2]float64{}
			for id, c := range counts {
				p := l.prev[id]
				l.rates[id] = [2]float64{float64(c[0]-p[0]) / dt, float64(c[1]-p[1]) / dt}
			}
		}
		l.prev, l.at = counts, now
	}
	return l.rates
}

func (s *Server) nodeInfo() NodeInfo {
	n := len(s.store.Tablets())
	id, leaders := uint64(1), n
	if s.repl != nil {
		id, leaders = s.repl.id, 0
		for _, d := range s.store.Tablets() {
			if r := s.repl.raft.Replica(uint64(d.TabletID)); r != nil {
				if term, _ := r.Lease(); term != 0 {
					leaders++
				}
			}
		}
	}
	return NodeInfo{
		NodeID: int(id), SQLAddr: s.Addr().String(), RPCAddr: s.cfg.RPCAddr, HTTPAddr: s.HTTPAddr().String(),
		Locality: s.cfg.Locality, Liveness: "live", StartedAt: s.started, Replicas: n, Leaders: leaders,
	}
}

func (s *Server) tabletInfos(tables []DatabaseInfo) []TabletInfo {
	descs := s.store.Tablets()
	counts := map[uint64][2]int64{}
	for _, d := range descs {
		if r := s.store.Replica(d.TabletID); r != nil {
			m := r.Metrics()
			counts[uint64(d.TabletID)] = [2]int64{m.ReadBatches.Load(), m.WriteBatches.Load()}
		}
	}
	rates := s.load.sample(time.Now(), counts)
	byTablet := map[uint64][]string{}
	for _, db := range tables {
		for _, t := range db.Tables {
			for _, id := range t.Tablets {
				byTablet[id] = append(byTablet[id], db.Name+"."+t.Schema+"."+t.Name)
			}
		}
	}
	out := make([]TabletInfo, 0, len(descs))
	for _, d := range descs {
		id := uint64(d.TabletID)
		size, _ := s.eng.EstimateDiskUsage(d.StartKey, d.EndKey)
		c, r := counts[id], rates[id]
		out = append(out, TabletInfo{
			TabletID: id, StartKey: fmt.Sprintf("%q", d.StartKey), EndKey: fmt.Sprintf("%q", d.EndKey),
			SizeBytes: size, Replicas: []int{1}, Leader: 1,
			ReadBatches: c[0], WriteBatches: c[1], ReadsPerSec: r[0], WritesPerSec: r[1],
			Tables: byTablet[id],
		})
	}
	return out
}

// databases lists every database's tables with the tablets holding them.
func (s *Server) databases(ctx context.Context) ([]DatabaseInfo, error) {
	descs := s.store.Tablets()
	var out []DatabaseInfo
	err := s.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		out = out[:0]
		rd := catalog.NewReader(txn, nil)
		dbs, err := rd.Databases(ctx)
		if err != nil {
			return err
		}
		for _, db := range dbs {
			di := DatabaseInfo{ID: uint32(db.ID), Name: db.Name}
			schemas, err := rd.Schemas(ctx, db.ID)
			if err != nil {
				return err
			}
			for _, sc := range schemas {
				if sc.Virtual {
					continue
				}
				rels, err := rd.Relations(ctx, db.ID, sc.ID)
				if err != nil {
					return err
				}
				for _, rel := range rels {
					t, ok := rel.(*catalog.Table)
					if !ok {
						continue
					}
					ti := TableInfo{ID: uint32(t.ID), Schema: sc.Name, Name: t.Name, Colocated: t.Colocated, GroupID: t.GroupID}
					l, err := t.Layout()
					if err != nil {
						return fmt.Errorf("table %s: %w", t.Name, err)
					}
					for _, sp := range l.TableSpans() {
						for _, d := range descs {
							if overlaps(d, sp) && !slices.Contains(ti.Tablets, uint64(d.TabletID)) {
								ti.Tablets = append(ti.Tablets, uint64(d.TabletID))
							}
						}
					}
					slices.Sort(ti.Tablets)
					di.Tables = append(di.Tables, ti)
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
	return out, err
}

func overlaps(d kvpb.TabletDescriptor, sp kvpb.Span) bool {
	return bytes.Compare(d.StartKey, sp.EndKey) < 0 && bytes.Compare(sp.Key, d.EndKey) < 0
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/nodes", func(w http.ResponseWriter, r *http.Request) {
		nodes, err := s.nodeInfos(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, nodes)
	})
	mux.HandleFunc("GET /api/databases", func(w http.ResponseWriter, r *http.Request) {
		dbs, err := s.databases(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, dbs)
	})
	mux.HandleFunc("GET /api/tablets", func(w http.ResponseWriter, r *http.Request) {
		dbs, err := s.databases(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, s.tabletInfos(dbs))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		dbs, err := s.databases(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		page := struct {
			Nodes     []NodeInfo
			Databases []DatabaseInfo
			Tablets   []TabletInfo
		}{nil, dbs, s.tabletInfos(dbs)}
		if page.Nodes, err = s.nodeInfos(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		var buf bytes.Buffer
		if err := overviewPage.Execute(&buf, page); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(buf.Bytes())
	})
}

var overviewPage = template.Must(template.New("overview").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Cairn</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; font-size: .9em; }
th { background: #f3f3f3; } code { font-size: .85em; }
.live { color: #1a7f37; } .coloc { color: #8250df; }
</style></head><body>
<h1>Cairn cluster</h1>
<h2>Nodes</h2>
<table><tr><th>node</th><th>SQL</th><th>RPC</th><th>locality</th><th>liveness</th><th>replicas</th><th>leaders</th><th>up since</th></tr>
{{range .Nodes}}<tr><td>{{.NodeID}}</td><td>{{.SQLAddr}}</td><td>{{.RPCAddr}}</td><td>{{.Locality}}</td><td class="live">{{.Liveness}}</td><td>{{.Replicas}}</td><td>{{.Leaders}}</td><td>{{.StartedAt.Format "2006-01-02 15:04:05"}}</td></tr>
{{end}}</table>
<h2>Databases and tables</h2>
{{range .Databases}}<h3>{{.Name}}</h3>
<table><tr><th>table</th><th>id</th><th>group</th><th>colocated</th><th>tablets</th></tr>
{{range .Tables}}<tr><td>{{.Schema}}.{{.Name}}</td><td>{{.ID}}</td><td>{{.GroupID}}</td><td>{{if .Colocated}}<span class="coloc">yes</span>{{else}}no{{end}}</td><td>{{range .Tablets}}{{.}} {{end}}</td></tr>
{{else}}<tr><td colspan="5">no tables</td></tr>
{{end}}</table>
{{end}}
<h2>Tablets</h2>
<table><tr><th>tablet</th><th>span</th><th>size on disk</th><th>replicas</th><th>leader</th><th>reads/s</th><th>writes/s</th><th>tables</th></tr>
{{range .Tablets}}<tr><td>{{.TabletID}}</td><td><code>{{.StartKey}}</code> – <code>{{.EndKey}}</code></td><td>{{.SizeBytes}}</td><td>{{range .Replicas}}{{.}} {{end}}</td><td>{{.Leader}}</td><td>{{printf "%.1f" .ReadsPerSec}}</td><td>{{printf "%.1f" .WritesPerSec}}</td><td>{{range .Tables}}{{.}}<br>{{end}}</td></tr>
{{end}}</table>
<p>JSON: <a href="/api/nodes">/api/nodes</a>, <a href="/api/databases">/api/databases</a>, <a href="/api/tablets">/api/tablets</a>; <a href="/metrics">/metrics</a>; <a href="/debug/pprof/">/debug/pprof</a></p>
</body></html>
`))
