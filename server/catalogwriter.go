package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/hlc"
	"github.com/cairn-db/cairn/membership"
	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/sql/catalog"
)

// A plain `cairn start` is a replicated cluster of one (Join = [RPCAddr])
// that other nodes may join later. While it is the cluster's only SQL
// gateway every DDL goes through its catalog cache, so it keeps the
// catalog generation in memory (session.Config.SoleCatalogWriter; the
// condition and its proof are sql/catalog's localgen.go) and a prepared
// SELECT reads no catalog key: that KV read was a fifth of the CPU of
// `pgbench -S -M prepared` (docs/performance.md, item 1).
//
// The condition ends when a second node is admitted. Invariants:
//
//  1. The node starts with the in-memory generation only when no other
//     node can have written the catalog: no Join, or Join is exactly its
//     own address and the node table names no other node (a node that
//     was ever admitted stays in the table, decommissioned or not).
//  2. Only a member admits a node (membership's handleJoin), and in a
//     cluster of one that is this node. Before it admits one it stops the
//     in-memory generation for good and fences every timestamp it served
//     from memory (shareCatalog, membership.Config.BeforeAdmit); if that
//     fails the joiner is answered Unavailable and retries. So the new
//     node, which cannot run SQL before it is admitted, can only write
//     the generation key above every statement this node answered from
//     memory, and this node reads the key per statement from then on.
//  3. The in-memory generation never comes back while the process runs
//     (a restart decides again by 1).

// soleCatalogWriter reports whether the node starts as its cluster's only
// SQL gateway (invariant 1).
func (s *Server) soleCatalogWriter(ctx context.Context) (bool, error) {
	cfg := s.cfg
	if len(cfg.Join) == 0 {
		return true, nil
	}
	if s.repl == nil || !slices.Equal(cfg.Join, []string{cfg.RPCAddr}) {
		return false, nil
	}
	only, err := membership.OnlyNode(ctx, s.db, s.repl.id)
	if err != nil {
		return false, fmt.Errorf("deciding whether the node is its cluster's only SQL gateway: %w", err)
	}
	return only, nil
}

// shareCatalog runs before the node admits another (invariant 2): it
// stops the in-memory catalog generation and fences what it served.
func (s *Server) shareCatalog(ctx context.Context) error {
	s.catalogMu.Lock()
	s.catalogShared = true
	b := s.backend
	s.catalogMu.Unlock()
	if b == nil {
		// Not created yet: it will be created without the in-memory
		// generation, and nothing was served from it.
		return nil
	}
	if b.LocalCatalog() {
		s.log.Info("cairn: admitting another node; this node now reads the catalog generation per statement")
	}
	return b.StopLocalCatalog(ctx)
}

// Generation leases (sql/catalog genlease.go): every node of a replicated
// cluster that is not (or no longer) its only SQL gateway answers
// statements from memory under a lease on the catalog generation, and a
// DDL revokes the other nodes' leases through the node-service method
// methodCatalogRevoke before it writes a new generation.

// methodCatalogRevoke is the node-service method a DDL calls on a lease
// holder: the request is the generation being replaced, the answer a
// timestamp at or above every statement the holder answered under its
// lease (encodeTimestamp).
const methodCatalogRevoke = "CatalogRevoke"

// catalogLease is the node's session.Config.CatalogLease.
func (s *Server) catalogLease() *catalog.LeaseConfig {
	return &catalog.LeaseConfig{Node: s.nodeID(), Addr: s.cfg.RPCAddr, Duration: s.cfg.CatalogLeaseDuration,
		Revoke: func(ctx context.Context, addr string, gen []byte) (hlc.Timestamp, error) {
			out, err := rpc.Call(ctx, s.rpcCreds, addr, methodCatalogRevoke, gen)
			if err != nil {
				return hlc.Timestamp{}, err
			}
			return decodeTimestamp(out)
		}}
}

// handleCatalogRevoke answers methodCatalogRevoke.
func (s *Server) handleCatalogRevoke(_ context.Context, gen []byte) ([]byte, error) {
	s.catalogMu.Lock()
	b := s.backend
	s.catalogMu.Unlock()
	if b == nil {
		// No SQL served yet in this process; the clock bounds what a
		// previous one served (it never runs backwards over a restart).
		return encodeTimestamp(s.db.Clock().Now()), nil
	}
	return encodeTimestamp(b.RevokeCatalogLease(gen)), nil
}

func encodeTimestamp(ts hlc.Timestamp) []byte {
	return binary.AppendVarint(binary.AppendVarint(nil, ts.WallTime), int64(ts.Logical))
}

func decodeTimestamp(b []byte) (hlc.Timestamp, error) {
	wall, n := binary.Varint(b)
	if n <= 0 {
		return hlc.Timestamp{}, fmt.Errorf("catalog revoke: bad timestamp %x", b)
	}
	logical, m := binary.Varint(b[n:])
	if m <= 0 || n+m != len(b) {
		return hlc.Timestamp{}, fmt.Errorf("catalog revoke: bad timestamp %x", b)
	}
	return hlc.Timestamp{WallTime: wall, Logical: int32(logical)}, nil
}
