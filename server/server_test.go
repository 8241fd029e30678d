package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t testing.TB, cfg Config) *Server {
	t.Helper()
	cfg.Logger = quiet()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Also stopped if the test ends without stopping it (a t.Fatal),
	// before a t.TempDir it uses is removed: a running node writes its
	// disk probe there each second. Stop is idempotent.
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// connect opens a pgx connection to s as postgres; the caller closes it
// (before stopping s).
func connect(t testing.TB, s *Server) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestHTTP(t *testing.T) {
	s := start(t, Config{Insecure: true})
	defer s.Stop(context.Background())
	get := func(path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://%s%s", s.HTTPAddr(), path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != 200 || body != "ok\n" {
		t.Errorf("/health: %d %q", code, body)
	}
	code, body := get("/metrics")
	if code != 200 || !strings.Contains(body, "\ncairn_up 1\n") || !strings.Contains(body, "# TYPE go_goroutines gauge") {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	if code, _ := get("/debug/pprof/goroutine?debug=1"); code != 200 {
		t.Errorf("/debug/pprof: %d", code)
	}
	if code, _ := get("/nothing"); code != 404 {
		t.Errorf("/nothing: %d", code)
	}
}

// TestRestart: a node on a directory keeps its data and its superuser's
// password across restarts; the password flag counts only at bootstrap.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := start(t, Config{StoreDir: dir, InitialPassword: "first"})
	url := func(s *Server, pw string) string {
		return fmt.Sprintf("postgres://postgres:%s@%s/postgres?sslmode=disable", pw, s.Addr())
	}
	if _, err := pgx.Connect(ctx, url(s, "wrong")); err == nil {
		t.Fatal("wrong password accepted")
	}
	c, err := pgx.Connect(ctx, url(s, "first"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (a INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO kept VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	s = start(t, Config{StoreDir: dir, InitialPassword: "second"})
	defer s.Stop(ctx)
	if _, err := pgx.Connect(ctx, url(s, "second")); err == nil {
		t.Error("the password of a later start replaced the bootstrap one")
	}
	c, err = pgx.Connect(ctx, url(s, "first"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 2 {
		t.Errorf("after restart: %d rows, %v", n, err)
	}
}

func TestStartErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "initial password"},
		{Config{Insecure: true, Locality: "region"}, "locality"},
		{Config{Insecure: true, RPCAddr: "nocolon"}, "rpc address"},
		{Config{Insecure: true, SQLAddr: "256.0.0.1:1"}, "listening for SQL"},
		{Config{Insecure: true, LatencyMap: "us-west:eu=145ms"}, "--latency-map needs --join"},
		{Config{Insecure: true, LeasePreferences: "spread"}, "--lease-preferences needs --join"},
		{Config{Insecure: true, LatencyMap: "us-west:eu"}, "REGION:REGION=DURATION"},
		{Config{Insecure: true, LeasePreferences: "us-west"}, "region=NAME"},
	} {
		tc.cfg.Logger = quiet()
		s, err := Start(context.Background(), tc.cfg)
		if err == nil {
			s.Stop(context.Background())
			t.Errorf("%+v: started", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
