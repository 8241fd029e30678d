package session

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kv"
	"github.com/cairn-db/cairn/pgwire"
	"github.com/cairn-db/cairn/pgwire/hba"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/jackc/pgerrcode"
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// Cluster settings hold for every node of the cluster: one replicated key
// each under keys.System,
//
//	cs/<name>    the value as text; no key: the setting's default ("")
//
// set with PostgreSQL's ALTER SYSTEM SET name = 'value' (CockroachDB's
// SET CLUSTER SETTING is the same statement, parser/dialect.go) or ALTER
// SYSTEM RESET, by a superuser outside a transaction block, and shown by
// SHOW name. A value is checked before it is written: a bad one is 22023
// and changes nothing. Readers (pgwire's host-based authentication, at
// every login; DDL, for each USING HASH without a bucket count) read the
// key in a transaction of their own, so a change is in force on every
// node from the next login or statement on. A setting never set (or
// reset) reads as its default.

// HBASetting is the host-based authentication rules in pg_hba.conf
// syntax (package pgwire/hba); empty means the built-in rules
// (docs/security.md).
const HBASetting = "server.host_based_authentication.configuration"

// HashBucketsSetting is the bucket count of a hash-sharded index created
// with USING HASH and no count (CockroachDB's setting of that name and
// default; sql/ddl reads it).
const HashBucketsSetting = "sql.defaults.default_hash_sharded_index_bucket_count"

// clusterSetting is one cluster setting Cairn knows.
type clusterSetting struct {
	name, desc string
	// def is the value while the setting is not set.
	def string
	// check validates a non-empty value.
	check func(string) error
	// set, when set, writes the value instead of the plain key (the
	// cluster version, which membership checks against every node).
	set func(ctx context.Context, b *Backend, value string) error
	// dflt is what SHOW says while the key is absent.
	dflt func() string
}

var clusterSettings = map[string]*clusterSetting{
	// The cluster version (package clusterversion): raised, never
	// lowered or reset, through membership, which checks that every
	// node's binary runs it (docs/operations.md, "Upgrading").
	clusterversion.Setting: {
		name: clusterversion.Setting,
		desc: "The cluster version: the behaviour every node may use. Raised automatically once every node runs a newer binary, or by hand; never lowered.",
		check: func(v string) error {
			_, err := clusterversion.Parse(v)
			return err
		},
		set: setClusterVersion,
		// Absent only on an unreplicated node: a cluster of one at its
		// binary's version (a cluster records it at bootstrap).
		dflt: func() string { return clusterversion.Binary.String() },
	},
	clusterversion.PreserveDowngradeSetting: {
		name: clusterversion.PreserveDowngradeSetting,
		desc: "Set to the current cluster version, holds the automatic cluster version upgrade (the binaries can still be rolled back) until reset or until SET CLUSTER SETTING version raises it.",
		check: func(v string) error {
			_, err := clusterversion.Parse(v)
			return err
		},
	},
	HBASetting: {
		name: HBASetting,
		desc: "Host-based authentication rules in pg_hba.conf syntax; empty means the built-in rules.",
		check: func(v string) error {
			_, err := hba.Parse(v)
			return err
		},
	},
	HashBucketsSetting: {
		name: HashBucketsSetting,
		desc: "Bucket count of a hash-sharded index created with USING HASH and no BUCKET_COUNT.",
		def:  "16",
		check: func(v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 2 || n > 2048 {
				return fmt.Errorf("%q is not a bucket count between 2 and 2048", v)
			}
			return nil
		},
	},
}

func clusterSettingKey(name string) []byte { return keys.System([]byte("cs/" + name)) }

// ClusterSetting returns the value of the cluster setting name (its
// default when it was never set or was reset), read in a transaction of
// its own.
func (b *Backend) ClusterSetting(ctx context.Context, name string) (string, error) {
	var def string
	if cs, ok := lookupClusterSetting(name); ok {
		def = cs.def
	}
	var v string
	err := b.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		val, ok, err := txn.Get(ctx, clusterSettingKey(name))
		if err != nil {
			return err
		}
		v = def
		if ok {
			v = string(val)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading cluster setting %s: %w", name, err)
	}
	return v, nil
}

// hashBuckets is ddl.Context.HashBuckets: the cluster's default bucket
// count of USING HASH.
func (s *Session) hashBuckets(ctx context.Context) (string, error) {
	return s.b.ClusterSetting(ctx, HashBucketsSetting)
}

