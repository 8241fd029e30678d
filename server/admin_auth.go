package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
)

// Who may use the HTTP endpoints (docs/architecture.md, "Admin UI",
// lists the decisions). The HTTP API authenticates as pgwire does: a
// node that requires passwords for SQL requires a SQL role's password
// here too, checked against the same SCRAM-SHA-256 verifier in the
// catalog; an --insecure node (trust) leaves HTTP open and says so.
//
// A client authenticates with HTTP Basic auth on each request (scripts,
// curl, cairn node) or logs in once (POST /api/login or the /login form)
// and sends back the HTTP-only session cookie it gets. The policy is one
// table (accessFor), deny by default: a new endpoint needs a login unless
// it is listed as open.
//
//	open       /health, /metrics (Prometheus scrapes, as CockroachDB keeps
//	           it open), /ui/ (the stylesheet and script), /login, /logout,
//	           /api/login, /api/logout
//	any role   every other GET: the pages and /api/ (any role may read the
//	           cluster's shape, as any PostgreSQL role may read pg_class)
//	superuser  /debug/pprof (profiles expose memory), the activity pages
//	           and their JSON (/statements, /sessions, /jobs: other roles'
//	           SQL text) and every request that is not a GET or HEAD
//	           (POST /api/nodes/{id}/decommission)
//
// The role is read from the catalog on every request, so DROP ROLE,
// ALTER ROLE ... NOLOGIN or NOSUPERUSER take effect at once, and a
// session ends when the role's password changes.

// defaultSessionTTL is how long a login lasts.
const defaultSessionTTL = 12 * time.Hour

// access is what a request needs.
type access int

const (
	accessOpen access = iota
	accessUser
	accessSuperuser
)

// accessFor is the policy: what the request's path and method need.
func accessFor(r *http.Request) access {
	p := r.URL.Path
	switch {
	case p == "/health", p == "/metrics", strings.HasPrefix(p, "/ui/"),
		p == "/login", p == "/logout", p == "/api/login", p == "/api/logout":
		return accessOpen
	case strings.HasPrefix(p, "/debug/"), activityPaths[p]:
		return accessSuperuser
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return accessSuperuser
	}
	return accessUser
}

// webSession is one login.
type webSession struct {
	user string
	// verifier is the role's verifier at login: a changed password ends
	// the session.
	verifier string
	expires  time.Time
}

// webAuth holds a node's sessions. They live in the node's memory: a
// login is to one node (its UI), and ends when the node restarts.
type webAuth struct {
	mu       sync.Mutex
	sessions map[string]webSession
	// ttl (0: defaultSessionTTL) and now (nil: time.Now) are set by
	// tests.
	ttl time.Duration
	now func() time.Time
}

func (a *webAuth) clock() time.Time {
	if a.now != nil {
		return a.now()
	}
	return time.Now()
}

func (a *webAuth) create(user, verifier string) (id string, expires time.Time, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("creating a session: %w", err)
	}
	id = base64.RawURLEncoding.EncodeToString(b[:])
	ttl := a.ttl
	if ttl <= 0 {
		ttl = defaultSessionTTL
	}
	now := a.clock()
	expires = now.Add(ttl)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions == nil {
		a.sessions = map[string]webSession{}
	}
	for k, s := range a.sessions {
		if !now.Before(s.expires) {
			delete(a.sessions, k)
		}
	}
	a.sessions[id] = webSession{user: user, verifier: verifier, expires: expires}
	return id, expires, nil
}

// lookup returns the live session id names.
func (a *webAuth) lookup(id string) (webSession, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if ok && !a.clock().Before(s.expires) {
		delete(a.sessions, id)
		return s, false
	}
	return s, ok
}

