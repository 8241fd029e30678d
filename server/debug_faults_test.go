package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/storage"
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

// TestDiskStallFences: a node whose disk stops answering fails with
// ErrDiskStalled (cmd/cairn then exits without waiting on the disk), so
// its leases move; a slowed disk is only slower.
func TestDiskStallFences(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := start(t, Config{Insecure: true, StoreDir: t.TempDir(), RPCAddr: addr, RPCListener: ln, Join: []string{addr}, FaultInjection: true, DiskStallFence: 50 * time.Millisecond})
	defer s.Stop(context.Background())
	post := func(path string) map[string]any {
		t.Helper()
		resp, err := http.Post("http://"+s.HTTPAddr().String()+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d, %v", path, resp.StatusCode, err)
		}
		return out
	}
	if out := post("/debug/faults/disk?latency=1ms"); out["latency"] != "1ms" || out["stalled"] != false {
		t.Fatalf("slow disk: %v", out)
	}
	commit := func() error {
		b := s.eng.NewWriteOnlyBatch()
		defer b.Close()
		if err := b.Put(storage.MVCCKey{Key: []byte("stall-test")}, []byte("v")); err != nil {
			return err
		}
		return b.Commit()
	}
	if err := commit(); err != nil {
		t.Fatalf("a commit on the slow disk: %v", err)
	}
	select {
	case err := <-s.Failed():
		t.Fatalf("the node failed on a slow disk: %v", err)
	default:
	}
	if out := post("/debug/faults/disk?latency=0s&stall=true"); out["stalled"] != true {
		t.Fatalf("stall: %v", out)
	}
	done := make(chan error, 1)
	go func() { done <- commit() }()
	failed := <-s.Failed()
	if !errors.Is(failed, ErrDiskStalled) {
		t.Fatalf("the node failed with %v, want ErrDiskStalled", failed)
	}
	s.simfs.Unstall()
	if err := <-done; err != nil {
		t.Fatalf("the stalled commit, once the disk answered: %v", err)
	}
}
