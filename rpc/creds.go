package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Creds are a node's transport credentials for every gRPC connection it
// serves and dials: mutual TLS with the cluster's CA (security.Certs'
// RPCServer and RPCClient configs), or, for a nil *Creds, plaintext (an
// insecure cluster). Every dial and Serve in this package takes them, so
// no connection of a secure node is plaintext by omission; and since a
// TLS server and a plaintext client (or the reverse) cannot complete a
// handshake, a secure node and an insecure one never exchange a message.
type Creds struct {
	server, client *tls.Config
}

// NewCreds returns mutual-TLS credentials: server for Serve (it must
// require and verify client certificates), client for dialing.
func NewCreds(server, client *tls.Config) *Creds {
	return &Creds{server: server, client: client}
}

// Secure reports whether c is TLS.
func (c *Creds) Secure() bool { return c != nil }

func (c *Creds) dialOption() grpc.DialOption {
	if c == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(c.client))
}

func (c *Creds) serverOptions() []grpc.ServerOption {
	if c == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c.server))}
}

// WithCreds makes Serve accept only connections that complete c's TLS
// handshake (nil: plaintext).
func WithCreds(c *Creds) ServeOption {
	return func(cfg *serveConfig) { cfg.creds = c }
}

// Errors of CheckPeer: definite verdicts that no retry changes.
var (
	// ErrPeerSecure: this node is insecure and the peer serves TLS.
	ErrPeerSecure = errors.New("the peer serves TLS and this node is insecure")
	// ErrPeerInsecure: this node is secure and the peer does not serve TLS.
	ErrPeerInsecure = errors.New("the peer does not serve TLS and this node is secure")
	// ErrPeerAuth: both serve TLS, and one refused the other's certificate.
	ErrPeerAuth = errors.New("the peer and this node do not accept each other's certificates")
)

// CheckPeer tells why calls to the node at addr would fail for reasons no
// retry mends, which gRPC reports only as closed connections: a TLS
// server and a plaintext client (or the reverse), or certificates of
// different CAs. It returns nil when a handshake with c succeeds, or when
// it cannot tell (the peer is unreachable or hung up mid-handshake: it
// may be starting), else one of ErrPeerSecure, ErrPeerInsecure,
// ErrPeerAuth wrapped with the details.
func CheckPeer(ctx context.Context, c *Creds, addr string) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	var record tls.RecordHeaderError
	var verify *tls.CertificateVerificationError
	if c == nil {
		// Only whether a handshake starts matters, so nothing is
		// verified and nothing is sent after it.
		tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err == nil || remoteAlert(err) {
			return fmt.Errorf("%w (%s)", ErrPeerSecure, addr)
		}
		return nil
	}
	cfg := c.client.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	err = tc.HandshakeContext(ctx)
	if err == nil {
		// In TLS 1.3 the server judges our certificate after our
		// handshake returns; its verdict is an alert, or its HTTP/2
		// settings frame, which gRPC sends first.
		_, err = tc.Read(make([]byte, 1))
	}
	switch {
	case err == nil:
		return nil
	case errors.As(err, &record):
		return fmt.Errorf("%w (%s)", ErrPeerInsecure, addr)
	case errors.As(err, &verify), remoteAlert(err):
		return fmt.Errorf("%w (%s): %v", ErrPeerAuth, addr, err)
	}
	return nil
}

// remoteAlert reports whether err is a TLS alert the peer sent (crypto/tls
// reports one as a net.OpError with Op "remote error"): the peer speaks
// TLS and refused the handshake, e.g. our certificate.
func remoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}
