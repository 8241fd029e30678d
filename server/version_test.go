package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/storage"
	"github.com/cairn-db/cairn/tablet"
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
	// Stopped before its store directory goes, as startAt's nodes are:
	// a node still running wrote into the directory while TempDir's
	// cleanup removed it ("directory not empty").
	c.t.Cleanup(func() { _ = s.Stop(context.Background()) })
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
	// A binary that no longer runs in clusters as old as 1.0 is refused
	// too, with why.
	if _, err := c.newNode([]string{c.addrs[1]}, clusterversion.Version{Major: 1, Minor: 2}, v11); err == nil ||
		!strings.Contains(err.Error(), "runs in clusters at version 1.1 or later and the cluster version is 1.0") {
		t.Fatalf("a binary of 1.2 that runs in clusters at 1.1 or later joining a 1.0 cluster: %v", err)
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

// storedGCFormats returns the format version (tablet.StateFormat) of every
// GC threshold stored on node s, by tablet.
func storedGCFormats(t *testing.T, s *Server) map[kvpb.TabletID]int {
	t.Helper()
	out := map[kvpb.TabletID]int{}
	for _, d := range s.store.Tablets() {
		b, ok, err := s.eng.Get(storage.MVCCKey{Key: tablet.GCThresholdKey(d.TabletID)})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		v, err := tablet.StateFormat(b)
		if err != nil {
			t.Fatalf("tablet %d's GC threshold %x: %v", d.TabletID, b, err)
		}
		out[d.TabletID] = v
	}
	return out
}

// TestClusterVersionGatesTabletStateFormat: the versioned GC threshold and
// applied index of cluster version 1.1 (clusterversion.VersionedState),
// which a 1.0 binary cannot read, are written only once 1.1 is active. In a cluster at
// 1.0 (node 1 plays a 1.0 binary), VACUUM stores thresholds in the 1.0
// form, also through the 1.1 node; once every node runs 1.1 and the
// version rises, VACUUM stores the versioned form, and a node restarted
// on the store reads both.
func TestClusterVersionGatesTabletStateFormat(t *testing.T) {
	c := newMemberCluster(t, 60*time.Second)
	n1, err := c.newNode(nil, v10, v10)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := c.newNode([]string{c.addrs[1]}, v11, v10)
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, n2, "CREATE TABLE t (k INT PRIMARY KEY, v INT)")
	execSQL(t, n2, "ALTER TABLE t CONFIGURE ZONE USING gc.ttlseconds = 1")
	execSQL(t, n2, "INSERT INTO t VALUES (1, 1), (2, 2)")
	// formats is every stored threshold's format on both nodes, and
	// whether one is of version want.
	formats := func(want int) (map[int]int, bool) {
		count := map[int]int{}
		for _, s := range []*Server{n1, n2} {
			for _, v := range storedGCFormats(t, s) {
				count[v]++
			}
		}
		return count, count[want] > 0
	}
	vacuumUntilFormat := func(via *Server, want int) map[int]int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			execSQL(t, via, "UPDATE t SET v = v + 1")
			execSQL(t, via, "VACUUM t")
			if count, ok := formats(want); ok {
				return count
			}
			if time.Now().After(deadline) {
				count, _ := formats(want)
				t.Fatalf("no GC threshold of format %d after VACUUM: formats %v", want, count)
			}
		}
	}
	// applied is the format of every applied index (raftnode) stored on
	// both nodes, counted by version.
	applied := func() map[int]int {
		count := map[int]int{}
		for _, s := range []*Server{n1, n2} {
			for _, d := range s.store.Tablets() {
				v, ok, err := raftnode.AppliedFormat(s.eng, uint64(d.TabletID))
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					count[v]++
				}
			}
		}
		return count
	}
	if count := vacuumUntilFormat(n2, 0); count[1] != 0 {
		t.Fatalf("at cluster version 1.0, GC thresholds were stored in the versioned form: formats %v", count)
	}
	if count := applied(); count[1] != 0 || count[0] == 0 {
		t.Fatalf("at cluster version 1.0, applied indexes are stored in formats %v, want only the 1.0 form", count)
	}

	if n1, err = c.restartAs(1, v11); err != nil {
		t.Fatal(err)
	}
	// Each node's version loop would find it in a liveness interval;
	// stepped here until both have: one raises the version once its view
	// shows every node live on 1.1, the other learns it. The restarted
	// node's own liveness may have lapsed while it was down (a loaded
	// machine under make test), and then neither raises it in the first
	// round, as the loop would not until the next interval.
	deadline := time.Now().Add(30 * time.Second)
	for n1.version.Active() != v11 || n2.version.Active() != v11 {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster version is %s on node 1 and %s on node 2 with every node on 1.1", n1.version.Active(), n2.version.Active())
		}
		for _, s := range []*Server{n1, n2} {
			if err := s.repl.member.RefreshVersion(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	vacuumUntilFormat(n1, 1)
	if count := applied(); count[1] == 0 {
		t.Fatalf("at cluster version 1.1, after writes, applied indexes are stored in formats %v, want the versioned form", count)
	}

	// Node 2 restarted on its store opens its replicas, whose thresholds
	// are now in both forms, and serves.
	if n2, err = c.restartAs(2, v11); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := connect(t, n2)
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after the restart: %d rows, %v", n, err)
	}
}

// A protected timestamp record (every node reads every node's) is written
// in the 20-byte form of 1.0 until 1.1 is active, then with a format
// version; both read back, and a future version is refused by name.
func TestProtectedTimestampRecordFormat(t *testing.T) {
	s := &Server{version: clusterversion.NewHandle(v11, v10)}
	p := hlc.Timestamp{WallTime: 1_700_000_000_000_000_000, Logical: 3}
	const wall = 1_700_000_000_500_000_000
	check := func(b []byte) {
		t.Helper()
		if got, w, err := decodePTS(b); err != nil || got != p || w != wall {
			t.Fatalf("%x decodes to %s, %d, %v", b, got, w, err)
		}
	}
	if b := s.encodePTS(p, wall); len(b) != 20 {
		t.Fatalf("at cluster version 1.0 a record is %x, want the 20-byte form", b)
	} else {
		check(b)
	}
	s.version.SetActive(v11)
	b := s.encodePTS(p, wall)
	if len(b) != 21 || b[0] != 0x81 {
		t.Fatalf("at cluster version 1.1 a record is %x, want the versioned form", b)
	}
	check(b)
	b[0] = 0x82
	if _, _, err := decodePTS(b); !errors.Is(err, clusterversion.ErrFutureFormat) || !strings.Contains(err.Error(), "a protected timestamp record is in format version 2") {
		t.Fatalf("a future record format: %v", err)
	}
}
