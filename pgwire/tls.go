package pgwire

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"
)

// serverTLS returns a per-connection copy of base that records which
// certificate the handshake presented, which SCRAM-SHA-256-PLUS needs for
// tls-server-end-point channel binding and crypto/tls does not report to
// servers. Certificates are served through GetCertificate so that the hook
// runs for every client, with or without SNI.
func serverTLS(base *tls.Config, presented **tls.Certificate) *tls.Config {
	cfg := base.Clone()
	certs, getCert := base.Certificates, base.GetCertificate
	cfg.Certificates = nil
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		var cert *tls.Certificate
		if getCert != nil {
			c, err := getCert(hello)
			if err != nil {
				return nil, err
			}
			cert = c
		}
		if cert == nil {
			for i := range certs {
				if hello.SupportsCertificate(&certs[i]) == nil {
					cert = &certs[i]
					break
				}
			}
		}
		if cert == nil && len(certs) > 0 {
			cert = &certs[0]
		}
		if cert == nil {
			return nil, errors.New("pgwire: no TLS certificate configured")
		}
		*presented = cert
		return cert, nil
	}
	return cfg
}

// endpointBinding computes RFC 5929 tls-server-end-point data for cert: a
// hash of the certificate with its signature's hash function, SHA-256 for
// MD5 and SHA-1.
func endpointBinding(cert *tls.Certificate) (scram.ChannelBinding, error) {
	if cert == nil || len(cert.Certificate) == 0 {
		return scram.ChannelBinding{}, errors.New("no certificate presented")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return scram.ChannelBinding{}, fmt.Errorf("parsing server certificate: %w", err)
		}
	}
	var h hash.Hash
	switch leaf.SignatureAlgorithm {
	case x509.MD5WithRSA, x509.SHA1WithRSA, x509.ECDSAWithSHA1, x509.DSAWithSHA1,
		x509.SHA256WithRSA, x509.SHA256WithRSAPSS, x509.ECDSAWithSHA256:
		h = sha256.New()
	case x509.SHA384WithRSA, x509.SHA384WithRSAPSS, x509.ECDSAWithSHA384:
		h = sha512.New384()
	case x509.SHA512WithRSA, x509.SHA512WithRSAPSS, x509.ECDSAWithSHA512:
		h = sha512.New()
	default:
		// Ed25519 and friends have no hash to reuse; RFC 5929 leaves this
		// undefined, so PLUS is not offered.
		return scram.ChannelBinding{}, fmt.Errorf("no tls-server-end-point hash for %v", leaf.SignatureAlgorithm)
	}
	h.Write(leaf.Raw)
	return scram.ChannelBinding{Type: scram.ChannelBindingTLSServerEndpoint, Data: h.Sum(nil)}, nil
}
