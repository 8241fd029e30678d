package tablet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-db/cairn/keys"
	"github.com/cairn-db/cairn/kvpb"
	"github.com/cairn-db/cairn/storage"
)

// The tablet directory: one bare key per tablet, keys.Directory(EndKey),
// holding the encoded descriptor. Keying by end key makes "the tablet of k"
// the first entry after Directory(k).
//
// Encoding (version 1):
//
//	0x01 uvarint(TabletID) varint(Generation) uvarint(len) StartKey uvarint(len) EndKey

const descriptorVersion = 1

// ErrBadDescriptor: a directory entry does not decode.
var ErrBadDescriptor = errors.New("tablet: malformed tablet descriptor")

// EncodeDescriptor appends the encoding of d to dst.
func EncodeDescriptor(dst []byte, d kvpb.TabletDescriptor) []byte {
	dst = append(dst, descriptorVersion)
	dst = binary.AppendUvarint(dst, uint64(d.TabletID))
	dst = binary.AppendVarint(dst, d.Generation)
	dst = binary.AppendUvarint(dst, uint64(len(d.StartKey)))
	dst = append(dst, d.StartKey...)
	dst = binary.AppendUvarint(dst, uint64(len(d.EndKey)))
	return append(dst, d.EndKey...)
}

// DecodeDescriptor decodes an entry written by EncodeDescriptor. The keys
// of the result are copies.
func DecodeDescriptor(b []byte) (kvpb.TabletDescriptor, error) {
	orig := b
	var d kvpb.TabletDescriptor
	if len(b) > 0 && b[0] > descriptorVersion {
		return d, fmt.Errorf("%w: %w", ErrBadDescriptor, futureFormat("the tablet descriptor", int(b[0]), descriptorVersion))
	}
	if len(b) == 0 || b[0] != descriptorVersion {
		return d, fmt.Errorf("%w: unknown version", ErrBadDescriptor)
	}
	b = b[1:]
	id, n := binary.Uvarint(b)
	if n <= 0 {
		return d, fmt.Errorf("%w: tablet id", ErrBadDescriptor)
	}
	b = b[n:]
	gen, n := binary.Varint(b)
	if n <= 0 {
		return d, fmt.Errorf("%w: generation", ErrBadDescriptor)
	}
	b = b[n:]
	readKey := func(what string) ([]byte, error) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: %s", ErrBadDescriptor, what)
		}
		k := append([]byte(nil), b[n:n+int(l)]...)
		b = b[n+int(l):]
		return k, nil
	}
	start, err := readKey("start key")
	if err != nil {
		return d, err
	}
	end, err := readKey("end key")
	if err != nil {
		return d, err
	}
	if len(b) != 0 {
		return d, fmt.Errorf("%w: %d trailing bytes", ErrBadDescriptor, len(b))
	}
	d = kvpb.TabletDescriptor{TabletID: kvpb.TabletID(id), StartKey: start, EndKey: end, Generation: gen}
	// Varints have overlong forms; accepting only the canonical one keeps
	// one descriptor, one encoding.
	if !bytes.Equal(EncodeDescriptor(nil, d), orig) {
		return d, fmt.Errorf("%w: non-canonical encoding", ErrBadDescriptor)
	}
	if err := ValidateDescriptor(d); err != nil {
		return d, err
	}
	return d, nil
}

// ValidateDescriptor checks that d names a non-empty addressable span.
func ValidateDescriptor(d kvpb.TabletDescriptor) error {
	if d.TabletID == 0 {
		return fmt.Errorf("%w: zero tablet id", ErrBadDescriptor)
	}
	if string(d.StartKey) >= string(d.EndKey) || string(d.StartKey) < string(keys.Min) || string(d.EndKey) > string(keys.Max) {
		return fmt.Errorf("%w: bad span [%q, %q)", ErrBadDescriptor, d.StartKey, d.EndKey)
	}
	return nil
}

// WriteDescriptor puts d's directory entry into w.
func WriteDescriptor(w storage.Writer, d kvpb.TabletDescriptor) error {
	if err := w.Put(storage.MVCCKey{Key: keys.Directory(d.EndKey)}, EncodeDescriptor(nil, d)); err != nil {
		return fmt.Errorf("tablet: write descriptor %s: %w", &d, err)
	}
	return nil
}

// ReadDirectory returns every descriptor in the directory, in key order.
func ReadDirectory(r storage.Reader) ([]kvpb.TabletDescriptor, error) {
	lo, hi := keys.DirectorySpan()
	it, err := r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("tablet: read directory: %w", err)
	}
	defer it.Close()
	var out []kvpb.TabletDescriptor
	for ok := it.First(); ok; ok = it.NextKey() {
		d, err := decodeEntry(it)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("tablet: read directory: %w", err)
	}
	return out, nil
}

// LookupDirectory returns the descriptor of the tablet holding key, or with
// reverse the tablet holding the keys just before key (StartKey < key <=
// EndKey). found is false when no tablet does.
func LookupDirectory(r storage.Reader, key []byte, reverse bool) (d kvpb.TabletDescriptor, found bool, err error) {
	lo, hi := keys.DirectorySpan()
	it, err := r.NewIter(storage.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return d, false, fmt.Errorf("tablet: look up %q: %w", key, err)
	}
	defer it.Close()
	for ok := it.SeekGE(storage.MVCCKey{Key: keys.Directory(key)}); ok; ok = it.NextKey() {
		d, err := decodeEntry(it)
		if err != nil {
			return d, false, err
		}
		if reverse {
			if string(d.StartKey) < string(key) && string(key) <= string(d.EndKey) {
				return d, true, nil
			}
			return d, false, nil
		}
		if string(d.EndKey) == string(key) {
			continue // the tablet ending at key does not hold it
		}
		return d, d.ContainsKey(key), nil
	}
	if err := it.Err(); err != nil {
		return d, false, fmt.Errorf("tablet: look up %q: %w", key, err)
	}
	return kvpb.TabletDescriptor{}, false, nil
}

func decodeEntry(it *storage.Iterator) (kvpb.TabletDescriptor, error) {
	k := it.UnsafeKey()
	v, err := it.UnsafeValue()
	if err != nil {
		return kvpb.TabletDescriptor{}, fmt.Errorf("tablet: read directory entry %s: %w", k, err)
	}
	d, err := DecodeDescriptor(v)
	if err != nil {
		return d, fmt.Errorf("tablet: directory entry %s: %w", k, err)
	}
	if end, _ := keys.DecodeDirectory(k.Key); string(end) != string(d.EndKey) {
		return d, fmt.Errorf("%w: entry %s holds %s", ErrBadDescriptor, k, &d)
	}
	return d, nil
}
