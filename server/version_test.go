package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	v10 = clusterversion.Version{Major: 1, Minor: 0}
	v11 = clusterversion.Version{Major: 1, Minor: 1}
)

// startVersion starts a node as memberCluster.startAt does, playing a
// binary of version binary that runs in clusters at minSupported or later;
// it returns Start's error instead of failing.
func (c *memberCluster) startVersion(addr string, ln net.Listener, dir string, join []string, binary, minSupported clusterversion.Version) (*Server, error) {
	c.t.Helper()
	cfg := c.config(addr, ln, dir, join, "")
	cfg.BinaryVersion, cfg.MinSupportedVersion = binary, minSupported
	s, err := Start(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[s.repl.id] = s
	c.dirs[s.repl.id] = dir
	c.addrs[s.repl.id] = addr
	return s, nil
}

// newNode starts a node on a new address and store (the first one, with
// join nil, bootstraps the cluster).
func (c *memberCluster) newNode(join []string, binary, minSupported clusterversion.Version) (*Server, error) {
	c.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	addr := ln.Addr().String()
	if join == nil {
		join = []string{addr}
	}
	s, err := c.startVersion(addr, ln, c.t.TempDir(), join, binary, minSupported)
	if err != nil {
		ln.Close()
	}
	return s, err
}

// restartAs stops node id and starts it again on its store, as a binary of
// version binary. Every node here was started with node 1's address as
// --join, and is restarted so.
func (c *memberCluster) restartAs(id uint64, binary clusterversion.Version) (*Server, error) {
	c.t.Helper()
	addr, dir := c.addrs[id], c.dirs[id]
	join := []string{c.addrs[1]}
	c.stop(id)
	ln := relisten(c.t, addr)
	s, err := c.startVersion(addr, ln, dir, join, binary, v10)
	if err != nil {
		ln.Close()
	}
	return s, err
}

func apiVersion(t *testing.T, s *Server) VersionInfo {
	t.Helper()
	var v VersionInfo
	getJSON(t, s, "/api/version", &v)
	return v
}

func showVersion(t *testing.T, s *Server, setting string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, s)
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW CLUSTER SETTING "+setting).Scan(&v); err != nil {
		t.Fatalf("SHOW CLUSTER SETTING %s: %v", setting, err)
	}
	return v
}

// execErr runs sql on s and returns its error's SQLSTATE and message.
func execErr(t *testing.T, s *Server, sql string) (code, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, s)
	defer conn.Close(ctx)
	_, err := conn.Exec(ctx, sql)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: %v, want an error", sql, err)
	}
	return pe.Code, pe.Message
}

