// Package rowenc owns how SQL rows become bytes in the ordered keyspace:
// the order-preserving encoding of index keys and the packed/unpacked
// encoding of row values (DESIGN §5, seeds/packed-rows.txt).
//
// Who calls it: the executor and the catalog's index writers (EncodeKey,
// PackRow, EncodeColumnValue, ColumnKey), scans (DecodeKey, RowMerger) and
// MVCC GC (Repacker, repack.go, which the server hands to every store as
// mvcc.Repacker); for whole tables, the executor (RowWriter, RowFetcher,
// spans). It imports sql/types, hlc, keys, kvpb and mvcc (for the
// Repacker's interface); the
// RowWriter fills anything shaped like a kv.Batch (Writes), so it stays
// below the KV client. It knows nothing of tablets or the catalog, which
// hands it a Schema and a TableLayout.
//
// # Keys
//
// An index entry's key is
//
//	group/bucket prefix (catalog) | table | index | key columns... [| column ID]
//
// Each key column is one marker byte — 0x00 NULL (NULLS FIRST), 0x01 value,
// 0x02 NULL (NULLS LAST) — and, for values, a self-delimiting body whose
// bytes are complemented for DESC columns. Order's zero value is Postgres's
// default, ASC NULLS LAST, and Desc is DESC NULLS FIRST: DESIGN §5 said
// "NULLs first", but a Postgres user's ORDER BY without NULLS FIRST/LAST
// expects these defaults, and an index that matches them lets the planner
// skip sorts. Both placements are supported per column. Bodies: ordered
// varints for ints and oids; sign-flipped IEEE bits for floats (NaN last,
// -0 = 0); class, exponent and base-100 digits for numerics; 0x00-escaped,
// 0x00 0x01-terminated bytes for text and bytea; sign-flipped fixed ints
// for dates and times; (days, time) for intervals; raw uuids; and
// element-by-element encodings for arrays. jsonb has no key encoding.
//
// Keys preserve Compare-equality, not representation: 1.0 and 1.00,
// '1 mon' and '30 days', -0 and 0 share a key (a unique index must see them
// as duplicates), so a decoded key may print differently from what was
// written. Callers that must return the exact value (index-only scans of
// numeric or interval) store it in the value too.
//
// # Row values
//
// A row's primary-index key holds one of:
//
//	packed    0x01 | schema version | n | null bitmap (n bits) | values
//	liveness  0x02 | schema version               (an unpacked row exists)
//
// and each column entry, at ColumnKey(rowKey, id) = rowKey followed by the
// column ID as an ordered varint, holds 0x03 | value, or 0x04 for "set to
// NULL". Column keys sort right after their row key, in ID order, and
// before the next row (no row key is a prefix of another: key columns are
// self-delimiting), so one span [rowKey, PrefixEnd(rowKey)) reads a row.
//
// Values carry no type tags: the Schema says each column's type, and a
// packed row's schema version says which columns it holds, so a row
// written before ADD COLUMN reads the column's default and one written
// before DROP COLUMN skips the dropped bytes. NULLs cost a bitmap bit, and
// trailing NULLs nothing (n stops at the last non-NULL column).
//
// Writers choose: PackRow for an insert or an update of every non-key
// column (or, with RowWriter.WholeRow, of a row packed in at most
// WholeRowMax bytes); EncodeColumnValue entries for a partial update; when PackRow
// reports ErrRowTooLarge or packing is off, EncodeUnpackedRow. Readers
// always accept both (RowMerger).
//
// GC repacks (repack.go, seeds/packed-rows.txt "Compactions"): a packed
// row whose column entries are all at or below the GC threshold becomes
// one packed row under the current schema version, written in the same
// raft batch as the rest of the GC, so the column entries, and the bytes
// of columns dropped since, go. Unpacked rows stay unpacked.
//
// # Tables
//
// The catalog turns a table descriptor into a TableLayout (table.go): the
// row's columns, the primary and secondary indexes, the table group, how
// many primary-key columns the bucket is hashed from, and the primary
// index's Schema. Keys (index.go) are
//
//	0x03 | group | bucket (2 bytes BE) | table | index | key columns [| column ID]
//
// with group, table and index as ordered varints. An ordinary table is a
// group of one (group = table ID); a colocated database's tables share its
// group, so they are one span; a hash-partitioned table's bucket is CRC-32
// of its hash columns' key encodings folded to 16 bits (HashBucket), else
// 0. Local secondary indexes share the row's group and bucket (a local
// GIN index, the first bucket of the row's block: ginblock.go); global
// ones have a group of their own and bucket 0. Group IDs come from the
// catalog's descriptor ID counter, so they never collide. A hash-sharded
// index needs nothing here: its shard column is a real (hidden, computed)
// column that leads its key.
//
// Secondary entries (indexentry.go): key = index columns plus the
// primary-key columns not among them, except for a unique index whose key
// has no NULL, which keeps only its columns (so a duplicate collides) and
// carries the primary key in the value; the value ends with the stored
// columns as a packed row. RowWriter (rowwriter.go) emits an insert,
// update or delete as KV operations on every index, ConditionalPuts where
// uniqueness must hold, and TableLayout.ConvertWriteError maps a failed
// condition to Postgres's 23505. RowFetcher (fetcher.go) decodes a scan
// back into rows through a RowMerger. IndexEntryEncoder (entryencoder.go)
// gives an index build the entries AppendIndexEntry would give the rows a
// RowFetcher decodes, from packed rows' bytes without building a Datum,
// and through those two for the rows it does not cover. A GIN index (IndexLayout.Inverted,
// gin.go) holds one entry per token of its column's value instead, keyed
// by the token and the primary key; EncodeIndexEntries encodes both
// kinds, and a RowFetcher refuses inverted indexes (their entries are not
// rows).
//
// Invariants:
//
//  1. For values a, b of one type and any Order, bytes.Compare of their
//     key encodings equals types.Compare(a, b) (negated for Descending;
//     NULL placed by NullsFirst), also for composite keys, and DecodeKey
//     returns a Compare-equal value (TestKeyOrderProperty).
//  2. PackRow/DecodeRow and EncodeColumnValue round-trip every storable
//     type exactly (TestPackRoundTripEveryType).
//  3. A read merges the newest row-key value with the column entries at
//     or above its timestamp; older entries are ignored. Any history of
//     full writes, partial updates, deletes, repacks and schema changes
//     reads like a plain map (TestMergeModel).
//  4. Decoders never panic on arbitrary bytes; they return ErrCorrupt
//     (FuzzDecodeKey, FuzzDecodeRow, FuzzIndexEntryEncoder).
//  5. A Schema keeps a dropped column until no packed row written while it
//     existed survives; a row written under a newer version than the
//     reader's schema is ErrSchemaTooOld, and a packed row under a version
//     the schema forgot (SchemaHistory.OldestPacked) is ErrCorrupt, never
//     misread. GC rewrites a packed row written under an older version
//     (repack.go), and VACUUM forgets the versions a census of the table
//     finds unused (TestForgetPackingVersions).
//  6. Within one table and bucket, primary keys sort in primary-key order;
//     all keys of a group lie in GroupSpan and a table's in its TableSpans
//     (TestPrimaryKeyOrderProperty, TestColocatedGroupIsContiguous,
//     TestHashPartitionedBuckets).
//  7. After any sequence of RowWriter changes, a RowFetcher scan of the
//     primary index reads the rows written, whatever mix of packed and
//     unpacked writes made them, and every secondary index holds exactly
//     the entries EncodeIndexEntry computes from those rows
//     (TestIndexModel, TestRowWriterRoundTrip).
//  8. A write that would duplicate a primary key or a unique index key
//     (NULLs distinct) fails as a whole with 23505 (TestUniqueViolation).
//  9. Inverted tokens over-approximate: a value satisfying jsonb @>, ?,
//     ?|, ?& or array @>, && against a constant holds the tokens the
//     planner looks up for it (TestInvertedTokensSuperset); after any
//     sequence of RowWriter changes an inverted index holds exactly the
//     live rows' entries (TestInvertedRowWriterModel).
//  10. A local inverted index of a hash-partitioned table writes every
//     entry of a row inside the row's block (BlockUnit: the split unit
//     of its group), under the block's first bucket, so a token's
//     entries of a block are one span (TestBlockStartsAreShardBounds,
//     TestLocalInvertedEntriesBesideTheirRow).
//  11. A RowWriter with an Arena (a bulk load's, used by one goroutine)
//     makes exactly the writes one without makes, and every key and
//     value it hands to Writes is its own, unchanged by later rows
//     (TestRowWriterArena, TestByteArena).
package rowenc
