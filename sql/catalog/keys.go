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
// descriptor rewrites: a transaction whose writes were shaped by the
// descriptor validates at commit that nobody wrote it since
// (kv.Txn.ValidateAtCommit).
func StampKey(id ID) []byte { return stampKey(id) }
func idCounterKey() []byte  { return keys.System(idCounterName) }
func genKey() []byte        { return keys.System([]byte("g")) }

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
