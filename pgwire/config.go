package pgwire

import (
	"crypto/tls"
	"log/slog"
	"time"
)

// Defaults for Config's zero values.
const (
	// DefaultMaxConnections matches PostgreSQL's max_connections.
	DefaultMaxConnections = 100
	// DefaultMaxMessageSize bounds one message body. PostgreSQL allows up
	// to 1 GiB, which lets a hundred clients pin 100 GiB; 64 MiB still
	// fits any realistic statement, bind message or COPY chunk (drivers
	// send COPY data in chunks of 64 KiB or less).
	DefaultMaxMessageSize = 64 << 20
	// DefaultAuthTimeout matches PostgreSQL's authentication_timeout
	// order of magnitude; it covers the startup packet and authentication.
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
	// TLS, when set, lets clients upgrade with SSLRequest.
	TLS *tls.Config
	// MaxConnections bounds concurrent client connections; past it a new
	// client gets 53300 "sorry, too many clients already".
	MaxConnections int
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
