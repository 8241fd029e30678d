// Package security owns Cairn's certificates: creating a cluster CA, node
// and client certificates in a certificates directory laid out as
// CockroachDB's (`cairn cert`), listing them, and loading them into the
// tls.Configs a node serves and dials with (SQL, HTTP, node-to-node RPC).
//
// It is a leaf: cmd/cairn creates and lists certificates, server/ loads
// them and hands the tls.Configs to pgwire, net/http and rpc. It must not
// import any other Cairn package, and it holds no cryptography of its
// own: keys, signatures and verification are crypto/ecdsa, crypto/x509
// and crypto/tls.
//
// A certificates directory holds:
//
//	ca.crt                        the cluster CA (its key lives elsewhere: --ca-key)
//	node.crt, node.key            this node's certificate: CN=node, the hosts as SANs
//	client.<user>.crt/.key        a SQL user's client certificate: CN=<user>
//
// Invariants:
//
//  1. Every private key is written with mode 0600 (libpq refuses a key
//     others can read), certificates with 0644; no file is replaced unless
//     the caller asks (Overwrite), so a second create-ca cannot silently
//     orphan every certificate the first one signed.
//  2. A node certificate is valid for both server and client auth (a node
//     dials other nodes with it) and has CommonName NodeUser; a client
//     certificate is valid for client auth only, so it cannot serve.
//  3. The RPC configs require, in both directions, a certificate that
//     chains to the cluster CA and whose CommonName is NodeUser: a SQL
//     user's client certificate, although signed by the same CA, does not
//     make its holder a node.
//  4. The SQL config asks for a client certificate but does not require
//     one; a presented one must chain to the cluster CA or the handshake
//     fails. Which user it logs in as is pgwire's decision (its CN).
package security
