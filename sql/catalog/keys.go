package catalog

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/sql/rowenc"
	"github.com/cairn-db/cairn/sql/types"
)

// The catalog's system keys (all under keys.System, one colocated span):
//
//	d/<id: 4 bytes BE>                    descriptor (encoding.go)
//	v/<id: 4 bytes BE>                    stamp: version uvarint | 16-byte nonce (cache.go)
//	w/<id: 4 bytes BE><parity: 1 byte>    writers' validation key of the versions of that
//	                                      parity (WriterKey): empty value
//	n/<parent><schema><name>              namespace entry -> id uvarint; parent and
//	                                      schema are ordered ints, name an ordered string
//	                                      (rowenc key encodings), so the entries of one
//	                                      (parent, schema) are one span in name order
//	r/<name>                              role (roles.go)
//	id                                    next descriptor ID, uvarint
//	g                                     catalog generation: counter uvarint | 16-byte
//	                                      nonce, rewritten by every DDL (generation.go)
var (
	descPrefix    = []byte("d/")
	stampPrefix   = []byte("v/")
	writerPrefix  = []byte("w/")
	nsPrefix      = []byte("n/")
	rolePrefix    = []byte("r/")
	idCounterName = []byte("id")
)

func idKey(prefix []byte, id ID) []byte {
	return keys.System(binary.BigEndian.AppendUint32(append([]byte(nil), prefix...), uint32(id)))
}

func descKey(id ID) []byte  { return idKey(descPrefix, id) }
func stampKey(id ID) []byte { return idKey(stampPrefix, id) }

// DescriptorKey is the key of descriptor id: a read of it returns, with
// the descriptor, the timestamp it was last written at.
func DescriptorKey(id ID) []byte { return descKey(id) }

// StampKey is the key of descriptor id's stamp, which every write of the
// descriptor rewrites (the node caches validate against it; writers
// validate WriterKey instead).
func StampKey(id ID) []byte { return stampKey(id) }
func idCounterKey() []byte  { return keys.System(idCounterName) }

// WriterKey is the key a transaction that wrote rows shaped by version
// version of descriptor id validates at commit (kv.Txn.ValidateAtCommit).
// There is one per parity of the version: an ordinary change writes both,
// so every writer of an older version fails its commit; an online schema
// change's step (Writer.UpdateStep) writes only its new version's, so
// writers of the version just before it (the other parity) still commit
// and only writers two versions behind fail. That is the two-version
// invariant of F1's online schema changes, enforced at commit: no row is
// ever written through a version older than one step behind the newest.
func WriterKey(id ID, version uint64) []byte {
	return append(idKey(writerPrefix, id), byte(version%2))
}
func genKey() []byte { return keys.System([]byte("g")) }

// GenerationKey is the catalog generation's key (generation.go), which
// every DDL transaction rewrites: a reader outside the catalog (the GC
// repacker's refresh) compares its value to tell whether any descriptor
// changed.
func GenerationKey() []byte { return genKey() }

// nsPrefixKey is the prefix of the namespace entries under (parent, schema).
func nsPrefixKey(parent, schema ID) []byte {
	b := append([]byte(nil), nsPrefix...)
	b, _ = rowenc.EncodeKey(b, types.DInt(parent), rowenc.Asc)
	b, _ = rowenc.EncodeKey(b, types.DInt(schema), rowenc.Asc)
	return keys.System(b)
}

func nsKey(parent, schema ID, name string) []byte {
	b, _ := rowenc.EncodeKey(nsPrefixKey(parent, schema), types.DString(name), rowenc.Asc)
	return b
}

func roleKey(name string) []byte {
	b, _ := rowenc.EncodeKey(append([]byte(nil), rolePrefix...), types.DString(name), rowenc.Asc)
	return keys.System(b)
}

func encodeID(id ID) []byte { return binary.AppendUvarint(nil, uint64(id)) }

func decodeID(b []byte) (ID, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) || v > uint64(^uint32(0)) {
		return 0, fmt.Errorf("%w: namespace entry value %x", ErrBadDescriptor, b)
	}
	return ID(v), nil
}
