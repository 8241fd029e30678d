package ddl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/server"
	"github.com/cairn-db/cairn/sql/ddl"
)

// TestBackfillReadsOnLeaseholders builds indexes of a table whose tablets'
// leases are spread over a three-node cluster: the backfill reads each
// tablet on its leaseholder (other nodes through distributed flows), the
// index is exact, and a unique build over a duplicate whose two rows are
// read on different nodes fails on the build's sorted stream.
func TestBackfillReadsOnLeaseholders(t *testing.T) {
	ctx := context.Background()
	servers := startCluster(t, 3)
	url := fmt.Sprintf("postgres://postgres@%s/%%s?sslmode=disable", servers[0].Addr())
	c := connect(t, url, "postgres")
	const rows = 12000
	mustExec(t, c, "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT) SPLIT INTO 6 TABLETS")
	mustExec(t, c, fmt.Sprintf("INSERT INTO t SELECT g, (g * 7919) %% 3000, g FROM generate_series(1, %d) g", rows))
	starts := spreadTableLeases(t, servers, c)
	if len(starts) < 6 {
		t.Fatalf("table in %d tablets, want 6", len(starts))
	}
	before := servers[1].BackfillPiecesServed() + servers[2].BackfillPiecesServed()

	mustExec(t, c, "CREATE INDEX t_v ON t (v)")
	nodes, fellBack := ddl.LastBackfillNodes()
	pieces, _, entries := ddl.LastBackfill()
	t.Logf("backfill: %d pieces read on nodes %v (%d fell back), %d entries", pieces, nodes, fellBack, entries)
	if len(nodes) < 3 || fellBack != 0 || entries != rows {
		t.Errorf("backfill: pieces per node %v (want all 3 nodes), %d fell back, %d entries (want %d)", nodes, fellBack, entries, rows)
	}
	served := servers[1].BackfillPiecesServed() + servers[2].BackfillPiecesServed() - before
	if served < 2 {
		t.Errorf("nodes 2 and 3 read %d pieces for the build, want >= 2", served)
	}
	checkIndexExact(t, servers[0], c, "t_v")
	var n int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE v = 7919 % 3000").Scan(&n); err != nil || n != 4 {
		t.Errorf("count through the index: %d %v (want 4)", n, err)
	}

	// A duplicate whose rows are in the first and the last tablet, whose
	// leases are on different nodes.
	mustExec(t, c, fmt.Sprintf("UPDATE t SET w = -5 WHERE k IN (1, %d)", rows))
	_, err := c.Exec(ctx, "CREATE UNIQUE INDEX t_w ON t (w)")
	if sqlState(err) != "23505" || pgDetail(err) != "Key (w)=(-5) is duplicated." {
		t.Fatalf("unique build over a duplicate read on two nodes: %v (%s)", err, pgDetail(err))
	}
	if nodes, _ := ddl.LastBackfillNodes(); len(nodes) < 2 {
		t.Errorf("the unique build read on nodes %v", nodes)
	}

	// Two remote fragments fail before sending anything (invariant 1):
	// their pieces are read on the build's node, and the index is exact.
	var failed atomic.Int32
	prev := ddl.SetRemoteRead(func(kvpb.Span) error {
		if failed.Add(1) <= 2 {
			return errors.New("injected: this node cannot read now")
		}
		return nil
	})
	mustExec(t, c, "CREATE INDEX t_v3 ON t (v)")
	ddl.SetRemoteRead(prev)
	if nodes, fellBack := ddl.LastBackfillNodes(); fellBack != 2 || len(nodes) < 2 {
		t.Errorf("with two failing fragments: pieces per node %v, %d fell back (want 2)", nodes, fellBack)
	}
	checkIndexExact(t, servers[0], c, "t_v3")

	// Remote fragments that fail after sending their pieces' rows read
	// but no entry (a GIN index over NULLs): the pieces are read again on
	// the build's node, and the progress counts each row once. (a is
	// NULL in every row.)
	mustExec(t, c, "ALTER TABLE t ADD COLUMN a INT[]")
	var lastRows atomic.Int64
	prevS, prevP := ddl.SetIndexHooks(nil, func(_ int64, rows int64) error {
		lastRows.Store(rows)
		return nil
	})
	prevSent := ddl.SetRemoteSent(func(kvpb.Span) error {
		return errors.New("injected: this node failed after sending its rows")
	})
	mustExec(t, c, "CREATE INDEX t_a ON t USING GIN (a)")
	ddl.SetRemoteSent(prevSent)
	ddl.SetIndexHooks(prevS, prevP)
	nodes, fellBack = ddl.LastBackfillNodes()
	if _, _, n := ddl.LastBackfill(); fellBack < 2 || len(nodes) != 1 || n != 0 {
		t.Errorf("GIN over NULLs, failing fragments: pieces per node %v, %d fell back, %d entries (want all local, >= 2 fell back, none)",
			nodes, fellBack, n)
	}
	if got := lastRows.Load(); got != rows {
		t.Errorf("GIN over NULLs, failing fragments: progress counted %d rows, want %d", got, rows)
	}

	// A partial index is read on the build's node (invariant 3).
	mustExec(t, c, "CREATE INDEX t_p ON t (v) WHERE w > 6000")
	if nodes, _ := ddl.LastBackfillNodes(); len(nodes) != 1 {
		t.Errorf("partial index read on nodes %v", nodes)
	}
	var want int64
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t WHERE w > 6000").Scan(&want); err != nil || want < 5000 {
		t.Fatalf("rows with w > 6000: %d %v", want, err)
	}
	if _, _, n := ddl.LastBackfill(); n != want {
		t.Errorf("partial index: %d entries, want %d", n, want)
	}

	// The same build with every piece read on the build's node: the
	// same entries.
	defer ddl.SetBackfillRemote(ddl.SetBackfillRemote(false))
	mustExec(t, c, "CREATE INDEX t_v2 ON t (v)")
	if nodes, _ := ddl.LastBackfillNodes(); len(nodes) != 1 {
		t.Errorf("local build read on nodes %v", nodes)
	}
	if _, _, local := ddl.LastBackfill(); local != entries {
		t.Errorf("local build: %d entries, distributed %d", local, entries)
	}
}

