package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestDebugFaults: /debug/faults exists only on a node started with
// FaultInjection; there it cuts peers, heals, skews the clock, refuses bad
// input with 400 and changes nothing then, and moves leases on demand (a
// node with no other voter moves none).
func TestDebugFaults(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: []string{addr}, FaultInjection: true})
	defer s.Stop(context.Background())
	plain := start(t, Config{Insecure: true})
	defer plain.Stop(context.Background())

	do := func(srv *Server, method, path string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+srv.HTTPAddr().String()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		srv     *Server
		method  string
		path    string
		code    int
		key     string
		want    string // JSON value of key, as fmt prints it
		comment string
	}{
		{plain, "GET", "/debug/faults", http.StatusNotFound, "", "", "not served without FaultInjection"},
		{s, "GET", "/debug/faults", http.StatusOK, "cut", "[]", "nothing cut at first"},
		{s, "POST", "/debug/faults/cut?nodes=2,3", http.StatusOK, "cut", "[2 3]", "cut two peers"},
		{s, "POST", "/debug/faults/cut?nodes=2,x", http.StatusBadRequest, "", "", "a bad node ID"},
		{s, "GET", "/debug/faults", http.StatusOK, "cut", "[2 3]", "the bad request changed nothing"},
		{s, "POST", "/debug/faults/cut?nodes=", http.StatusOK, "cut", "[]", "healed"},
		{s, "POST", "/debug/faults/clock-offset?d=150ms", http.StatusOK, "clock_offset", "150ms", "clock skewed"},
		{s, "POST", "/debug/faults/clock-offset?d=soon", http.StatusBadRequest, "", "", "a bad duration"},
		{s, "GET", "/debug/faults", http.StatusOK, "clock_offset", "150ms", "still the last good offset"},
		{s, "POST", "/debug/faults/clock-offset?d=0s", http.StatusOK, "clock_offset", "0s", "offset undone"},
		{s, "POST", "/debug/faults/transfer-leases?to=", http.StatusBadRequest, "", "", "a missing target"},
		{s, "POST", "/debug/faults/transfer-leases?to=2", http.StatusOK, "moved", "0", "no other voter to move to"},
	} {
		code, out := do(tc.srv, tc.method, tc.path)
		if code != tc.code {
			t.Errorf("%s %s (%s): %d, want %d", tc.method, tc.path, tc.comment, code, tc.code)
			continue
		}
		if tc.key != "" {
			got, _ := json.Marshal(out[tc.key])
			if s := strings.ReplaceAll(strings.Trim(string(got), `"`), ",", " "); s != tc.want {
				t.Errorf("%s %s (%s): %s = %s, want %s", tc.method, tc.path, tc.comment, tc.key, s, tc.want)
			}
		}
	}
}