// TestClusterVersionRollingUpgrade walks a rolling upgrade from a binary
// of version 1.0 to one of 1.1, with the automatic rise held: the cluster
// stays at 1.0 while a node runs 1.0; SET CLUSTER SETTING version refuses
// to go above it, and later to go down; once raised, a 1.0 binary is
// refused, joining or restarting.
func TestClusterVersionRollingUpgrade(t *testing.T) {
	ctx := context.Background()
	c := newMemberCluster(t, 60*time.Second)
	n1, err := c.newNode(nil, v10, v10)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := c.newNode([]string{c.addrs[1]}, v11, v10)
	if err != nil {
		t.Fatalf("a 1.1 binary joining a 1.0 cluster: %v", err)
	}
	if got := showVersion(t, n2, "version"); got != "1.0" {
		t.Fatalf("a new cluster of 1.0 binaries is at version %q", got)
	}
	// The admin API says which node runs which binary.
	if nodes := apiNodes(t, n2); nodes[1].BinaryVersion != "1.0" || nodes[2].BinaryVersion != "1.1" {
		t.Fatalf("/api/nodes binary versions: %q and %q", nodes[1].BinaryVersion, nodes[2].BinaryVersion)
	}
	if err := n2.repl.member.RefreshVersion(ctx); err != nil {
		t.Fatal(err)
	}
	if got := showVersion(t, n2, "version"); got != "1.0" {
		t.Fatalf("with node 1 on 1.0, the cluster version rose to %q", got)
	}
	// So do /api/version (cairn node status's first line) and the admin
	// UI's overview: node 2 runs 1.1 in a cluster at 1.0.
	if v := apiVersion(t, n2); v != (VersionInfo{NodeID: 2, BinaryVersion: "1.1", MinSupportedVersion: "1.0", ClusterVersion: "1.0"}) {
		t.Fatalf("/api/version on node 2: %+v", v)
	}
	_, _, page := httpGet(t, n2, "/")
	for _, want := range []string{`<div class="card" id="cluster-version"><div class="n">1.0</div>cluster version</div>`, `runs a binary of version 1.1`,
		`<td class="binary-version">1.0</td>`, `<td class="binary-version">1.1</td>`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the overview of node 2 lacks %s:\n%s", want, page)
		}
	}
	if code, msg := execErr(t, n2, "SET CLUSTER SETTING version = '1.1'"); code != "22023" || !strings.Contains(msg, "node 1 runs a binary of version 1.0") {
		t.Fatalf("raising the version above node 1's binary: %s %s", code, msg)
	}
	if code, msg := execErr(t, n1, "SET CLUSTER SETTING version = '1.1'"); code != "22023" || !strings.Contains(msg, "this node's binary is version 1.0") {
		t.Fatalf("raising the version above this node's binary: %s %s", code, msg)
	}

	execSQL(t, n1, "SET CLUSTER SETTING cluster.preserve_downgrade_option = '1.0'")
	if n1, err = c.restartAs(1, v11); err != nil {
		t.Fatalf("restarting node 1 on 1.1: %v", err)
	}
	if err := n2.repl.member.RefreshVersion(ctx); err != nil {
		t.Fatal(err)
	}
	if got := showVersion(t, n1, "version"); got != "1.0" {
		t.Fatalf("with the rise held, every node on 1.1 moved the cluster version to %q", got)
	}
	execSQL(t, n1, "SET CLUSTER SETTING version = '1.1'")
	if got := showVersion(t, n2, "version"); got != "1.1" {
		t.Fatalf("after SET CLUSTER SETTING version = '1.1': %q", got)
	}
	if got := showVersion(t, n2, clusterversion.PreserveDowngradeSetting); got != "" {
		t.Fatalf("the hold survived the upgrade: %q", got)
	}
	if n1.version.Active() != v11 {
		t.Fatalf("node 1 is at %s after raising the version", n1.version.Active())
	}
	if code, msg := execErr(t, n2, "SET CLUSTER SETTING version = '1.0'"); code != "22023" || !strings.Contains(msg, "cannot go down") {
		t.Fatalf("lowering the cluster version: %s %s", code, msg)
	}
	if code, _ := execErr(t, n2, "SET CLUSTER SETTING version = DEFAULT"); code != "22023" {
		t.Fatalf("resetting the cluster version: %s", code)
	}

	// A node too old to join is refused, with why.
	_, err = c.newNode([]string{c.addrs[1]}, v10, v10)
	if err == nil || !strings.Contains(err.Error(), "binary is version 1.0 and the cluster version is 1.1: run a binary of version 1.1 or newer") {
		t.Fatalf("a 1.0 binary joining a 1.1 cluster: %v", err)
	}
	// So is a member restarting on the old binary.
	if _, err = c.restartAs(2, v10); err == nil || !strings.Contains(err.Error(), "cluster version is 1.1") {
		t.Fatalf("node 2 restarting on a 1.0 binary: %v", err)
	}
	t.Logf("refused: %v", err)
}

// TestClusterVersionRisesByItself: once every node runs the newer binary,
// the cluster version follows without anyone asking.
func TestClusterVersionRisesByItself(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	if _, err := c.newNode(nil, v10, v10); err != nil {
		t.Fatal(err)
	}
	n2, err := c.newNode([]string{c.addrs[1]}, v11, v10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.restartAs(1, v11); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n2.version.Active() != v11 {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster version is still %s with every node on 1.1", n2.version.Active())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := showVersion(t, n2, "version"); got != "1.1" {
		t.Fatalf("SHOW CLUSTER SETTING version = %q", got)
	}
}
