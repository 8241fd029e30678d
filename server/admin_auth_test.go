package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// authClient makes HTTP requests to one node, with optional Basic
// credentials and a cookie jar, never following redirects.
type authClient struct {
	t          *testing.T
	base       string
	user, pass string
	c          *http.Client
}

func newAuthClient(t *testing.T, s *Server) *authClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &authClient{t: t, base: "http://" + s.HTTPAddr().String(), c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (a *authClient) basic(user, pass string) *authClient {
	b := *a
	b.user, b.pass = user, pass
	return &b
}

// do sends method path with body (form-encoded when a url.Values, JSON
// when a string starting with "{") and returns the status, the response
// and its body.
func (a *authClient) do(method, path string, body any, hdr ...string) (int, *http.Response, string) {
	a.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case url.Values:
		rd, ctype = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	case string:
		rd, ctype = strings.NewReader(b), "application/json"
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if a.user != "" {
		req.SetBasicAuth(a.user, a.pass)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp, string(b)
}

// clockAt is a settable clock for the session store.
type clockAt struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clockAt) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clockAt) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// startSecureCluster starts a secure node as a replicated cluster of one
// (so that decommissioning is possible), with the superuser's password pw.
func startSecureCluster(t *testing.T, pw string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{InitialPassword: pw, RPCAddr: addr, RPCListener: ln, Join: []string{addr},
		LivenessTTL: 400 * time.Millisecond, ReplicateInterval: 100 * time.Millisecond})
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// TestHTTPAuth: a secure node's HTTP endpoints, anonymously, as an
// ordinary role and as a superuser, by Basic auth and by session cookie.
func TestHTTPAuth(t *testing.T) {
	s := startSecureCluster(t, "root-pw")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres:root-pw@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	execAll(t, c,
		"CREATE ROLE viewer LOGIN PASSWORD 'view-pw'",
		"CREATE ROLE ops LOGIN SUPERUSER PASSWORD 'ops-pw'",
		"CREATE ROLE nologin PASSWORD 'x'",
		"CREATE ROLE nopass LOGIN")
	anon := newAuthClient(t, s)
	viewer := anon.basic("viewer", "view-pw")
	root := anon.basic("postgres", "root-pw")
	const decommission = "/api/nodes/1/decommission"

	for _, tc := range []struct {
		name         string
		a            *authClient
		method, path string
		want         int
	}{
		{"health is open", anon, "GET", "/health", 200},
		{"metrics are open", anon, "GET", "/metrics", 200},
		{"stylesheet is open", anon, "GET", "/ui/style.css", 200},
		{"login page is open", anon, "GET", "/login", 200},
		{"read needs a login", anon, "GET", "/api/nodes", 401},
		{"api index needs a login", anon, "GET", "/api/", 401},
		{"page sends to the login form", anon, "GET", "/databases", 303},
		{"wrong password", anon.basic("viewer", "nope"), "GET", "/api/nodes", 401},
		{"unknown role", anon.basic("ghost", "view-pw"), "GET", "/api/nodes", 401},
		{"role without LOGIN", anon.basic("nologin", "x"), "GET", "/api/nodes", 401},
		{"role without a password", anon.basic("nopass", ""), "GET", "/api/nodes", 401},
		{"read as any role", viewer, "GET", "/api/nodes", 200},
		{"page as any role", viewer, "GET", "/tablets", 200},
		{"pprof needs a login", anon, "GET", "/debug/pprof/", 401},
		{"pprof needs a superuser", viewer, "GET", "/debug/pprof/", 403},
		{"pprof as superuser", root, "GET", "/debug/pprof/goroutine?debug=1", 200},
		{"statements need a superuser", viewer, "GET", "/api/statements", 403},
		{"sessions page needs a superuser", viewer, "GET", "/sessions", 403},
		{"jobs need a superuser", viewer, "GET", "/api/jobs", 403},
		{"statements as superuser", root, "GET", "/statements", 200},
		{"sessions as superuser", root, "GET", "/api/sessions", 200},
		{"jobs as superuser", root, "GET", "/jobs", 200},
		{"decommission needs a login", anon, "POST", decommission, 401},
		{"decommission needs a superuser", viewer, "POST", decommission, 403},
		{"unknown node, as superuser", root, "POST", "/api/nodes/x/decommission", 400},
	} {
		code, resp, body := tc.a.do(tc.method, tc.path, nil)
		if code != tc.want {
			t.Errorf("%s: %s %s = %d, want %d\n%s", tc.name, tc.method, tc.path, code, tc.want, body)
			continue
		}
		switch code {
		case 401, 403:
			var e struct {
				Error string `json:"error"`
				Code  int    `json:"code"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != code || e.Error == "" {
				t.Errorf("%s: body %q is not a JSON error (%v)", tc.name, body, err)
			}
			if code == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s: 401 without a Basic challenge", tc.name)
			}
		case 303:
			if loc := resp.Header.Get("Location"); loc != "/login?next=%2Fdatabases" {
				t.Errorf("%s: redirected to %q", tc.name, loc)
			}
		}
	}
	// A wrong password, an unknown role and a role without one fail alike.
	_, _, wrong := anon.basic("viewer", "nope").do("GET", "/api/nodes", nil)
	_, _, ghost := anon.basic("ghost", "nope").do("GET", "/api/nodes", nil)
	if strings.ReplaceAll(ghost, "ghost", "viewer") != wrong {
		t.Errorf("an unknown role fails unlike a wrong password:\n%s\n%s", ghost, wrong)
	}

	// A superuser may decommission (a cluster of one: the node is marked
	// decommissioning; nothing can move, which is all the test needs).
	if code, _, body := anon.basic("ops", "ops-pw").do("POST", decommission, nil); code != 200 || !strings.Contains(body, `"decommissioning"`) {
		t.Fatalf("decommission as superuser ops: %d %s", code, body)
	}
	// Privileges are read per request: ops loses SUPERUSER.
	execAll(t, c, "ALTER ROLE ops NOSUPERUSER")
	if code, _, body := anon.basic("ops", "ops-pw").do("POST", decommission, nil); code != 403 {
		t.Errorf("decommission after NOSUPERUSER: %d %s", code, body)
	}
}

// TestHTTPSessions: log in and out by JSON and by the login form, the
// cookie's attributes, its expiry, a forged cookie, a password change
// ending a session, and a cross-origin POST.
func TestHTTPSessions(t *testing.T) {
	s := startSecureCluster(t, "root-pw")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres:root-pw@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	execAll(t, c, "CREATE ROLE viewer LOGIN PASSWORD 'view-pw'")
	clock := &clockAt{t: time.Now()}
	s.admin.auth.now = clock.now
	s.admin.auth.ttl = time.Hour

	// A failed login sets no cookie.
	a := newAuthClient(t, s)
	code, resp, body := a.do("POST", "/api/login", `{"username": "viewer", "password": "wrong"}`)
	if code != 401 || len(resp.Cookies()) != 0 || !strings.Contains(body, `password authentication failed for user \"viewer\"`) {
		t.Fatalf("login with a wrong password: %d %v %s", code, resp.Cookies(), body)
	}
	if code, _, body := a.do("POST", "/api/login", `{"username": `); code != 400 {
		t.Errorf("login with bad JSON: %d %s", code, body)
	}

	// JSON login.
	code, resp, body = a.do("POST", "/api/login", `{"username": "viewer", "password": "view-pw"}`)
	if code != 200 {
		t.Fatalf("login: %d %s", code, body)
	}
	var lr loginResponse
	if err := json.Unmarshal([]byte(body), &lr); err != nil || lr.Username != "viewer" || lr.Superuser {
		t.Fatalf("login answer %s (%v)", body, err)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Name != s.sessionCookie() || len(cookies[0].Value) < 40 {
		t.Fatalf("session cookie %+v", cookies)
	}
	if code, _, body := a.do("GET", "/api/tablets", nil); code != 200 {
		t.Fatalf("read with the cookie: %d %s", code, body)
	}
	if code, _, body := a.do("GET", "/", nil); code != 200 || !strings.Contains(body, `id="session-user">viewer<`) || strings.Contains(body, "insecure-banner") {
		t.Fatalf("overview with the cookie: %d\n%s", code, body)
	}
	if code, _, _ := a.do("POST", "/api/nodes/1/decommission", nil); code != 403 {
		t.Errorf("decommission with viewer's cookie: %d, want 403", code)
	}
	// Expiry: an hour later the cookie names no live session.
	clock.add(time.Hour + time.Second)
	if code, resp, body := a.do("GET", "/api/tablets", nil); code != 401 || !strings.Contains(body, "expired") {
		t.Errorf("read with an expired cookie: %d %s", code, body)
	} else if cs := resp.Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("an expired session's cookie is not cleared: %+v", cs)
	}
	// A page with an expired (here: forged) cookie goes to the login form.
	forged := newAuthClient(t, s)
	u, _ := url.Parse(forged.base)
	forged.c.Jar.SetCookies(u, []*http.Cookie{{Name: s.sessionCookie(), Value: "forged-session-id"}})
	if code, resp, _ := forged.do("GET", "/tablets", nil); code != 303 || resp.Header.Get("Location") != "/login?expired=1&next=%2Ftablets" {
		t.Errorf("page with a forged cookie: %d -> %q", code, resp.Header.Get("Location"))
	}
	if code, _, _ := forged.do("GET", "/api/nodes", nil); code != 401 {
		t.Errorf("API with a forged cookie: %d", code)
	}

	// Form login as the superuser, redirected where it was going; then a
	// decommission with the cookie, from this origin and from another.
	f := newAuthClient(t, s)
	code, resp, body = f.do("POST", "/login", url.Values{"username": {"postgres"}, "password": {"bad"}, "next": {"/tablets"}})
	if code != 401 || !strings.Contains(body, `id="login-error"`) || !strings.Contains(body, `value="/tablets"`) {
		t.Errorf("form login with a bad password: %d\n%s", code, body)
	}
	code, resp, _ = f.do("POST", "/login", url.Values{"username": {"postgres"}, "password": {"root-pw"}, "next": {"/tablets"}})
	if code != 303 || resp.Header.Get("Location") != "/tablets" {
		t.Fatalf("form login: %d -> %q", code, resp.Header.Get("Location"))
	}
	if code, _, _ := f.do("POST", "/login", url.Values{"username": {"postgres"}, "password": {"root-pw"}, "next": {"//evil.example/"}}); code != 303 {
		t.Errorf("form login: %d", code)
	} else if _, resp, _ := f.do("POST", "/login", url.Values{"username": {"postgres"}, "password": {"root-pw"}, "next": {"//evil.example/"}}); resp.Header.Get("Location") != "/" {
		t.Errorf("form login redirected off the node: %q", resp.Header.Get("Location"))
	}
	if code, _, body := f.do("GET", "/debug/pprof/", nil); code != 200 {
		t.Errorf("pprof with the superuser's cookie: %d %s", code, body)
	}
	if code, _, body := f.do("POST", "/api/nodes/1/decommission", nil, "Origin", "http://evil.example"); code != 403 || !strings.Contains(body, "cross-origin") {
		t.Errorf("cross-origin decommission with the cookie: %d %s", code, body)
	}
	if code, _, body := f.do("POST", "/api/nodes/1/decommission", nil, "Origin", f.base); code != 200 {
		t.Errorf("same-origin decommission with the cookie: %d %s", code, body)
	}

	// A password change ends the sessions logged in with the old one.
	execAll(t, c, "ALTER ROLE postgres PASSWORD 'new-pw'")
	if code, _, body := f.do("GET", "/api/nodes", nil); code != 401 || !strings.Contains(body, "no longer valid") {
		t.Errorf("session after a password change: %d %s", code, body)
	}

	// Logout ends the session.
	l := newAuthClient(t, s)
	if code, _, body := l.do("POST", "/api/login", url.Values{"username": {"viewer"}, "password": {"view-pw"}}); code != 200 {
		t.Fatalf("form-encoded API login: %d %s", code, body)
	}
	jar := l.c.Jar.Cookies(u)
	if code, _, _ := l.do("POST", "/api/logout", nil); code != 200 {
		t.Fatalf("logout: %d", code)
	}
	replay := newAuthClient(t, s)
	replay.c.Jar.SetCookies(u, jar)
	if code, _, _ := replay.do("GET", "/api/nodes", nil); code != 401 {
		t.Errorf("the cookie of a logged-out session still reads: %d", code)
	}
}

// TestHTTPInsecure: an insecure node's HTTP is open, and the pages say so.
func TestHTTPInsecure(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	a := newAuthClient(t, s)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/nodes", 200},
		{"GET", "/debug/pprof/", 200},
		// Open, and then refused by the handler: this node is not
		// replicated.
		{"POST", "/api/nodes/1/decommission", 400},
	} {
		if code, _, body := a.do(tc.method, tc.path, nil); code != tc.want {
			t.Errorf("%s %s = %d, want %d\n%s", tc.method, tc.path, code, tc.want, body)
		}
	}
	if code, _, body := a.do("GET", "/", nil); code != 200 || !strings.Contains(body, `id="insecure-banner"`) {
		t.Errorf("overview of an insecure node: %d, no insecure banner\n%s", code, body)
	}
	if code, _, body := a.do("GET", "/login", nil); code != 200 || !strings.Contains(body, "--insecure") {
		t.Errorf("login page of an insecure node: %d\n%s", code, body)
	}
}
