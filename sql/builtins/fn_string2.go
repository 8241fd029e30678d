package builtins

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgerrcode"

	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
)

// Encoding conversion (convert_from, convert_to, convert). Cairn's server
// encoding is UTF8; the conversions Postgres users reach for are between
// it and LATIN1 or SQL_ASCII, which are what is supported here. Other
// valid Postgres encoding names are 0A000.

// normEncoding is Postgres's clean_encoding_name: lower case, no
// punctuation ("UTF-8", "utf8" and "Utf_8" are one name).
func normEncoding(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// encodingOf returns the canonical name of a supported encoding, or an
// error worded for the source or destination argument.
func encodingOf(name, which string) (string, error) {
	switch normEncoding(name) {
	case "utf8", "unicode":
		return "UTF8", nil
	case "latin1", "iso88591":
		return "LATIN1", nil
	case "sqlascii":
		return "SQL_ASCII", nil
	}
	for _, n := range encodingNames {
		if normEncoding(n) == normEncoding(name) {
			return "", errUnsupported("conversion to or from encoding %q is not supported", n)
		}
	}
	return "", errInvalidParam("invalid %s encoding name \"%s\"", which, name)
}

// errInvalidByteSequence is Postgres's report_invalid_encoding: the bytes
// of the offending character, as many as its first byte announces.
func errInvalidByteSequence(enc string, b []byte) error {
	n := 1
	switch c := b[0]; {
	case enc != "UTF8":
	case c&0xe0 == 0xc0:
		n = 2
	case c&0xf0 == 0xe0:
		n = 3
	case c&0xf8 == 0xf0:
		n = 4
	}
	n = min(n, len(b))
	hex := make([]string, n)
	for i := range n {
		hex[i] = fmt.Sprintf("0x%02x", b[i])
	}
	return pgerror.New(pgerrcode.CharacterNotInRepertoire, "invalid byte sequence for encoding \"%s\": %s", enc, strings.Join(hex, " "))
}

// decodeFrom turns bytes in encoding enc into a (UTF8) text, checking
// them as Postgres's pg_verify_mbstr does: no NUL, valid for enc.
func decodeFrom(b []byte, enc string) (string, error) {
	switch enc {
	case "LATIN1":
		var sb strings.Builder
		for i, c := range b {
			if c == 0 {
				return "", errInvalidByteSequence(enc, b[i:])
			}
			sb.WriteRune(rune(c))
		}
		return sb.String(), nil
	default: // UTF8, and SQL_ASCII whose bytes pass through
		for i := 0; i < len(b); {
			if b[i] == 0 {
				return "", errInvalidByteSequence("UTF8", b[i:])
			}
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return "", errInvalidByteSequence("UTF8", b[i:])
			}
			i += n
		}
		return string(b), nil
	}
}

// encodeTo turns a text into bytes of encoding enc; a character enc lacks
// is 22P05, as in Postgres.
func encodeTo(s, enc string) ([]byte, error) {
	if enc != "LATIN1" {
		return []byte(s), nil
	}
	out := make([]byte, 0, len(s))
	for i, r := range s {
		if r > 0xff {
			n := utf8.RuneLen(r)
			hex := make([]string, n)
			for j := range n {
				hex[j] = fmt.Sprintf("0x%02x", s[i+j])
			}
			return nil, pgerror.New(pgerrcode.UntranslatableCharacter,
				"character with byte sequence %s in encoding \"UTF8\" has no equivalent in encoding \"LATIN1\"", strings.Join(hex, " "))
		}
		out = append(out, byte(r))
	}
	return out, nil
}

func init() {
	text, bytea := types.Text, types.Bytea
	registerFn("convert_from", Overload{Args: []*types.T{bytea, text}, Return: Fixed(text), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			enc, err := encodingOf(str(a[1]), "source")
			if err != nil {
				return nil, err
			}
			s, err := decodeFrom([]byte(a[0].(types.DBytes)), enc)
			return types.DString(s), err
		}})
	registerFn("convert_to", Overload{Args: []*types.T{text, text}, Return: Fixed(bytea), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			enc, err := encodingOf(str(a[1]), "destination")
			if err != nil {
				return nil, err
			}
			b, err := encodeTo(str(a[0]), enc)
			return types.DBytes(b), err
		}})
	registerFn("convert", Overload{Args: []*types.T{bytea, text, text}, Return: Fixed(bytea), Strict: true, Volatility: Stable,
		Fn: func(_ EvalContext, a []types.Datum) (types.Datum, error) {
			src, err := encodingOf(str(a[1]), "source")
			if err != nil {
				return nil, err
			}
			dst, err := encodingOf(str(a[2]), "destination")
			if err != nil {
				return nil, err
			}
			s, err := decodeFrom([]byte(a[0].(types.DBytes)), src)
			if err != nil {
				return nil, err
			}
			b, err := encodeTo(s, dst)
			return types.DBytes(b), err
		}})
}
