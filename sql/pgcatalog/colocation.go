package pgcatalog

import (
	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
)

var _ builtins.TablePropertiesInfo = (*Resolver)(nil)

// TableProperties implements builtins.TablePropertiesInfo
// (yb_table_properties): a table's layout as its descriptor records it
// (docs/colocation.md). A colocated table has one tablet, its database's
// group, and its table ID as colocation ID; another table has the tablets
// it was pre-split into (one when range partitioned) and no table group.
// The tablet count is the layout's as created: Cairn does not split tables
// later yet.
func (res *Resolver) TableProperties(oid uint32) (builtins.TableProperties, bool, error) {
	var p builtins.TableProperties
	kind, tid, _ := splitOID(oid)
	if kind == kindIndex {
		return p, false, nil
	}
	if _, _, ok := res.relByOID(oid); !ok {
		return p, false, nil
	}
	d, err := res.r.ByID(res.ctx, tid)
	if err != nil {
		return p, false, err
	}
	t, ok := d.(*catalog.Table)
	if !ok {
		return p, false, nil
	}
	p.NumTablets = 1
	if t.Colocated {
		p.IsColocated = true
		p.TablegroupOID = uint32(t.GroupID)
		p.ColocationID = uint32(t.ID)
		return p, true, nil
	}
	if t.Partitioning.Kind == catalog.PartitionHash {
		p.NumHashKeyColumns = int64(t.Partitioning.HashColumns)
		if t.Partitioning.InitialTablets > 0 {
			p.NumTablets = int64(t.Partitioning.InitialTablets)
		}
	}
	return p, true, nil
}
