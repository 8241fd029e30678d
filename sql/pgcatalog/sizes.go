package pgcatalog

import (
	"bytes"
	"fmt"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/builtins"
	"github.com/cairn-db/cairn/sql/catalog"
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/plan"
	"github.com/cairn-db/cairn/sql/rowenc"
)

// Sizes of relations and databases (builtins.SizeInfo: pg_table_size and
// friends, so psql's \dt+, \di+ and \l+ work). A relation's bytes are
// those of its own key span, as plan.SpanSizes counts them (keys and
// values as stored, every version until GC removes it): the tables of a
// colocated database share a tablet but not a key prefix, so each gets
// its own share. The layout (sql/rowenc, index.go) is
//
//	group | bucket | table | index | key ...
//
// so an index of a table that is not hash partitioned is one exact
// prefix; a local index of a hash-partitioned table has one prefix per
// bucket, all inside its table's group, and is counted by one scan of the
// group keeping the keys whose table and index follow the bucket.
//
// A table's size (SizeMain) is its primary index's: its rows. The primary
// key's index relation (t_pkey) has no storage of its own, so it is 0.

var _ builtins.SizeInfo = (*Resolver)(nil)

// errNoSizes answers a size function in a session with no node's storage
// behind it.
var errNoSizes = pgerror.New(pgerrcode.FeatureNotSupported, "object sizes are not available without a node's storage")

// SetSizes gives the resolver what it counts sizes with: the node's tablet
// directory, when it can (plan.SpanSizes). Without it the size functions
// fail with 0A000.
func (res *Resolver) SetSizes(d plan.TabletDirectory) {
	res.sizes, _ = d.(plan.SpanSizes)
	res.tablets = d
}

// RelationSize implements builtins.SizeInfo.
func (res *Resolver) RelationSize(oid uint32, part builtins.SizePart) (int64, bool, error) {
	if res.sizes == nil {
		return 0, false, errNoSizes
	}
	if _, _, ok := res.relByOID(oid); !ok {
		return 0, false, nil
	}
	kind, tid, sub := splitOID(oid)
	if virtualByOID(oid) != nil {
		return 0, true, nil // a catalog view: computed, stored nowhere
	}
	d, err := res.r.ByID(res.ctx, tid)
	if err != nil {
		return 0, false, err
	}
	t, ok := d.(*catalog.Table)
	if !ok {
		return 0, true, nil // a view or a sequence: no key span of its own
	}
	l, err := t.Layout()
	if err != nil {
		return 0, false, fmt.Errorf("pgcatalog: size of %s: %w", t.Name, err)
	}
	if kind == kindIndex {
		if part == builtins.SizeIndexes {
			return 0, true, nil
		}
		idx := l.Index(sub)
		if idx == nil || idx.IsPrimary() {
			return 0, true, nil
		}
		n, err := res.indexBytes(l, idx)
		return n, err == nil, err
	}
	var n int64
	if part != builtins.SizeIndexes {
		if n, err = res.indexBytes(l, &l.Primary); err != nil {
			return 0, false, err
		}
	}
	if part != builtins.SizeMain {
		for i := range l.Secondary {
			m, err := res.indexBytes(l, &l.Secondary[i])
			if err != nil {
				return 0, false, err
			}
			n += m
		}
	}
	return n, true, nil
}

// indexBytes counts the bytes of idx's entries.
func (res *Resolver) indexBytes(l *rowenc.TableLayout, idx *rowenc.IndexLayout) (int64, error) {
	sp := l.IndexSpan(idx)
	var keep func([]byte) bool
	if idx.Local && l.HashColumns > 0 {
		// One scan of the group (sp), keeping the keys whose table and
		// index (what follows the group and the 2-byte bucket) are idx's.
		at := len(rowenc.GroupPrefix(nil, l.GroupID)) + 2
		tableIndex := l.IndexPrefix(nil, idx, 0)[at:]
		keep = func(k []byte) bool { return len(k) >= at && bytes.HasPrefix(k[at:], tableIndex) }
	}
	sz, err := res.sizes.SpanSizes(res.ctx, sp.Key, sp.EndKey, keep)
	if err != nil {
		return 0, fmt.Errorf("pgcatalog: size of index %s of %s: %w", idx.Name, l.Name, err)
	}
	return sz.TotalBytes, nil
}

// DatabaseSize implements builtins.SizeInfo: the bytes of every table of
// the database, indexes included (its catalog entries live in the system
// span and are not counted, so an empty database is 0 bytes).
func (res *Resolver) DatabaseSize(oid uint32) (int64, bool, error) {
	if res.sizes == nil {
		return 0, false, errNoSizes
	}
	d, err := res.r.ByID(res.ctx, catalog.ID(oid))
	if pgerror.Code(err) == pgerrcode.UndefinedObject {
		return 0, false, nil // no descriptor with that ID
	}
	if err != nil {
		return 0, false, err
	}
	db, ok := d.(*catalog.Database)
	if !ok {
		return 0, false, nil
	}
	n, err := res.databaseBytes(db)
	return n, err == nil, err
}

// DatabaseSizeByName implements builtins.SizeInfo (3D000 for an unknown
// name).
func (res *Resolver) DatabaseSizeByName(name string) (int64, error) {
	if res.sizes == nil {
		return 0, errNoSizes
	}
	db, err := res.r.Database(res.ctx, name)
	if err != nil {
		return 0, err
	}
	return res.databaseBytes(db)
}

// databaseBytes sums the spans of the database's tables
// (rowenc.TableSpans: rows with local indexes, then global indexes), each
// span once: colocated distributed tables share their group's.
func (res *Resolver) databaseBytes(db *catalog.Database) (int64, error) {
	schemas, err := res.r.Schemas(res.ctx, db.ID)
	if err != nil {
		return 0, fmt.Errorf("pgcatalog: size of database %s: %w", db.Name, err)
	}
	var n int64
	counted := map[string]bool{}
	for _, sc := range schemas {
		if sc.Virtual {
			continue
		}
		rels, err := res.r.Relations(res.ctx, db.ID, sc.ID)
		if err != nil {
			return 0, fmt.Errorf("pgcatalog: size of database %s: %w", db.Name, err)
		}
		for _, d := range rels {
			t, ok := d.(*catalog.Table)
			if !ok {
				continue
			}
			l, err := t.Layout()
			if err != nil {
				return 0, fmt.Errorf("pgcatalog: size of %s: %w", t.Name, err)
			}
			for _, sp := range l.TableSpans() {
				if counted[string(sp.Key)] {
					continue
				}
				counted[string(sp.Key)] = true
				sz, err := res.sizes.SpanSizes(res.ctx, sp.Key, sp.EndKey, nil)
				if err != nil {
					return 0, fmt.Errorf("pgcatalog: size of %s: %w", t.Name, err)
				}
				n += sz.TotalBytes
			}
		}
	}
	return n, nil
}
