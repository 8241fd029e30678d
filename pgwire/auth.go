package pgwire

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-db/cairn/pgwire/pgauth"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"
)

const (
	scramMechanism     = "SCRAM-SHA-256"
	scramPlusMechanism = "SCRAM-SHA-256-PLUS" // with TLS channel binding
)

// authenticate runs trust (Insecure), certificate (a verified client
// certificate: certauth.go) or SCRAM-SHA-256 authentication for user and
// sends AuthenticationOk on success. A plaintext client the node refuses
// (checkTransport) is refused first. When Config.HBA returns rules, they
// decide instead (hbaauth.go).
//
// In secure mode an unknown role, or one without a password, goes through
// a full SCRAM exchange against made-up credentials and fails like a wrong
// password (28P01), as PostgreSQL's mock authentication does: a client
// cannot probe which roles exist.
func (c *conn) authenticate(ctx context.Context, user, database string) (Role, error) {
	rule, err := c.hbaRule(ctx, user, database)
	if err != nil {
		return Role{}, err
	}
	if rule != nil {
		return c.authenticateRule(ctx, rule, user, database)
	}
	if err := c.checkTransport(user, database); err != nil {
		return Role{}, err
	}
	role, exists, err := c.lookupRole(ctx, user)
	if err != nil {
		return Role{}, err
	}
	certUser, withCert := c.certUser()
	if c.srv.cfg.Insecure || withCert {
		if withCert {
			if err := checkCert(user, certUser); err != nil {
				return Role{}, err
			}
		}
		if !exists {
			return Role{}, pgerror.New(pgerrcode.InvalidAuthorizationSpecification, "role %q does not exist", user)
		}
	} else if err := c.scramAuth(user, role, exists); err != nil {
		return Role{}, err
	}
	return c.authOK(role)
}

// lookupRole returns the role named user and whether it exists.
func (c *conn) lookupRole(ctx context.Context, user string) (Role, bool, error) {
	role, err := c.srv.cfg.Backend.LookupRole(ctx, user)
	if err != nil && !errors.Is(err, ErrRoleNotFound) {
		return Role{}, false, fmt.Errorf("looking up role %q: %w", user, err)
	}
	return role, err == nil, nil
}

// authOK ends a successful authentication: a role that may not log in is
// still refused.
func (c *conn) authOK(role Role) (Role, error) {
	if !role.CanLogin {
		return Role{}, pgerror.New(pgerrcode.InvalidAuthorizationSpecification, "role %q is not permitted to log in", role.Name)
	}
	c.be.Send(&pgproto3.AuthenticationOk{})
	return role, nil
}

// scramAuth runs SCRAM-SHA-256 for user against the role's verifier, or
// against made-up credentials for an unknown role or one without a
// password, which then fails like a wrong password.
func (c *conn) scramAuth(user string, role Role, exists bool) error {
	creds, ok := c.storedCredentials(role, exists)
	if err := c.scramExchange(user, creds); err != nil {
		return err
	}
	if !ok {
		return passwordFailed(user)
	}
	return nil
}

// storedCredentials parses the role's verifier; ok is false (and the
// credentials are made up) when there is none to check against.
func (c *conn) storedCredentials(role Role, exists bool) (creds scram.StoredCredentials, ok bool) {
	if exists && role.SCRAMVerifier != "" {
		var err error
		creds, err = pgauth.ParseVerifier(role.SCRAMVerifier)
		if err == nil {
			return creds, true
		}
		c.log.Warn("pgwire: role has an unusable password verifier", "err", err)
	}
	return mockCredentials(), false
}

func passwordFailed(user string) error {
	return pgerror.New(pgerrcode.InvalidPassword, "password authentication failed for user %q", user)
}

// mockCredentials returns credentials no password matches.
func mockCredentials() scram.StoredCredentials {
	salt := make([]byte, pgauth.SaltLen)
	key := make([]byte, 32)
	rand.Read(salt)
	rand.Read(key)
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: pgauth.DefaultIterations},
		StoredKey:  key, ServerKey: key,
	}
}

// scramExchange runs SASL with SCRAM-SHA-256 against creds: AuthenticationSASL,
// SASLInitialResponse, AuthenticationSASLContinue, SASLResponse,
// AuthenticationSASLFinal. Over TLS it also offers SCRAM-SHA-256-PLUS with
// tls-server-end-point channel binding, as PostgreSQL does, so a client can
// tell that no one terminated TLS in between. The client's SCRAM user name
// is ignored; the startup packet's user is authoritative (PostgreSQL does
// the same, and libpq sends an empty name).
func (c *conn) scramExchange(user string, creds scram.StoredCredentials) error {
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return creds, nil })
	if err != nil {
		return fmt.Errorf("starting SCRAM: %w", err)
	}
	mechanisms := []string{scramMechanism}
	var binding scram.ChannelBinding
	if c.tlsCert != nil {
		if b, err := endpointBinding(c.tlsCert); err == nil {
			binding = b
			mechanisms = []string{scramPlusMechanism, scramMechanism}
		} else {
			c.log.Warn("pgwire: not offering SCRAM-SHA-256-PLUS", "err", err)
		}
	}
	c.be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: mechanisms})
	if err := c.setAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	msg, err := c.receive()
	if err != nil {
		return err
	}
	first, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		return protocolErrorf("expected SASL response, got %T", msg)
	}
	if !slices.Contains(mechanisms, first.AuthMechanism) {
		return protocolErrorf("client selected an invalid SASL authentication mechanism")
	}
	// The mechanism and the GS2 flag must agree; otherwise a client could
	// pick PLUS and then skip the binding.
	if usesBinding := strings.HasPrefix(string(first.Data), "p="); usesBinding != (first.AuthMechanism == scramPlusMechanism) {
		return protocolErrorf("SCRAM channel binding does not match the selected mechanism %s", first.AuthMechanism)
	}
	conv := srv.NewConversation()
	if binding.IsSupported() {
		conv = srv.NewConversationWithChannelBinding(binding)
	}
	challenge, err := conv.Step(string(first.Data))
	if err != nil {
		return pgerror.New(pgerrcode.ProtocolViolation, "malformed SCRAM message: %v", err)
	}
	c.be.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(challenge)})
	if err := c.setAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	if err := c.flush(); err != nil {
		return err
	}
	if msg, err = c.receive(); err != nil {
		return err
	}
	final, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return protocolErrorf("expected SASL response, got %T", msg)
	}
	outcome, err := conv.Step(string(final.Data))
	if err != nil || !conv.Valid() {
		return passwordFailed(user)
	}
	c.be.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(outcome)})
	return c.setAuthType(pgproto3.AuthTypeOk)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
