package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cairn-db/cairn/rpc"
	"github.com/cairn-db/cairn/security"
)

// This file wires a secure node's certificates (Config.Certs, package
// security) into its three listeners:
//
//   - RPC: mutual TLS with the cluster CA; only a peer holding a node
//     certificate of that CA completes a handshake, in either direction
//     (rpc.Creds), so a node without one can neither join nor send raft,
//     KV or membership messages, nor receive any.
//   - SQL: pgwire answers SSLRequest with 'S' and serves TLS with the node
//     certificate; a client certificate of the CA logs in as its CN;
//     clients from other hosts must use TLS unless AcceptSQLWithoutTLS.
//   - HTTP: HTTPS with the node certificate.
//
// A node without Certs serves all three in plaintext, as before.

var errInsecureWithCerts = errors.New("--insecure and --certs-dir exclude each other: an insecure node has no TLS")

// initTLS sets the node's RPC credentials from its certificates; it runs
// before anything listens. It warns of listen addresses the node
// certificate does not name: other nodes dialing --rpc-addr would refuse
// it, and verify-full clients --sql-addr.
func (s *Server) initTLS() {
	c := s.cfg.Certs
	if c == nil {
		return
	}
	s.rpcCreds = rpc.NewCreds(c.RPCServer(), c.RPCClient())
	for _, w := range unnamedHosts(c, s.cfg) {
		s.log.Warn("cairn: " + w)
	}
}

// unnamedHosts lists, as warnings, the listen addresses whose host the
// node certificate does not name (an unspecified host, every interface,
// is not checked: the names clients use are not known).
func unnamedHosts(c *security.Certs, cfg Config) []string {
	var out []string
	for _, a := range []struct{ flag, addr string }{{"--rpc-addr", cfg.RPCAddr}, {"--sql-addr", cfg.SQLAddr}, {"--http-addr", cfg.HTTPAddr}} {
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil || host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
			continue
		}
		if !c.Names(host) {
			out = append(out, fmt.Sprintf("%s %s: %s does not name %s, so peers and verify-full clients that dial it will refuse this node (make it with cairn cert create-node %s ... --overwrite)",
				a.flag, a.addr, security.NodeCertFile, host, host))
		}
	}
	return out
}

// serveHTTP serves HTTP on ln, HTTPS with the node certificate on a
// secure node (ServeTLS, so that HTTP/2 is offered as well).
func (s *Server) serveHTTP(ln net.Listener) error {
	if c := s.cfg.Certs; c != nil {
		s.http.TLSConfig = c.HTTPServer()
		return s.http.ServeTLS(ln, "", "")
	}
	return s.http.Serve(ln)
}

// Secure reports whether the node serves TLS (it has certificates).
func (s *Server) Secure() bool { return s.cfg.Certs != nil }

// NodeID is the node's ID (1 for an unreplicated node).
func (s *Server) NodeID() uint64 { return s.nodeID() }

// ClusterID is the ID of the node's cluster ("" for an unreplicated node,
// which has none).
func (s *Server) ClusterID() string {
	if s.repl == nil || s.repl.member == nil {
		return ""
	}
	return s.repl.member.ClusterID()
}

// RPCAddr is the address other nodes reach this one at ("" for an
// unreplicated node, which does not listen for them).
func (s *Server) RPCAddr() string {
	if s.repl == nil || s.repl.rpc == nil {
		return ""
	}
	return s.repl.rpc.Addr().String()
}

// checkPeers refuses, with a message that says why, to go on trying to
// reach addrs when one of them can never accept this node: one serves TLS
// and this node does not, or the reverse, or their certificates are of
// different CAs (rpc.CheckPeer). gRPC would report each of these as a
// closed connection until joinTimeout. Addresses that cannot be reached
// are left to the caller's retries.
func (s *Server) checkPeers(ctx context.Context, addrs []string) error {
	for _, a := range addrs {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := rpc.CheckPeer(pctx, s.rpcCreds, a)
		cancel()
		switch {
		case errors.Is(err, rpc.ErrPeerSecure):
			return fmt.Errorf("%w: start this node with --certs-dir and a node certificate of that cluster's CA, not --insecure", err)
		case errors.Is(err, rpc.ErrPeerInsecure):
			return fmt.Errorf("%w: a secure node does not join an insecure cluster", err)
		case err != nil:
			return fmt.Errorf("%w: are both node certificates signed by the same CA (ca.crt)?", err)
		}
	}
	return nil
}