// spreadTableLeases moves the lease of table t's i-th tablet to the
// node of servers[i mod 3], has node 1 read the table (so its leaseholder
// cache learns where the leases went), and returns the tablets' first
// keys within the table.
func spreadTableLeases(t *testing.T, servers []*server.Server, c *pgx.Conn) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := servers[0]
	desc := moveState(t, s, c, "t")
	layout, err := desc.Layout()
	if err != nil {
		t.Fatal(err)
	}
	span := layout.IndexSpan(&layout.Primary)
	var starts [][]byte
	for k := span.Key; bytes.Compare(k, span.EndKey) < 0; {
		d, err := s.DB().TabletCache().Lookup(ctx, k, false)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, k)
		if len(d.EndKey) == 0 || bytes.Compare(d.EndKey, span.EndKey) >= 0 {
			break
		}
		k = d.EndKey
	}
	for i, start := range starts {
		node := servers[i%len(servers)].NodeID()
		for {
			ba := &kvpb.BatchRequest{}
			ba.Add(&kvpb.SpreadLeaseRequest{Key: start, Node: node})
			br, err := s.DB().Send(ctx, ba)
			if err == nil && br.Responses[0].(*kvpb.SpreadLeaseResponse).Done {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the lease of tablet %d did not reach node %d: %v", i, node, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	var n int64
	if err := c.QueryRow(ctx, "SELECT sum(w) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return starts
}

func TestRemoteEntryEncoding(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rows  []int64
		keys  []string
		vals  []string
		wantN int64
	}{
		{"entries", []int64{3, 0}, []string{"\x89a", "\x89b"}, []string{"", "v"}, 3},
		{"rows only", []int64{7}, []string{""}, []string{""}, 7},
		{"binary", []int64{1, 2}, []string{"\x00\xff", "\x01"}, []string{"\x00", ""}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var enc [][]byte
			for i := range tc.rows {
				enc = append(enc, ddl.EncodeRemoteEntry(nil, tc.rows[i], tc.keys[i], tc.vals[i]))
			}
			got, n, err := ddl.DecodeRemoteEntries(enc)
			if err != nil || n != tc.wantN {
				t.Fatalf("decoded %d rows, %v; want %d", n, err, tc.wantN)
			}
			var want [][2]string
			for i, k := range tc.keys {
				if k != "" {
					want = append(want, [2]string{k, tc.vals[i]})
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("decoded %q, want %q", got, want)
			}
		})
	}
	for _, bad := range [][]byte{{}, {0x80}, {1, 5, 'a'}} {
		if _, _, err := ddl.DecodeRemoteEntries([][]byte{bad}); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}
