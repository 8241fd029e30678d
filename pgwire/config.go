package pgwire

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/cairn-db/cairn/pgwire/hba"
)

// Defaults for Config's zero values.
const (
	// DefaultMaxConnections matches PostgreSQL's max_connections.
	DefaultMaxConnections = 100
	// DefaultSuperuserReservedConnections matches PostgreSQL's
	// superuser_reserved_connections.
	DefaultSuperuserReservedConnections = 3
	// DefaultClientCheckInterval is how often a connection running a
	// statement is checked for a client that went away (PostgreSQL's
	// client_connection_check_interval, which is off by default there;
	// here a vanished client's statement is always cancelled).
	DefaultClientCheckInterval = time.Second
	// DefaultMaxMessageSize bounds one message body. PostgreSQL allows up
	// to 1 GiB, which lets a hundred clients pin 100 GiB; 64 MiB still
	// fits any realistic statement, bind message or COPY chunk (drivers
	// send COPY data in chunks of 64 KiB or less).
	DefaultMaxMessageSize = 64 << 20
	// DefaultAuthTimeout is shorter than PostgreSQL's 60 s
	// authentication_timeout; it covers the startup packet and
	// authentication, which a real client finishes in milliseconds, and a
	// short one frees the slots of clients that never authenticate.
	DefaultAuthTimeout = 10 * time.Second
	// DefaultServerVersion is what server_version reports: the PostgreSQL
	// release whose behaviour Cairn follows (the Debian 12 package used as
	// the reference). Drivers parse it as a number, so Cairn's own identity
	// belongs in version(), not here.
	DefaultServerVersion = "15.18"
	// MaxStartupPacketSize is PostgreSQL's MAX_STARTUP_PACKET_LENGTH.
	MaxStartupPacketSize = 10000
)

// Config configures a Server. The zero value is usable: defaults are
// filled in by NewServer.
type Config struct {
	// Backend provides roles and sessions. Required.
	Backend Backend
	// ListenAddr is the TCP address ListenAndServe listens on, e.g.
	// ":26257"; Serve takes a listener instead.
	ListenAddr string
	// Insecure lets any existing role that can log in connect without a
	// password (trust authentication). Otherwise SCRAM-SHA-256 is required.
	Insecure bool
	// TLS, when set, lets clients upgrade with SSLRequest. With ClientCAs
	// and ClientAuth asking for a certificate, a client certificate that
	// verifies logs in as the user its CommonName names, without a
	// password (certauth.go).
	TLS *tls.Config
	// RefuseRemotePlaintext, with TLS, refuses clients from other hosts
	// that do not upgrade to TLS (28000, before any password is sent);
	// loopback clients may still log in without TLS.
	RefuseRemotePlaintext bool
	// HBA, when set, returns the host-based authentication rules in force
	// on a secure node (hbaauth.go): the first rule a connection matches
	// names its method, and RefuseRemotePlaintext no longer applies (the
	// rules say what plaintext clients may do). It returns nil when no
	// rules are configured, and the built-in rules above apply. An
	// insecure node ignores it.
	HBA func(ctx context.Context) (*hba.Config, error)
	// MaxConnections bounds the authenticated sessions (PostgreSQL's
	// max_connections); past it a new client gets 53300 "sorry, too many
	// clients already". Connections still authenticating do not count:
	// they have MaxStartupConnections.
	MaxConnections int
	// SuperuserReservedConnections of the MaxConnections slots are kept
	// for superusers: a role without SUPERUSER is refused with 53300 once
	// only that many remain. Zero means the default (3); negative, none.
	// It must be less than MaxConnections.
	SuperuserReservedConnections int
	// MaxStartupConnections bounds connections that have not finished
	// authenticating (each for at most AuthTimeout). When a new one comes
	// and they are all taken, the oldest is closed to make room, so
	// clients that connect and never authenticate can delay a real login
	// but never keep it out. Zero means twice MaxConnections (the number
	// of children PostgreSQL's postmaster allows).
	MaxStartupConnections int
	// ClientCheckInterval is how often a connection running a statement
	// is polled for a closed socket; a client found gone has its
	// statement cancelled. Zero means DefaultClientCheckInterval;
	// negative disables the check.
	ClientCheckInterval time.Duration
	// MaxMessageSize bounds the body of any message after startup; a larger
	// message is a protocol violation (08P01) that closes the connection.
	MaxMessageSize int
	// AuthTimeout bounds the time from accept to the end of authentication.
	AuthTimeout time.Duration
	// ServerVersion is reported as server_version.
	ServerVersion string
	// Logger receives structured connection logs; nil means slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.SuperuserReservedConnections == 0 {
		c.SuperuserReservedConnections = min(DefaultSuperuserReservedConnections, c.MaxConnections-1)
	} else if c.SuperuserReservedConnections < 0 {
		c.SuperuserReservedConnections = 0
	}
	if c.MaxStartupConnections <= 0 {
		c.MaxStartupConnections = 2 * c.MaxConnections
	}
	if c.ClientCheckInterval == 0 {
		c.ClientCheckInterval = DefaultClientCheckInterval
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.AuthTimeout <= 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.ServerVersion == "" {
		c.ServerVersion = DefaultServerVersion
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// defaultParameterStatus returns the ParameterStatus values sent after
// authentication, before the session's own. These are the parameters
// PostgreSQL 15 reports (GUC_REPORT) with its default values.
func (c Config) defaultParameterStatus(user string, startup map[string]string) map[string]string {
	p := map[string]string{
		"server_version":                c.ServerVersion,
		"server_encoding":               "UTF8",
		"client_encoding":               "UTF8",
		"DateStyle":                     "ISO, MDY",
		"IntervalStyle":                 "postgres",
		"TimeZone":                      "Etc/UTC",
		"integer_datetimes":             "on",
		"standard_conforming_strings":   "on",
		"is_superuser":                  "off",
		"session_authorization":         user,
		"application_name":              "",
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
	}
	if v, ok := startup["application_name"]; ok {
		p["application_name"] = v
	}
	return p
}
