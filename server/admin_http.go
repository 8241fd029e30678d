package server

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/plan"
)

// The admin UI's routes. Pages are html/template files embedded from ui/
// (no JavaScript build: a few lines of vanilla JS reload a page on
// demand); every page has a JSON twin under /api/ (docs/architecture.md,
// "Admin UI", lists them).

//go:embed ui
var uiFiles embed.FS

var uiFuncs = template.FuncMap{
	"bytes": func(v any) string {
		switch n := v.(type) {
		case uint64:
			return FormatBytes(n)
		case int64:
			return FormatBytes(uint64(max(n, 0)))
		case int:
			return FormatBytes(uint64(max(n, 0)))
		}
		return fmt.Sprint(v)
	},
	"rate":    func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"percent": func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" },
	"since": func(now, t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return now.Sub(t).Round(time.Millisecond).String()
	},
	"pathEscape": url.PathEscape,
	// dict makes a map of key, value pairs, for a template's argument.
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[fmt.Sprint(kv[i])] = kv[i+1]
		}
		return m
	},
	"colocatedCount": func(d DatabaseInfo) int {
		n := 0
		for _, t := range d.Tables {
			if t.Colocated {
				n++
			}
		}
		return n
	},
}

// uiPages are the page templates, each the layout with its content.
var uiPages = func() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(uiFuncs).ParseFS(uiFiles, "ui/layout.html"))
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "databases", "database", "table", "tablets", "statements", "sessions", "jobs"} {
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(uiFiles, "ui/"+name+".html"))
	}
	return pages
}()

// loginTemplate is the login form (a page of its own: it has no view).
var loginTemplate = template.Must(template.New("").Funcs(uiFuncs).ParseFS(uiFiles, "ui/login.html"))

