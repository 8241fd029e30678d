package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-db/cairn/raftnode"
	"github.com/cairn-db/cairn/security"
	"google.golang.org/grpc"
)

// clusterCreds makes a CA with a node certificate for 127.0.0.1 and a
// client certificate for alice, and returns the node's credentials and
// credentials that present alice's certificate instead.
func clusterCreds(t *testing.T) (node, alice *Creds) {
	t.Helper()
	root := t.TempDir()
	o := security.Options{CertsDir: root, CAKey: filepath.Join(root, "ca.key")}
	for _, err := range []error{security.CreateCA(o), security.CreateNode(o, []string{"127.0.0.1"}), security.CreateClient(o, "alice")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	certs, err := security.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(root, "client.alice.crt"), filepath.Join(root, "client.alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := certs.RPCClient()
	cfg.Certificates = []tls.Certificate{pair}
	return NewCreds(certs.RPCServer(), certs.RPCClient()), NewCreds(nil, cfg)
}

// TestCreds calls a method across every pairing of a secure server, a
// plaintext one, and clients with the node's credentials, none, another
// CA's, and a SQL user's certificate of the same CA; CheckPeer names why
// each failing pairing fails.
func TestCreds(t *testing.T) {
	node, alice := clusterCreds(t)
	foreign, _ := clusterCreds(t)
	serve := func(c *Creds) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := Serve(ln, func(raftnode.Envelope) {}, nil, WithCreds(c),
			WithMethod("Echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil }))
		t.Cleanup(s.Stop)
		return ln.Addr().String()
	}
	secure, plain := serve(node), serve(nil)
	for _, tc := range []struct {
		name   string
		client *Creds
		addr   string
		check  error // CheckPeer's verdict; nil where the call succeeds
	}{
		{"node to secure", node, secure, nil},
		{"plaintext to plaintext", nil, plain, nil},
		{"plaintext to secure", nil, secure, ErrPeerSecure},
		{"node to plaintext", node, plain, ErrPeerInsecure},
		{"another CA to secure", foreign, secure, ErrPeerAuth},
		{"SQL user's certificate to secure", alice, secure, ErrPeerAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := Call(ctx, tc.client, tc.addr, "Echo", []byte("hi"))
			if ok := err == nil && string(out) == "hi"; ok != (tc.check == nil) {
				t.Errorf("Call: %q, %v; want success %v", out, err, tc.check == nil)
			}
			if err := CheckPeer(ctx, tc.client, tc.addr); !errors.Is(err, tc.check) || (tc.check == nil) != (err == nil) {
				t.Errorf("CheckPeer: %v, want %v", err, tc.check)
			}
			// An extra service's client (WithService, DialOptions) gets
			// the same verdict as Call.
			conn, err := grpc.NewClient(tc.addr, tc.client.DialOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req, out := []byte("hi"), []byte(nil)
			err = conn.Invoke(ctx, "/"+nodeServiceName+"/Echo", &req, &out)
			if ok := err == nil && string(out) == "hi"; ok != (tc.check == nil) {
				t.Errorf("Invoke with Creds.DialOptions: %q, %v; want success %v", out, err, tc.check == nil)
			}
		})
	}
	// An address nobody listens on: no verdict (the caller retries).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	if err := CheckPeer(context.Background(), node, gone); err != nil {
		t.Errorf("CheckPeer of a closed port: %v", err)
	}
}
