package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-db/cairn/security"
)

// defaultCertsDir is --certs-dir's default, CockroachDB's
// ${HOME}/.cockroach-certs under Cairn's name.
func defaultCertsDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ".cairn-certs"
	}
	return filepath.Join(home, ".cairn-certs")
}

const certUsage = `usage:
  cairn cert create-ca --ca-key FILE [--certs-dir DIR] [--lifetime D] [--overwrite]
  cairn cert create-node HOST... --ca-key FILE [--certs-dir DIR] [--lifetime D] [--overwrite]
  cairn cert create-client USER --ca-key FILE [--certs-dir DIR] [--lifetime D] [--overwrite]
  cairn cert list [--certs-dir DIR]
`

// cmdCert is `cairn cert`: the cluster CA (ca.crt in --certs-dir, its key
// at --ca-key, kept away from the nodes), a node's certificate (node.crt,
// node.key) for the hosts it is reached at, and a SQL user's client
// certificate (client.USER.crt, .key), as CockroachDB's cert commands
// make them (package security).
func cmdCert(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, certUsage)
		return usagef("cert needs a subcommand: create-ca, create-node, create-client or list")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "create-ca", "create-node", "create-client", "list":
	default:
		fmt.Fprint(stderr, certUsage)
		return usagef("unknown cert subcommand %q", sub)
	}
	var o security.Options
	fs := certFlagSet(sub, &o)
	fs.SetOutput(stderr)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if sub != "list" && o.CAKey == "" {
		return usagef("--ca-key is required")
	}
	switch sub {
	case "create-ca":
		if len(pos) > 0 {
			return usagef("unexpected arguments: %s", strings.Join(pos, " "))
		}
		if err := security.CreateCA(o); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(o.CertsDir, security.CACertFile), o.CAKey)
	case "create-node":
		if len(pos) == 0 {
			return usagef("create-node needs the node's hosts: every name and address it is reached at")
		}
		if err := security.CreateNode(o, pos); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s for %s\n", filepath.Join(o.CertsDir, security.NodeCertFile), security.NodeKeyFile, strings.Join(pos, ", "))
	case "create-client":
		if len(pos) != 1 {
			return usagef("create-client needs one user name")
		}
		if err := security.CreateClient(o, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(o.CertsDir, security.ClientCertFile(pos[0])), security.ClientKeyFile(pos[0]))
	case "list":
		if len(pos) > 0 {
			return usagef("unexpected arguments: %s", strings.Join(pos, " "))
		}
		infos, err := security.List(o.CertsDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Certificate directory: %s\n", o.CertsDir)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "Usage\tCertificate File\tKey File\tExpires\tNotes\tError")
		for _, i := range infos {
			exp, msg := "", ""
			if !i.Expires.IsZero() {
				exp = i.Expires.UTC().Format(time.DateOnly)
			}
			if i.Err != nil {
				msg = i.Err.Error()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", i.Usage, i.CertFile, i.KeyFile, exp, i.Notes, msg)
		}
		return tw.Flush()
	}
	return nil
}

// certFlagSet defines the flags of cert sub into o.
func certFlagSet(sub string, o *security.Options) *flag.FlagSet {
	fs := flag.NewFlagSet("cert "+sub, flag.ContinueOnError)
	fs.StringVar(&o.CertsDir, "certs-dir", defaultCertsDir(), "the certificates directory")
	if sub != "list" {
		fs.StringVar(&o.CAKey, "ca-key", "", "the CA's private key file (required; keep it off the nodes)")
		fs.BoolVar(&o.Overwrite, "overwrite", false, "replace existing files")
		fs.DurationVar(&o.Lifetime, "lifetime", 0, fmt.Sprintf("validity (default %s for the CA, %s for the others)", security.DefaultCALifetime, security.DefaultCertLifetime))
	}
	return fs
}

// parseInterleaved parses fs's flags wherever they stand among the
// positional arguments (`create-node localhost 10.0.0.1 --certs-dir d`, as
// CockroachDB's docs write it) and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
