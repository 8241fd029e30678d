package membership

// Cluster versions (package clusterversion): this node keeps the cluster
// version in its Handle, refuses to run (Start) or to admit a node
// (handleJoin) whose binary cannot run at it, and raises it once every
// node runs a newer binary, unless cluster.preserve_downgrade_option holds
// it; SET CLUSTER SETTING version raises it by hand (SetClusterVersion).

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-db/cairn/clusterversion"
	"github.com/cairn-db/cairn/kv"
)

// ErrVersionRefused: SET CLUSTER SETTING version asked for a version the
// cluster cannot take now (lower than the current one, or above a
// node's binary).
var ErrVersionRefused = clusterversion.ErrSetRefused

// Version is this node's view of the versions.
func (m *Member) Version() *clusterversion.Handle { return m.cfg.Version }

// readClusterVersion reads the cluster version in txn; a cluster that
// never recorded one is at the oldest version this binary runs in.
func readClusterVersion(ctx context.Context, txn *kv.Txn) (clusterversion.Version, error) {
	v, ok, err := txn.Get(ctx, clusterversion.Key())
	if err != nil || !ok {
		return clusterversion.MinSupported, err
	}
	cv, err := clusterversion.Parse(string(v))
	if err != nil {
		return cv, fmt.Errorf("membership: the stored cluster version: %w", err)
	}
	return cv, nil
}

// checkVersion reads the cluster version and refuses to run this node's
// binary in it if it cannot (clusterversion invariant 2).
func (m *Member) checkVersion(ctx context.Context) error {
	var cv clusterversion.Version
	err := m.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		var err error
		cv, err = readClusterVersion(ctx, txn)
		return err
	})
	if err != nil {
		return fmt.Errorf("membership: reading the cluster version: %w", err)
	}
	h := m.cfg.Version
	if err := clusterversion.Check(h.Binary(), h.MinSupported(), cv); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	h.SetActive(cv)
	return nil
}

// checkJoiner refuses a joining node whose binary cannot run at the
// cluster version; a node that advertises no version is a build older
// than cluster versions.
func (m *Member) checkJoiner(ctx context.Context, rec NodeRecord) error {
	bin, err1 := clusterversion.Parse(rec.BinaryVersion)
	minV, err2 := clusterversion.Parse(rec.MinSupportedVersion)
	if err1 != nil || err2 != nil {
		return refuse("the node at %s advertises no binary version: its build is older than %s, the first with cluster versions; run a binary of version %s or newer", rec.RPCAddr, clusterversion.Versions[0].Version, m.cfg.Version.Active())
	}
	var cv clusterversion.Version
	if err := m.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		var err error
		cv, err = readClusterVersion(ctx, txn)
		return err
	}); err != nil {
		return err
	}
	if err := clusterversion.Check(bin, minV, cv); err != nil {
		return refuse("node at %s: %v", rec.RPCAddr, err)
	}
	return nil
}

// upgradeTarget is the version every node the cluster counts on runs a
// binary of: the lowest binary version among the nodes not
// decommissioned, or ok false if one of them is not live or advertises
// no version (its binary is unknown). why says which node holds it back.
func upgradeTarget(v *View) (target clusterversion.Version, ok bool, why string) {
	ids := make([]uint64, 0, len(v.Nodes))
	for id := range v.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	first := true
	for _, id := range ids {
		rec := v.Nodes[id]
		if rec.Status == StatusDecommissioned {
			continue
		}
		if st := v.State(id); st != Live {
			return target, false, fmt.Sprintf("node %d is %s: its binary is unknown until it is live again (or decommissioned)", id, st)
		}
		bin, err := clusterversion.Parse(rec.BinaryVersion)
		if err != nil {
			return target, false, fmt.Sprintf("node %d advertises no binary version", id)
		}
		if first || bin.Less(target) {
			target, first = bin, false
		}
	}
	return target, !first, ""
}

// RefreshVersion learns the cluster version and raises it automatically
// when every node runs a newer binary and no preserve_downgrade_option
// holds it. The version loop calls it every LivenessTTL; tests step it.
func (m *Member) RefreshVersion(ctx context.Context) error {
	v, err := m.View(ctx)
	if err != nil {
		return err
	}
	target, ok, _ := upgradeTarget(v)
	var raised clusterversion.Version
	err = m.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		raised = clusterversion.Version{}
		cv, err := readClusterVersion(ctx, txn)
		if err != nil {
			return err
		}
		m.cfg.Version.SetActive(cv)
		if !ok || !cv.Less(target) || m.cfg.Version.Binary().Less(target) {
			return nil
		}
		hold, held, err := txn.Get(ctx, clusterversion.PreserveDowngradeKey())
		if err != nil {
			return err
		}
		if held && string(hold) == cv.String() {
			return nil
		}
		raised = target
		return txn.Put(ctx, clusterversion.Key(), []byte(target.String()))
	})
	if err != nil {
		return err
	}
	if !raised.IsZero() {
		m.cfg.Version.SetActive(raised)
		m.cfg.Logger.Info("cairn: every node runs a binary of version "+raised.String()+" or newer: the cluster version is now "+raised.String(), "node", m.NodeID())
	}
	return nil
}

// SetClusterVersion raises the cluster version to s (SET CLUSTER SETTING
// version = s). It refuses, with ErrVersionRefused, a version below the
// current one (invariant 1: no downgrade), or one some node's binary (or
// this one's) is older than, or any while a node the cluster counts on is
// not live.
func (m *Member) SetClusterVersion(ctx context.Context, s string) error {
	want, err := clusterversion.Parse(s)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVersionRefused, err)
	}
	if m.cfg.Version.Binary().Less(want) {
		return fmt.Errorf("%w: this node's binary is version %s, older than %s", ErrVersionRefused, m.cfg.Version.Binary(), want)
	}
	v, err := m.View(ctx)
	if err != nil {
		return err
	}
	target, ok, why := upgradeTarget(v)
	if !ok {
		return fmt.Errorf("%w: %s", ErrVersionRefused, why)
	}
	if target.Less(want) {
		for id, rec := range v.Nodes {
			if bin, err := clusterversion.Parse(rec.BinaryVersion); err == nil && bin == target && rec.Status != StatusDecommissioned {
				return fmt.Errorf("%w: node %d runs a binary of version %s, older than %s: upgrade it first", ErrVersionRefused, id, bin, want)
			}
		}
		return fmt.Errorf("%w: a node runs a binary older than %s", ErrVersionRefused, want)
	}
	err = m.db.Txn(ctx, kv.Serializable, func(ctx context.Context, txn *kv.Txn) error {
		cv, err := readClusterVersion(ctx, txn)
		if err != nil {
			return err
		}
		if want.Less(cv) {
			return fmt.Errorf("%w: the cluster version is %s; it cannot go down to %s", ErrVersionRefused, cv, want)
		}
		if want == cv {
			return nil
		}
		// The version the option preserved is gone: the option is
		// done (clusterversion.PreserveDowngradeSetting).
		if err := txn.Delete(ctx, clusterversion.PreserveDowngradeKey()); err != nil {
			return err
		}
		return txn.Put(ctx, clusterversion.Key(), []byte(want.String()))
	})
	if err != nil {
		return err
	}
	m.cfg.Version.SetActive(want)
	return nil
}
