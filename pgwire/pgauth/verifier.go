// Package pgauth derives and parses SCRAM-SHA-256 password verifiers in
// PostgreSQL's storage format, so that CREATE ROLE ... PASSWORD (the SQL
// layer) and the pgwire server agree on one representation.
//
// It is called by the SQL layer when a password is set and by pgwire when a
// client authenticates. It holds no state and touches nothing else.
//
// Invariants:
//
//  1. A verifier is "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>"
//     with standard base64 for salt and keys, byte for byte what PostgreSQL
//     stores in pg_authid.rolpassword, so verifiers can move between Cairn
//     and PostgreSQL (pg_dumpall output, ALTER ROLE ... PASSWORD 'SCRAM-...').
//  2. Passwords are normalized with SASLprep when that succeeds and used as
//     raw bytes otherwise, as PostgreSQL does; the client side (libpq, pgx)
//     follows the same rule, so either way both ends derive the same keys.
//  3. The plaintext password is never kept.
package pgauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/xdg-go/scram"
)

// Parameters PostgreSQL uses by default (scram_iterations, SCRAM_DEFAULT_SALT_LEN).
const (
	DefaultIterations = 4096
	SaltLen           = 16
	mechanism         = "SCRAM-SHA-256"
)

// ErrInvalidVerifier is returned by ParseVerifier for malformed input.
var ErrInvalidVerifier = errors.New("pgauth: invalid SCRAM-SHA-256 verifier")

// Verifier returns the verifier for password with a fresh random salt and
// DefaultIterations.
func Verifier(password string) (string, error) {
	salt := make([]byte, SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("pgauth: generating salt: %w", err)
	}
	return VerifierWithSalt(password, salt, DefaultIterations)
}

// VerifierWithSalt returns the verifier for password with the given salt and
// iteration count; tests and imports of existing verifiers need determinism.
func VerifierWithSalt(password string, salt []byte, iterations int) (string, error) {
	if len(salt) == 0 || iterations <= 0 {
		return "", fmt.Errorf("pgauth: salt must be non-empty and iterations positive")
	}
	client, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		// Invariant 2: a password SASLprep rejects is used as is.
		client, err = scram.SHA256.NewClientUnprepped("", password, "")
		if err != nil {
			return "", fmt.Errorf("pgauth: %w", err)
		}
	}
	creds, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return "", fmt.Errorf("pgauth: deriving keys: %w", err)
	}
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d:%s$%s:%s", mechanism, iterations, b64(salt), b64(creds.StoredKey), b64(creds.ServerKey)), nil
}

// ParseVerifier decodes a verifier into the credentials a SCRAM server
// conversation checks a client against.
func ParseVerifier(v string) (scram.StoredCredentials, error) {
	var zero scram.StoredCredentials
	parts := strings.Split(v, "$")
	if len(parts) != 3 || parts[0] != mechanism {
		return zero, ErrInvalidVerifier
	}
	iterSalt := strings.Split(parts[1], ":")
	keys := strings.Split(parts[2], ":")
	if len(iterSalt) != 2 || len(keys) != 2 {
		return zero, ErrInvalidVerifier
	}
	iters, err := strconv.Atoi(iterSalt[0])
	if err != nil || iters <= 0 {
		return zero, ErrInvalidVerifier
	}
	salt, err1 := base64.StdEncoding.DecodeString(iterSalt[1])
	stored, err2 := base64.StdEncoding.DecodeString(keys[0])
	server, err3 := base64.StdEncoding.DecodeString(keys[1])
	if err := errors.Join(err1, err2, err3); err != nil || len(salt) == 0 || len(stored) != 32 || len(server) != 32 {
		return zero, ErrInvalidVerifier
	}
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: iters},
		StoredKey:  stored,
		ServerKey:  server,
	}, nil
}

// CheckPassword reports whether password derives creds (PostgreSQL's
// check of a clear-text password against a SCRAM verifier, for the
// password authentication method). The keys are compared in constant
// time.
func CheckPassword(password string, creds scram.StoredCredentials) bool {
	v, err := VerifierWithSalt(password, []byte(creds.Salt), creds.Iters)
	if err != nil {
		return false
	}
	got, err := ParseVerifier(v)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got.StoredKey, creds.StoredKey) == 1 &&
		subtle.ConstantTimeCompare(got.ServerKey, creds.ServerKey) == 1
}