// setClusterVersion is SET CLUSTER SETTING version = v: through
// membership on a node of a cluster; on a cluster of one the version is
// its binary's and nothing else is accepted.
func setClusterVersion(ctx context.Context, b *Backend, v string) error {
	if v == "" {
		return pgerror.New(pgerrcode.InvalidParameterValue, "the cluster version cannot be reset: it only rises")
	}
	if b.cfg.ClusterVersion == nil {
		if want, _ := clusterversion.Parse(v); want != clusterversion.Binary {
			return pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: a node that is a cluster of one runs at its binary's version %s", clusterversion.Setting, clusterversion.Binary)
		}
		return b.setClusterSetting(ctx, clusterversion.Setting, v)
	}
	if err := b.cfg.ClusterVersion.SetClusterVersion(ctx, v); err != nil {
		if errors.Is(err, clusterversion.ErrSetRefused) {
			return pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %v", clusterversion.Setting, err)
		}
		return err
	}
	return nil
}

// HBAConfig returns the host-based authentication rules in force, or nil
// when the setting is empty (pgwire.Config.HBA).
func (b *Backend) HBAConfig(ctx context.Context) (*hba.Config, error) {
	v, err := b.ClusterSetting(ctx, HBASetting)
	if err != nil || strings.TrimSpace(v) == "" {
		return nil, err
	}
	return hba.Parse(v)
}

// setClusterSetting writes (or, for "", deletes) a checked value.
func (b *Backend) setClusterSetting(ctx context.Context, name, value string) error {
	return b.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		if value == "" {
			return txn.Delete(ctx, clusterSettingKey(name))
		}
		return txn.Put(ctx, clusterSettingKey(name), []byte(value))
	})
}

// lookupClusterSetting returns the cluster setting named name, if any.
func lookupClusterSetting(name string) (*clusterSetting, bool) {
	cs, ok := clusterSettings[strings.ToLower(name)]
	return cs, ok
}

// alterSystem runs ALTER SYSTEM SET name = 'value', ALTER SYSTEM SET name
// TO DEFAULT, ALTER SYSTEM RESET name and ALTER SYSTEM RESET ALL.
func (s *Session) alterSystem(x *stmtState, n *pg_query.AlterSystemStmt, w pgwire.ResultWriter) error {
	if s.block || s.multiImplicit {
		return pgerror.New(pgerrcode.ActiveSQLTransaction, "ALTER SYSTEM cannot run inside a transaction block")
	}
	if !s.super {
		return pgerror.New(pgerrcode.InsufficientPrivilege, "must be superuser to execute ALTER SYSTEM command")
	}
	vs := n.Setstmt
	if vs.Kind == pg_query.VariableSetKind_VAR_RESET_ALL {
		names := make([]string, 0, len(clusterSettings))
		for name := range clusterSettings {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if clusterSettings[name].set != nil {
				continue // the cluster version is not reset
			}
			if err := s.b.setClusterSetting(x.ctx, name, ""); err != nil {
				return err
			}
		}
		return w.Complete("ALTER SYSTEM")
	}
	cs, ok := lookupClusterSetting(vs.Name)
	if !ok {
		return pgerror.New(pgerrcode.UndefinedObject, "unrecognized configuration parameter %q", vs.Name)
	}
	var v string
	switch vs.Kind {
	case pg_query.VariableSetKind_VAR_SET_VALUE:
		if len(vs.Args) != 1 {
			return pgerror.New(pgerrcode.InvalidParameterValue, "parameter %q takes one value", cs.name)
		}
		t, ok := constText(vs.Args[0])
		if !ok {
			return pgerror.New(pgerrcode.SyntaxError, "ALTER SYSTEM SET %s takes only a constant value", cs.name)
		}
		v = t
	case pg_query.VariableSetKind_VAR_SET_DEFAULT, pg_query.VariableSetKind_VAR_RESET:
	default:
		return notSupported("this form of ALTER SYSTEM is not supported")
	}
	if strings.TrimSpace(v) != "" {
		if err := cs.check(v); err != nil {
			return pgerror.New(pgerrcode.InvalidParameterValue, "invalid value for parameter %q: %v", cs.name, err)
		}
	}
	if cs.set != nil {
		if err := cs.set(x.ctx, s.b, v); err != nil {
			return err
		}
		return w.Complete("ALTER SYSTEM")
	}
	if err := s.b.setClusterSetting(x.ctx, cs.name, v); err != nil {
		return err
	}
	return w.Complete("ALTER SYSTEM")
}