func (a *webAuth) delete(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

// principal is who made an HTTP request.
type principal struct {
	User      string
	Superuser bool
	// Insecure: the node trusts everyone; User is set only when the
	// client logged in anyway.
	Insecure bool
	session  bool
}

type principalKey struct{}

func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// authError is a refusal: code 401 or 403 (503: the catalog could not be
// read).
type authError struct {
	code int
	msg  string
	// expired: a session cookie that named no live session.
	expired bool
}

func (e *authError) Error() string { return e.msg }

// sessionCookie is the cookie's name. Browsers do not separate cookies by
// port, so two nodes on one host (a local cluster) would overwrite each
// other's: the name carries the HTTP port.
func (s *Server) sessionCookie() string {
	if a, ok := s.httpLn.Addr().(*net.TCPAddr); ok {
		return fmt.Sprintf("cairn_session_%d", a.Port)
	}
	return "cairn_session"
}

// withAuth wraps the HTTP handler with the policy.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := accessFor(r)
		if need == accessOpen {
			next.ServeHTTP(w, r)
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			s.refuse(w, r, err)
			return
		}
		if need == accessSuperuser && !p.Insecure {
			if !p.Superuser {
				s.refuse(w, r, &authError{code: http.StatusForbidden, msg: fmt.Sprintf("role %q is not a superuser: %s %s needs one", p.User, r.Method, r.URL.Path)})
				return
			}
			// A session cookie is SameSite=Strict, which modern browsers
			// never send cross-site; refuse a foreign Origin anyway.
			if o := r.Header.Get("Origin"); p.session && o != "" && !sameOrigin(o, r.Host) {
				s.refuse(w, r, &authError{code: http.StatusForbidden, msg: "cross-origin request refused"})
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host == host
}

// authenticate identifies the request's role: Basic auth if sent, else
// the session cookie. An insecure node lets anonymous requests through.
func (s *Server) authenticate(r *http.Request) (principal, error) {
	ctx := r.Context()
	if user, pw, ok := r.BasicAuth(); ok {
		role, err := s.checkLogin(ctx, user, pw)
		if err != nil {
			return principal{}, err
		}
		return principal{User: role.Name, Superuser: role.Superuser, Insecure: s.cfg.Insecure}, nil
	}
	c, err := r.Cookie(s.sessionCookie())
	if err != nil {
		if s.cfg.Insecure {
			return principal{Insecure: true}, nil
		}
		return principal{}, &authError{code: http.StatusUnauthorized, msg: "authentication required: log in (POST /api/login) or send HTTP Basic credentials of a SQL role"}
	}
	sess, ok := s.admin.auth.lookup(c.Value)
	if !ok {
		if s.cfg.Insecure {
			return principal{Insecure: true}, nil
		}
		return principal{}, &authError{code: http.StatusUnauthorized, msg: "the session has expired or is unknown: log in again", expired: true}
	}
	role, err := s.readRole(ctx, sess.user)
	if err != nil {
		return principal{}, err
	}
	if role == nil || !role.Login || (!s.cfg.Insecure && role.Verifier != sess.verifier) {
		// Dropped, NOLOGIN, or a new password since the login.
		s.admin.auth.delete(c.Value)
		return principal{}, &authError{code: http.StatusUnauthorized, msg: "the session is no longer valid (the role changed): log in again", expired: true}
	}
	return principal{User: role.Name, Superuser: role.Superuser, Insecure: s.cfg.Insecure, session: true}, nil
}

// readRole reads role name from the catalog (nil: no such role).
func (s *Server) readRole(ctx context.Context, name string) (*catalog.Role, error) {
	var role *catalog.Role
	err := s.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		var err error
		role, err = catalog.NewReader(txn, nil).Role(ctx, name)
		return err
	})
	if err != nil {
		if pgerror.Code(err) == pgerrcode.UndefinedObject {
			return nil, nil
		}
		return nil, &authError{code: http.StatusServiceUnavailable, msg: fmt.Sprintf("reading role %q: %v", name, err)}
	}
	return role, nil
}

// checkLogin checks user's password against the role's verifier, as
// pgwire's SCRAM exchange does: an unknown role, one without a password
// and a wrong password all fail alike, after the same key derivation, so
// a client cannot probe which roles exist. An insecure node checks only
// that the role exists and may log in (trust).
func (s *Server) checkLogin(ctx context.Context, user, password string) (*catalog.Role, error) {
	role, err := s.readRole(ctx, user)
	if err != nil {
		return nil, err
	}
	failed := &authError{code: http.StatusUnauthorized, msg: fmt.Sprintf("password authentication failed for user %q", user)}
	if s.cfg.Insecure {
		if role == nil {
			return nil, &authError{code: http.StatusUnauthorized, msg: fmt.Sprintf("role %q does not exist", user)}
		}
	} else {
		verifier := ""
		if role != nil {
			verifier = role.Verifier
		}
		if !passwordMatches(verifier, password) || role == nil || password == "" {
			return nil, failed
		}
	}
	if !role.Login {
		return nil, &authError{code: http.StatusUnauthorized, msg: fmt.Sprintf("role %q is not permitted to log in", user)}
	}
	return role, nil
}

// mockVerifier is checked against when a role has no usable verifier, so
// that a failure costs what a wrong password does.
var mockVerifier = func() string {
	v, err := pgauth.Verifier(rand.Text())
	if err != nil {
		panic(err)
	}
	return v
}()

