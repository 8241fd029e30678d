package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime/pprof"
	"testing"
	"time"
)

// TestStopEndsProfile: Stop does not wait for a CPU profile in flight to
// run its course. A node asked for a 600 s profile stopped only when the
// profile ended (Shutdown waits for every request); it now gives requests
// a short drain and then closes their connections, which ends the
// profile.
func TestStopEndsProfile(t *testing.T) {
	s := start(t, Config{Insecure: true})
	got := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=600", s.HTTPAddr()))
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		got <- err
	}()
	// The profile is in flight once this process's CPU profiler is busy.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := pprof.StartCPUProfile(io.Discard); err != nil {
			break
		}
		pprof.StopCPUProfile()
		if time.Now().After(deadline) {
			t.Fatal("the profile request did not start the CPU profiler within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(60 * time.Second):
		s.http.Close() // lets that Stop, and the test's cleanup, end
		t.Fatal("Stop still waits 60 s into a 600 s profile")
	}
	select {
	case <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("the profile request still runs 60 s after Stop returned")
	}
	// The profiler is free again: the profile ended with its request.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := pprof.StartCPUProfile(io.Discard); err == nil {
			pprof.StopCPUProfile()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the CPU profiler is still busy 30 s after Stop")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
