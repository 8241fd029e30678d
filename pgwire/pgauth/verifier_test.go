package pgauth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// referenceVerifier computes a verifier straight from RFC 5802/7677's
// definitions, independently of xdg-go/scram, for ASCII passwords (where
// SASLprep is the identity).
func referenceVerifier(t *testing.T, password string, salt []byte, iters int) string {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iters, 32)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	server := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iters, b64(salt), b64(stored[:]), b64(server))
}

func TestVerifierMatchesDefinition(t *testing.T) {
	for _, tc := range []struct {
		password string
		salt     string
		iters    int
	}{
		{"pencil", "saltsaltsaltsalt", 4096},
		{"secret", "\x00\x01\x02\x03", 1},
		{"", "x", 10},
	} {
		got, err := VerifierWithSalt(tc.password, []byte(tc.salt), tc.iters)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceVerifier(t, tc.password, []byte(tc.salt), tc.iters); got != want {
			t.Errorf("password %q: got %s, want %s", tc.password, got, want)
		}
	}
}

// TestRandomSalt checks that Verifier salts afresh and parses back.
func TestRandomSalt(t *testing.T) {
	a, err := Verifier("pw")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Verifier("pw")
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two verifiers of one password share a salt")
	}
	if !strings.HasPrefix(a, "SCRAM-SHA-256$4096:") {
		t.Fatalf("unexpected format %s", a)
	}
	c, err := ParseVerifier(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Salt) != SaltLen || c.Iters != DefaultIterations {
		t.Fatalf("parsed %+v", c.KeyFactors)
	}
}

// TestConversation runs a full SCRAM exchange against parsed credentials:
// the right password authenticates, a wrong one does not.
func TestConversation(t *testing.T) {
	v, err := VerifierWithSalt("correct horse", []byte("0123456789abcdef"), 64)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := ParseVerifier(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		password string
		ok       bool
	}{{"correct horse", true}, {"battery staple", false}} {
		srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return creds, nil })
		if err != nil {
			t.Fatal(err)
		}
		cl, err := scram.SHA256.NewClient("", tc.password, "")
		if err != nil {
			t.Fatal(err)
		}
		sc, cc := srv.NewConversation(), cl.WithMinIterations(1).NewConversation()
		msg, err := cc.Step("")
		for err == nil && !sc.Done() {
			if msg, err = sc.Step(msg); err != nil || sc.Done() {
				break
			}
			msg, err = cc.Step(msg)
		}
		if got := err == nil && sc.Valid(); got != tc.ok {
			t.Errorf("password %q: authenticated=%v (err %v), want %v", tc.password, got, err, tc.ok)
		}
	}
}

func TestParseVerifierRejects(t *testing.T) {
	good, err := VerifierWithSalt("pw", []byte("salt"), 5)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, "$")
	for _, bad := range []string{
		"",
		"md5abcdef",
		"SCRAM-SHA-1$5:c2FsdA==$" + parts[2],
		"SCRAM-SHA-256$0:c2FsdA==$" + parts[2],
		"SCRAM-SHA-256$x:c2FsdA==$" + parts[2],
		"SCRAM-SHA-256$5:!!!$" + parts[2],
		"SCRAM-SHA-256$5:$" + parts[2],
		"SCRAM-SHA-256$5:c2FsdA==$" + "AAAA:AAAA",
		"SCRAM-SHA-256$5:c2FsdA==",
		good + "$extra",
	} {
		if _, err := ParseVerifier(bad); err == nil {
			t.Errorf("ParseVerifier(%q) accepted", bad)
		}
	}
	if _, err := ParseVerifier(good); err != nil {
		t.Fatalf("ParseVerifier(%q): %v", good, err)
	}
}

// TestPostgreSQLVector checks against a verifier PostgreSQL 15.18 stored
// for CREATE ROLE alice LOGIN PASSWORD 's3cret' (pg_authid.rolpassword).
func TestPostgreSQLVector(t *testing.T) {
	const fromPostgres = "SCRAM-SHA-256$4096:gn4HOwJb09LK6KX0tDxm8Q==$d4p52DcUMEwQ6Pb53A8S+JO+chdUmOLBH336msbJX+A=:1HQz2vtOnlK1vRj8mYZ1qVSUF5D1KbS6BdLlno5PSrI="
	salt, err := base64.StdEncoding.DecodeString("gn4HOwJb09LK6KX0tDxm8Q==")
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifierWithSalt("s3cret", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got != fromPostgres {
		t.Fatalf("got %s\nwant %s", got, fromPostgres)
	}
}

// TestCheckPassword checks clear-text passwords against a verifier
// PostgreSQL made (the password method of host-based authentication).
func TestCheckPassword(t *testing.T) {
	const fromPostgres = "SCRAM-SHA-256$4096:gn4HOwJb09LK6KX0tDxm8Q==$d4p52DcUMEwQ6Pb53A8S+JO+chdUmOLBH336msbJX+A=:1HQz2vtOnlK1vRj8mYZ1qVSUF5D1KbS6BdLlno5PSrI="
	creds, err := ParseVerifier(fromPostgres)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		password string
		ok       bool
	}{{"s3cret", true}, {"s3cret ", false}, {"S3cret", false}, {"", false}} {
		if got := CheckPassword(tc.password, creds); got != tc.ok {
			t.Errorf("CheckPassword(%q) = %v, want %v", tc.password, got, tc.ok)
		}
	}
}
