package copyfmt

import (
	"bytes"
	"encoding/binary"
)

// AppendRow appends fields as one text or CSV row, newline included, to
// dst (nil = NULL, invariant 1). For a header, pass the column names.
func AppendRow(dst []byte, fields [][]byte, opts Options) []byte {
	opts = opts.withDefaults()
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, opts.Delimiter)
		}
		switch {
		case f == nil:
			dst = append(dst, opts.Null...)
		case opts.Format == CSV:
			dst = appendCSVField(dst, f, opts)
		default:
			dst = appendTextField(dst, f, opts.Delimiter)
		}
	}
	return append(dst, '\n')
}

func appendTextField(dst, f []byte, delim byte) []byte {
	for _, c := range f {
		switch c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\v':
			dst = append(dst, '\\', 'v')
		default:
			if c == delim {
				dst = append(dst, '\\')
			}
			dst = append(dst, c)
		}
	}
	return dst
}

func appendCSVField(dst, f []byte, o Options) []byte {
	// Quote whatever could be misread: separators, quotes, line breaks, a
	// value that looks like the NULL string, and the end marker.
	needs := string(f) == o.Null || bytes.Equal(f, endMarker) ||
		bytes.IndexByte(f, o.Delimiter) >= 0 || bytes.IndexByte(f, o.Quote) >= 0 ||
		bytes.IndexByte(f, o.Escape) >= 0 || bytes.ContainsAny(f, "\r\n")
	if !needs {
		return append(dst, f...)
	}
	dst = append(dst, o.Quote)
	for _, c := range f {
		if c == o.Quote || c == o.Escape {
			dst = append(dst, o.Escape)
		}
		dst = append(dst, c)
	}
	return append(dst, o.Quote)
}

// AppendBinaryHeader appends the binary COPY signature, flags and an empty
// header extension.
func AppendBinaryHeader(dst []byte) []byte {
	dst = append(dst, BinarySignature...)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
}

// AppendBinaryTuple appends one binary COPY tuple (nil field = NULL).
func AppendBinaryTuple(dst []byte, fields [][]byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(fields)))
	for _, f := range fields {
		if f == nil {
			dst = binary.BigEndian.AppendUint32(dst, 0xffffffff)
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
		dst = append(dst, f...)
	}
	return dst
}

// AppendBinaryTrailer appends the end-of-data marker.
func AppendBinaryTrailer(dst []byte) []byte {
	return append(dst, 0xff, 0xff)
}
