package localcluster

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestNetworkRTT: in a global cluster every node's planner expects the
// round trips the latency map imposes, as its clock probes measure them:
// us-west reaches us-east in 60 ms and eu in 145 ms, so its mean over
// the three nodes (itself at zero) is about 68 ms; us-east's (60, 86)
// about 49 ms. The measurement includes loopback and scheduling delays,
// so the check is a band around those figures.
func TestNetworkRTT(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-region cluster")
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Nodes: 3, Global: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	want := map[string]time.Duration{"us-west": (60 + 145) * time.Millisecond / 3, "us-east": (60 + 86) * time.Millisecond / 3, "eu": (86 + 145) * time.Millisecond / 3}
	deadline := time.Now().Add(30 * time.Second)
	for i, s := range c.Nodes {
		w := want[c.Regions[i]]
		for {
			// Until the clock monitor has probed both peers the mean
			// is short of the map's.
			got := s.NetworkRTT()
			if got >= w && got < w+40*time.Millisecond {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d (%s): NetworkRTT %v, want about %v", i+1, c.Regions[i], got, w)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
