package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/server"
)

// TestNodeCommands runs cairn node status and decommission against two
// in-process nodes (one started as a cluster of one, one joining it):
// status lists both as live, decommission of the second (which holds no
// replica: two nodes keep one voter per tablet) finishes and status then
// shows it decommissioned.
func TestNodeCommands(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	startNode := func(join func(self string) []string) *server.Server {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		s, err := server.Start(ctx, server.Config{Insecure: true, RPCAddr: addr, RPCListener: ln, Join: join(addr), Logger: quiet,
			LivenessTTL: 400 * time.Millisecond, ReplicateInterval: 100 * time.Millisecond, Locality: "region=r" + addr[len(addr)-1:]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(ctx) })
		return s
	}
	var first string
	n1 := startNode(func(self string) []string { first = self; return []string{self} })
	startNode(func(string) []string { return []string{first} })
	host := n1.HTTPAddr().String()
	node := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"node"}, args...), strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("cairn node %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	status := node("status", "--host", host)
	for _, want := range []string{`(?m)^id\s+rpc address\s+sql address\s+locality\s+liveness\s+replicas\s+leaders$`, `(?m)^1\s+\S+\s+\S+\s+region=r\S*\s+live\s+1\s+1$`, `(?m)^2\s+\S+\s+\S+\s+region=r\S*\s+live\s+0\s+0$`} {
		if !regexp.MustCompile(want).MatchString(status) {
			t.Fatalf("cairn node status:\n%s\nwant a line matching %s", status, want)
		}
	}
	if out := node("decommission", "2", "--url", "http://"+host); !strings.Contains(out, "node 2 is decommissioned") {
		t.Fatalf("cairn node decommission 2:\n%s", out)
	}
	if status := node("status", "--host", host); !regexp.MustCompile(`(?m)^2\s.*\sdecommissioned\s+0\s+0$`).MatchString(status) {
		t.Fatalf("cairn node status after decommissioning node 2:\n%s", status)
	}
}