func (s *Server) renderLogin(w http.ResponseWriter, code int, p loginPage) {
	p.Insecure = s.cfg.Insecure
	var buf bytes.Buffer
	if err := loginTemplate.ExecuteTemplate(&buf, "login", p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// uiPage is what a page template sees.
type uiPage struct {
	Title, Active string
	Self          uint64
	View          *adminView
	WarnSize      int64
	// Tablets are the tablets the page is about (all, a database's, a
	// table's).
	Tablets []TabletInfo
	DB      *DatabaseInfo
	Table   *TableInfo
	// UserDatabases and UserTables count what users created.
	UserDatabases, UserTables int
	// User is the role logged in ("": none, on an insecure node);
	// Insecure says the node lets anyone in.
	User     string
	Insecure bool
	// The activity pages' rows (admin_activity.go) and when they were
	// read.
	Statements []StatementInfo
	Sessions   []plan.SessionActivity
	Jobs       []jobs.Record
	Now        time.Time
	// The overview's charts of the node's recent statements
	// (timeseries.go) and how many points they have.
	QPSChart, MeanChart, P99Chart chart
	SeriesPoints                  int
	// Version is the overview's versions, as this node knows them.
	Version VersionInfo
}

// apiIndex is GET /api/'s answer: the endpoints and what they return.
var apiIndex = []struct {
	Path string `json:"path"`
	What string `json:"what"`
}{
	{"/api/nodes", "the nodes: ID, addresses, locality, liveness, binary version, replicas and leaders"},
	{"/api/version", "this node's binary version, the oldest cluster version it runs in, and the cluster version as it knows it"},
	{"/api/databases", "every database (the system catalog first) with its tables and tablets"},
	{"/api/databases/{db}/tables", "a database's tables (404: no such database)"},
	{"/api/system/tables", "the system catalog's parts, a colocated group"},
	{"/api/tables/{id}/tablets", "the tablets of the table with descriptor ID id"},
	{"/api/tablets", "every tablet: span, size, replicas, leader, reads and writes per second, tables"},
	{"/api/tablets/{id}", "one tablet"},
	{"/api/timeseries", "this node's statements per second, mean and 99th-percentile latency, one point a second over the last ten minutes"},
	{"/api/statements", "this node's statements by fingerprint (pg_stat_statements), the most time-consuming first (a superuser)"},
	{"/api/sessions", "this node's sessions and what each runs (pg_stat_activity) (a superuser)"},
	{"/api/jobs", "the cluster's jobs, newest first, with status and progress (a superuser)"},
	{"POST /api/login", "log in as a SQL role ({\"username\", \"password\"} as JSON or a form): sets an HTTP-only session cookie"},
	{"POST /api/logout", "end the session of the cookie sent"},
	{"POST /api/nodes/{id}/decommission", "decommission node id (a superuser; ?done=1 once it holds no replica)"},
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name string, p *uiPage) {
	p.Self = s.nodeID()
	if p.View != nil {
		p.WarnSize = p.View.WarnSize
	}
	pr := principalOf(r)
	p.User, p.Insecure = pr.User, s.cfg.Insecure
	if p.Tablets == nil && p.View != nil {
		p.Tablets = p.View.Tablets
	}
	var buf bytes.Buffer
	if err := uiPages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// tabletsOf returns the tablets among all whose IDs are in ids.
func tabletsOf(all []TabletInfo, ids []uint64) []TabletInfo {
	out := []TabletInfo{}
	for _, t := range all {
		if slices.Contains(ids, t.TabletID) {
			out = append(out, t)
		}
	}
	return out
}

func (s *Server) adminRoutes(mux *http.ServeMux) {
	static, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(static)))
	s.authRoutes(mux)

	// view wraps a handler that needs the admin view: a failure to read
	// it is a 500 with the error.
	view := func(withNodes bool, h func(w http.ResponseWriter, r *http.Request, v *adminView)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			v, err := s.view(r.Context(), withNodes)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			h(w, r, v)
		}
	}
	dbOf := func(w http.ResponseWriter, r *http.Request, v *adminView) *DatabaseInfo {
		if r.PathValue("db") == "" {
			return v.database(systemDatabase, true)
		}
		d := v.database(r.PathValue("db"), false)
		if d == nil {
			http.Error(w, fmt.Sprintf("database %q does not exist", r.PathValue("db")), http.StatusNotFound)
		}
		return d
	}
	tableOf := func(w http.ResponseWriter, r *http.Request, v *adminView) *TableInfo {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
		var t *TableInfo
		if err == nil {
			t = v.table(uint32(id))
		}
		if t == nil {
			http.Error(w, fmt.Sprintf("no table with id %q", r.PathValue("id")), http.StatusNotFound)
		}
		return t
	}

	// JSON.
	mux.HandleFunc("GET /api/{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, apiIndex)
	})
	mux.HandleFunc("GET /api/nodes", view(true, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		writeJSON(w, v.Nodes)
	}))
	mux.HandleFunc("GET /api/databases", view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		writeJSON(w, v.Databases)
	}))
	dbTables := view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		if d := dbOf(w, r, v); d != nil {
			writeJSON(w, d.Tables)
		}
	})
	mux.HandleFunc("GET /api/databases/{db}/tables", dbTables)
	mux.HandleFunc("GET /api/system/tables", dbTables)
	mux.HandleFunc("GET /api/tables/{id}/tablets", view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		if t := tableOf(w, r, v); t != nil {
			writeJSON(w, tabletsOf(v.Tablets, t.Tablets))
		}
	}))
	mux.HandleFunc("GET /api/tablets", view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		writeJSON(w, v.Tablets)
	}))
	mux.HandleFunc("GET /api/tablets/{id}", view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if t := v.tablet(id); err == nil && t != nil {
			writeJSON(w, t)
			return
		}
		http.Error(w, fmt.Sprintf("no tablet %q", r.PathValue("id")), http.StatusNotFound)
	}))

	// Pages.
	mux.HandleFunc("GET /{$}", view(true, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		p := &uiPage{Title: "Overview", Active: "overview", View: v}
		for _, d := range v.Databases {
			if !d.System {
				p.UserDatabases++
				p.UserTables += len(d.Tables)
			}
		}
		pts := s.obs.points()
		p.QPSChart = lineChart(pts, func(p SeriesPoint) float64 { return p.QPS })
		p.MeanChart = lineChart(pts, func(p SeriesPoint) float64 { return p.MeanMs })
		p.P99Chart = lineChart(pts, func(p SeriesPoint) float64 { return p.P99Ms })
		p.SeriesPoints = len(pts)
		p.Version = s.versionInfo()
		s.render(w, r, "overview", p)
	}))
	mux.HandleFunc("GET /databases", view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		s.render(w, r, "databases", &uiPage{Title: "Databases", Active: "databases", View: v})
	}))
	dbPage := view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		if d := dbOf(w, r, v); d != nil {
			title := "Database " + d.Name
			if d.System {
				title = "System catalog"
			}
			s.render(w, r, "database", &uiPage{Title: title, Active: "databases", View: v, DB: d, Tablets: tabletsOf(v.Tablets, d.Tablets)})
		}
	})
	mux.HandleFunc("GET /databases/{db}", dbPage)
	mux.HandleFunc("GET /system", dbPage)
	mux.HandleFunc("GET /tables/{id}", view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		if t := tableOf(w, r, v); t != nil {
			s.render(w, r, "table", &uiPage{Title: "Table " + t.Name, Active: "databases", View: v, Table: t, Tablets: tabletsOf(v.Tablets, t.Tablets)})
		}
	}))
	s.activityRoutes(mux)
	mux.HandleFunc("GET /tablets", view(false, func(w http.ResponseWriter, r *http.Request, v *adminView) {
		s.render(w, r, "tablets", &uiPage{Title: "Tablets", Active: "tablets", View: v})
	}))
}
