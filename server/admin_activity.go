package server

import (
	"net/http"
	"sort"
	"time"

	"github.com/cairn-db/cairn/sql/jobs"
	"github.com/cairn-db/cairn/sql/plan"
)

// The admin UI's activity pages: the node's statements (its
// pg_stat_statements), its sessions (its pg_stat_activity) and the
// cluster's jobs (schema changes and their progress), each with a JSON
// twin under /api/. They show SQL text of every role, which PostgreSQL
// shows only to roles with those roles' privileges, so they are for
// superusers (admin_auth.go's accessFor).

// activityPaths are the pages and endpoints only superusers may read.
var activityPaths = map[string]bool{
	"/statements": true, "/sessions": true, "/jobs": true,
	"/api/statements": true, "/api/sessions": true, "/api/jobs": true,
}

// StatementInfo is one row of /api/statements.
type StatementInfo struct {
	QueryID    int64   `json:"query_id"`
	Query      string  `json:"query"`
	User       string  `json:"user"`
	DatabaseID uint32  `json:"database_id"`
	Calls      int64   `json:"calls"`
	Rows       int64   `json:"rows"`
	TotalMs    float64 `json:"total_ms"`
	MeanMs     float64 `json:"mean_ms"`
	MaxMs      float64 `json:"max_ms"`
}

// statements returns the node's statements, the most time-consuming
// first.
func (s *Server) statements() []StatementInfo {
	out := []StatementInfo{}
	for _, st := range s.backend.Statements() {
		out = append(out, StatementInfo{QueryID: st.QueryID, Query: st.Query, User: st.User, DatabaseID: st.DatabaseID,
			Calls: st.Calls, Rows: st.Rows, TotalMs: st.TotalMs, MeanMs: st.MeanMs, MaxMs: st.MaxMs})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TotalMs > out[j].TotalMs })
	return out
}

// sessions returns the node's sessions.
func (s *Server) sessions() []plan.SessionActivity {
	out := s.backend.Sessions()
	if out == nil {
		out = []plan.SessionActivity{}
	}
	return out
}

// activityRoutes adds the activity pages and their JSON twins.
func (s *Server) activityRoutes(mux *http.ServeMux) {
	jobList := func(w http.ResponseWriter, r *http.Request) ([]jobs.Record, bool) {
		recs, err := jobs.List(r.Context(), s.db)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return nil, false
		}
		// Newest first.
		sort.SliceStable(recs, func(i, j int) bool { return recs[i].ID > recs[j].ID })
		if recs == nil {
			recs = []jobs.Record{}
		}
		return recs, true
	}
	mux.HandleFunc("GET /api/timeseries", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.obs.points()) })
	mux.HandleFunc("GET /api/statements", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.statements()) })
	mux.HandleFunc("GET /api/sessions", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.sessions()) })
	mux.HandleFunc("GET /api/jobs", func(w http.ResponseWriter, r *http.Request) {
		if recs, ok := jobList(w, r); ok {
			writeJSON(w, recs)
		}
	})
	mux.HandleFunc("GET /statements", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, "statements", &uiPage{Title: "Statements", Active: "statements", Statements: s.statements()})
	})
	mux.HandleFunc("GET /sessions", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, "sessions", &uiPage{Title: "Sessions", Active: "sessions", Sessions: s.sessions(), Now: time.Now()})
	})
	mux.HandleFunc("GET /jobs", func(w http.ResponseWriter, r *http.Request) {
		if recs, ok := jobList(w, r); ok {
			s.render(w, r, "jobs", &uiPage{Title: "Jobs", Active: "jobs", Jobs: recs, Now: time.Now()})
		}
	})
}
