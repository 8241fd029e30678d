package rowenc

import (
	"bytes"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
)

// SplitUnit is the SQL layer's answer to the split queue's question
// (store.Config.SplitUnit): which span around key must stay in one
// tablet. The queue sits below SQL and knows no catalog, so the rule is
// read from the key alone:
//
//   - the system span [keys.Min, keys.TableDataMin) (catalog, settings,
//     jobs, membership, counters, directory): the system catalog is a
//     colocated group of many tables, never split automatically;
//   - a key whose group differs from its table: a shared group (a
//     colocated database's group, whose ID is the database's, or a global
//     index's group): the whole group span, so a colocation tablet holding
//     several tables is never divided. This is conservative: a colocated
//     database with a single table, and a global index, stay whole too.
//   - otherwise ok is false: an ordinary table's group (group = table ID),
//     which the queue may split at any row boundary (a key that no
//     shorter existing key prefixes: a row key and its column entries
//     share the row key as prefix, see the package doc).
func SplitUnit(key []byte) (unit kvpb.Span, ok bool) {
	if bytes.Compare(key, keys.TableDataMin) < 0 {
		return kvpb.Span{Key: keys.Min, EndKey: keys.TableDataMin}, true
	}
	p, _, err := DecodeKeyPrefix(key)
	if err != nil {
		// A bare group or table prefix (a split point DDL made): no row.
		return kvpb.Span{}, false
	}
	if p.Group != uint64(p.Table) {
		return GroupSpan(p.Group), true
	}
	return kvpb.Span{}, false
}

// BucketUnit is the split unit of a key in a group split between buckets
// (a distributed table's group, shared by the tables colocated with it):
// the key's bucket, [group/b, group/b+1), so that a split never separates
// rows of equal distribution values of two colocated tables. A key that is
// not a row's (a bare group prefix a DDL split at) has none.
func BucketUnit(key []byte) (kvpb.Span, bool) {
	p, _, err := DecodeKeyPrefix(key)
	if err != nil {
		return kvpb.Span{}, false
	}
	return BucketSpan(p.Group, p.Bucket, p.Bucket), true
}