// passwordMatches derives password's keys with the verifier's salt and
// iterations and compares them in constant time.
func passwordMatches(verifier, password string) bool {
	want, err := pgauth.ParseVerifier(verifier)
	usable := err == nil
	if !usable {
		want, _ = pgauth.ParseVerifier(mockVerifier)
	}
	v, err := pgauth.VerifierWithSalt(password, []byte(want.Salt), want.Iters)
	if err != nil {
		return false
	}
	got, err := pgauth.ParseVerifier(v)
	if err != nil {
		return false
	}
	return usable && subtle.ConstantTimeCompare(got.StoredKey, want.StoredKey)&subtle.ConstantTimeCompare(got.ServerKey, want.ServerKey) == 1
}

// isPage reports whether a refused request was for an HTML page (which
// is redirected to the login form) rather than the API.
func isPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		!strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/debug/")
}

// refuse answers a failed authentication or authorization: a page
// request for a login goes to the login form, anything else gets the
// status with a JSON error.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var ae *authError
	if !errors.As(err, &ae) {
		ae = &authError{code: http.StatusInternalServerError, msg: err.Error()}
	}
	if ae.expired {
		s.clearCookie(w)
	}
	if ae.code == http.StatusUnauthorized && isPage(r) {
		q := url.Values{"next": {r.URL.RequestURI()}}
		if ae.expired {
			q.Set("expired", "1")
		}
		http.Redirect(w, r, "/login?"+q.Encode(), http.StatusSeeOther)
		return
	}
	if ae.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="cairn", charset="UTF-8"`)
	}
	writeJSONError(w, ae.code, ae.msg)
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": msg, "code": code})
}

func (s *Server) clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: s.sessionCookie(), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// loginRequest is POST /api/login's JSON body (a form posts the same
// fields).
type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// loginResponse is what a login returns.
type loginResponse struct {
	Username  string    `json:"username"`
	Superuser bool      `json:"superuser"`
	ExpiresAt time.Time `json:"expires_at"`
}

// login checks the credentials of a login request and starts a session
// with its cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request, req loginRequest) (loginResponse, error) {
	role, err := s.checkLogin(r.Context(), req.Username, req.Password)
	if err != nil {
		s.log.Info("cairn: admin UI login failed", "user", req.Username, "remote", r.RemoteAddr)
		return loginResponse{}, err
	}
	id, expires, err := s.admin.auth.create(role.Name, role.Verifier)
	if err != nil {
		return loginResponse{}, err
	}
	http.SetCookie(w, &http.Cookie{Name: s.sessionCookie(), Value: id, Path: "/", Expires: expires,
		MaxAge: int(time.Until(expires).Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return loginResponse{Username: role.Name, Superuser: role.Superuser, ExpiresAt: expires.UTC()}, nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(s.sessionCookie()); err == nil {
		s.admin.auth.delete(c.Value)
	}
	s.clearCookie(w)
}

// safeNext is where a login form redirects: a path on this node, never
// another site ("//host" or a scheme).
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

// loginPage is what the login template sees.
type loginPage struct {
	Next, Error, User string
	Insecure, Expired bool
}

func (s *Server) authRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/login", func(w http.ResponseWriter, r *http.Request) {
		var req loginRequest
		if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/json" {
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
				writeJSONError(w, http.StatusBadRequest, fmt.Sprintf("login: want {\"username\": ..., \"password\": ...}: %v", err))
				return
			}
		} else {
			req = loginRequest{Username: r.PostFormValue("username"), Password: r.PostFormValue("password")}
		}
		resp, err := s.login(w, r, req)
		if err != nil {
			s.refuse(w, r, err)
			return
		}
		writeJSON(w, resp)
	})
	mux.HandleFunc("POST /api/logout", func(w http.ResponseWriter, r *http.Request) {
		s.logout(w, r)
		writeJSON(w, map[string]bool{"logged_out": true})
	})
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		s.renderLogin(w, http.StatusOK, loginPage{Next: safeNext(r.URL.Query().Get("next")), Expired: r.URL.Query().Get("expired") != ""})
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		next := safeNext(r.PostFormValue("next"))
		req := loginRequest{Username: r.PostFormValue("username"), Password: r.PostFormValue("password")}
		if _, err := s.login(w, r, req); err != nil {
			code := http.StatusUnauthorized
			var ae *authError
			if errors.As(err, &ae) {
				code = ae.code
			}
			s.renderLogin(w, code, loginPage{Next: next, Error: err.Error(), User: req.Username})
			return
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		s.logout(w, r)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
}
